//! The capacity gate: a counting semaphore whose waiters are served strictly
//! in arrival order. At most `capacity` requests hold a slot; up to
//! `queue_limit` more wait; beyond that, admission fails at once (503).
//!
//! Each waiter has its own condition variable, so a release wakes exactly
//! the next waiter instead of the whole queue. All state sits behind one
//! mutex; the condition variables are only ever used with it.
//!
//! A waiter can also be asynchronous (the reactor's): it holds a ticket
//! instead of a thread; when the slot is handed to it, its ticket is listed
//! for `take_async_grants` and the notify function set by the reactor is
//! called. Both kinds share one FIFO queue.

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
    /// None: an asynchronous waiter.
    queue: VecDeque<(u64, Option<Arc<Waiter>>)>,
    /// Ticket numbers of waiters that were handed a slot but have not yet
    /// woken to take it.
    granted: Vec<u64>,
    /// The same for asynchronous waiters, until take_async_grants.
    async_granted: Vec<u64>,
    notify: Option<Notify>,
    next_ticket: u64,
    queue_limit: usize,
    max_queue: usize,
    rejected: u64,
}

/// Called when a slot goes to an asynchronous waiter.
pub type Notify = Arc<dyn Fn() + Send + Sync>;

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
                async_granted: Vec::new(),
                notify: None,
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
        st.queue.push_back((ticket, Some(me.clone())));
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

    /// Returns a slot taken with `enqueue_async`; the next waiter gets it.
    pub fn give_back(&self) {
        let mut st = self.lock();
        st.in_service -= 1;
        dispatch_locked(&mut st);
    }

    /// Sets what is called (under the gate's lock: it must not block or
    /// call back) when a slot goes to an asynchronous waiter.
    pub fn set_async_notify(&self, f: Notify) {
        self.lock().notify = Some(f);
    }

    /// Asynchronous admission: Ok(None) = a slot now; Ok(Some(ticket)) =
    /// queued, the slot comes through take_async_grants; Err = queue full.
    /// A slot either way is returned with `give_back`.
    pub fn enqueue_async(&self) -> Result<Option<u64>, Denied> {
        let mut st = self.lock();
        if st.queue.is_empty() && has_room(&st) {
            st.in_service += 1;
            return Ok(None);
        }
        if st.queue.len() >= st.queue_limit {
            st.rejected += 1;
            return Err(Denied::Overflow);
        }
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.queue.push_back((ticket, None));
        st.max_queue = st.max_queue.max(st.queue.len());
        Ok(Some(ticket))
    }

    /// Moves the tickets of asynchronous waiters that now hold a slot into
    /// `out`.
    pub fn take_async_grants(&self, out: &mut Vec<u64>) {
        out.append(&mut self.lock().async_granted);
    }

    /// An asynchronous waiter leaves (its client went away): out of the
    /// queue, or, if a slot was handed to it meanwhile, the slot goes on.
    pub fn cancel_async(&self, ticket: u64) {
        let mut st = self.lock();
        if let Some(pos) = st.queue.iter().position(|(t, _)| *t == ticket) {
            st.queue.remove(pos);
        } else if let Some(pos) = st.async_granted.iter().position(|&t| t == ticket) {
            st.async_granted.swap_remove(pos);
            st.in_service -= 1;
            dispatch_locked(&mut st);
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
        match w {
            Some(w) => {
                st.granted.push(ticket);
                w.cv.notify_one();
            }
            None => {
                st.async_granted.push(ticket);
                if let Some(f) = &st.notify {
                    f();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
    fn async_waiters_share_the_fifo_queue() {
        let g = Gate::new(Some(1), 3);
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        g.set_async_notify(Arc::new(move || {
            c.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(g.enqueue_async(), Ok(None), "a free slot at once");
        let first = g.enqueue_async().unwrap().unwrap();
        thread::scope(|s| {
            let h = s.spawn(|| g.acquire(never).map(|_| ()));
            wait_until("thread queued", || g.stats().queued == 2);
            let third = g.enqueue_async().unwrap().unwrap();
            assert_eq!(g.enqueue_async(), Err(Denied::Overflow));
            // Release: the slot goes to the first (async) waiter.
            g.give_back();
            let mut got = Vec::new();
            g.take_async_grants(&mut got);
            assert_eq!(got, vec![first]);
            assert_eq!(calls.load(Ordering::SeqCst), 1);
            // Then the thread, then the third.
            g.give_back();
            assert_eq!(h.join().unwrap(), Ok(()));
            g.take_async_grants(&mut got);
            assert_eq!(got, vec![first, third]);
        });
        g.give_back();
        assert_eq!(g.stats().in_service, 0);
    }

    #[test]
    fn cancelled_async_waiter_passes_its_slot_on() {
        let g = Gate::new(Some(1), 3);
        assert_eq!(g.enqueue_async(), Ok(None));
        let a = g.enqueue_async().unwrap().unwrap();
        let b = g.enqueue_async().unwrap().unwrap();
        // Still queued: it just leaves.
        g.cancel_async(a);
        assert_eq!(g.stats().queued, 1);
        // Granted but not taken: the slot goes to nobody else waiting.
        g.give_back();
        g.cancel_async(b);
        let mut got = Vec::new();
        g.take_async_grants(&mut got);
        assert!(got.is_empty());
        assert_eq!(g.stats().in_service, 0);
        assert_eq!(g.stats().queued, 0);
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
