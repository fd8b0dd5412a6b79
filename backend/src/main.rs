//! prequal-backend: the workload replica for prequalbench. It serves /work
//! with real capacity (a FIFO queue in front of `concurrency` slots), reports
//! its requests-in-flight and latency estimate on /prequal/probe, and can
//! misbehave on purpose (probe and work fault modes, antagonists).
//! `--mode cpu-share` serves sim's cpu-share replicas instead: this process
//! is one machine with `--replicas` listeners sharing a fluid CPU model
//! (cpushare.rs, machine.rs).
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
mod machine;
#[cfg(target_os = "linux")]
mod reactor;
mod server;
mod signals;

use config::{Mode, Parsed};
use machine::Machine;
use server::App;
use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
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
    let listeners = bind(&cfg)?;
    if cfg.mode == Mode::Sleep && (!cfg.antagonists.is_empty() || cfg.concurrency != 4) {
        eprintln!("prequal-backend: mode sleep has no capacity limit: --concurrency and --antagonist are ignored");
    }
    let fds = raise_fd_limit();
    // The listeners, the reactors' descriptors, stdio and some slack.
    let need = (cfg.max_connections + cfg.probe_reserve + 8) * listeners.len() + 32;
    if fds.is_some_and(|n| n < need as u64) {
        eprintln!(
            "prequal-backend: the descriptor limit ({}) is below --max-connections + --probe-reserve + 32 ({need}): accept fails before the cap, and each failure sheds a waiting connection",
            fds.unwrap_or(0)
        );
    }
    let apps: Vec<Arc<App>> = if cfg.mode == Mode::CpuShare {
        // One process is one machine: its replicas share its model.
        let machine = Machine::new(&machine::machine_config(&cfg), cfg.seed);
        machine
            .spawn()
            .map_err(|e| format!("machine thread: {e}"))?;
        (0..cfg.replicas)
            .map(|k| {
                let cfg = config::Config {
                    seed: replica_seed(cfg.seed, k),
                    ..cfg.clone()
                };
                Arc::new(App::replica(cfg, machine.clone(), k))
            })
            .collect()
    } else {
        vec![Arc::new(App::new(cfg))]
    };
    let cfg = &apps[0].cfg;
    let addrs: Vec<SocketAddr> = listeners.iter().map(|(_, a)| *a).collect();
    if let Some(path) = &cfg.addr_file {
        let lines: String = addrs.iter().map(|a| format!("{a}\n")).collect();
        write_atomically(path, &lines).map_err(|e| format!("--addr-file {path}: {e}"))?;
    }
    for a in &addrs {
        eprintln!(
            "prequal-backend: listening on {a} (mode {:?}, concurrency {}, queue limit {})",
            cfg.mode, cfg.concurrency, cfg.queue_limit
        );
    }

    if !cfg.antagonists.is_empty() && cfg.mode != Mode::Sleep {
        let a = apps[0].clone();
        thread::Builder::new()
            .name("antagonists".into())
            .spawn(move || a.run_antagonists())
            .map_err(|e| format!("antagonist thread: {e}"))?;
    }
    {
        let apps = apps.clone();
        let addrs = addrs.clone();
        thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                let sig = signals.wait();
                // Keep accepting while the replica is being removed from load
                // balancers (EndpointSlice propagation, a file source reload):
                // requests sent to it meanwhile are still answered.
                let grace = apps[0].cfg.shutdown_grace;
                eprintln!("prequal-backend: signal {sig}: serving {grace:?} more, then draining (a second signal exits at once)");
                // A second signal (an operator's second Ctrl-C) does not wait
                // for the grace and the drain: orchestrators signal once.
                let forced = apps.clone();
                let _ = thread::Builder::new()
                    .name("signals-again".into())
                    .spawn(move || {
                        let sig = signals.wait();
                        let open: usize = forced.iter().map(|a| a.conns.open()).sum();
                        eprintln!(
                            "prequal-backend: signal {sig} again: exiting now, {open} connections open"
                        );
                        std::process::exit(1);
                    });
                thread::sleep(grace);
                eprintln!("prequal-backend: closing the listener, draining");
                for (a, addr) in apps.iter().zip(&addrs) {
                    accept::stop(a, *addr);
                }
            })
            .map_err(|e| format!("signal thread: {e}"))?;
    }

    // Each replica accepts on its own thread; every one drains at shutdown.
    let mut rest = Vec::new();
    let mut listeners = listeners.into_iter();
    let (first, _) = listeners.next().expect("at least one listener");
    for (app, (listener, _)) in apps[1..].iter().zip(listeners) {
        let app = app.clone();
        rest.push(
            thread::Builder::new()
                .name("accept".into())
                .spawn(move || accept::serve(&app, listener))
                .map_err(|e| format!("accept thread: {e}"))?,
        );
    }
    let mut drained = accept::serve(&apps[0], first);
    for h in rest {
        drained &= h.join().unwrap_or(false);
    }
    if !drained {
        let open: usize = apps.iter().map(|a| a.conns.open()).sum();
        eprintln!(
            "prequal-backend: {open} connections still open after {:?}; exiting",
            apps[0].cfg.drain_timeout
        );
    }
    Ok(())
}

/// The listeners: one, or, cpu-share, one per replica: port P, P+1, ...
/// or, with port 0, a free port each.
fn bind(cfg: &config::Config) -> Result<Vec<(TcpListener, SocketAddr)>, String> {
    let base: SocketAddr = cfg
        .listen
        .parse()
        .map_err(|e| format!("listen {}: {e}", cfg.listen))?;
    (0..cfg.replicas)
        .map(|k| {
            let mut at = base;
            if base.port() != 0 {
                let port = base.port() as usize + k;
                let port = u16::try_from(port)
                    .map_err(|_| format!("listen: port {port} of replica {k} is above 65535"))?;
                at.set_port(port);
            }
            let l = TcpListener::bind(at).map_err(|e| format!("listen {at}: {e}"))?;
            let a = l.local_addr().map_err(|e| format!("listen {at}: {e}"))?;
            Ok((l, a))
        })
        .collect()
}

/// Replica k's own random stream (its work draws), apart from the
/// machine's (its antagonist), which takes the seed itself.
fn replica_seed(seed: u64, k: usize) -> u64 {
    dist::Rng::new(seed ^ (k as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)).next_u64()
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
