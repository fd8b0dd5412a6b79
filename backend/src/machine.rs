//! One machine of cpu-share replicas on wall time: the pure model of
//! cpushare.rs behind a mutex, advanced by one machine thread.
//!
//! Every arrival, completion and antagonist step advances the model (each
//! event at its own model time, so a late wake-up delays an answer but
//! never changes the model's arithmetic), recomputes the rates and plans
//! the next event; the thread then waits on a condition variable until
//! that event is due or an arrival brings it sooner. No CPU is burnt.
//!
//! Serving path. A request in service is answered when the model says its
//! work is done. On Linux the reactor serves /work without a thread (its
//! answer is written when the machine lists the request as finished and
//! pokes the reactor's eventfd, as the gate does for a granted slot): a
//! worker thread per request in service would add a blocking thread and
//! two context switches per request on a host the load generator and the
//! proxy share, which is what the reactor was built to remove. Requests
//! the reactor hands to a worker (bodies it does not parse itself, other
//! platforms) block on a channel instead (`run`); both wait on the same
//! model.

use crate::cpushare::{MachineConfig, Model, NEVER};
use crate::gate::Notify;
use crate::load::Meter;
use std::collections::HashMap;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The machine that `--mode cpu-share` flags describe.
pub fn machine_config(cfg: &crate::config::Config) -> MachineConfig {
    MachineConfig {
        share: cfg.share.unwrap_or(1.0 / cfg.replicas as f64),
        replicas: cfg.replicas,
        hard: cfg.hard_limit,
        cores: cfg.cores,
        load: cfg.machine_load.clone().unwrap_or_default(),
        index: cfg.machine_index,
        machines: cfg.machines,
    }
}

/// How a request in service learns that it is done.
enum Waiter {
    /// A worker blocked in `run`.
    Thread(SyncSender<()>),
    /// The reactor: listed in its replica's `finished`, then notified.
    Async,
}

struct Replica {
    /// The replica's load meter (its App reads it for probes).
    meter: Arc<Mutex<Meter>>,
    /// The busy amount last given to the meter.
    busy: u64,
    finished: Vec<u64>,
    notify: Option<Notify>,
}

struct State {
    model: Model,
    next_id: u64,
    waiting: HashMap<u64, Waiter>,
    replicas: Vec<Replica>,
    done: Vec<(usize, u64, u64)>,
    /// When the machine thread will wake up on its own (NEVER: it waits
    /// for an arrival).
    wakes_at: u64,
}

pub struct Machine {
    /// Time 0 of the model; the replicas' Apps use it as their clock's
    /// origin too, so meter times agree.
    origin: Instant,
    state: Mutex<State>,
    wake: Condvar,
}

impl Machine {
    /// A machine at time 0 (now); call `spawn` to start its thread.
    pub fn new(cfg: &MachineConfig, seed: u64) -> Arc<Machine> {
        Arc::new(Machine {
            origin: Instant::now(),
            state: Mutex::new(State {
                model: Model::new(cfg, seed),
                next_id: 0,
                waiting: HashMap::new(),
                replicas: (0..cfg.replicas)
                    .map(|_| Replica {
                        meter: Arc::new(Mutex::new(Meter::new(Some(1000), 0))),
                        busy: 0,
                        finished: Vec::new(),
                        notify: None,
                    })
                    .collect(),
                done: Vec::new(),
                wakes_at: NEVER,
            }),
            wake: Condvar::new(),
        })
    }

    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Replica k's load meter: utilization is its rate over its allocation.
    pub fn meter(&self, k: usize) -> Arc<Mutex<Meter>> {
        self.lock().replicas[k].meter.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// Starts the machine thread; it runs for the life of the process.
    pub fn spawn(self: &Arc<Machine>) -> std::io::Result<()> {
        let m = self.clone();
        std::thread::Builder::new()
            .name("machine".into())
            .spawn(move || m.run_thread())
            .map(|_| ())
    }

    fn run_thread(&self) {
        let mut st = self.lock();
        loop {
            let now = self.now_ns();
            self.poll(&mut st, now);
            let next = st.model.next_event();
            st.wakes_at = next;
            st = if next == NEVER {
                self.wake.wait(st).unwrap_or_else(|e| e.into_inner())
            } else if next > now {
                let wait = Duration::from_nanos(next - now);
                self.wake
                    .wait_timeout(st, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            } else {
                st
            };
        }
    }

    /// Processes what is due by `now`, signals the finished requests and
    /// brings the meters up to date.
    fn poll(&self, st: &mut State, now: u64) {
        let mut done = std::mem::take(&mut st.done);
        st.model.poll(now, &mut done);
        for &(k, id, _) in &done {
            match st.waiting.remove(&id) {
                Some(Waiter::Thread(tx)) => {
                    let _ = tx.try_send(());
                }
                Some(Waiter::Async) => {
                    let r = &mut st.replicas[k];
                    r.finished.push(id);
                    if let Some(f) = &r.notify {
                        f();
                    }
                }
                None => {}
            }
        }
        done.clear();
        st.done = done;
        for (k, r) in st.replicas.iter_mut().enumerate() {
            // sim's load report: busy = round(rate × 1000) of capacity 1000.
            let busy = (st.model.rate(k) * 1000.0).round() as u64;
            if busy != r.busy {
                r.busy = busy;
                r.meter
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .set_busy(now, busy);
            }
        }
    }

    /// Puts a request of `work_ns` into replica k's service now.
    fn submit(&self, k: usize, work_ns: u64, waiter: Waiter) -> u64 {
        let mut st = self.lock();
        let now = self.now_ns();
        self.poll(&mut st, now);
        let id = st.next_id;
        st.next_id += 1;
        st.waiting.insert(id, waiter);
        st.model.arrive(now, k, id, work_ns);
        // A zero-work request is due now: answer it without a round trip.
        self.poll(&mut st, now);
        if st.model.next_event() < st.wakes_at {
            self.wake.notify_one();
        }
        id
    }

    /// Serves `work_ns` on replica k, blocking until the model says it is
    /// done (a worker's path).
    pub fn run(&self, k: usize, work_ns: u64) {
        let (tx, rx) = sync_channel(1);
        self.submit(k, work_ns, Waiter::Thread(tx));
        let _ = rx.recv();
    }

    /// Starts `work_ns` on replica k without waiting (the reactor's path):
    /// its id shows up in `take_finished` when done, after `notify`.
    pub fn start_async(&self, k: usize, work_ns: u64) -> u64 {
        self.submit(k, work_ns, Waiter::Async)
    }

    /// Sets what is called (under the machine's lock: it must not block or
    /// call back) when requests of replica k started with `start_async`
    /// finish.
    pub fn set_notify(&self, k: usize, f: Notify) {
        self.lock().replicas[k].notify = Some(f);
    }

    /// Moves the ids of replica k's finished async requests into `out`.
    pub fn take_finished(&self, k: usize, out: &mut Vec<u64>) {
        out.append(&mut self.lock().replicas[k].finished);
    }

    /// The antagonist's level now, a fraction of the machine.
    pub fn antagonist_level(&self) -> f64 {
        self.lock().model.antagonist_level()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpushare::MachineLoad;

    fn one_machine(replicas: usize) -> Arc<Machine> {
        let m = Machine::new(
            &MachineConfig {
                share: 0.5,
                replicas,
                hard: false,
                cores: 0,
                load: MachineLoad::default(),
                index: 0,
                machines: 1,
            },
            1,
        );
        m.spawn().unwrap();
        m
    }

    /// Two 100 ms requests on one replica of a machine of 2 allocations
    /// (soft: a lone busy replica borrows the idle one): each gets 1
    /// allocation, so both take 100 ms; a third alone on the other replica
    /// meanwhile halves that. Only lower bounds are asserted.
    #[test]
    fn threads_wait_for_the_model_on_wall_time() {
        let m = one_machine(2);
        let t = Instant::now();
        std::thread::scope(|s| {
            let a = s.spawn(|| m.run(0, 100_000_000));
            let b = s.spawn(|| m.run(0, 100_000_000));
            a.join().unwrap();
            b.join().unwrap();
        });
        assert!(
            t.elapsed() >= Duration::from_millis(100),
            "{:?}",
            t.elapsed()
        );
        // Zero work is answered at once; the meter saw the rate.
        m.run(1, 0);
        assert_eq!(m.lock().waiting.len(), 0);
    }

    #[test]
    fn async_requests_are_listed_and_notified() {
        let m = one_machine(1);
        let pokes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let p = pokes.clone();
        m.set_notify(
            0,
            Arc::new(move || {
                p.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }),
        );
        let t = Instant::now();
        let id = m.start_async(0, 20_000_000);
        let mut out = Vec::new();
        let end = Instant::now() + Duration::from_secs(10);
        while out.is_empty() {
            assert!(Instant::now() < end, "never finished");
            std::thread::sleep(Duration::from_millis(1));
            m.take_finished(0, &mut out);
        }
        assert_eq!(out, [id]);
        // Alone on the machine (soft) it runs at 2 allocations: 10 ms.
        assert!(t.elapsed() >= Duration::from_millis(10));
        assert_eq!(pokes.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
