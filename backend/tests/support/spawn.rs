//! Starting the built backend for an integration test: it listens on
//! 127.0.0.1, port 0, and writes its addresses to a file of its own;
//! `addresses` waits (20 s at most) until every replica listens.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// Starts `bin --listen 127.0.0.1:0 --addr-file FILE args…`, stdout
/// discarded, stderr as given. Returns the child and FILE.
pub fn start(bin: &str, args: &[&str], stderr: Stdio) -> (Child, PathBuf) {
    static N: AtomicU64 = AtomicU64::new(0);
    let addr_file = std::env::temp_dir().join(format!(
        "prequal-backend-test-{}-{}.addr",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_file(&addr_file);
    let child = Command::new(bin)
        .args(["--listen", "127.0.0.1:0", "--addr-file"])
        .arg(&addr_file)
        .args(args)
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("start the backend");
    (child, addr_file)
}

/// The replicas' addresses once the backend has written them all (the
/// file is written atomically, whole lines); removes the file. `log` says
/// what the backend printed, for the panic if it never listens.
pub fn addresses(addr_file: &Path, log: impl Fn() -> String) -> Vec<SocketAddr> {
    let end = Instant::now() + Duration::from_secs(20);
    let text = loop {
        if let Ok(s) = std::fs::read_to_string(addr_file) {
            if s.ends_with('\n') {
                break s;
            }
        }
        assert!(Instant::now() < end, "backend never listened: {}", log());
        thread::sleep(Duration::from_millis(10));
    };
    let _ = std::fs::remove_file(addr_file);
    text.lines().map(|l| l.parse().unwrap()).collect()
}
