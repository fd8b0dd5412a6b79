//! The HTTP endpoints and the shared replica state: RIF, the capacity gate,
//! the latency estimator and the counters.

use crate::accept::Conns;
use crate::antagonist::capacity_at;
use crate::config::{Config, Mode, ProbeFault, WorkFault};
use crate::dist::Rng;
use crate::estimator::Estimator;
use crate::gate::{Denied, Gate};
use crate::hash;
use crate::http::{write_response, Conn, HeaderValue, ParseError, Request};
use crate::json;
use crate::load::Meter;
use crate::machine::Machine;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Default iterations of a /work request.
pub const DEFAULT_ITERATIONS: u64 = 1000;
/// Upper bound on iterations, so one request cannot pin a replica for days.
pub const MAX_ITERATIONS: u64 = 1_000_000_000;
/// How often waits (hang, probe timeout, idle reads) look at shutdown and
/// at whether the client is still there.
pub const POLL: Duration = Duration::from_millis(50);
/// Longest read timeout of connections: how soon an idle one notices
/// shutdown (shorter when the idle or request timeout is shorter).
const IDLE_WAKE: Duration = Duration::from_millis(500);
/// A response must be accepted by the peer within this time.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

pub struct App {
    pub cfg: Config,
    gate: Gate,
    /// Requests in flight: /work from arrival until its response is written.
    rif: AtomicU64,
    served: AtomicU64,
    estimator: Mutex<Estimator>,
    /// qps, eps and utilization over the last second, for probes. A
    /// cpu-share replica's is shared with its machine, which sets its
    /// utilization (the CPU rate over the allocation).
    load: Arc<Mutex<Meter>>,
    /// cpu-share: the machine and this replica's index on it.
    machine: Option<(Arc<Machine>, usize)>,
    rng: Mutex<Rng>,
    /// The monotonic clock's origin for latency samples and antagonists.
    start: Instant,
    shutdown: AtomicBool,
    /// Open connections: the cap, and draining at shutdown.
    pub conns: Conns,
    /// Tests freeze the clock here (ns since start; 0: the real clock).
    #[cfg(test)]
    fake_ns: AtomicU64,
}

/// A response to write; `close` ends the connection after it.
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub extra: Vec<(&'static str, HeaderValue)>,
}

impl Response {
    fn json(status: u16, body: String) -> Response {
        Response {
            status,
            content_type: "application/json",
            body: body.into_bytes(),
            extra: Vec::new(),
        }
    }

    fn text(status: u16, body: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.as_bytes().to_vec(),
            extra: Vec::new(),
        }
    }

    fn method_not_allowed(allow: &'static str) -> Response {
        let mut r = Response::text(405, "method not allowed\n");
        r.extra.push(("Allow", HeaderValue::Str(allow)));
        r
    }

    /// Adds the server feedback headers every /work response carries: the
    /// queue length (waiting, not in service) now, and this request's
    /// service time (time in a slot; 0 without one).
    fn feedback(mut self, queued: usize, service: Duration) -> Response {
        self.extra
            .push(("X-Prequal-Queue", HeaderValue::Int(queued as u64)));
        self.extra.push((
            "X-Prequal-Service-Us",
            HeaderValue::Int(service.as_micros() as u64),
        ));
        self
    }
}

/// A /work request the reactor serves without a thread (io/sleep mode):
/// it waits for a slot as an asynchronous waiter of the gate, then holds
/// the slot until `sleep` has passed.
pub struct InlineWork {
    arrival: Instant,
    rif_at_arrival: u64,
    iterations: u64,
    /// When it got its slot.
    started: Instant,
    /// How long it stays in its slot (drawn when it gets one).
    pub sleep: Duration,
    /// cpu-share: its id in the machine model once in service (it is done
    /// when the machine lists it, not after `sleep`).
    pub job: Option<u64>,
}

/// How the reactor goes on with a /work request (see try_start_work).
pub enum InlineStart {
    /// Admitted, with its gate ticket while it waits for a slot (None: in
    /// service now).
    Admitted(InlineWork, Option<u64>),
    /// Answered at once (400, 503), and whether the request counts in RIF
    /// (then call `inline_written` after writing the answer).
    Answer(Response, bool),
}

/// Decrements RIF when dropped, i.e. after the response has been written.
pub struct RifToken<'a>(&'a AtomicU64);

impl Drop for RifToken<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a handler produced.
pub enum Outcome<'a> {
    Respond(Response, Option<RifToken<'a>>),
    /// The client went away or the request must not be answered: close.
    Close,
}

impl App {
    /// A replica. In cpu-share mode it gets a machine of its own (replica 0
    /// of `--replicas`); `App::replica` puts several on one machine.
    pub fn new(cfg: Config) -> App {
        if cfg.mode == Mode::CpuShare {
            let m = Machine::new(&crate::machine::machine_config(&cfg), cfg.seed);
            if let Err(e) = m.spawn() {
                panic!("machine thread: {e}");
            }
            return App::replica(cfg, m, 0);
        }
        App::build(cfg, None)
    }

    /// Replica k of a cpu-share machine.
    pub fn replica(cfg: Config, machine: Arc<Machine>, k: usize) -> App {
        App::build(cfg, Some((machine, k)))
    }

    fn build(cfg: Config, machine: Option<(Arc<Machine>, usize)>) -> App {
        let capacity = match cfg.mode {
            Mode::Sleep => None,
            _ => capacity_at(cfg.concurrency, &cfg.antagonists, Duration::ZERO),
        };
        App {
            gate: Gate::new(capacity, cfg.queue_limit),
            rif: AtomicU64::new(0),
            served: AtomicU64::new(0),
            estimator: Mutex::new(
                Estimator::new(cfg.latency_window.as_nanos() as u64)
                    .with_idle_max_age(cfg.latency_idle_max_age.as_nanos() as u64),
            ),
            load: match &machine {
                Some((m, k)) => m.meter(*k),
                None => Arc::new(Mutex::new(Meter::new(capacity, 0))),
            },
            rng: Mutex::new(Rng::new(cfg.seed)),
            // One clock for the replica and its machine: they share the meter.
            start: machine
                .as_ref()
                .map_or_else(Instant::now, |(m, _)| m.origin()),
            machine,
            shutdown: AtomicBool::new(false),
            conns: Conns::new(),
            #[cfg(test)]
            fake_ns: AtomicU64::new(0),
            cfg,
        }
    }

    pub fn shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    /// Stops accepting (the accept loop looks at this after each accept and
    /// while waiting for a free slot) and ends idle connections.
    pub fn begin_shutdown(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        self.conns.wake();
    }

    fn meter(&self) -> std::sync::MutexGuard<'_, Meter> {
        self.load.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ns(&self) -> u64 {
        #[cfg(test)]
        {
            let fake = self.fake_ns.load(Ordering::SeqCst);
            if fake != 0 {
                return fake;
            }
        }
        self.start.elapsed().as_nanos() as u64
    }

    /// Applies the antagonist schedule every few milliseconds until shutdown.
    /// Only started when there is a schedule (and not in sleep mode).
    pub fn run_antagonists(&self) {
        let mut last = self.gate.stats().capacity;
        while !self.shutting_down() {
            let cap = capacity_at(
                self.cfg.concurrency,
                &self.cfg.antagonists,
                self.start.elapsed(),
            );
            if cap != last {
                self.gate.set_capacity(cap);
                self.meter().set_capacity(self.now_ns(), cap);
                last = cap;
            }
            thread::sleep(Duration::from_millis(2));
        }
    }

    /// Routes one request. `client_gone` reports whether the peer closed.
    pub fn handle(&self, req: &Request, client_gone: &mut dyn FnMut() -> bool) -> Outcome<'_> {
        let get = req.method == "GET" || req.method == "HEAD";
        let resp = match req.path() {
            "/work" => {
                if get || req.method == "POST" {
                    return self.work(req, client_gone);
                }
                self.meter().answered(self.now_ns(), false);
                Response::method_not_allowed("GET, POST")
                    .feedback(self.gate.queued(), Duration::ZERO)
            }
            "/prequal/probe" if get => return self.probe(client_gone),
            "/healthz" | "/health" if get => Response::text(200, "ok"),
            "/stats" if get => Response::json(200, self.stats_json()),
            "/reset" if req.method == "POST" => {
                self.estimator
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clear();
                self.served.store(0, Ordering::SeqCst);
                self.gate.reset_counters();
                self.meter().reset(self.now_ns());
                Response::json(200, self.stats_json())
            }
            "/prequal/probe" | "/healthz" | "/health" | "/stats" => {
                Response::method_not_allowed("GET, HEAD")
            }
            "/reset" => Response::method_not_allowed("POST"),
            // Lets tests panic a connection thread; absent from the binary.
            #[cfg(test)]
            "/test/panic" => panic!("test: panic in a connection thread"),
            _ => Response::text(404, "not found\n"),
        };
        Outcome::Respond(resp, None)
    }

    pub fn stats_json(&self) -> String {
        let g = self.gate.stats();
        let (shed, refused) = self.conns.shed_refused();
        let machine = self.machine.as_ref().map_or(String::new(), |(m, _)| {
            format!(",\"antagonist_level\":{}", json::ms(m.antagonist_level()))
        });
        format!(
            "{{\"in_flight\":{},\"queued\":{},\"served\":{},\"rejected\":{},\"max_queue\":{},\"capacity\":{},\"connections\":{},\"connections_shed\":{},\"connections_refused\":{}{}}}",
            self.rif.load(Ordering::SeqCst),
            g.queued,
            self.served.load(Ordering::SeqCst),
            g.rejected,
            g.max_queue,
            g.capacity.unwrap_or(0),
            self.conns.open(),
            shed,
            refused,
            machine
        )
    }

    fn probe(&self, client_gone: &mut dyn FnMut() -> bool) -> Outcome<'_> {
        let resp = match self.cfg.probe_fault {
            ProbeFault::Status500 => Response::json(500, "{\"error\":\"probe fault: 500\"}".into()),
            ProbeFault::Malformed => Response {
                status: 200,
                content_type: "application/json",
                body: b"this is not json".to_vec(),
                extra: Vec::new(),
            },
            ProbeFault::Timeout => {
                let until = Instant::now() + self.cfg.fault_timeout;
                while Instant::now() < until {
                    if client_gone() {
                        return Outcome::Close;
                    }
                    if self.shutting_down() {
                        break;
                    }
                    thread::sleep(POLL.min(until.saturating_duration_since(Instant::now())));
                }
                Response::json(200, self.probe_json(Duration::ZERO))
            }
            ProbeFault::StaleTimestamp => {
                Response::json(200, self.probe_json(self.cfg.fault_stale_offset))
            }
            ProbeFault::None => Response::json(200, self.probe_json(Duration::ZERO)),
        };
        Outcome::Respond(resp, None)
    }

    fn probe_json(&self, clock_offset: Duration) -> String {
        let rif = self.rif.load(Ordering::SeqCst);
        let est = self
            .estimator
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .estimate(rif, self.now_ns());
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
            .saturating_sub(clock_offset.as_millis() as u64);
        let load = self.meter().snapshot(self.now_ns());
        // Unlimited capacity has no utilization: the key is left out, which
        // clients read as unknown.
        let utilization = load
            .utilization
            .map_or(String::new(), |u| format!(",\"utilization\":{u:.4}"));
        format!(
            "{{\"rif\":{},\"latency_median_ms\":{},\"timestamp_ms\":{},\"samples\":{},\"qps\":{:.3},\"eps\":{:.3}{}}}",
            rif,
            est.median_ms.map_or("null".to_string(), json::ms),
            unix_ms,
            est.samples,
            load.qps,
            load.eps,
            utilization
        )
    }

    fn iterations(req: &Request) -> Result<u64, String> {
        let n = if req.method == "POST" && !req.body.iter().all(|b| b.is_ascii_whitespace()) {
            json::parse_iterations(&req.body).map_err(|e| {
                if e.starts_with("iterations") {
                    e
                } else {
                    format!("body: {e} (want {{\"iterations\": n}})")
                }
            })?
        } else {
            let mut found = None;
            for pair in req.query().split('&') {
                if let Some(v) = pair.strip_prefix("iterations=") {
                    found =
                        Some(v.parse::<u64>().map_err(|_| {
                            format!("iterations: {v:?} is not a non-negative integer")
                        })?);
                }
            }
            found
        };
        let n = n.unwrap_or(DEFAULT_ITERATIONS);
        if n > MAX_ITERATIONS {
            return Err(format!(
                "iterations: {n} is above the limit {MAX_ITERATIONS}"
            ));
        }
        Ok(n)
    }

    fn work(&self, req: &Request, client_gone: &mut dyn FnMut() -> bool) -> Outcome<'_> {
        let iterations = match App::iterations(req) {
            Ok(n) => n,
            Err(e) => return Outcome::Respond(self.bad_work(&e), None),
        };
        let arrival = Instant::now();
        let rif_at_arrival = self.rif.fetch_add(1, Ordering::SeqCst);
        let token = RifToken(&self.rif);

        match self.cfg.work_fault {
            WorkFault::None => {}
            WorkFault::FailFast => {
                // A broken replica still measures its own (tiny) latency,
                // which is what makes it look attractive: the sinkhole case.
                self.record(rif_at_arrival, arrival);
                self.meter().answered(self.now_ns(), true);
                return Outcome::Respond(
                    Response::json(500, "{\"error\":\"work fault: fail_fast\"}".into())
                        .feedback(self.gate.queued(), Duration::ZERO),
                    Some(token),
                );
            }
            WorkFault::Hang => {
                // To the socket this is an idle connection: the idle timeout
                // bounds it, also when the client's presence cannot be seen.
                let until = arrival + self.cfg.idle_timeout;
                while !client_gone() && !self.shutting_down() && Instant::now() < until {
                    thread::sleep(POLL);
                }
                return Outcome::Close;
            }
        }

        let permit = match self.gate.acquire(&mut *client_gone) {
            Ok(p) => p,
            Err(Denied::Overflow) => {
                self.meter().answered(self.now_ns(), true);
                return Outcome::Respond(
                    Response::json(503, "{\"error\":\"queue full\"}".into())
                        .feedback(self.gate.queued(), Duration::ZERO),
                    Some(token),
                );
            }
            Err(Denied::Cancelled) => return Outcome::Close,
        };
        let started = Instant::now();
        if self.machine.is_none() {
            self.meter().start(self.now_ns());
        }
        let queue = started - arrival;
        match self.cfg.mode {
            Mode::Io | Mode::Sleep => thread::sleep(self.io_sleep(iterations)),
            Mode::CpuShare => {
                let (m, k) = self
                    .machine
                    .as_ref()
                    .expect("a cpu-share replica has a machine");
                m.run(*k, self.io_sleep(iterations).as_nanos() as u64);
            }
            Mode::Cpu => {
                let mean = iterations as f64 * self.cfg.cpu_rounds as f64 * self.cfg.slow;
                let rounds = {
                    let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
                    self.cfg.distribution.draw(mean, &mut rng).round() as u64
                };
                std::hint::black_box(hash::chain(rif_at_arrival ^ iterations, rounds));
            }
        }
        let service = started.elapsed();
        drop(permit);
        let resp = self.served(rif_at_arrival, arrival, iterations, queue, service);
        Outcome::Respond(resp, Some(token))
    }

    /// The 400 for bad /work input.
    fn bad_work(&self, e: &str) -> Response {
        self.meter().answered(self.now_ns(), false);
        Response::json(400, format!("{{\"error\":{}}}", quote(e)))
            .feedback(self.gate.queued(), Duration::ZERO)
    }

    /// The time in the slot of an io/sleep-mode request; a cpu-share
    /// request's work (ns at the allocation).
    fn io_sleep(&self, iterations: u64) -> Duration {
        let mean_ns =
            self.cfg.service_time.as_nanos() as f64 * iterations as f64 / 1000.0 * self.cfg.slow;
        let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        let ns = self.cfg.distribution.draw(mean_ns, &mut rng);
        Duration::from_nanos(ns.min(1e18) as u64)
    }

    /// Accounts a request that has left its slot and builds its answer.
    fn served(
        &self,
        rif_at_arrival: u64,
        arrival: Instant,
        iterations: u64,
        queue: Duration,
        service: Duration,
    ) -> Response {
        {
            let now = self.now_ns();
            let mut load = self.meter();
            if self.machine.is_none() {
                load.stop(now);
            }
            load.answered(now, false);
        }
        self.record(rif_at_arrival, arrival);
        self.served.fetch_add(1, Ordering::SeqCst);
        let body = format!(
            "{{\"duration_ms\":{},\"queue_ms\":{},\"rif_at_arrival\":{},\"iterations\":{}}}",
            json::ms(service.as_secs_f64() * 1e3),
            json::ms(queue.as_secs_f64() * 1e3),
            rif_at_arrival,
            iterations
        );
        Response::json(200, body).feedback(self.gate.queued(), service)
    }

    /// For the reactor: admits a /work request when it can be served
    /// without a thread: io, sleep or cpu-share mode, no work fault,
    /// GET/HEAD/POST. None: serve it on a worker (405, faults, cpu mode).
    pub fn try_start_work(&self, req: &Request) -> Option<InlineStart> {
        if !matches!(self.cfg.mode, Mode::Io | Mode::Sleep | Mode::CpuShare)
            || !matches!(self.cfg.work_fault, WorkFault::None)
            || !matches!(req.method.as_str(), "GET" | "HEAD" | "POST")
        {
            return None;
        }
        let iterations = match App::iterations(req) {
            Ok(n) => n,
            Err(e) => return Some(InlineStart::Answer(self.bad_work(&e), false)),
        };
        let arrival = Instant::now();
        let rif_at_arrival = self.rif.fetch_add(1, Ordering::SeqCst);
        let mut w = InlineWork {
            arrival,
            rif_at_arrival,
            iterations,
            started: arrival,
            sleep: Duration::ZERO,
            job: None,
        };
        match self.gate.enqueue_async() {
            Ok(None) => {
                self.begin_inline_service(&mut w);
                Some(InlineStart::Admitted(w, None))
            }
            Ok(Some(ticket)) => Some(InlineStart::Admitted(w, Some(ticket))),
            Err(_) => {
                self.meter().answered(self.now_ns(), true);
                let resp = Response::json(503, "{\"error\":\"queue full\"}".into())
                    .feedback(self.gate.queued(), Duration::ZERO);
                Some(InlineStart::Answer(resp, true))
            }
        }
    }

    /// The request got its slot: its service begins: a sleep of `w.sleep`,
    /// or, cpu-share, job `w.job` in the machine (see `inline_finished`).
    pub fn begin_inline_service(&self, w: &mut InlineWork) {
        w.started = Instant::now();
        let d = self.io_sleep(w.iterations);
        match &self.machine {
            Some((m, k)) => w.job = Some(m.start_async(*k, d.as_nanos() as u64)),
            None => {
                self.meter().start(self.now_ns());
                w.sleep = d;
            }
        }
    }

    /// cpu-share: the jobs of inline requests that the machine has finished
    /// since the last call (after the notify set by `on_inline_grant`).
    pub fn inline_finished(&self, out: &mut Vec<u64>) {
        if let Some((m, k)) = &self.machine {
            m.take_finished(*k, out);
        }
    }

    /// A waiting request whose client went away leaves the queue (and RIF).
    pub fn cancel_inline(&self, ticket: u64) {
        self.gate.cancel_async(ticket);
        self.rif.fetch_sub(1, Ordering::SeqCst);
    }

    /// Ends an inline request once its sleep has passed: gives the slot
    /// back and builds the answer. Call `inline_written` after writing it.
    pub fn finish_inline_work(&self, w: &InlineWork) -> Response {
        let service = w.started.elapsed();
        self.gate.give_back();
        self.served(
            w.rif_at_arrival,
            w.arrival,
            w.iterations,
            w.started - w.arrival,
            service,
        )
    }

    /// Calls `f` when a waiting inline request is handed a slot, and when
    /// the machine finishes an inline cpu-share request.
    pub fn on_inline_grant(&self, f: crate::gate::Notify) {
        if let Some((m, k)) = &self.machine {
            m.set_notify(*k, f.clone());
        }
        self.gate.set_async_notify(f);
    }

    /// Inline requests handed a slot since the last call (their tickets).
    pub fn inline_grants(&self, out: &mut Vec<u64>) {
        self.gate.take_async_grants(out);
    }

    /// RIF counts a request until its answer has been written.
    pub fn inline_written(&self) {
        self.rif.fetch_sub(1, Ordering::SeqCst);
    }

    fn record(&self, rif_at_arrival: u64, arrival: Instant) {
        let mut est = self.estimator.lock().unwrap_or_else(|e| e.into_inner());
        // Read the clock under the lock so samples enter in finish order.
        let now = self.now_ns();
        let latency_ms = arrival.elapsed().as_secs_f64() * 1e3;
        est.record(rif_at_arrival, latency_ms, now);
    }

    /// Whether the reactor thread may answer this request itself: cheap,
    /// never blocks, has no body (see reactor.rs).
    pub fn serves_inline(&self, req: &Request) -> bool {
        (req.method == "GET" || req.method == "HEAD")
            && match req.path() {
                "/prequal/probe" => !matches!(self.cfg.probe_fault, ProbeFault::Timeout),
                "/healthz" | "/health" | "/stats" => true,
                _ => false,
            }
    }

    /// Serves one connection until it closes, errors, times out (request or
    /// idle timeout) or shutdown. The caller counts the connection. `buf`
    /// holds bytes already read from it, `pending` the rest of a response
    /// to write first (then close if `close_after`). With `may_park`, a
    /// connection idle for one read wake is returned instead, for the
    /// reactor to hold without a thread.
    pub fn serve_conn(
        &self,
        stream: TcpStream,
        buf: Vec<u8>,
        pending: &[u8],
        close_after: bool,
        may_park: bool,
    ) -> Option<TcpStream> {
        let cfg = &self.cfg;
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_nodelay(true);
        // Reads wake up this often to notice shutdown and the deadlines; long
        // enough that hundreds of idle keep-alive connections cost next to
        // nothing. The request deadline is also checked after every read.
        let wake = IDLE_WAKE.min(cfg.idle_timeout).min(cfg.request_timeout);
        let _ = stream.set_read_timeout(Some(wake));
        // A client that stops reading must not pin this thread forever.
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        let mut conn = Conn::from_parts(stream, buf).with_request_timeout(cfg.request_timeout);
        if !pending.is_empty() && (conn.stream().write_all(pending).is_err() || close_after) {
            return None;
        }
        let mut idle_since = Instant::now();
        let mut park = false;
        loop {
            let idle_stop = || {
                if self.shutting_down() || idle_since.elapsed() >= cfg.idle_timeout {
                    return true;
                }
                park = may_park;
                park
            };
            let req = match conn.read_request(idle_stop) {
                Ok(r) => r,
                Err(ParseError::Closed) if park => return Some(conn.into_parts().0),
                Err(e) => {
                    if let Some((status, msg)) = e.response() {
                        let _ = write_response(
                            conn.stream(),
                            status,
                            "text/plain; charset=utf-8",
                            msg.as_bytes(),
                            false,
                            &[],
                            false,
                        );
                        // After a parse error the stream position is unknown:
                        // close, but drain briefly first so that the peer reads
                        // our answer instead of a reset caused by its unread
                        // bytes.
                        linger_close(conn.stream());
                    }
                    break;
                }
            };
            let outcome = self.handle(&req, &mut || conn.peer_gone());
            let Outcome::Respond(resp, token) = outcome else {
                break;
            };
            let keep = req.keep_alive && !self.shutting_down();
            let wrote = write_response(
                conn.stream(),
                resp.status,
                resp.content_type,
                &resp.body,
                keep,
                &resp.extra,
                req.method == "HEAD",
            );
            drop(token);
            if wrote.is_err() || !keep {
                break;
            }
            idle_since = Instant::now();
            // At the cap, an answered connection goes back to the reactor
            // now rather than after a read wake: only there can a newcomer
            // shed it. A pool of cap connections sending bodies (cpu mode)
            // would otherwise leave a newcomer nothing to shed for up to
            // 500 ms, and it got the probe reserve's 503 for /work.
            if may_park && conn.buffered() == 0 && self.conns.at_cap(cfg.max_connections) {
                return Some(conn.into_parts().0);
            }
        }
        None
    }
}

/// Half-closes and discards input for a short while (bounded in bytes and time).
fn linger_close(s: &mut TcpStream) {
    let _ = s.shutdown(std::net::Shutdown::Write);
    let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
    let end = Instant::now() + Duration::from_secs(1);
    let mut buf = [0u8; 8192];
    let mut total = 0usize;
    while Instant::now() < end && total < 4 << 20 {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
}

/// A JSON string literal.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(args: &[&str]) -> App {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match crate::config::parse(&args, &Default::default()).unwrap() {
            crate::config::Parsed::Run(c) => App::new(*c),
            crate::config::Parsed::Help => unreachable!(),
        }
    }

    fn req(method: &str, target: &str, body: &str) -> Request {
        Request {
            method: method.into(),
            target: target.into(),
            headers: Vec::new(),
            body: body.as_bytes().to_vec(),
            keep_alive: true,
        }
    }

    fn call(a: &App, r: &Request) -> (u16, String) {
        match a.handle(r, &mut || false) {
            Outcome::Respond(resp, _) => (resp.status, String::from_utf8(resp.body).unwrap()),
            Outcome::Close => (0, String::new()),
        }
    }

    #[test]
    fn probe_is_null_before_work_then_known() {
        let a = app(&["--service-time", "1ms", "--seed", "1"]);
        let (code, body) = call(&a, &req("GET", "/prequal/probe", ""));
        assert_eq!(code, 200);
        assert!(
            body.starts_with("{\"rif\":0,\"latency_median_ms\":null,\"timestamp_ms\":"),
            "{body}"
        );
        assert!(body.contains(",\"samples\":0,"), "{body}");
        assert!(
            body.ends_with(",\"qps\":0.000,\"eps\":0.000,\"utilization\":0.0000}"),
            "an idle replica reports no load: {body}"
        );
        let (code, body) = call(&a, &req("POST", "/work", r#"{"iterations": 500}"#));
        assert_eq!(code, 200, "{body}");
        assert!(body.contains("\"rif_at_arrival\":0"), "{body}");
        assert!(body.contains("\"iterations\":500"), "{body}");
        let (_, body) = call(&a, &req("GET", "/prequal/probe", ""));
        assert!(
            !body.contains("null") && body.contains(",\"samples\":1,"),
            "{body}"
        );
    }

    /// A worker's path in cpu-share mode (the reactor's is tested over
    /// the wire in tests/cpushare.rs): the request waits for the machine.
    #[test]
    fn cpu_share_work_on_a_worker_waits_for_the_machine() {
        let a = app(&[
            "--mode",
            "cpu-share",
            "--share",
            "1",
            "--concurrency",
            "0",
            "--service-time",
            "30ms",
            "--machine-load",
            "levels=0.5,hold=1h",
        ]);
        let t = Instant::now();
        let (code, body) = call(&a, &req("GET", "/work", ""));
        assert_eq!(code, 200, "{body}");
        // Half the machine is the antagonist's: 30 ms of work takes 60.
        assert!(
            t.elapsed() >= Duration::from_millis(60),
            "{:?}",
            t.elapsed()
        );
        let (_, stats) = call(&a, &req("GET", "/stats", ""));
        assert!(stats.ends_with(",\"antagonist_level\":0.500}"), "{stats}");
        let (_, probe) = call(&a, &req("GET", "/prequal/probe", ""));
        assert!(probe.contains(",\"samples\":1,"), "{probe}");
        assert!(field(&probe, "utilization").unwrap() > 0.0, "{probe}");
    }

    #[test]
    fn overflow_answers_503_and_counts_it() {
        let a = app(&[
            "--concurrency",
            "1",
            "--queue-limit",
            "0",
            "--service-time",
            "200ms",
        ]);
        thread::scope(|s| {
            let h = s.spawn(|| call(&a, &req("GET", "/work", "")).0);
            let end = Instant::now() + Duration::from_secs(10);
            while a.gate.stats().in_service == 0 {
                assert!(Instant::now() < end, "first request never entered service");
                thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(call(&a, &req("GET", "/work", "")).0, 503);
            assert_eq!(h.join().unwrap(), 200);
        });
        let (_, stats) = call(&a, &req("GET", "/stats", ""));
        assert_eq!(
            stats,
            "{\"in_flight\":0,\"queued\":0,\"served\":1,\"rejected\":1,\"max_queue\":0,\"capacity\":1,\"connections\":0,\"connections_shed\":0,\"connections_refused\":0}"
        );
        let (_, after) = call(&a, &req("POST", "/reset", ""));
        assert_eq!(
            after,
            "{\"in_flight\":0,\"queued\":0,\"served\":0,\"rejected\":0,\"max_queue\":0,\"capacity\":1,\"connections\":0,\"connections_shed\":0,\"connections_refused\":0}"
        );
    }

    #[test]
    fn routing_and_bad_input() {
        let a = app(&["--service-time", "1ms"]);
        assert_eq!(call(&a, &req("GET", "/healthz", "")), (200, "ok".into()));
        assert_eq!(call(&a, &req("GET", "/health", "")).0, 200);
        assert_eq!(call(&a, &req("GET", "/nope", "")).0, 404);
        assert_eq!(call(&a, &req("PUT", "/work", "")).0, 405);
        assert_eq!(call(&a, &req("GET", "/reset", "")).0, 405);
        assert_eq!(call(&a, &req("POST", "/prequal/probe", "")).0, 405);
        let (code, body) = call(&a, &req("GET", "/work?iterations=x", ""));
        assert_eq!(code, 400);
        assert!(body.contains("iterations"), "{body}");
        let (code, body) = call(&a, &req("POST", "/work", "[1]"));
        assert_eq!(code, 400);
        assert!(body.contains("iterations"), "{body}");
        let (code, _) = call(&a, &req("GET", "/work?iterations=1000000001", ""));
        assert_eq!(code, 400);
        assert_eq!(
            a.rif.load(Ordering::SeqCst),
            0,
            "rejected input must not count as RIF"
        );
    }

    #[test]
    fn faults() {
        let a = app(&["--probe-fault", "500"]);
        assert_eq!(call(&a, &req("GET", "/prequal/probe", "")).0, 500);
        let a = app(&["--probe-fault", "malformed"]);
        assert_eq!(
            call(&a, &req("GET", "/prequal/probe", "")),
            (200, "this is not json".into())
        );
        let a = app(&["--probe-fault", "timeout", "--fault-timeout", "20ms"]);
        let t = Instant::now();
        assert_eq!(call(&a, &req("GET", "/prequal/probe", "")).0, 200);
        assert!(t.elapsed() >= Duration::from_millis(20));
        let a = app(&["--work-fault", "fail_fast", "--service-time", "1s"]);
        assert_eq!(call(&a, &req("GET", "/work", "")).0, 500);
        let (_, probe) = call(&a, &req("GET", "/prequal/probe", ""));
        assert!(
            probe.contains(",\"samples\":1,"),
            "fail_fast is measured: {probe}"
        );
        let a = app(&["--work-fault", "hang"]);
        let mut polls = 0;
        let out = a.handle(&req("GET", "/work", ""), &mut || {
            polls += 1;
            polls > 2
        });
        assert!(matches!(out, Outcome::Close));
        assert_eq!(a.rif.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn antagonist_lowers_capacity_then_restores_it() {
        let a = app(&[
            "--concurrency",
            "4",
            "--antagonist",
            "at=0,for=100ms,capacity=1",
        ]);
        assert_eq!(a.gate.stats().capacity, Some(1), "drop in effect at start");
        thread::scope(|s| {
            let h = s.spawn(|| a.run_antagonists());
            let end = Instant::now() + Duration::from_secs(10);
            while a.gate.stats().capacity != Some(4) {
                assert!(Instant::now() < end, "capacity never restored");
                thread::sleep(Duration::from_millis(1));
            }
            a.begin_shutdown();
            h.join().unwrap();
        });
        // Sleep mode has no capacity limit at all.
        let a = app(&["--mode", "sleep", "--antagonist", "at=0,for=1h,capacity=1"]);
        assert_eq!(a.gate.stats().capacity, None);
    }

    #[test]
    fn stale_timestamp_moves_the_clock_back() {
        let a = app(&[
            "--probe-fault",
            "stale_timestamp",
            "--fault-stale-offset",
            "1h",
        ]);
        let (_, body) = call(&a, &req("GET", "/prequal/probe", ""));
        let ts: u64 = body
            .split("\"timestamp_ms\":")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .and_then(|v| v.parse().ok())
            .expect("timestamp_ms");
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        assert!(now - ts >= 3_600_000 - 1000, "offset {} ms", now - ts);
    }

    /// The value of a response header the handler set.
    fn header(resp: &Response, name: &str) -> Option<u64> {
        resp.extra
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| match v {
                HeaderValue::Int(n) => *n,
                HeaderValue::Str(s) => panic!("{name}: {s:?} is not a number"),
            })
    }

    fn respond(a: &App, r: &Request) -> Response {
        match a.handle(r, &mut || false) {
            Outcome::Respond(resp, _) => resp,
            Outcome::Close => panic!("closed"),
        }
    }

    /// A number field of a probe answer.
    fn field(body: &str, key: &str) -> Option<f64> {
        let rest = body.split(&format!("\"{key}\":")).nth(1)?;
        rest.split([',', '}']).next()?.parse().ok()
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn probe_reports_rates_of_answered_work() {
        let a = app(&[
            "--concurrency",
            "1",
            "--queue-limit",
            "0",
            "--service-time",
            "0s",
        ]);
        a.fake_ns.store(5 * S, Ordering::SeqCst);
        for _ in 0..6 {
            assert_eq!(call(&a, &req("GET", "/work", "")).0, 200);
        }
        assert_eq!(call(&a, &req("GET", "/work?iterations=x", "")).0, 400);
        // Slot taken: queue full, 503s, which count as errors.
        let held = a.gate.acquire(|| false).unwrap();
        for _ in 0..3 {
            assert_eq!(call(&a, &req("GET", "/work", "")).0, 503);
        }
        drop(held);
        // Probes and other endpoints are not /work: not counted.
        call(&a, &req("GET", "/healthz", ""));
        call(&a, &req("GET", "/prequal/probe", ""));
        // At 5.5 s the window is [4.6 s, 5.5 s]: 0.9 s.
        a.fake_ns.store(5 * S + S / 2, Ordering::SeqCst);
        let (_, body) = call(&a, &req("GET", "/prequal/probe", ""));
        assert_eq!(field(&body, "qps"), Some(11.111), "{body}");
        assert_eq!(field(&body, "eps"), Some(3.333), "{body}");
        // A second later they have all left the window.
        a.fake_ns.store(6 * S + S / 2, Ordering::SeqCst);
        let (_, body) = call(&a, &req("GET", "/prequal/probe", ""));
        assert_eq!(field(&body, "qps"), Some(0.0), "{body}");
        assert_eq!(field(&body, "eps"), Some(0.0), "{body}");
        // fail_fast 500s are errors too.
        let a = app(&["--work-fault", "fail_fast"]);
        a.fake_ns.store(5 * S, Ordering::SeqCst);
        assert_eq!(call(&a, &req("GET", "/work", "")).0, 500);
        a.fake_ns.store(5 * S + S / 2, Ordering::SeqCst);
        let (_, body) = call(&a, &req("GET", "/prequal/probe", ""));
        assert_eq!(field(&body, "eps"), Some(1.111), "{body}");
        assert_eq!(field(&body, "qps"), Some(1.111), "{body}");
    }

    #[test]
    fn probe_utilization_follows_busy_slots() {
        let a = app(&["--concurrency", "1", "--service-time", "300ms"]);
        a.fake_ns.store(S, Ordering::SeqCst);
        let (_, body) = call(&a, &req("GET", "/prequal/probe", ""));
        assert_eq!(field(&body, "utilization"), Some(0.0), "idle: {body}");
        thread::scope(|s| {
            let h = s.spawn(|| call(&a, &req("GET", "/work", "")).0);
            let end = Instant::now() + Duration::from_secs(10);
            while a.meter().busy() == 0 {
                assert!(Instant::now() < end, "request never entered service");
                thread::sleep(Duration::from_millis(1));
            }
            // The one slot busy for the whole window [2.1 s, 3 s].
            a.fake_ns.store(3 * S, Ordering::SeqCst);
            let (_, body) = call(&a, &req("GET", "/prequal/probe", ""));
            assert_eq!(field(&body, "utilization"), Some(1.0), "busy: {body}");
            assert_eq!(h.join().unwrap(), 200);
        });
        // Unlimited capacity: no slots, so no utilization key.
        let a = app(&["--mode", "sleep"]);
        let (_, body) = call(&a, &req("GET", "/prequal/probe", ""));
        assert!(!body.contains("utilization"), "{body}");
        assert!(field(&body, "qps").is_some(), "{body}");
    }

    #[test]
    fn work_responses_carry_queue_and_service_time() {
        let a = app(&[
            "--concurrency",
            "1",
            "--queue-limit",
            "1",
            "--service-time",
            "20ms",
        ]);
        let ok = respond(&a, &req("GET", "/work", ""));
        assert_eq!(ok.status, 200);
        assert_eq!(header(&ok, "X-Prequal-Queue"), Some(0));
        let us = header(&ok, "X-Prequal-Service-Us").unwrap();
        assert!((20_000..10_000_000).contains(&us), "service {us} us");
        // One in service, one waiting: a third gets 503 and sees queue 1.
        let held = a.gate.acquire(|| false).unwrap();
        thread::scope(|s| {
            let waiter = s.spawn(|| respond(&a, &req("GET", "/work?iterations=0", "")));
            let end = Instant::now() + Duration::from_secs(10);
            while a.gate.queued() == 0 {
                assert!(Instant::now() < end, "waiter never queued");
                thread::sleep(Duration::from_millis(1));
            }
            let full = respond(&a, &req("GET", "/work", ""));
            assert_eq!(full.status, 503);
            assert_eq!(header(&full, "X-Prequal-Queue"), Some(1));
            assert_eq!(header(&full, "X-Prequal-Service-Us"), Some(0));
            drop(held);
            let waited = waiter.join().unwrap();
            assert_eq!(waited.status, 200);
            // Zero iterations: a slot held for next to no time.
            assert!(header(&waited, "X-Prequal-Service-Us").unwrap() < 1_000_000);
        });
        for (r, status) in [
            (req("GET", "/work?iterations=x", ""), 400),
            (req("PUT", "/work", ""), 405),
        ] {
            let resp = respond(&a, &r);
            assert_eq!(resp.status, status);
            assert_eq!(header(&resp, "X-Prequal-Queue"), Some(0));
            assert_eq!(header(&resp, "X-Prequal-Service-Us"), Some(0));
        }
        // Only /work carries them.
        let probe = respond(&a, &req("GET", "/prequal/probe", ""));
        assert_eq!(header(&probe, "X-Prequal-Queue"), None);
    }
}

#[cfg(test)]
mod park_tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::{mpsc, Arc};

    #[test]
    fn at_the_cap_an_answered_connection_goes_back_to_the_reactor_at_once() {
        let cfg = match crate::config::parse(
            &["--max-connections".to_string(), "1".to_string()],
            &Default::default(),
        ) {
            Ok(crate::config::Parsed::Run(c)) => *c,
            _ => panic!("config"),
        };
        let app = Arc::new(App::new(cfg));
        let _slot = crate::accept::ConnSlot::take(app.clone()); // the cap: 1 open
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (srv, _) = l.accept().unwrap();
        let (tx, rx) = mpsc::channel();
        let a = app.clone();
        std::thread::spawn(move || {
            let back = a.serve_conn(srv, Vec::new(), &[], false, true);
            let _ = tx.send(back.is_some());
        });
        client
            .write_all(b"POST /work HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !got.ends_with(b"}") {
            let n = client.read(&mut buf).unwrap();
            assert!(n > 0, "closed: {:?}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
        assert!(got.starts_with(b"HTTP/1.1 200"));
        // Part of a next request: a worker still holding the connection
        // would read it and wait for the rest (for the request timeout).
        client.write_all(b"GET /hea").unwrap();
        let parked = rx.recv_timeout(Duration::from_secs(10));
        assert_eq!(parked, Ok(true), "the worker kept the connection");
        drop(client);
    }
}
