//! prequal-backend: the workload replica for prequalbench. It serves /work
//! with real capacity (a FIFO queue in front of `concurrency` slots), reports
//! its requests-in-flight and latency estimate on /prequal/probe, and can
//! misbehave on purpose (probe and work fault modes, antagonists).
//!
//! Standard library only: on Linux one reactor thread (epoll) holds idle
//! connections and serves probes and io/sleep-mode /work itself; anything
//! else runs on reused worker threads (at most --max-connections); with
//! keep-alive; at the cap a new connection sheds the one waiting longest
//! for a request;
//! SIGTERM/SIGINT keep serving for a grace period, then stop
//! accepting, finish in-flight work and exit 0; a second signal exits at
//! once (status 1).
//!
//! `prequal-backend --sleep DUR` only sleeps: the pod's preStop hook, since
//! the distroless image has no shell or sleep binary.

mod accept;
mod antagonist;
mod config;
mod cpushare;
mod dist;
mod duration;
mod estimator;
mod gate;
mod hash;
mod http;
#[cfg(test)]
mod http_fuzz;
mod json;
mod load;
#[cfg(target_os = "linux")]
mod reactor;
mod server;
mod signals;

use config::{Mode, Parsed};
use server::App;
use std::collections::HashMap;
use std::io::Write;
use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::Arc;
use std::thread;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--sleep") {
        return sleep_command(&args[1..]);
    }
    let env: HashMap<String, String> = std::env::vars().collect();
    let cfg = match config::parse(&args, &env) {
        Ok(Parsed::Run(cfg)) => *cfg,
        Ok(Parsed::Help) => {
            print!("{}", config::usage());
            println!(
                "\n       prequal-backend --sleep DUR  (sleep, exit 0: the pod's preStop hook)"
            );
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
    let fds = raise_fd_limit();
    // The listener, the reactor's descriptors, stdio and some slack.
    let need = cfg.max_connections + cfg.probe_reserve + 32;
    if fds.is_some_and(|n| n < need as u64) {
        eprintln!(
            "prequal-backend: the descriptor limit ({}) is below --max-connections + --probe-reserve + 32 ({need}): accept fails before the cap, and each failure sheds a waiting connection",
            fds.unwrap_or(0)
        );
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
                // Keep accepting while the replica is being removed from load
                // balancers (EndpointSlice propagation, a file source reload):
                // requests sent to it meanwhile are still answered.
                let grace = a.cfg.shutdown_grace;
                eprintln!("prequal-backend: signal {sig}: serving {grace:?} more, then draining (a second signal exits at once)");
                // A second signal (an operator's second Ctrl-C) does not wait
                // for the grace and the drain: orchestrators signal once.
                let forced = a.clone();
                let _ = thread::Builder::new()
                    .name("signals-again".into())
                    .spawn(move || {
                        let sig = signals.wait();
                        eprintln!(
                            "prequal-backend: signal {sig} again: exiting now, {} connections open",
                            forced.conns.open()
                        );
                        std::process::exit(1);
                    });
                thread::sleep(grace);
                eprintln!("prequal-backend: closing the listener, draining");
                accept::stop(&a, addr);
            })
            .map_err(|e| format!("signal thread: {e}"))?;
    }

    if !accept::serve(&app, listener) {
        eprintln!(
            "prequal-backend: {} connections still open after {:?}; exiting",
            app.conns.open(),
            app.cfg.drain_timeout
        );
    }
    Ok(())
}

/// Raises the soft limit on open descriptors to the hard limit, as Go's
/// runtime does: the soft default (often 1024) is below the connection cap
/// plus the reserve. Returns the limit now in force.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn raise_fd_limit() -> Option<u64> {
    #[repr(C)]
    struct RLimit {
        cur: u64,
        max: u64,
    }
    extern "C" {
        fn getrlimit(resource: i32, rlim: *mut RLimit) -> i32;
        fn setrlimit(resource: i32, rlim: *const RLimit) -> i32;
    }
    const RLIMIT_NOFILE: i32 = 7;
    let mut lim = RLimit { cur: 0, max: 0 };
    // SAFETY: lim is a valid struct rlimit (two rlim_t, u64 on Linux).
    if unsafe { getrlimit(RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    if lim.cur < lim.max {
        let want = RLimit {
            cur: lim.max,
            max: lim.max,
        };
        // SAFETY: as above; raising the soft limit up to the hard one is
        // allowed without privileges.
        if unsafe { setrlimit(RLIMIT_NOFILE, &want) } == 0 {
            return Some(want.cur);
        }
    }
    Some(lim.cur)
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
fn raise_fd_limit() -> Option<u64> {
    None
}

/// `--sleep DUR`: sleep, exit 0. A bad or missing duration exits 2.
fn sleep_command(args: &[String]) -> ExitCode {
    let [d] = args else {
        eprintln!("prequal-backend: --sleep: want exactly one duration, e.g. --sleep 5s");
        return ExitCode::from(2);
    };
    match duration::parse_duration(d) {
        Ok(d) => {
            thread::sleep(d);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("prequal-backend: --sleep: {e}");
            ExitCode::from(2)
        }
    }
}

/// Writes via a temporary file and rename, so readers never see half a line.
fn write_atomically(path: &str, content: &str) -> std::io::Result<()> {
    let tmp = format!("{path}.tmp.{}", std::process::id());
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(content.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}
