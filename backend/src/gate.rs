//! The capacity gate: a counting semaphore whose waiters are served strictly
//! in arrival order. At most `capacity` requests hold a slot; up to
//! `queue_limit` more wait; beyond that, admission fails at once (503).
//!
//! Each waiter has its own condition variable, so a release wakes exactly
//! the next waiter instead of the whole queue. All state sits behind one
//! mutex; the condition variables are only ever used with it.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// How often a waiter wakes to ask whether its client went away.
const CANCEL_POLL: Duration = Duration::from_millis(50);

struct Waiter {
    cv: Condvar,
}

struct State {
    /// None means unlimited.
    capacity: Option<usize>,
    in_service: usize,
    queue: VecDeque<(u64, Arc<Waiter>)>,
    /// Ticket numbers of waiters that were handed a slot but have not yet
    /// woken to take it.
    granted: Vec<u64>,
    next_ticket: u64,
    queue_limit: usize,
    max_queue: usize,
    rejected: u64,
}

pub struct Gate {
    state: Mutex<State>,
}

/// Why a request did not get a slot.
#[derive(Debug, PartialEq, Eq)]
pub enum Denied {
    /// The queue was full.
    Overflow,
    /// The caller's cancel check fired while it waited (client gone).
    Cancelled,
}

/// Counters for /stats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateStats {
    pub in_service: usize,
    pub queued: usize,
    pub max_queue: usize,
    pub rejected: u64,
    /// None means unlimited.
    pub capacity: Option<usize>,
}

/// A held slot; dropping it releases the slot to the next waiter.
pub struct Permit<'a> {
    gate: &'a Gate,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut st = self.gate.lock();
        st.in_service -= 1;
        dispatch_locked(&mut st);
    }
}

impl Gate {
    pub fn new(capacity: Option<usize>, queue_limit: usize) -> Gate {
        Gate {
            state: Mutex::new(State {
                capacity,
                in_service: 0,
                queue: VecDeque::new(),
                granted: Vec::new(),
                next_ticket: 0,
                queue_limit,
                max_queue: 0,
                rejected: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking holder cannot leave the counters half-updated in a way
        // that matters more than serving on; keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a slot, waiting in FIFO order. `cancelled` is polled while
    /// waiting; when it returns true the request leaves the queue.
    pub fn acquire(&self, mut cancelled: impl FnMut() -> bool) -> Result<Permit<'_>, Denied> {
        let mut st = self.lock();
        if st.queue.is_empty() && has_room(&st) {
            st.in_service += 1;
            return Ok(Permit { gate: self });
        }
        if st.queue.len() >= st.queue_limit {
            st.rejected += 1;
            return Err(Denied::Overflow);
        }
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        let me = Arc::new(Waiter { cv: Condvar::new() });
        st.queue.push_back((ticket, me.clone()));
        st.max_queue = st.max_queue.max(st.queue.len());
        loop {
            st = me
                .cv
                .wait_timeout(st, CANCEL_POLL)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            if let Some(pos) = st.granted.iter().position(|&t| t == ticket) {
                st.granted.swap_remove(pos);
                return Ok(Permit { gate: self });
            }
            drop(st);
            let gone = cancelled();
            st = self.lock();
            if let Some(pos) = st.granted.iter().position(|&t| t == ticket) {
                st.granted.swap_remove(pos);
                if gone {
                    // Handed a slot just as the client left: pass it on.
                    st.in_service -= 1;
                    dispatch_locked(&mut st);
                    return Err(Denied::Cancelled);
                }
                return Ok(Permit { gate: self });
            }
            if gone {
                if let Some(pos) = st.queue.iter().position(|(t, _)| *t == ticket) {
                    st.queue.remove(pos);
                }
                return Err(Denied::Cancelled);
            }
        }
    }

    /// Changes the capacity (antagonists); a rise admits waiters at once.
    pub fn set_capacity(&self, capacity: Option<usize>) {
        let mut st = self.lock();
        st.capacity = capacity;
        dispatch_locked(&mut st);
    }

    pub fn stats(&self) -> GateStats {
        let st = self.lock();
        GateStats {
            in_service: st.in_service,
            queued: st.queue.len(),
            max_queue: st.max_queue,
            rejected: st.rejected,
            capacity: st.capacity,
        }
    }

    /// Requests waiting for a slot now.
    pub fn queued(&self) -> usize {
        self.lock().queue.len()
    }

    /// Clears max_queue and rejected (POST /reset); waiters are untouched.
    pub fn reset_counters(&self) {
        let mut st = self.lock();
        st.max_queue = st.queue.len();
        st.rejected = 0;
    }
}

fn has_room(st: &State) -> bool {
    st.capacity.is_none_or(|c| st.in_service < c)
}

/// Hands free slots to the head of the queue.
fn dispatch_locked(st: &mut State) {
    while has_room(st) {
        let Some((ticket, w)) = st.queue.pop_front() else {
            break;
        };
        st.in_service += 1;
        st.granted.push(ticket);
        w.cv.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;
    use std::thread;
    use std::time::Instant;

    fn never() -> bool {
        false
    }

    fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn admits_up_to_capacity_then_queues() {
        let g = Gate::new(Some(2), 10);
        let a = g.acquire(never).unwrap();
        let _b = g.acquire(never).unwrap();
        assert_eq!(g.stats().in_service, 2);
        thread::scope(|s| {
            let h = s.spawn(|| g.acquire(never).map(|_| ()));
            wait_until("queued", || g.stats().queued == 1);
            assert_eq!(g.stats().in_service, 2);
            drop(a);
            assert_eq!(h.join().unwrap(), Ok(()));
        });
        assert_eq!(g.stats().max_queue, 1);
    }

    #[test]
    fn waiters_are_served_in_arrival_order() {
        let g = Gate::new(Some(1), 100);
        let first = g.acquire(never).unwrap();
        let (tx, rx) = mpsc::channel();
        thread::scope(|s| {
            for i in 0..8 {
                // Enqueue one at a time so the arrival order is known.
                let (g, tx) = (&g, tx.clone());
                s.spawn(move || {
                    let p = g.acquire(never).unwrap();
                    tx.send(i).unwrap();
                    drop(p);
                });
                wait_until("waiter queued", || g.stats().queued == i + 1);
            }
            drop(first);
        });
        drop(tx);
        let order: Vec<usize> = rx.iter().collect();
        assert_eq!(order, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn overflow_is_rejected_immediately() {
        let g = Gate::new(Some(1), 1);
        let _p = g.acquire(never).unwrap();
        let stop = AtomicBool::new(false);
        thread::scope(|s| {
            let h = s.spawn(|| g.acquire(|| stop.load(Ordering::SeqCst)).err());
            wait_until("queued", || g.stats().queued == 1);
            assert_eq!(g.acquire(never).err(), Some(Denied::Overflow));
            assert_eq!(g.stats().rejected, 1);
            stop.store(true, Ordering::SeqCst);
            assert_eq!(h.join().unwrap(), Some(Denied::Cancelled));
        });
        assert_eq!(g.stats().queued, 0);
    }

    #[test]
    fn zero_queue_limit_rejects_when_full() {
        let g = Gate::new(Some(1), 0);
        let _p = g.acquire(never).unwrap();
        assert_eq!(g.acquire(never).err(), Some(Denied::Overflow));
    }

    #[test]
    fn cancelled_waiter_leaves_and_order_is_kept() {
        let g = Gate::new(Some(1), 10);
        let p = g.acquire(never).unwrap();
        let gone = AtomicBool::new(false);
        thread::scope(|s| {
            let h1 = s.spawn(|| g.acquire(|| gone.load(Ordering::SeqCst)).err());
            wait_until("first queued", || g.stats().queued == 1);
            let h2 = s.spawn(|| g.acquire(never).map(|_| ()));
            wait_until("second queued", || g.stats().queued == 2);
            gone.store(true, Ordering::SeqCst);
            assert_eq!(h1.join().unwrap(), Some(Denied::Cancelled));
            assert_eq!(g.stats().queued, 1);
            drop(p);
            assert_eq!(h2.join().unwrap(), Ok(()));
        });
        assert_eq!(g.stats().in_service, 0);
    }

    #[test]
    fn unlimited_never_queues() {
        let g = Gate::new(None, 0);
        let permits: Vec<_> = (0..100).map(|_| g.acquire(never).unwrap()).collect();
        assert_eq!(g.stats().in_service, 100);
        drop(permits);
        assert_eq!(g.stats().in_service, 0);
    }

    #[test]
    fn capacity_drop_and_restore() {
        let g = Gate::new(Some(2), 10);
        g.set_capacity(Some(0));
        thread::scope(|s| {
            let h = s.spawn(|| g.acquire(never).map(|_| ()));
            wait_until("queued under zero capacity", || g.stats().queued == 1);
            g.set_capacity(Some(2));
            assert_eq!(h.join().unwrap(), Ok(()));
        });
        // A drop below in_service admits nobody until enough slots free up.
        let a = g.acquire(never).unwrap();
        let b = g.acquire(never).unwrap();
        g.set_capacity(Some(1));
        thread::scope(|s| {
            let h = s.spawn(|| g.acquire(never).map(|_| ()));
            wait_until("queued", || g.stats().queued == 1);
            drop(a);
            // in_service is now 1 = capacity: still waiting.
            assert_eq!(g.stats().queued, 1);
            drop(b);
            assert_eq!(h.join().unwrap(), Ok(()));
        });
    }

    #[test]
    fn reset_clears_counters() {
        let g = Gate::new(Some(1), 0);
        let _p = g.acquire(never).unwrap();
        let _ = g.acquire(never);
        assert_eq!(g.stats().rejected, 1);
        g.reset_counters();
        assert_eq!(g.stats().rejected, 0);
        assert_eq!(g.stats().in_service, 1);
    }
}
