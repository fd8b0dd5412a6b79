//! The built binary in `--mode cpu-share`: one process is one machine with
//! a listener per replica. Loopback only; waits poll with deadlines and
//! timing is asserted only from below (the model makes a request take at
//! least its share of the machine's time; a slow host only adds to it),
//! plus a generous ceiling.

#[path = "support/spawn.rs"]
mod spawn;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_prequal-backend");

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}

struct Machine {
    child: Child,
    addrs: Vec<SocketAddr>,
}

impl Machine {
    fn start(args: &[&str]) -> Machine {
        let mut all = vec!["--shutdown-grace", "0"];
        all.extend_from_slice(args);
        let (child, addr_file) = spawn::start(BIN, &all, Stdio::null());
        let addrs = spawn::addresses(&addr_file, String::new);
        Machine { child, addrs }
    }

    fn connect(&self, replica: usize) -> TcpStream {
        let s = TcpStream::connect_timeout(&self.addrs[replica], Duration::from_secs(5)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s
    }

    fn get(&self, replica: usize, path: &str) -> (u16, String) {
        let mut s = self.connect(replica);
        send(&mut s, path);
        read_answer(&mut s)
    }

    /// The probe's RIF on a replica.
    fn rif(&self, replica: usize) -> u64 {
        let (status, body) = self.get(replica, "/prequal/probe");
        assert_eq!(status, 200, "{body}");
        field(&body, "rif").expect("rif") as u64
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn send(s: &mut TcpStream, path: &str) {
    write!(s, "GET {path} HTTP/1.1\r\nConnection: close\r\n\r\n").unwrap();
}

fn read_answer(s: &mut TcpStream) -> (u16, String) {
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").expect("a response");
    (head[9..12].parse().unwrap(), body.to_string())
}

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

const TWO_HARD_HALVES: &[&str] = &[
    "--mode",
    "cpu-share",
    "--replicas",
    "2",
    "--share",
    "0.5",
    "--cpu-limit",
    "hard",
    "--concurrency",
    "0",
    "--distribution",
    "fixed",
    "--service-time",
    "100ms",
];

/// Two requests of 100 ms at the allocation on one replica held to its
/// share share its rate: each takes 200 ms (less the few µs between the
/// two arrivals), where running side by side would take 100 ms.
#[test]
fn two_requests_on_one_replica_share_its_cpu() {
    let m = Machine::start(TWO_HARD_HALVES);
    assert_eq!(m.addrs.len(), 2);
    assert_ne!(m.addrs[0], m.addrs[1]);
    // Connect first, then send both back to back, so they overlap fully.
    let mut conns = [m.connect(0), m.connect(0)];
    let t = Instant::now();
    for c in &mut conns {
        send(c, "/work");
    }
    let handles: Vec<_> = conns
        .into_iter()
        .map(|mut c| thread::spawn(move || (read_answer(&mut c), t.elapsed())))
        .collect();
    for h in handles {
        let ((status, body), took) = h.join().unwrap();
        assert_eq!(status, 200, "{body}");
        assert!(
            took > Duration::from_millis(150),
            "took {took:?}: not shared"
        );
        assert!(took < Duration::from_secs(3), "took {took:?}");
        assert!(field(&body, "duration_ms").unwrap() > 150.0, "{body}");
    }
    // A lone request on the other replica: its own allocation, 100 ms.
    let t = Instant::now();
    assert_eq!(m.get(1, "/work").0, 200);
    assert!(t.elapsed() > Duration::from_millis(90), "{:?}", t.elapsed());
}

/// Each address is its own replica: its probe reports its own RIF, its
/// /stats its own counters and the machine's antagonist level.
#[test]
fn each_replica_reports_its_own_rif_and_load() {
    let m = Machine::start(&[TWO_HARD_HALVES, &["--machine-load", "levels=0.25,hold=1h"]].concat());
    assert_eq!(m.rif(0), 0);
    // 500 ms of work each, shared: a second in service.
    let mut conns = [m.connect(0), m.connect(0)];
    for c in &mut conns {
        send(c, "/work?iterations=5000");
    }
    poll("two requests in service on replica 0", || m.rif(0) == 2);
    assert_eq!(m.rif(1), 0);
    let (_, probe) = m.get(0, "/prequal/probe");
    assert!(field(&probe, "utilization").unwrap() > 0.0, "{probe}");
    let (_, stats) = m.get(0, "/stats");
    assert_eq!(field(&stats, "in_flight"), Some(2.0), "{stats}");
    assert_eq!(field(&stats, "antagonist_level"), Some(0.25), "{stats}");
    let (_, stats) = m.get(1, "/stats");
    assert_eq!(field(&stats, "in_flight"), Some(0.0), "{stats}");
    for mut c in conns {
        assert_eq!(read_answer(&mut c).0, 200);
    }
    poll("replica 0 idle again", || m.rif(0) == 0);
    let (_, stats) = m.get(0, "/stats");
    assert_eq!(field(&stats, "served"), Some(2.0), "{stats}");
}

/// SIGTERM drains every replica: a request in service on replica 1 is
/// still answered, and the process exits 0.
#[test]
fn sigterm_drains_every_replica() {
    let mut m = Machine::start(TWO_HARD_HALVES);
    let mut c = m.connect(1);
    send(&mut c, "/work?iterations=3000");
    poll("the request in service", || m.rif(1) == 1);
    // SAFETY: kill only sends a signal to our own child.
    assert_eq!(unsafe { kill(m.child.id() as i32, 15) }, 0);
    assert_eq!(read_answer(&mut c).0, 200);
    let end = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = m.child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < end, "still running");
        thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
}

#[test]
fn fixed_ports_count_up_from_the_listen_port() {
    // A free port P, then P..P+1 (retried: another process may take one).
    for _ in 0..20 {
        let p = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if p == u16::MAX {
            continue;
        }
        let listen = format!("127.0.0.1:{p}");
        let mut args = TWO_HARD_HALVES.to_vec();
        args.extend(["--listen", &listen]);
        let mut child = Command::new(BIN)
            .args(&args)
            .args(["--shutdown-grace", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let end = Instant::now() + Duration::from_secs(20);
        let mut ok = false;
        while Instant::now() < end {
            if let Some(st) = child.try_wait().unwrap() {
                assert!(!st.success());
                break; // a port was taken meanwhile: try another
            }
            let up = |port: u16| TcpStream::connect(("127.0.0.1", port)).is_ok();
            if up(p) && up(p + 1) {
                ok = true;
                break;
            }
            thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        if ok {
            return;
        }
    }
    panic!("never listened on P and P+1");
}
