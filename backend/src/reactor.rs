//! Idle connections wait in one epoll set instead of on a thread each, and
//! the cheap endpoints (/prequal/probe, /healthz, /health, /stats) are
//! answered right there, on the reactor thread, without waking a worker.
//! So is an io/sleep-mode /work request: it waits for a slot in the gate's
//! FIFO queue as an asynchronous waiter (an eventfd wakes the reactor when
//! it is handed one; a client that leaves meanwhile is seen by epoll and
//! leaves the queue), then holds the slot for its drawn sleep on a timer
//! (timerfd, ns resolution) instead of on a sleeping thread. A cpu-share
//! request holds it until its machine lists it as finished (the same
//! eventfd wakes the reactor; see machine.rs).
//!
//! Why: with a thread per connection every request costs a blocking read
//! and a wake-up of its thread; on this 2-core VM the scheduler's switch
//! in and out was about half of the backend's CPU per request (perf: 48%
//! under recv → sk_wait_data → schedule). One epoll_wait hands the reactor
//! many ready connections at once, as nginx's worker does. Idle
//! connections also stop waking twice a second each to look at shutdown.
//!
//! Anything else (cpu mode, a work fault, a body, a partial or malformed
//! request, a probe fault that delays) goes with the bytes read so far to a worker
//! thread, which serves it exactly as before (parser, deadlines, 400/408/
//! 413/431, lingering close). A worker that then sees its connection idle
//! for one read wake (≤ 500 ms) parks it back here. Connections keep their
//! slot (the cap, the drain) wherever they are. Linux only; elsewhere
//! workers keep their connections as they always did.

use crate::accept::{ConnSlot, Handoff, Pool};
use crate::http::{head_complete, parse_simple, write_response, MAX_HEADER_BYTES};
use crate::server::{App, InlineStart, InlineWork, Outcome, Response};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod sys {
    /// struct epoll_event: packed on x86-64 only, as in the kernel's ABI.
    #[cfg_attr(target_arch = "x86_64", repr(C, packed))]
    #[cfg_attr(not(target_arch = "x86_64"), repr(C))]
    #[derive(Clone, Copy, Default)]
    pub struct EpollEvent {
        pub events: u32,
        pub data: u64,
    }

    /// struct timespec with a C long (pointer-sized on Linux) per field.
    #[repr(C)]
    #[derive(Default)]
    pub struct TimeSpec {
        pub tv_sec: isize,
        pub tv_nsec: isize,
    }

    #[repr(C)]
    #[derive(Default)]
    pub struct ITimerSpec {
        pub interval: TimeSpec,
        pub value: TimeSpec,
    }

    extern "C" {
        pub fn epoll_create1(flags: i32) -> i32;
        pub fn epoll_ctl(epfd: i32, op: i32, fd: i32, event: *mut EpollEvent) -> i32;
        pub fn epoll_wait(epfd: i32, events: *mut EpollEvent, max: i32, timeout_ms: i32) -> i32;
        pub fn timerfd_create(clock: i32, flags: i32) -> i32;
        pub fn eventfd(initval: u32, flags: i32) -> i32;
        pub fn timerfd_settime(
            fd: i32,
            flags: i32,
            new: *const ITimerSpec,
            old: *mut ITimerSpec,
        ) -> i32;
    }

    pub const EPOLL_CLOEXEC: i32 = 0o2_000_000;
    pub const EPOLL_CTL_ADD: i32 = 1;
    pub const EPOLL_CTL_DEL: i32 = 2;
    pub const EPOLLIN: u32 = 0x1;
    pub const EPOLLRDHUP: u32 = 0x2000;
    pub const CLOCK_MONOTONIC: i32 = 1;
    pub const TFD_CLOEXEC: i32 = 0o2_000_000;
    /// O_NONBLOCK on x86, ARM and RISC-V (also EFD_NONBLOCK).
    pub const TFD_NONBLOCK: i32 = 0o4000;
}

/// Events taken per epoll_wait.
const BATCH: usize = 256;
/// Longest wait: how soon shutdown and idle timeouts are noticed.
const WAKE: Duration = Duration::from_millis(500);
/// Timers fire on a grid of this step, so that deadlines close together
/// share one wake-up; never early, at most this late, like the 50 µs
/// default timer slack that thread::sleep (nanosleep) had.
const TIMER_SLACK: Duration = Duration::from_micros(50);
/// The epoll token of the timer.
const TIMER: u64 = u64::MAX;
/// The epoll token of the eventfd that says a waiting request got a slot.
const GRANTED: u64 = u64::MAX - 1;
/// Bytes a connection whose request waits for a slot may send meanwhile
/// (pipelining) before the reactor stops reading it; as on a worker.
const MAX_BUFFERED: usize = 1024 * 1024 + MAX_HEADER_BYTES;
/// After an error answer the connection is drained this long before it
/// closes, so the peer reads the answer, not a reset caused by bytes it
/// sent that we did not read (a worker's lingering close, without a thread).
const LINGER: Duration = Duration::from_millis(500);

struct Entry {
    stream: TcpStream,
    buf: Vec<u8>,
    slot: ConnSlot,
    /// Since when it waits for its next request (accepted, or answered).
    idle_since: Instant,
    /// A request was read from it: the first-request timeout is over.
    served: bool,
    /// When the first bytes of a request head not yet complete arrived.
    started: Option<Instant>,
    /// Answered with an error and half-closed: drained until then, closed.
    closing: Option<Instant>,
    /// In the epoll set. Taken out while a /work request is in service and
    /// the peer sends more (or closes), so level-triggered events do not
    /// spin; put back once the answer is out.
    registered: bool,
    /// A /work request in its slot, answered when its timer fires.
    busy: Option<Busy>,
}

struct Busy {
    work: InlineWork,
    keep_alive: bool,
    head: bool,
    /// Its gate ticket while it waits for a slot.
    queued: Option<u64>,
}

/// What a connection needs next.
enum Next {
    /// Idle again: stays parked.
    Park,
    Close,
    /// To a worker, with the unwritten rest of a response (if any) and
    /// whether the connection ends after it.
    Worker(Vec<u8>, bool),
    /// A /work request in service until then.
    Busy(Instant),
    /// A /work request waiting for a slot, with its gate ticket.
    Queued(u64),
    /// A cpu-share /work request in service until its machine finishes
    /// this job.
    Computing(u64),
    /// Write this final answer, half-close, drain briefly, close.
    Linger(Vec<u8>),
}

pub struct Reactor {
    /// The origin of the timer grid.
    origin: Instant,
    epfd: OwnedFd,
    timer: File,
    granted: Arc<File>,
    parked: Mutex<Parked>,
}

#[derive(Default)]
struct Parked {
    conns: HashMap<u64, Entry>,
    next: u64,
    timers: BinaryHeap<Reverse<(Instant, u64)>>,
    /// Gate ticket → connection, for requests waiting for a slot.
    waiting: HashMap<u64, u64>,
    /// Machine job → connection, for cpu-share requests in service.
    computing: HashMap<u64, u64>,
    /// When the timerfd is set to fire.
    armed: Option<Instant>,
}

fn os_fd(fd: i32) -> std::io::Result<OwnedFd> {
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Reactor {
    pub fn new() -> std::io::Result<Reactor> {
        // SAFETY: no preconditions; a result >= 0 is a new descriptor.
        let epfd = os_fd(unsafe { sys::epoll_create1(sys::EPOLL_CLOEXEC) })?;
        // SAFETY: as above.
        let timer = os_fd(unsafe {
            sys::timerfd_create(sys::CLOCK_MONOTONIC, sys::TFD_CLOEXEC | sys::TFD_NONBLOCK)
        })?;
        // SAFETY: as above.
        let granted = os_fd(unsafe { sys::eventfd(0, sys::TFD_CLOEXEC | sys::TFD_NONBLOCK) })?;
        let r = Reactor {
            origin: Instant::now(),
            epfd,
            timer: File::from(timer),
            granted: Arc::new(File::from(granted)),
            parked: Mutex::new(Parked::default()),
        };
        r.ctl(sys::EPOLL_CTL_ADD, r.timer.as_raw_fd(), TIMER)?;
        r.ctl(sys::EPOLL_CTL_ADD, r.granted.as_raw_fd(), GRANTED)?;
        Ok(r)
    }

    fn ctl(&self, op: i32, fd: i32, token: u64) -> std::io::Result<()> {
        let mut ev = sys::EpollEvent {
            events: sys::EPOLLIN | sys::EPOLLRDHUP,
            data: token,
        };
        // SAFETY: both descriptors are open for the call (callers own fd)
        // and ev is a valid epoll_event.
        if unsafe { sys::epoll_ctl(self.epfd.as_raw_fd(), op, fd, &mut ev) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Parked> {
        self.parked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Parks an idle connection (nothing buffered); `served` once a request
    /// was read from it. Gives it back when it cannot be parked (shutdown,
    /// or epoll refused it); the caller then serves it on its thread.
    pub fn park(
        &self,
        app: &App,
        stream: TcpStream,
        slot: ConnSlot,
        idle_since: Instant,
        served: bool,
    ) -> Result<(), (TcpStream, ConnSlot)> {
        if app.shutting_down() || stream.set_nonblocking(true).is_err() {
            return Err((stream, slot));
        }
        let mut p = self.lock();
        let token = p.next;
        p.next += 1;
        if self
            .ctl(sys::EPOLL_CTL_ADD, stream.as_raw_fd(), token)
            .is_err()
        {
            let _ = stream.set_nonblocking(false);
            return Err((stream, slot));
        }
        p.conns.insert(
            token,
            Entry {
                stream,
                buf: Vec::new(),
                slot,
                idle_since,
                served,
                started: None,
                closing: None,
                registered: true,
                busy: None,
            },
        );
        Ok(())
    }

    /// Closes the connection that has waited longest for a request (one
    /// lingering after an error answer first), to make room for a new one
    /// at the cap. A connection whose request is in service or queued, or
    /// on a worker, is not a candidate. False when there is none. O(n) in
    /// parked connections, and only at the cap.
    ///
    /// A kept-alive connection (one request served) with no request bytes
    /// buffered but some in its socket that the reactor has not read yet
    /// is passed over: a request is arriving on it (a pooled connection
    /// just reused by an ingress or load generator). Closing it would reset
    /// that request, which a client may not replay (a POST), and the
    /// benchmark would charge the error to the policy. New connections and
    /// ones holding part of a head keep their place in the order, so a
    /// flood of drips cannot shelter behind this.
    pub fn shed_oldest(&self) -> bool {
        let mut p = self.lock();
        let key = |e: &Entry| (e.closing.is_none(), e.idle_since);
        let arriving = |e: &Entry| {
            e.closing.is_none()
                && e.served
                && e.buf.is_empty()
                && matches!(e.stream.peek(&mut [0u8; 1]), Ok(n) if n > 0)
        };
        let candidates = p.conns.iter().filter(|(_, e)| e.busy.is_none());
        let Some((&first, e)) = candidates.min_by_key(|(_, e)| key(e)) else {
            return false;
        };
        let victim = if !arriving(e) {
            Some(first)
        } else {
            // Rare: the next oldest, in order, that is not arriving either.
            let mut order: Vec<_> = p
                .conns
                .iter()
                .filter(|(_, e)| e.busy.is_none())
                .map(|(t, e)| (key(e), *t))
                .collect();
            order.sort_unstable();
            order
                .into_iter()
                .map(|(_, t)| t)
                .find(|t| !arriving(&p.conns[t]))
        };
        match victim {
            // Dropping it closes the descriptor and releases its slot.
            Some(token) => {
                drop(p.conns.remove(&token));
                true
            }
            None => false,
        }
    }

    /// The reactor thread: waits for parked connections to become readable,
    /// answers cheap requests, runs inline /work requests' timers, hands the
    /// rest to workers, closes connections idle past the idle timeout, and
    /// at shutdown closes every idle one. Runs for the life of the process.
    pub fn run(&self, app: &App, pool: &Arc<Pool>) {
        let cfg = &app.cfg;
        let wake = WAKE
            .min(cfg.idle_timeout)
            .min(cfg.first_request_timeout)
            .min(cfg.request_timeout)
            .max(Duration::from_millis(1));
        let mut events = vec![sys::EpollEvent::default(); BATCH];
        let mut last_sweep = Instant::now();
        let mut handoffs = Vec::new();
        let mut grants = Vec::new();
        let mut finished = Vec::new();
        let ev = self.granted.clone();
        app.on_inline_grant(Arc::new(move || {
            // Non-blocking; a full counter still wakes the reactor.
            let _ = (&*ev).write(&1u64.to_ne_bytes());
        }));
        loop {
            // SAFETY: events has BATCH valid entries for the kernel to fill.
            let n = unsafe {
                sys::epoll_wait(
                    self.epfd.as_raw_fd(),
                    events.as_mut_ptr(),
                    BATCH as i32,
                    wake.as_millis() as i32,
                )
            };
            let mut p = self.lock();
            for ev in &events[..n.max(0) as usize] {
                let token = ev.data;
                match token {
                    // Clear them; due timers and grants are looked at below.
                    TIMER => {
                        let _ = (&self.timer).read(&mut [0u8; 8]);
                        continue;
                    }
                    GRANTED => {
                        let _ = (&*self.granted).read(&mut [0u8; 8]);
                        continue;
                    }
                    _ => {}
                }
                let Some(e) = p.conns.get_mut(&token) else {
                    continue;
                };
                if e.closing.is_some() {
                    if client_gone(e) {
                        p.conns.remove(&token);
                    } else {
                        e.buf.clear();
                    }
                    continue;
                }
                if let Some(b) = &e.busy {
                    if let Some(ticket) = b.queued {
                        // Waiting for a slot: a client that leaves leaves
                        // the queue; bytes it sends meanwhile are kept.
                        if client_gone(e) {
                            app.cancel_inline(ticket);
                            p.waiting.remove(&ticket);
                            p.conns.remove(&token);
                        } else if e.buf.len() >= MAX_BUFFERED {
                            self.unregister(e);
                        }
                        continue;
                    }
                    // More bytes or a close while in service: look at them
                    // once the answer is out.
                    self.unregister(e);
                    continue;
                }
                let next = serve_ready(app, e);
                self.settle(&mut p, token, next, &mut handoffs);
            }
            app.inline_grants(&mut grants);
            for ticket in grants.drain(..) {
                let Some(token) = p.waiting.remove(&ticket) else {
                    continue;
                };
                let Some(e) = p.conns.get_mut(&token) else {
                    continue;
                };
                let Some(b) = e.busy.as_mut() else {
                    continue;
                };
                b.queued = None;
                app.begin_inline_service(&mut b.work);
                let next = if let Some(job) = b.work.job {
                    Next::Computing(job)
                } else if b.work.sleep.is_zero() {
                    let b = e.busy.take().expect("busy");
                    finish_busy(app, e, b)
                } else {
                    Next::Busy(Instant::now() + b.work.sleep)
                };
                self.settle(&mut p, token, next, &mut handoffs);
            }
            // After the grants: a job started above that finished at once
            // is found in `computing`.
            app.inline_finished(&mut finished);
            for job in finished.drain(..) {
                if let Some(token) = p.computing.remove(&job) {
                    self.finish(app, &mut p, token, &mut handoffs);
                }
            }
            let now = Instant::now();
            while let Some(&Reverse((due, token))) = p.timers.peek() {
                if due > now {
                    break;
                }
                p.timers.pop();
                self.finish(app, &mut p, token, &mut handoffs);
            }
            self.arm(&mut p);
            let shutting_down = app.shutting_down();
            if shutting_down || last_sweep.elapsed() >= wake {
                last_sweep = Instant::now();
                let now = last_sweep;
                let due: Vec<u64> = p
                    .conns
                    .iter()
                    .filter(|(_, e)| {
                        e.busy.is_none()
                            && (shutting_down || deadline(app, e).is_some_and(|d| d <= now))
                    })
                    .map(|(t, _)| *t)
                    .collect();
                for token in due {
                    let next = match p.conns.get_mut(&token) {
                        // Bytes that arrived meanwhile are still served (a
                        // request sent just before shutdown gets its answer).
                        Some(e) if shutting_down && e.closing.is_none() => {
                            match serve_ready(app, e) {
                                Next::Park => Next::Close,
                                other => other,
                            }
                        }
                        // Part of a request head, never finished: say why.
                        Some(e) if e.closing.is_none() && !e.buf.is_empty() => {
                            Next::Linger(error_answer(408, "request not received in time\n"))
                        }
                        _ => Next::Close,
                    };
                    self.settle(&mut p, token, next, &mut handoffs);
                }
                self.arm(&mut p);
            }
            drop(p);
            for h in handoffs.drain(..) {
                pool.dispatch(h);
            }
        }
    }

    fn unregister(&self, e: &mut Entry) {
        if e.registered {
            let _ = self.ctl(sys::EPOLL_CTL_DEL, e.stream.as_raw_fd(), 0);
            e.registered = false;
        }
    }

    /// Sets the timerfd to the earliest timer, if that changed.
    fn arm(&self, p: &mut Parked) {
        let want = p.timers.peek().map(|r| {
            let slack = TIMER_SLACK.as_nanos();
            let ns = r.0 .0.saturating_duration_since(self.origin).as_nanos();
            let up = ns.div_ceil(slack) * slack;
            self.origin + Duration::from_nanos(up as u64)
        });
        if want == p.armed {
            return;
        }
        let mut spec = sys::ITimerSpec::default();
        if let Some(at) = want {
            // Relative; zero would disarm it, so at least 1 ns.
            let d = at
                .saturating_duration_since(Instant::now())
                .max(Duration::from_nanos(1));
            spec.value = sys::TimeSpec {
                tv_sec: d.as_secs() as isize,
                tv_nsec: d.subsec_nanos() as isize,
            };
        }
        // SAFETY: the timer descriptor is open; spec is valid, old may be null.
        unsafe {
            sys::timerfd_settime(self.timer.as_raw_fd(), 0, &spec, std::ptr::null_mut());
        }
        p.armed = want;
    }

    /// Answers the busy request of connection `token` (its timer or its
    /// machine says it is done), if the connection is still there.
    fn finish(&self, app: &App, p: &mut Parked, token: u64, handoffs: &mut Vec<Handoff>) {
        let Some(e) = p.conns.get_mut(&token) else {
            return;
        };
        let Some(b) = e.busy.take() else {
            return;
        };
        let next = finish_busy(app, e, b);
        self.settle(p, token, next, handoffs);
    }

    fn settle(&self, p: &mut Parked, token: u64, next: Next, handoffs: &mut Vec<Handoff>) {
        // A reserve connection gets no thread while the cap is full: it
        // was taken because every other one was busy.
        let stays_reserve = matches!(next, Next::Worker(..))
            && p.conns.get_mut(&token).is_some_and(|e| !e.slot.promote());
        let next = match next {
            Next::Worker(pending, _) if stays_reserve => {
                if pending.is_empty() {
                    Next::Linger(error_answer(
                        503,
                        "over --max-connections: this connection is served /prequal/probe, /healthz and /stats only\n",
                    ))
                } else {
                    Next::Close
                }
            }
            next => next,
        };
        match next {
            Next::Linger(out) => {
                let Some(e) = p.conns.get_mut(&token) else {
                    return;
                };
                let _ = write_now(&mut e.stream, &out);
                let _ = e.stream.shutdown(Shutdown::Write);
                e.buf.clear();
                e.closing = Some(Instant::now() + LINGER);
                self.settle(p, token, Next::Park, handoffs);
            }
            Next::Park => {
                if let Some(e) = p.conns.get_mut(&token) {
                    if !e.registered {
                        if self
                            .ctl(sys::EPOLL_CTL_ADD, e.stream.as_raw_fd(), token)
                            .is_err()
                        {
                            drop(p.conns.remove(&token));
                            return;
                        }
                        e.registered = true;
                    }
                }
            }
            Next::Busy(due) => p.timers.push(Reverse((due, token))),
            Next::Queued(ticket) => {
                p.waiting.insert(ticket, token);
            }
            Next::Computing(job) => {
                p.computing.insert(job, token);
            }
            // Closing the descriptor takes it out of the epoll set.
            Next::Close => drop(p.conns.remove(&token)),
            Next::Worker(pending, close_after) => {
                let Some(mut e) = p.conns.remove(&token) else {
                    return;
                };
                self.unregister(&mut e);
                handoffs.push(Handoff {
                    stream: e.stream,
                    buf: e.buf,
                    slot: e.slot,
                    pending,
                    close_after,
                });
            }
        }
    }
}

/// When a parked connection that is not in service is due to close: its
/// first request's head must be in within the first-request timeout of
/// the accept, any later head within the request timeout of its first
/// byte, and an idle kept-alive connection goes after the idle timeout.
fn deadline(app: &App, e: &Entry) -> Option<Instant> {
    let cfg = &app.cfg;
    if let Some(at) = e.closing {
        return Some(at);
    }
    let head = e.started.map(|t| t + cfg.request_timeout);
    if !e.served {
        let first = e.idle_since + cfg.first_request_timeout;
        return Some(head.map_or(first, |h| h.min(first)));
    }
    head.or(Some(e.idle_since + cfg.idle_timeout))
}

/// A final error answer (the connection closes after it).
fn error_answer(status: u16, msg: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = write_response(
        &mut out,
        status,
        "text/plain; charset=utf-8",
        msg.as_bytes(),
        false,
        &[],
        false,
    );
    out
}

/// Whether the peer of a connection whose request waits has gone (EOF or
/// an error), reading and keeping what it sent meanwhile.
fn client_gone(e: &mut Entry) -> bool {
    let mut chunk = [0u8; 8192];
    while e.buf.len() < MAX_BUFFERED {
        match e.stream.read(&mut chunk) {
            Ok(0) => return true,
            Ok(n) => e.buf.extend_from_slice(&chunk[..n]),
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(err) => return err.kind() != ErrorKind::WouldBlock,
        }
    }
    false
}

/// Writes as much of `out` as the socket takes now. Err(Some(n)): it took
/// only the first n bytes; Err(None): the connection failed.
fn write_now(stream: &mut TcpStream, out: &[u8]) -> Result<(), Option<usize>> {
    let mut off = 0;
    while off < out.len() {
        match stream.write(&out[off..]) {
            Ok(0) => return Err(None),
            Ok(n) => off += n,
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(err) if err.kind() == ErrorKind::WouldBlock => return Err(Some(off)),
            Err(_) => return Err(None),
        }
    }
    Ok(())
}

/// Writes one answer; None when the connection goes on here, else what
/// comes next (a client that does not read goes to a worker, which waits
/// for it under the write timeout instead of this thread).
fn answer(app: &App, e: &mut Entry, resp: &Response, keep_alive: bool, head: bool) -> Option<Next> {
    let keep = keep_alive && !app.shutting_down();
    let mut out = Vec::with_capacity(256 + resp.body.len());
    let _ = write_response(
        &mut out,
        resp.status,
        resp.content_type,
        &resp.body,
        keep,
        &resp.extra,
        head,
    );
    // Idle from before the write: a client that reads the answer and then
    // opens another connection must find this one the older (shedding).
    let answered = Instant::now();
    match write_now(&mut e.stream, &out) {
        Ok(()) if keep => {
            e.idle_since = answered;
            None
        }
        Ok(()) => Some(Next::Close),
        Err(Some(off)) => Some(Next::Worker(out[off..].to_vec(), !keep)),
        Err(None) => Some(Next::Close),
    }
}

/// Answers an inline /work request whose time in the slot is over, then
/// goes on with whatever the connection sent meanwhile.
fn finish_busy(app: &App, e: &mut Entry, b: Busy) -> Next {
    let resp = app.finish_inline_work(&b.work);
    let next = answer(app, e, &resp, b.keep_alive, b.head);
    app.inline_written();
    match next {
        Some(next) => next,
        None => serve_ready(app, e),
    }
}

/// Reads what a ready connection sent and answers the requests in it that
/// need no thread.
fn serve_ready(app: &App, e: &mut Entry) -> Next {
    let mut chunk = [0u8; 8192];
    // A client may send its requests and then close its side: they are
    // still answered, then the connection closes (as on a worker).
    let mut eof = false;
    loop {
        if e.buf.len() > MAX_HEADER_BYTES {
            break; // read_request on a worker answers 431
        }
        match e.stream.read(&mut chunk) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(n) => e.buf.extend_from_slice(&chunk[..n]),
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(err) if err.kind() == ErrorKind::WouldBlock => break,
            Err(_) => return Next::Close,
        }
    }
    loop {
        // Stray line breaks between requests are dropped here, as
        // read_request would, so that they cannot fill the buffer.
        let stray = e
            .buf
            .iter()
            .take_while(|&&b| b == b'\r' || b == b'\n')
            .count();
        e.buf.drain(..stray);
        if e.buf.is_empty() {
            e.started = None;
            return if eof || app.shutting_down() {
                Next::Close
            } else {
                Next::Park
            };
        }
        // Part of a head: it waits here, under its deadline, without a
        // thread (a socket per byte used to take a worker each).
        if !head_complete(&e.buf) {
            if eof {
                return Next::Close;
            }
            e.started.get_or_insert_with(Instant::now);
            return Next::Park;
        }
        e.served = true;
        e.started = None;
        let Some((req, used)) = parse_simple(&e.buf) else {
            return Next::Worker(Vec::new(), false);
        };
        if !app.serves_inline(&req) && !e.slot.promote() {
            return Next::Worker(Vec::new(), false); // 503 in settle
        }
        let head = req.method == "HEAD";
        let next = if app.serves_inline(&req) {
            e.buf.drain(..used);
            let Outcome::Respond(resp, token) = app.handle(&req, &mut || false) else {
                return Next::Close;
            };
            let next = answer(app, e, &resp, req.keep_alive, head);
            drop(token);
            next
        } else if req.path() == "/work" {
            match app.try_start_work(&req) {
                None => return Next::Worker(Vec::new(), false),
                Some(InlineStart::Answer(resp, holds_rif)) => {
                    e.buf.drain(..used);
                    let next = answer(app, e, &resp, req.keep_alive, head);
                    if holds_rif {
                        app.inline_written();
                    }
                    next
                }
                Some(InlineStart::Admitted(work, queued)) => {
                    e.buf.drain(..used);
                    let b = Busy {
                        keep_alive: req.keep_alive,
                        head,
                        work,
                        queued,
                    };
                    if let Some(ticket) = queued {
                        e.busy = Some(b);
                        return Next::Queued(ticket);
                    }
                    if let Some(job) = b.work.job {
                        e.busy = Some(b);
                        return Next::Computing(job);
                    }
                    if !b.work.sleep.is_zero() {
                        let due = Instant::now() + b.work.sleep;
                        e.busy = Some(b);
                        return Next::Busy(due);
                    }
                    let resp = app.finish_inline_work(&b.work);
                    let next = answer(app, e, &resp, b.keep_alive, head);
                    app.inline_written();
                    next
                }
            }
        } else {
            return Next::Worker(Vec::new(), false);
        };
        if let Some(next) = next {
            return next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::net::TcpListener;

    /// Whether the server side of `c` was closed (EOF or reset).
    fn closed(c: &mut TcpStream) -> bool {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        !matches!(c.read(&mut [0u8; 1]), Err(e) if e.kind() == ErrorKind::WouldBlock)
    }

    #[test]
    fn shedding_passes_over_a_connection_whose_request_is_arriving() {
        let app = Arc::new(App::new(Config::default()));
        let r = Reactor::new().unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut pooled = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (pooled_srv, _) = l.accept().unwrap();
        let mut newer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (newer_srv, _) = l.accept().unwrap();
        let t0 = Instant::now();
        let slot = || ConnSlot::take(app.clone());
        assert!(r.park(&app, pooled_srv, slot(), t0, true).is_ok());
        assert!(r
            .park(&app, newer_srv, slot(), t0 + Duration::from_secs(1), true)
            .is_ok());
        // The pool reuses its oldest connection: the request is in the
        // socket, not yet read by the reactor (which is not running here).
        write!(
            pooled,
            "POST /work HTTP/1.1\r\nContent-Length: 2\r\n\r\n{{}}"
        )
        .unwrap();
        let arrived = Instant::now();
        while r
            .lock()
            .conns
            .values()
            .all(|e| !matches!(e.stream.peek(&mut [0u8; 1]), Ok(n) if n > 0))
        {
            assert!(arrived.elapsed() < Duration::from_secs(10), "never arrived");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(r.shed_oldest(), "the newer idle connection is shed");
        assert!(closed(&mut newer));
        pooled.set_nonblocking(true).unwrap();
        assert!(
            matches!(pooled.read(&mut [0u8; 1]), Err(e) if e.kind() == ErrorKind::WouldBlock),
            "the connection carrying a request must stay open"
        );
        assert_eq!(app.conns.open(), 1);
        // Nothing else to shed: the arriving request is not cut off.
        assert!(!r.shed_oldest());
        assert_eq!(app.conns.open(), 1);
    }
}
