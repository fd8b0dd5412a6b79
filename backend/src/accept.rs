//! Accepting connections: a cap on connections served at once, a count that
//! a guard releases whatever way a connection ends, worker threads that are
//! reused (so threads never outnumber the cap, even while some exit), and
//! the end of the server (close the listener, drain).
//!
//! At the cap (Linux, with the reactor) a new connection is accepted and
//! the parked connection that has waited longest for a request is closed
//! to make room, as the ingress does: waiting in the listen backlog let a
//! flood of idle sockets lock every new client out for the idle timeout,
//! probes included, which a benchmark would mistake for a slow replica.
//! When no connection can be shed (every one has a request in service or
//! on a worker) the newcomer takes one of `--probe-reserve` extra slots,
//! served probes, health and stats on the reactor only (503 for anything
//! else), so a replica's state stays readable; with those gone too it is
//! closed at once. Without the reactor excess connections wait in the
//! backlog, raised to the kernel's maximum (net.core.somaxconn).

#[cfg(target_os = "linux")]
use crate::reactor::Reactor;
use crate::server::App;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// Stack per connection thread: handlers are shallow (SHA-256 state is small).
const CONN_STACK: usize = 256 * 1024;
/// A wait for a free slot re-checks shutdown at least this often.
const SLOT_POLL: Duration = Duration::from_millis(100);
/// A worker without a connection for this long exits.
const WORKER_IDLE_EXIT: Duration = Duration::from_secs(30);

/// The number of open connections.
pub struct Conns {
    open: Mutex<usize>,
    changed: Condvar,
    /// Most connections open at once since start (for tests).
    peak: AtomicUsize,
    /// Worker threads started since start (for tests).
    spawned: AtomicUsize,
    /// Open connections in the probe reserve (counted in `open` too).
    reserve_open: AtomicUsize,
    /// Connections shed at the cap, and new ones closed at once.
    shed: AtomicUsize,
    refused: AtomicUsize,
}

impl Conns {
    pub fn new() -> Conns {
        Conns {
            open: Mutex::new(0),
            changed: Condvar::new(),
            peak: AtomicUsize::new(0),
            spawned: AtomicUsize::new(0),
            reserve_open: AtomicUsize::new(0),
            shed: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
        }
    }

    pub fn open(&self) -> usize {
        *self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[cfg(test)]
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    #[cfg(test)]
    pub fn spawned(&self) -> usize {
        self.spawned.load(Ordering::SeqCst)
    }

    /// Connections shed at the cap and refused since start.
    pub fn shed_refused(&self) -> (usize, usize) {
        (
            self.shed.load(Ordering::SeqCst),
            self.refused.load(Ordering::SeqCst),
        )
    }

    /// Whether the connections outside the probe reserve reach `cap`.
    pub fn at_cap(&self, cap: usize) -> bool {
        self.normal_open() >= cap
    }

    /// Open connections outside the probe reserve.
    fn normal_open(&self) -> usize {
        self.open()
            .saturating_sub(self.reserve_open.load(Ordering::SeqCst))
    }

    /// Wakes every waiter (shutdown).
    pub fn wake(&self) {
        self.changed.notify_all();
    }

    /// Waits until fewer than `cap` connections are open (true) or `stop`
    /// says to give up (false).
    fn wait_below(&self, cap: usize, stop: &dyn Fn() -> bool) -> bool {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        while *open >= cap {
            if stop() {
                return false;
            }
            open = self
                .changed
                .wait_timeout(open, SLOT_POLL)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        !stop()
    }

    /// Waits until no connection is open (true) or `timeout` passes (false).
    pub fn wait_none(&self, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        while *open > 0 {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            open = self
                .changed
                .wait_timeout(open, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}

/// One counted connection. Taken before its thread is spawned, so a drain
/// never misses a connection that was accepted but has not started yet;
/// released on drop, so a thread that panics, or fails to spawn, never
/// leaves the count high (which made every later shutdown wait its full
/// drain timeout).
pub struct ConnSlot {
    app: Arc<App>,
    /// One of the --probe-reserve slots: served on the reactor only.
    pub reserve: bool,
}

impl ConnSlot {
    pub fn take(app: Arc<App>) -> ConnSlot {
        ConnSlot::take_kind(app, false)
    }

    fn take_kind(app: Arc<App>, reserve: bool) -> ConnSlot {
        let mut open = app.conns.open.lock().unwrap_or_else(|e| e.into_inner());
        *open += 1;
        if reserve {
            app.conns.reserve_open.fetch_add(1, Ordering::SeqCst);
        }
        app.conns.peak.fetch_max(*open, Ordering::SeqCst);
        drop(open);
        ConnSlot { app, reserve }
    }

    /// Moves a reserve connection to a normal slot when the cap has room
    /// again; true when it is (now) a normal one. A connection taken into
    /// the reserve during a burst is kept in a client's pool afterwards: it
    /// must not answer that client's later requests 503 for good.
    pub fn promote(&mut self) -> bool {
        if !self.reserve {
            return true;
        }
        let conns = &self.app.conns;
        let open = conns.open.lock().unwrap_or_else(|e| e.into_inner());
        let normal = open.saturating_sub(conns.reserve_open.load(Ordering::SeqCst));
        if normal < self.app.cfg.max_connections {
            conns.reserve_open.fetch_sub(1, Ordering::SeqCst);
            self.reserve = false;
        }
        drop(open);
        !self.reserve
    }
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        let conns = &self.app.conns;
        let mut open = conns.open.lock().unwrap_or_else(|e| e.into_inner());
        *open -= 1;
        if self.reserve {
            conns.reserve_open.fetch_sub(1, Ordering::SeqCst);
        }
        conns.changed.notify_all();
    }
}

/// Accepts and serves connections, at most `max_connections` at once, until
/// shutdown (see `stop`); then closes the listener and waits for open
/// connections up to the drain timeout. Returns whether all finished.
pub fn serve(app: &Arc<App>, listener: TcpListener) -> bool {
    widen_backlog(&listener);
    let cap = app.cfg.max_connections;
    let pool = Arc::new(Pool::default());
    #[cfg(target_os = "linux")]
    start_reactor(app, &pool);
    loop {
        // Without the reactor nothing can be shed: wait in the backlog.
        if pool.reactor().is_none() && !app.conns.wait_below(cap, &|| app.shutting_down()) {
            break;
        }
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) => {
                if app.shutting_down() {
                    break;
                }
                // Out of file descriptors (EMFILE, ENFILE): free one by
                // shedding, else back off; keep serving either way.
                if matches!(e.raw_os_error(), Some(23 | 24)) && pool.shed_oldest(app) {
                    continue;
                }
                eprintln!("prequal-backend: accept: {e}");
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        // Served even when shutdown began meanwhile: it was accepted, so it
        // gets an answer (our own wake-up connection just closes). It waits
        // for its first request in the reactor, without a thread.
        let _ = stream.set_nodelay(true);
        let Some(slot) = pool.admit(app) else {
            app.conns.refused.fetch_add(1, Ordering::SeqCst);
            drop(stream);
            // stop()'s wake-up connection itself may be refused at the
            // cap: looping back into accept would then block for ever.
            if app.shutting_down() {
                break;
            }
            continue;
        };
        pool.park_or_dispatch(app, stream, slot);
        if app.shutting_down() {
            break;
        }
    }
    drop(listener);
    app.conns.wait_none(app.cfg.drain_timeout)
}

#[cfg(target_os = "linux")]
fn start_reactor(app: &Arc<App>, pool: &Arc<Pool>) {
    let reactor = match Reactor::new() {
        Ok(r) => Arc::new(r),
        Err(e) => {
            eprintln!("prequal-backend: epoll: {e}; serving every connection on a thread");
            return;
        }
    };
    let (a, p, r) = (app.clone(), pool.clone(), reactor.clone());
    let started = thread::Builder::new()
        .name("reactor".into())
        .spawn(move || r.run(&a, &p));
    match started {
        Ok(_) => {
            let _ = pool.reactor.set(reactor);
        }
        Err(e) => {
            eprintln!("prequal-backend: reactor thread: {e}; serving every connection on a thread")
        }
    }
}

/// A connection going to a worker: the bytes read so far, and the rest of
/// a response to write first (then close if `close_after`).
pub struct Handoff {
    pub stream: TcpStream,
    pub buf: Vec<u8>,
    pub slot: ConnSlot,
    pub pending: Vec<u8>,
    pub close_after: bool,
}

/// Threads that serve connections one after another. A worker is spawned
/// only when no idle one is left for a connection, and it counts as idle
/// before it releases its previous connection's slot: so workers never
/// outnumber the connections open at once, which the cap bounds. A
/// connection that goes idle is parked in the reactor (Linux), and its
/// worker takes the next one.
#[derive(Default)]
pub struct Pool {
    state: Mutex<PoolState>,
    ready: Condvar,
    #[cfg(target_os = "linux")]
    reactor: OnceLock<Arc<Reactor>>,
}

#[derive(Default)]
struct PoolState {
    jobs: std::collections::VecDeque<Handoff>,
    idle: usize,
}

impl Pool {
    #[cfg(target_os = "linux")]
    fn reactor(&self) -> Option<&Arc<Reactor>> {
        self.reactor.get()
    }

    #[cfg(not(target_os = "linux"))]
    fn reactor(&self) -> Option<&std::convert::Infallible> {
        None
    }

    /// Closes the parked connection waiting longest for a request; false
    /// when there is none (or no reactor).
    fn shed_oldest(&self, app: &App) -> bool {
        #[cfg(target_os = "linux")]
        if let Some(r) = self.reactor() {
            if r.shed_oldest() {
                app.conns.shed.fetch_add(1, Ordering::SeqCst);
                return true;
            }
        }
        let _ = app;
        false
    }

    /// A slot for a new connection: a normal one below the cap or after
    /// shedding the oldest waiting connection, else one of the probe
    /// reserve; None when all are taken by connections with requests.
    fn admit(&self, app: &Arc<App>) -> Option<ConnSlot> {
        let cfg = &app.cfg;
        if self.reactor().is_none() || app.conns.normal_open() < cfg.max_connections {
            return Some(ConnSlot::take(app.clone()));
        }
        if self.shed_oldest(app) && app.conns.normal_open() < cfg.max_connections {
            return Some(ConnSlot::take(app.clone()));
        }
        (app.conns.reserve_open.load(Ordering::SeqCst) < cfg.probe_reserve)
            .then(|| ConnSlot::take_kind(app.clone(), true))
    }

    /// Parks an idle connection in the reactor, or gives it to a worker when
    /// there is none or it refuses (shutdown).
    fn park_or_dispatch(self: &Arc<Pool>, app: &App, stream: TcpStream, slot: ConnSlot) {
        #[cfg(target_os = "linux")]
        let (stream, slot) = match self.reactor() {
            Some(r) => match r.park(app, stream, slot, Instant::now(), false) {
                Ok(()) => return,
                Err(back) => back,
            },
            None => (stream, slot),
        };
        #[cfg(not(target_os = "linux"))]
        let _ = app;
        self.dispatch(Handoff {
            stream,
            buf: Vec::new(),
            slot,
            pending: Vec::new(),
            close_after: false,
        });
    }

    pub fn dispatch(self: &Arc<Pool>, job: Handoff) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.jobs.push_back(job);
        if st.idle >= st.jobs.len() {
            drop(st);
            self.ready.notify_one();
            return;
        }
        drop(st);
        if let Some(job) = self
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .jobs
            .back()
        {
            job.slot.app.conns.spawned.fetch_add(1, Ordering::SeqCst);
        }
        let pool = self.clone();
        let spawned = thread::Builder::new()
            .stack_size(CONN_STACK)
            .spawn(move || pool.work());
        if let Err(e) = spawned {
            // Nobody will take the connection: close it, releasing its slot.
            eprintln!("prequal-backend: connection thread: {e}");
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            drop(st.jobs.pop_back());
        }
    }

    /// A worker's life: take a connection, serve it, repeat; exit after
    /// WORKER_IDLE_EXIT without one. A panic ends the worker; unwinding drops
    /// the slot it holds.
    fn work(&self) {
        let mut done: Option<ConnSlot> = None;
        loop {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            st.idle += 1;
            // Idle now: only now may the finished connection's slot go.
            drop(done.take());
            let job = loop {
                if let Some(job) = st.jobs.pop_front() {
                    break Some(job);
                }
                let (next, wait) = self
                    .ready
                    .wait_timeout(st, WORKER_IDLE_EXIT)
                    .unwrap_or_else(|e| e.into_inner());
                st = next;
                if wait.timed_out() && st.jobs.is_empty() {
                    break None;
                }
            };
            st.idle -= 1;
            drop(st);
            let Some(job) = job else { return };
            let app = job.slot.app.clone();
            let may_park = self.reactor().is_some();
            let mut back =
                app.serve_conn(job.stream, job.buf, &job.pending, job.close_after, may_park);
            let mut slot = Some(job.slot);
            while let Some(stream) = back.take() {
                #[cfg(target_os = "linux")]
                if let (Some(r), Some(s)) = (self.reactor(), slot.take()) {
                    match r.park(&app, stream, s, Instant::now(), true) {
                        Ok(()) => break,
                        Err((stream, s)) => {
                            // Refused (shutdown): serve it here to the end.
                            slot = Some(s);
                            back = app.serve_conn(stream, Vec::new(), &[], false, false);
                            continue;
                        }
                    }
                }
                #[cfg(not(target_os = "linux"))]
                drop(stream);
            }
            done = slot;
        }
    }
}

/// Begins shutdown and wakes `serve` out of its blocking accept.
pub fn stop(app: &App, listening: SocketAddr) {
    app.begin_shutdown();
    let _ = TcpStream::connect_timeout(&wake_addr(listening), Duration::from_secs(1));
}

/// The address to connect to for waking our own accept: loopback when bound
/// to the wildcard address.
fn wake_addr(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, addr.port())
}

/// std listens with a backlog of 128; calling listen again on a listening
/// socket changes it. A negative backlog means the kernel's maximum
/// (Linux and the BSDs clamp it to somaxconn).
#[cfg(unix)]
fn widen_backlog(listener: &TcpListener) {
    use std::os::fd::AsRawFd;
    extern "C" {
        fn listen(fd: i32, backlog: i32) -> i32;
    }
    // SAFETY: the descriptor is a listening socket owned by `listener`,
    // alive for the call; listen only changes its queue length.
    let _ = unsafe { listen(listener.as_raw_fd(), -1) };
}

#[cfg(not(unix))]
fn widen_backlog(_: &TcpListener) {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{ErrorKind, Read, Write};
    use std::thread::JoinHandle;

    struct Server {
        app: Arc<App>,
        addr: SocketAddr,
        done: Option<JoinHandle<bool>>,
    }

    impl Server {
        fn start(args: &[&str]) -> Server {
            let mut all = vec!["--listen", "127.0.0.1:0", "--service-time", "1ms"];
            all.extend_from_slice(args);
            let args: Vec<String> = all.iter().map(|s| s.to_string()).collect();
            let cfg = match crate::config::parse(&args, &Default::default()).unwrap() {
                crate::config::Parsed::Run(c) => *c,
                crate::config::Parsed::Help => unreachable!(),
            };
            let listener = TcpListener::bind(&cfg.listen).unwrap();
            let addr = listener.local_addr().unwrap();
            let app = Arc::new(App::new(cfg));
            let a = app.clone();
            let done = thread::spawn(move || serve(&a, listener));
            Server {
                app,
                addr,
                done: Some(done),
            }
        }

        fn connect(&self) -> TcpStream {
            let s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(5)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s
        }

        /// Stops the server; whether every connection finished in its drain.
        fn stop(&mut self) -> bool {
            stop(&self.app, self.addr);
            self.done.take().unwrap().join().unwrap()
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            if self.done.is_some() {
                self.stop();
            }
        }
    }

    fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
        let end = Instant::now() + Duration::from_secs(20);
        while !cond() {
            assert!(Instant::now() < end, "timed out waiting for {what}");
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Reads until EOF (true) or an error/timeout (false), keeping the bytes.
    fn read_to_eof(s: &mut TcpStream, out: &mut Vec<u8>) -> bool {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf) {
                Ok(0) => return true,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }

    fn get(s: &mut TcpStream, path: &str) -> String {
        write!(s, "GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let mut buf = [0u8; 4096];
        let n = s.read(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn panicking_connection_releases_its_count() {
        let mut srv = Server::start(&["--drain-timeout", "5s"]);
        let mut c = srv.connect();
        write!(c, "GET /test/panic HTTP/1.1\r\n\r\n").unwrap();
        let mut out = Vec::new();
        assert!(read_to_eof(&mut c, &mut out), "the connection is closed");
        assert!(out.is_empty(), "no answer from a panicked thread");
        wait_until("the count to drop to 0", || srv.app.conns.open() == 0);
        // With the count left high the drain would time out (false).
        assert!(srv.stop(), "drain finished");
    }

    #[test]
    fn connection_accepted_as_shutdown_begins_is_served_and_drained() {
        let mut srv = Server::start(&["--service-time", "200ms"]);
        let mut c = srv.connect();
        write!(c, "GET /work HTTP/1.1\r\n\r\n").unwrap();
        // Accepted (counted), perhaps not yet read: then shutdown begins.
        // The drain must wait for its answer.
        wait_until("the connection to be accepted", || {
            srv.app.conns.open() == 1
        });
        assert!(srv.stop(), "drain finished");
        let stats = srv.app.stats_json();
        assert!(
            stats.contains("\"in_flight\":0") && stats.contains("\"served\":1"),
            "serve returned before the request was answered: {stats}"
        );
        let mut out = Vec::new();
        assert!(read_to_eof(&mut c, &mut out));
        let out = String::from_utf8_lossy(&out);
        assert!(out.starts_with("HTTP/1.1 200"), "{out:?}");
        assert!(out.contains("Connection: close"), "{out:?}");
    }

    /// Whether the server closed `s` (EOF or reset) within its read timeout.
    fn closed(s: &mut TcpStream) -> bool {
        let mut out = Vec::new();
        read_to_eof(s, &mut out) && out.is_empty()
    }

    #[test]
    fn at_the_cap_the_connection_waiting_longest_is_shed() {
        let srv = Server::start(&["--max-connections", "2", "--probe-reserve", "0"]);
        let mut answered = srv.connect();
        assert!(get(&mut answered, "/healthz").starts_with("HTTP/1.1 200"));
        let mut silent = srv.connect();
        wait_until("both counted", || srv.app.conns.open() == 2);
        // The cap is reached: a newcomer is served at once (it used to wait
        // in the backlog until a connection went), and the connection idle
        // longest makes room for it.
        let mut third = srv.connect();
        assert!(get(&mut third, "/prequal/probe").starts_with("HTTP/1.1 200"));
        assert!(closed(&mut answered), "the oldest idle connection is shed");
        // Next in line: the silent one (third was answered after it).
        let mut fourth = srv.connect();
        assert!(get(&mut fourth, "/healthz").starts_with("HTTP/1.1 200"));
        assert!(closed(&mut silent));
        assert!(get(&mut third, "/healthz").starts_with("HTTP/1.1 200"));
        assert_eq!(srv.app.conns.shed_refused(), (2, 0));
        assert!(srv.app.conns.peak() <= 3, "peak {}", srv.app.conns.peak());
        assert_eq!(srv.app.conns.spawned(), 0);
    }

    #[test]
    fn the_probe_reserve_serves_probes_when_nothing_can_be_shed() {
        // Both connections in a request that holds them: nothing to shed.
        let args = [
            "--max-connections",
            "1",
            "--concurrency",
            "1",
            "--service-time",
            "1s",
        ];
        let srv = Server::start(&[&args[..], &["--probe-reserve", "1"]].concat());
        let mut busy = srv.connect();
        write!(busy, "GET /work HTTP/1.1\r\n\r\n").unwrap();
        wait_until("the work in service", || {
            srv.app.stats_json().contains("\"in_flight\":1")
        });
        let mut spare = srv.connect();
        let out = get(&mut spare, "/prequal/probe");
        assert!(out.starts_with("HTTP/1.1 200"), "{out:?}");
        assert!(out.contains("\"rif\":1"), "the replica's state: {out:?}");
        assert!(get(&mut spare, "/stats").starts_with("HTTP/1.1 200"));
        // Anything that would need a thread: 503, then close.
        write!(spare, "GET /work HTTP/1.1\r\n\r\n").unwrap();
        let mut out = Vec::new();
        assert!(read_to_eof(&mut spare, &mut out));
        let out = String::from_utf8_lossy(&out);
        assert!(out.starts_with("HTTP/1.1 503"), "{out:?}");
        assert!(out.contains("Connection: close"), "{out:?}");
        let mut pooled = srv.connect();
        assert!(get(&mut pooled, "/healthz").starts_with("HTTP/1.1 200"));
        assert!(read_responses(&mut busy, 1).starts_with("HTTP/1.1 200"));
        // The burst is over: a reserve connection kept in a client's pool
        // is served /work again, not refused for the rest of its life.
        drop(busy);
        wait_until("only the pooled one open", || srv.app.conns.open() == 1);
        write!(pooled, "GET /work HTTP/1.1\r\n\r\n").unwrap();
        let out = read_responses(&mut pooled, 1);
        assert!(out.starts_with("HTTP/1.1 200"), "{out:?}");
        assert!(get(&mut pooled, "/healthz").starts_with("HTTP/1.1 200"));
        assert_eq!(srv.app.conns.spawned(), 0);
        assert_eq!(srv.app.conns.shed_refused().1, 0);
        drop(srv);

        // Without a reserve the newcomer is closed at once.
        let srv = Server::start(&[&args[..], &["--probe-reserve", "0"]].concat());
        let mut busy = srv.connect();
        write!(busy, "GET /work HTTP/1.1\r\n\r\n").unwrap();
        wait_until("the work in service", || {
            srv.app.stats_json().contains("\"in_flight\":1")
        });
        let mut late = srv.connect();
        let _ = write!(late, "GET /prequal/probe HTTP/1.1\r\n\r\n");
        assert!(closed(&mut late));
        assert_eq!(srv.app.conns.shed_refused(), (0, 1));
        assert!(read_responses(&mut busy, 1).starts_with("HTTP/1.1 200"));
    }

    #[test]
    fn a_new_connection_has_the_first_request_timeout_to_send_its_head() {
        let srv = Server::start(&["--first-request-timeout", "300ms", "--idle-timeout", "60s"]);
        let mut silent = srv.connect();
        let mut partial = srv.connect();
        write!(partial, "GET /healthz HTTP/1.1\r\nX-A: ").unwrap();
        let mut kept = srv.connect();
        assert!(get(&mut kept, "/healthz").starts_with("HTTP/1.1 200"));
        let t = Instant::now();
        assert!(closed(&mut silent), "closed without a word");
        let mut out = Vec::new();
        assert!(read_to_eof(&mut partial, &mut out));
        let out = String::from_utf8_lossy(&out);
        assert!(out.starts_with("HTTP/1.1 408"), "{out:?}");
        // Well before the 60 s idle timeout (and the 10 s read timeout).
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        // A connection that sent a request has the idle timeout.
        thread::sleep(Duration::from_millis(600));
        assert!(get(&mut kept, "/healthz").starts_with("HTTP/1.1 200"));
        wait_until("only the kept one open", || srv.app.conns.open() == 1);
    }

    #[test]
    fn a_partial_head_waits_in_the_reactor_without_a_thread() {
        let srv = Server::start(&[]);
        let mut conns: Vec<TcpStream> = (0..20).map(|_| srv.connect()).collect();
        for c in &mut conns {
            write!(c, "G").unwrap();
        }
        for c in &mut conns {
            write!(c, "ET /prequal/probe HTTP/1.1\r\nHost").unwrap();
        }
        wait_until("all counted", || srv.app.conns.open() == 20);
        thread::sleep(Duration::from_millis(100));
        assert_eq!(srv.app.conns.spawned(), 0, "a worker per partial head");
        for c in &mut conns {
            write!(c, ": t\r\n\r\n").unwrap();
            assert!(read_responses(c, 1).starts_with("HTTP/1.1 200"));
        }
        assert_eq!(srv.app.conns.spawned(), 0);
    }

    #[test]
    fn idle_keep_alive_connection_is_closed() {
        let srv = Server::start(&["--idle-timeout", "200ms"]);
        let mut c = srv.connect();
        assert!(get(&mut c, "/healthz").starts_with("HTTP/1.1 200"));
        let mut out = Vec::new();
        assert!(
            read_to_eof(&mut c, &mut out),
            "closed within the read timeout"
        );
        assert!(out.is_empty());
        // A connection that never sends a request is idle too.
        let mut silent = srv.connect();
        assert!(read_to_eof(&mut silent, &mut out));
        wait_until("no open connection", || srv.app.conns.open() == 0);
    }

    #[test]
    fn hang_with_pipelined_requests_ends_when_the_client_leaves() {
        let srv = Server::start(&["--work-fault", "hang"]);
        let mut c = srv.connect();
        // Two requests at once: the second is buffered while the first hangs.
        write!(
            c,
            "GET /work HTTP/1.1\r\n\r\nGET /work HTTP/1.1\r\n\r\nGET /wo"
        )
        .unwrap();
        wait_until("the hang to start", || {
            srv.app.stats_json().contains("\"in_flight\":1")
        });
        c.shutdown(std::net::Shutdown::Write).unwrap();
        wait_until("the connection to end", || srv.app.conns.open() == 0);
        assert!(srv.app.stats_json().contains("\"in_flight\":0"));
    }

    #[test]
    fn hang_with_a_silent_client_ends_at_the_idle_timeout() {
        let srv = Server::start(&["--work-fault", "hang", "--idle-timeout", "300ms"]);
        let mut c = srv.connect();
        write!(c, "GET /work HTTP/1.1\r\n\r\nGET /work HTTP/1.1\r\n\r\n").unwrap();
        let mut out = Vec::new();
        assert!(read_to_eof(&mut c, &mut out), "closed by the server");
        assert!(out.is_empty(), "a hang never answers");
        wait_until("the connection to end", || srv.app.conns.open() == 0);
    }

    /// Reads until `n` complete responses (each ending in its body) are in.
    fn read_responses(s: &mut TcpStream, n: usize) -> String {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let text = String::from_utf8_lossy(&out).into_owned();
            let complete = text.matches("HTTP/1.1 ").count() >= n && {
                // The last response's body has arrived in full.
                let last = text.rsplit("HTTP/1.1 ").next().unwrap_or("");
                let len: usize = last
                    .lines()
                    .find_map(|l| l.strip_prefix("Content-Length: "))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(usize::MAX);
                last.split_once("\r\n\r\n")
                    .is_some_and(|(_, body)| body.len() >= len)
            };
            if complete {
                return text;
            }
            assert!(Instant::now() < end, "timed out: {text:?}");
            let k = s.read(&mut buf).unwrap();
            assert!(k > 0, "closed early: {text:?}");
            out.extend_from_slice(&buf[..k]);
        }
    }

    #[test]
    fn probes_are_answered_without_a_thread_per_connection() {
        let srv = Server::start(&[]);
        let mut conns: Vec<TcpStream> = (0..20).map(|_| srv.connect()).collect();
        for _ in 0..5 {
            for c in &mut conns {
                write!(c, "GET /prequal/probe HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
                let out = read_responses(c, 1);
                assert!(out.starts_with("HTTP/1.1 200"), "{out:?}");
                assert!(out.contains("\"qps\":"), "{out:?}");
            }
        }
        // Pipelined: all answered in order.
        let c = &mut conns[0];
        write!(
            c,
            "GET /healthz HTTP/1.1\r\n\r\nGET /stats HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\n"
        )
        .unwrap();
        let out = read_responses(c, 3);
        assert!(
            out.contains("\r\n\r\nok") && out.contains("\"in_flight\""),
            "{out:?}"
        );
        assert_eq!(
            srv.app.conns.spawned(),
            0,
            "the reactor answers these itself"
        );
        assert_eq!(srv.app.conns.open(), 20);
    }

    #[test]
    fn work_moves_to_a_worker_and_back() {
        let srv = Server::start(&["--service-time", "0s"]);
        let mut c = srv.connect();
        // A probe (reactor), /work with a body (worker) and a probe behind
        // it, pipelined: answered in order.
        write!(
            c,
            "GET /prequal/probe HTTP/1.1\r\n\r\nPOST /work HTTP/1.1\r\nContent-Length: 17\r\n\r\n{{\"iterations\": 0}}GET /healthz HTTP/1.1\r\n\r\n"
        )
        .unwrap();
        let out = read_responses(&mut c, 3);
        let rif = out.find("\"rif\":").unwrap();
        let work = out.find("\"rif_at_arrival\":").unwrap();
        let ok = out.rfind("\r\n\r\nok").unwrap();
        assert!(rif < work && work < ok, "{out:?}");
        assert_eq!(srv.app.conns.spawned(), 1);
        // Idle for longer than a read wake, the worker parks it; whichever
        // holds it, the next requests are served on the same connection.
        thread::sleep(Duration::from_millis(700));
        for req in [
            "POST /work HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",
            "GET /prequal/probe HTTP/1.1\r\n\r\n",
            "GET /work?iterations=0 HTTP/1.1\r\n\r\n",
        ] {
            write!(c, "{req}").unwrap();
            assert!(read_responses(&mut c, 1).starts_with("HTTP/1.1 200"));
        }
        // One worker, reused: never one per request.
        assert_eq!(srv.app.conns.spawned(), 1);
        assert_eq!(srv.app.conns.open(), 1);
    }

    #[test]
    fn inline_work_holds_its_slot_on_a_timer() {
        let srv = Server::start(&["--concurrency", "1", "--service-time", "300ms"]);
        let mut a = srv.connect();
        let mut b = srv.connect();
        // A takes the only slot on the reactor (no thread); a healthz sent
        // behind it waits for its answer.
        write!(a, "GET /work HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n").unwrap();
        wait_until("A in service", || {
            srv.app.stats_json().contains("\"in_flight\":1")
        });
        assert_eq!(srv.app.conns.spawned(), 0);
        // B finds no slot: it queues, still on the reactor, in FIFO order.
        write!(b, "GET /work?iterations=500 HTTP/1.1\r\n\r\n").unwrap();
        wait_until("B queued", || srv.app.stats_json().contains("\"queued\":1"));
        let out_a = read_responses(&mut a, 2);
        let out_b = read_responses(&mut b, 1);
        assert!(out_a.starts_with("HTTP/1.1 200"), "{out_a:?}");
        let service: u64 = out_a
            .lines()
            .find_map(|l| l.strip_prefix("X-Prequal-Service-Us: "))
            .unwrap()
            .parse()
            .unwrap();
        assert!(service >= 300_000, "{out_a:?}");
        let queue_a: f64 = out_a
            .split("\"queue_ms\":")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .and_then(|v| v.parse().ok())
            .unwrap();
        assert!(queue_a < 100.0, "A did not wait for a slot: {out_a:?}");
        assert!(out_a.ends_with("\r\n\r\nok"), "healthz after it: {out_a:?}");
        // B waited for A's slot.
        let queue_ms: f64 = out_b
            .split("\"queue_ms\":")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .and_then(|v| v.parse().ok())
            .unwrap();
        assert!(queue_ms > 0.0, "{out_b:?}");
        assert_eq!(srv.app.conns.spawned(), 0, "no thread for either");
        wait_until("RIF back to 0", || {
            srv.app
                .stats_json()
                .contains("\"in_flight\":0,\"queued\":0,\"served\":2")
        });
    }

    #[test]
    fn queued_inline_work_leaves_when_its_client_does() {
        let srv = Server::start(&[
            "--concurrency",
            "1",
            "--queue-limit",
            "1",
            "--service-time",
            "1s",
        ]);
        let mut a = srv.connect();
        write!(a, "GET /work HTTP/1.1\r\n\r\n").unwrap();
        wait_until("A in service", || {
            srv.app.stats_json().contains("\"in_flight\":1")
        });
        let mut b = srv.connect();
        write!(b, "GET /work HTTP/1.1\r\n\r\n").unwrap();
        wait_until("B queued", || srv.app.stats_json().contains("\"queued\":1"));
        // The queue is full: C gets 503 at once, with the queue length.
        let mut c = srv.connect();
        write!(c, "GET /work HTTP/1.1\r\n\r\n").unwrap();
        let out = read_responses(&mut c, 1);
        assert!(out.starts_with("HTTP/1.1 503"), "{out:?}");
        assert!(out.contains("X-Prequal-Queue: 1\r\n"), "{out:?}");
        // B leaves: out of the queue and of RIF.
        drop(b);
        wait_until("B out of the queue", || {
            srv.app
                .stats_json()
                .starts_with("{\"in_flight\":1,\"queued\":0,")
        });
        assert!(read_responses(&mut a, 1).starts_with("HTTP/1.1 200"));
        wait_until("all done", || {
            srv.app
                .stats_json()
                .contains("\"in_flight\":0,\"queued\":0,\"served\":1,\"rejected\":1")
        });
        assert_eq!(srv.app.conns.spawned(), 0);
    }

    #[test]
    fn request_then_half_close_is_answered() {
        let srv = Server::start(&[]);
        let mut c = srv.connect();
        write!(c, "GET /healthz HTTP/1.1\r\n\r\n").unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let mut out = Vec::new();
        assert!(read_to_eof(&mut c, &mut out));
        let out = String::from_utf8_lossy(&out);
        assert!(
            out.starts_with("HTTP/1.1 200") && out.ends_with("ok"),
            "{out:?}"
        );
        wait_until("the connection to close", || srv.app.conns.open() == 0);
    }
}
