//! Black-box tests of the server feedback over the wire: the probe's qps,
//! eps and utilization, and the X-Prequal-Queue / X-Prequal-Service-Us
//! headers on /work responses. Loopback only; every loop is bounded in
//! count and time. The exact window arithmetic is tested with a fake clock
//! in src/load.rs and src/server.rs; here each check is retried with fresh
//! requests until a deadline, so a slow host cannot make it fail.

#[path = "support/spawn.rs"]
mod spawn;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_prequal-backend");

struct Backend {
    child: Child,
    addr: SocketAddr,
}

impl Backend {
    fn start(args: &[&str]) -> Backend {
        let mut all = vec!["--shutdown-grace", "0"];
        all.extend_from_slice(args);
        let (child, addr_file) = spawn::start(BIN, &all, Stdio::null());
        let addr = spawn::addresses(&addr_file, String::new)[0];
        Backend { child, addr }
    }

    /// One request on its own connection: (status, headers, body).
    fn get(&self, path: &str) -> (u16, String, String) {
        let mut s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(5)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nConnection: close\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let (head, body) = out.split_once("\r\n\r\n").expect("a response");
        let status = head[9..12].parse().unwrap();
        (status, head.to_string(), body.to_string())
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A header's value as a number; panics when absent or not a number.
fn header(head: &str, name: &str) -> u64 {
    let line = head
        .lines()
        .find(|l| {
            l.split_once(':')
                .is_some_and(|(n, _)| n.eq_ignore_ascii_case(name))
        })
        .unwrap_or_else(|| panic!("no {name} in {head:?}"));
    let v = line.split_once(':').unwrap().1.trim();
    v.parse()
        .unwrap_or_else(|_| panic!("{name}: {v:?} is not a non-negative integer"))
}

/// A number field of a probe answer; None when absent.
fn field(body: &str, key: &str) -> Option<f64> {
    let rest = body.split(&format!("\"{key}\":")).nth(1)?;
    rest.split([',', '}']).next()?.parse().ok()
}

fn poll(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn idle_probe_reports_zero_load_next_to_the_old_fields() {
    let b = Backend::start(&["--concurrency", "2"]);
    let (status, _, body) = b.get("/prequal/probe");
    assert_eq!(status, 200);
    for key in ["rif", "timestamp_ms", "samples"] {
        assert!(field(&body, key).is_some(), "{key} in {body}");
    }
    assert!(body.contains("\"latency_median_ms\":null"), "{body}");
    assert_eq!(field(&body, "qps"), Some(0.0), "{body}");
    assert_eq!(field(&body, "eps"), Some(0.0), "{body}");
    assert_eq!(field(&body, "utilization"), Some(0.0), "{body}");
}

#[test]
fn work_headers_and_load_while_full() {
    let b = Backend::start(&[
        "--concurrency",
        "1",
        "--queue-limit",
        "0",
        "--service-time",
        "2s",
    ]);
    // 10 iterations of 2 s per 1000: at least 20 ms in the slot.
    let (status, head, _) = b.get("/work?iterations=10");
    assert_eq!(status, 200);
    assert_eq!(header(&head, "X-Prequal-Queue"), 0);
    let us = header(&head, "X-Prequal-Service-Us");
    assert!((20_000..20_000_000).contains(&us), "service {us} us");
    let (status, head, _) = b.get("/work?iterations=x");
    assert_eq!(status, 400);
    assert_eq!(header(&head, "X-Prequal-Service-Us"), 0);
    header(&head, "X-Prequal-Queue");

    // Hold the only slot for far longer than the test (killed at the end).
    let addr = b.addr;
    thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        let _ = write!(s, "GET /work?iterations=1000000 HTTP/1.1\r\n\r\n");
        let _ = s.read(&mut [0u8; 64]);
    });
    // Each round sends a fresh 503 and probes at once: the 503 must show
    // in eps, and the held slot in utilization.
    poll("a 503 counted in eps with the slot busy", || {
        let (status, head, _) = b.get("/work?iterations=0");
        if status != 503 {
            return false; // the hold is not in service yet
        }
        assert_eq!(header(&head, "X-Prequal-Service-Us"), 0, "{head}");
        assert_eq!(header(&head, "X-Prequal-Queue"), 0, "{head}");
        let (_, _, body) = b.get("/prequal/probe");
        let (qps, eps, util) = (
            field(&body, "qps").unwrap(),
            field(&body, "eps").unwrap(),
            field(&body, "utilization").unwrap(),
        );
        assert!(eps <= qps, "eps counts among answered requests: {body}");
        assert!((0.0..=1.0).contains(&util), "{body}");
        eps > 0.0 && util > 0.0
    });
}
