//! prequal-backend: the workload replica for prequalbench. It serves /work
//! with real capacity (a FIFO queue in front of `concurrency` slots), reports
//! its requests-in-flight and latency estimate on /prequal/probe, and can
//! misbehave on purpose (probe and work fault modes, antagonists).
//!
//! Standard library only: a thread per connection over std::net, with
//! keep-alive; SIGTERM/SIGINT stop accepting, finish in-flight work, exit 0.

mod antagonist;
mod config;
mod dist;
mod duration;
mod estimator;
mod gate;
mod hash;
mod http;
mod json;
mod server;
mod signals;

use config::{Mode, Parsed};
use server::App;
use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// Stack per connection thread: handlers are shallow (SHA-256 state is small).
const CONN_STACK: usize = 256 * 1024;
/// How long shutdown waits for in-flight requests before exiting anyway.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let env: HashMap<String, String> = std::env::vars().collect();
    let cfg = match config::parse(&args, &env) {
        Ok(Parsed::Run(cfg)) => *cfg,
        Ok(Parsed::Help) => {
            print!("{}", config::usage());
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("prequal-backend: {e}");
            return ExitCode::from(2);
        }
    };
    // Block the signals before any thread starts so that only the signal
    // thread receives them.
    let signals = match signals::Signals::block() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("prequal-backend: signals: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(cfg, signals) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("prequal-backend: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cfg: config::Config, signals: signals::Signals) -> Result<(), String> {
    let listener =
        TcpListener::bind(&cfg.listen).map_err(|e| format!("listen {}: {e}", cfg.listen))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("listen {}: {e}", cfg.listen))?;
    if cfg.mode == Mode::Sleep && (!cfg.antagonists.is_empty() || cfg.concurrency != 4) {
        eprintln!("prequal-backend: mode sleep has no capacity limit: --concurrency and --antagonist are ignored");
    }
    let app = Arc::new(App::new(cfg));
    if let Some(path) = &app.cfg.addr_file {
        write_atomically(path, &format!("{addr}\n"))
            .map_err(|e| format!("--addr-file {path}: {e}"))?;
    }
    eprintln!(
        "prequal-backend: listening on {addr} (mode {:?}, concurrency {}, queue limit {})",
        app.cfg.mode, app.cfg.concurrency, app.cfg.queue_limit
    );

    if !app.cfg.antagonists.is_empty() && app.cfg.mode != Mode::Sleep {
        let a = app.clone();
        thread::Builder::new()
            .name("antagonists".into())
            .spawn(move || a.run_antagonists())
            .map_err(|e| format!("antagonist thread: {e}"))?;
    }
    {
        let a = app.clone();
        thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                let sig = signals.wait();
                eprintln!("prequal-backend: signal {sig}, draining");
                a.begin_shutdown();
                // Wake the blocking accept.
                let _ = TcpStream::connect_timeout(&wake_addr(addr), Duration::from_secs(1));
            })
            .map_err(|e| format!("signal thread: {e}"))?;
    }

    for stream in listener.incoming() {
        if app.shutting_down() {
            break;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors and the like: back off, keep serving.
                eprintln!("prequal-backend: accept: {e}");
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let a = app.clone();
        if let Err(e) = thread::Builder::new()
            .stack_size(CONN_STACK)
            .spawn(move || a.serve_conn(stream))
        {
            eprintln!("prequal-backend: connection thread: {e}");
        }
    }
    drop(listener);
    if !app.wait_conns(DRAIN_TIMEOUT) {
        eprintln!("prequal-backend: connections still open after {DRAIN_TIMEOUT:?}; exiting");
    }
    Ok(())
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

/// Writes via a temporary file and rename, so readers never see half a line.
fn write_atomically(path: &str, content: &str) -> std::io::Result<()> {
    let tmp = format!("{path}.tmp.{}", std::process::id());
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(content.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}
