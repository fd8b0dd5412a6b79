//! Idle connections wait in one epoll set instead of on a thread each, and
//! the cheap endpoints (/prequal/probe, /healthz, /health, /stats) are
//! answered right there, on the reactor thread, without waking a worker.
//!
//! Why: with a thread per connection every request costs a blocking read
//! and a wake-up of its thread; on this 2-core VM the scheduler's switch
//! in and out was about half of the backend's CPU per request (perf: 48%
//! under recv → sk_wait_data → schedule). One epoll_wait hands the reactor
//! many ready connections at once, as nginx's worker does. Idle
//! connections also stop waking twice a second each to look at shutdown.
//!
//! Anything else (a /work request, a body, a partial or malformed request,
//! a probe fault that delays) goes with the bytes read so far to a worker
//! thread, which serves it exactly as before (parser, deadlines, 400/408/
//! 413/431, lingering close). A worker that then sees its connection idle
//! for one read wake (≤ 500 ms) parks it back here. Connections keep their
//! slot (the cap, the drain) wherever they are. Linux only; elsewhere
//! workers keep their connections as they always did.

use crate::accept::{ConnSlot, Handoff, Pool};
use crate::http::{parse_simple, write_response, MAX_HEADER_BYTES};
use crate::server::{App, Outcome};
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
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

    extern "C" {
        pub fn epoll_create1(flags: i32) -> i32;
        pub fn epoll_ctl(epfd: i32, op: i32, fd: i32, event: *mut EpollEvent) -> i32;
        pub fn epoll_wait(epfd: i32, events: *mut EpollEvent, max: i32, timeout_ms: i32) -> i32;
    }

    pub const EPOLL_CLOEXEC: i32 = 0o2_000_000;
    pub const EPOLL_CTL_ADD: i32 = 1;
    pub const EPOLL_CTL_DEL: i32 = 2;
    pub const EPOLLIN: u32 = 0x1;
    pub const EPOLLRDHUP: u32 = 0x2000;
}

/// Events taken per epoll_wait.
const BATCH: usize = 256;
/// Longest wait: how soon shutdown and idle timeouts are noticed.
const WAKE: Duration = Duration::from_millis(500);

struct Entry {
    stream: TcpStream,
    buf: Vec<u8>,
    slot: ConnSlot,
    idle_since: Instant,
}

/// What a ready connection needs next.
enum Next {
    /// Idle again: stays parked.
    Park,
    Close,
    /// To a worker, with the unwritten rest of a response (if any) and
    /// whether the connection ends after it.
    Worker(Vec<u8>, bool),
}

pub struct Reactor {
    epfd: OwnedFd,
    parked: Mutex<Parked>,
}

#[derive(Default)]
struct Parked {
    conns: HashMap<u64, Entry>,
    next: u64,
}

impl Reactor {
    pub fn new() -> std::io::Result<Reactor> {
        // SAFETY: epoll_create1 has no preconditions; a non-negative result
        // is a new descriptor that we own from here on.
        let fd = unsafe { sys::epoll_create1(sys::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Reactor {
            // SAFETY: fd is a fresh descriptor nobody else owns.
            epfd: unsafe { OwnedFd::from_raw_fd(fd) },
            parked: Mutex::new(Parked::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Parked> {
        self.parked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Parks an idle connection (nothing buffered). Gives it back when it
    /// cannot be parked (shutdown, or epoll refused it); the caller then
    /// serves it on its thread.
    pub fn park(
        &self,
        app: &App,
        stream: TcpStream,
        slot: ConnSlot,
        idle_since: Instant,
    ) -> Result<(), (TcpStream, ConnSlot)> {
        if app.shutting_down() || stream.set_nonblocking(true).is_err() {
            return Err((stream, slot));
        }
        let fd = stream.as_raw_fd();
        let mut p = self.lock();
        let token = p.next;
        p.next += 1;
        let mut ev = sys::EpollEvent {
            events: sys::EPOLLIN | sys::EPOLLRDHUP,
            data: token,
        };
        // SAFETY: both descriptors are open (the stream is owned here) and
        // ev is a valid epoll_event for the call.
        if unsafe { sys::epoll_ctl(self.epfd.as_raw_fd(), sys::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
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
            },
        );
        Ok(())
    }

    /// The reactor thread: waits for parked connections to become readable,
    /// answers cheap requests, hands the rest to workers, closes connections
    /// idle past the idle timeout, and at shutdown closes every idle one.
    /// Runs for the life of the process.
    pub fn run(&self, app: &App, pool: &Arc<Pool>) {
        let wake = WAKE.min(app.cfg.idle_timeout).max(Duration::from_millis(1));
        let mut events = vec![sys::EpollEvent::default(); BATCH];
        let mut last_sweep = Instant::now();
        let mut handoffs = Vec::new();
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
                let Some(entry) = p.conns.get_mut(&token) else {
                    continue;
                };
                let next = serve_ready(app, entry);
                self.settle(&mut p, token, next, &mut handoffs);
            }
            let shutting_down = app.shutting_down();
            if shutting_down || last_sweep.elapsed() >= wake {
                last_sweep = Instant::now();
                let idle = app.cfg.idle_timeout;
                let due: Vec<u64> = p
                    .conns
                    .iter()
                    .filter(|(_, e)| shutting_down || e.idle_since.elapsed() >= idle)
                    .map(|(t, _)| *t)
                    .collect();
                for token in due {
                    // Bytes that arrived meanwhile are still served (a
                    // request sent just before shutdown gets its answer).
                    let next = match p.conns.get_mut(&token) {
                        Some(e) if shutting_down => match serve_ready(app, e) {
                            Next::Park => Next::Close,
                            other => other,
                        },
                        _ => Next::Close,
                    };
                    self.settle(&mut p, token, next, &mut handoffs);
                }
            }
            drop(p);
            for h in handoffs.drain(..) {
                pool.dispatch(h);
            }
        }
    }

    fn settle(&self, p: &mut Parked, token: u64, next: Next, handoffs: &mut Vec<Handoff>) {
        match next {
            Next::Park => {}
            // Closing the descriptor takes it out of the epoll set.
            Next::Close => drop(p.conns.remove(&token)),
            Next::Worker(pending, close_after) => {
                let Some(e) = p.conns.remove(&token) else {
                    return;
                };
                let mut ev = sys::EpollEvent::default();
                // SAFETY: the descriptor is open (owned by e.stream).
                unsafe {
                    sys::epoll_ctl(
                        self.epfd.as_raw_fd(),
                        sys::EPOLL_CTL_DEL,
                        e.stream.as_raw_fd(),
                        &mut ev,
                    )
                };
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

/// Reads what a ready connection sent and answers the cheap requests in it.
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
    let mut out = Vec::new();
    loop {
        if e.buf.is_empty() {
            return if eof || app.shutting_down() {
                Next::Close
            } else {
                Next::Park
            };
        }
        let Some((req, used)) = parse_simple(&e.buf) else {
            return Next::Worker(Vec::new(), false);
        };
        if !app.serves_inline(&req) {
            return Next::Worker(Vec::new(), false);
        }
        e.buf.drain(..used);
        let Outcome::Respond(resp, token) = app.handle(&req, &mut || false) else {
            return Next::Close;
        };
        let keep = req.keep_alive && !app.shutting_down();
        out.clear();
        let _ = write_response(
            &mut out,
            resp.status,
            resp.content_type,
            &resp.body,
            keep,
            &resp.extra,
            req.method == "HEAD",
        );
        drop(token);
        let mut off = 0;
        while off < out.len() {
            match e.stream.write(&out[off..]) {
                Ok(0) => return Next::Close,
                Ok(n) => off += n,
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                // A client that does not read: a worker waits for it, under
                // the write timeout, instead of this thread.
                Err(err) if err.kind() == ErrorKind::WouldBlock => {
                    return Next::Worker(out[off..].to_vec(), !keep)
                }
                Err(_) => return Next::Close,
            }
        }
        if !keep {
            return Next::Close;
        }
        e.idle_since = Instant::now();
    }
}
