//! Command-line flags and their environment variables. Every flag --x-y has
//! PREQUAL_BACKEND_X_Y; the seed's variable names are accepted too. Flags win
//! over PREQUAL_BACKEND_*, which win over the seed's names.

use crate::antagonist::Antagonist;
use crate::cpushare::MachineLoad;
use crate::dist::Distribution;
use crate::duration::parse_duration;
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Cpu,
    Io,
    Sleep,
    /// sim's cpu-share replicas: a fluid CPU model, no CPU burnt.
    CpuShare,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeFault {
    None,
    Timeout,
    Status500,
    Malformed,
    StaleTimestamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkFault {
    None,
    FailFast,
    Hang,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub listen: String,
    pub addr_file: Option<String>,
    pub mode: Mode,
    pub service_time: Duration,
    pub cpu_rounds: u64,
    pub distribution: Distribution,
    pub slow: f64,
    pub concurrency: usize,
    pub queue_limit: usize,
    pub antagonists: Vec<Antagonist>,
    pub probe_fault: ProbeFault,
    pub fault_timeout: Duration,
    pub fault_stale_offset: Duration,
    pub work_fault: WorkFault,
    pub latency_window: Duration,
    /// With latency_window 0: at RIF 0, samples older than this do not
    /// count (ZERO: off; default 5 s). See estimator.rs.
    pub latency_idle_max_age: Duration,
    pub seed: u64,
    /// From a request's first byte to its last (else 408 and close).
    pub request_timeout: Duration,
    /// An idle keep-alive connection (or a hang) is closed after this.
    pub idle_timeout: Duration,
    /// A new connection must send its first request's head within this,
    /// else it is closed (408 if it sent part of one).
    pub first_request_timeout: Duration,
    /// Connections served at once; at the cap a new one sheds the
    /// connection waiting longest for a request.
    pub max_connections: usize,
    /// Connections beyond the cap, taken when none can be shed; they are
    /// served only probes, health and stats.
    pub probe_reserve: usize,
    /// After SIGTERM, keep accepting and serving this long.
    pub shutdown_grace: Duration,
    /// Then wait this long at most for open connections to finish.
    pub drain_timeout: Duration,
    /// cpu-share: replicas on this machine (one listener each).
    pub replicas: usize,
    /// cpu-share: each replica's allocation, a fraction of the machine
    /// (required there).
    pub share: Option<f64>,
    /// cpu-share: a replica may not borrow idle CPU beyond its share.
    pub hard_limit: bool,
    /// cpu-share: one request runs on at most one of this many cores (0: no cap).
    pub cores: u32,
    /// cpu-share: the co-tenant antagonist's demand (None: none).
    pub machine_load: Option<MachineLoad>,
    /// cpu-share: this machine's index among `machines` (a cyclic
    /// antagonist starts at phase index/machines).
    pub machine_index: usize,
    pub machines: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            listen: "0.0.0.0:8080".into(),
            addr_file: None,
            mode: Mode::Io,
            service_time: Duration::from_millis(20),
            cpu_rounds: 1,
            distribution: Distribution::Fixed,
            slow: 1.0,
            concurrency: 4,
            queue_limit: 1024,
            antagonists: Vec::new(),
            probe_fault: ProbeFault::None,
            fault_timeout: Duration::from_secs(5),
            fault_stale_offset: Duration::from_secs(10),
            work_fault: WorkFault::None,
            latency_window: Duration::ZERO,
            latency_idle_max_age: Duration::from_millis(crate::estimator::DEFAULT_IDLE_MAX_AGE_MS),
            seed: 0,
            request_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(120),
            first_request_timeout: Duration::from_secs(5),
            max_connections: 1024,
            probe_reserve: 64,
            shutdown_grace: Duration::from_secs(3),
            drain_timeout: Duration::from_secs(30),
            replicas: 1,
            share: None,
            hard_limit: false,
            cores: 0,
            machine_load: None,
            machine_index: 0,
            machines: 1,
        }
    }
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    Run(Box<Config>),
    Help,
}

pub const FLAGS: &[(&str, &str)] = &[
    (
        "listen",
        "ADDR  listen address (default 0.0.0.0:8080; port 0 picks a free port)",
    ),
    (
        "addr-file",
        "PATH  write the bound ip:port here once listening",
    ),
    (
        "mode",
        "cpu|io|sleep|cpu-share  (default io; cpu-share: sim's fluid CPU model, see README)",
    ),
    (
        "service-time",
        "DUR  mean service time of 1000 iterations in io/sleep mode; cpu-share: mean work at the allocation (default 20ms)",
    ),
    (
        "cpu-rounds",
        "N  SHA-256 rounds per iteration in cpu mode (default 1)",
    ),
    (
        "distribution",
        "fixed|exp|normal  (default fixed; normal has sigma = mu, truncated at 0)",
    ),
    ("slow", "F  multiplier on the work (default 1.0)"),
    (
        "concurrency",
        "N  requests in service at once (default 4; 0 = unlimited)",
    ),
    (
        "queue-limit",
        "N  waiting requests before 503 (default 1024)",
    ),
    (
        "antagonist",
        "SPEC  capacity drop \"at=10s,for=5s,capacity=1[,every=30s]\" (repeatable)",
    ),
    (
        "probe-fault",
        "none|timeout|500|malformed|stale_timestamp  (default none)",
    ),
    (
        "fault-timeout",
        "DUR  delay of the probe fault timeout (default 5s)",
    ),
    (
        "fault-stale-offset",
        "DUR  how far stale_timestamp moves the clock back (default 10s)",
    ),
    ("work-fault", "none|fail_fast|hang  (default none)"),
    (
        "latency-window",
        "DUR  0 (default): the last 16 latency samples per RIF count, however old (the paper's \"recent\"); > 0: only samples younger than this",
    ),
    (
        "latency-idle-max-age",
        "DUR  with --latency-window 0: while idle (RIF 0), samples older than this do not count, so a replica avoided since a slow spell is explored again (default 5s; 0: off)",
    ),
    ("seed", "N  random seed (default from the clock)"),
    (
        "request-timeout",
        "DUR  a request must arrive in full this soon after its first byte, else 408 (default 30s)",
    ),
    (
        "idle-timeout",
        "DUR  close a keep-alive connection idle this long; also ends a hang (default 120s)",
    ),
    (
        "first-request-timeout",
        "DUR  a new connection must send its first request's head this soon, else it is closed (408 if it sent part of one) (default 5s)",
    ),
    (
        "max-connections",
        "N  connections served at once; at the cap a new one sheds the connection waiting longest for a request (default 1024)",
    ),
    (
        "probe-reserve",
        "N  connections beyond --max-connections, taken when none can be shed: served /prequal/probe, /healthz, /stats only, else 503 (default 64; 0: none)",
    ),
    (
        "shutdown-grace",
        "DUR  after SIGTERM keep accepting and serving this long (default 3s)",
    ),
    (
        "drain-timeout",
        "DUR  then wait at most this long for open connections (default 30s)",
    ),
    (
        "replicas",
        "K  cpu-share: replicas on this machine, one listener each (ports P..P+K-1, or free ones with port 0) (default 1)",
    ),
    (
        "share",
        "F  cpu-share: each replica's allocation, a fraction of the machine in (0, 1]; share × replicas <= 1 (required)",
    ),
    (
        "cpu-limit",
        "soft|hard  cpu-share: soft borrows idle CPU beyond the share, hard does not (default soft)",
    ),
    (
        "cores",
        "N  cpu-share: one request runs on at most one of N cores (default 0: no cap)",
    ),
    (
        "machine-load",
        "SPEC  cpu-share: co-tenant antagonist \"levels=0.1/0.6,hold=4s/1s[,random]\" (fractions of the machine; random: exponential holds)",
    ),
    (
        "machine-index",
        "I  cpu-share: this machine's index; a cyclic --machine-load starts at phase I/--machines (default 0)",
    ),
    ("machines", "N  cpu-share: machines in the fleet (default 1)"),
];

/// Flags that only mean something with --mode cpu-share.
const CPU_SHARE_FLAGS: &[&str] = &[
    "replicas",
    "share",
    "cpu-limit",
    "cores",
    "machine-load",
    "machine-index",
    "machines",
];

pub fn usage() -> String {
    let mut s = String::from(
        "usage: prequal-backend [flags]\n\nflags (each also read from PREQUAL_BACKEND_<FLAG>):\n",
    );
    for (name, help) in FLAGS {
        s.push_str(&format!("  --{name} {help}\n"));
    }
    s
}

fn env_name(flag: &str) -> String {
    format!("PREQUAL_BACKEND_{}", flag.to_uppercase().replace('-', "_"))
}

/// Parses flags (without argv[0]) and environment variables.
/// Errors name the flag (or variable) and what was expected.
pub fn parse(args: &[String], env: &HashMap<String, String>) -> Result<Parsed, String> {
    // Gather (source name, flag, value) in increasing precedence; later wins,
    // except --antagonist, which accumulates within the winning source.
    let mut settings: Vec<(String, &str, String)> = Vec::new();
    let seed_env: [(&str, &str); 6] = [
        ("PORT", "listen"),
        ("WORK_MULTIPLIER", "slow"),
        ("IO_BOUND_MODE", "mode"),
        ("FAULT_PROBE_MODE", "probe-fault"),
        ("FAULT_TIMEOUT_MS", "fault-timeout"),
        ("FAULT_STALE_OFFSET_MS", "fault-stale-offset"),
    ];
    for (var, flag) in seed_env {
        let Some(v) = env.get(var) else { continue };
        let value = match var {
            "PORT" => {
                let port: u16 = v
                    .trim()
                    .parse()
                    .map_err(|_| format!("PORT: {v:?} is not a port number (0-65535)"))?;
                format!("0.0.0.0:{port}")
            }
            "IO_BOUND_MODE" => match v.trim() {
                "1" | "true" => "io".into(),
                // Anything else keeps the seed's default, cpu.
                _ => "cpu".into(),
            },
            "FAULT_TIMEOUT_MS" | "FAULT_STALE_OFFSET_MS" => {
                let ms: u64 = v
                    .trim()
                    .parse()
                    .map_err(|_| format!("{var}: {v:?} is not a whole number of milliseconds"))?;
                format!("{ms}ms")
            }
            _ => v.clone(),
        };
        settings.push((var.to_string(), flag, value));
    }
    for (flag, _) in FLAGS {
        let var = env_name(flag);
        if let Some(v) = env.get(&var) {
            if *flag == "antagonist" {
                // Several schedules in one variable are separated by ';'.
                for spec in v.split(';').filter(|s| !s.trim().is_empty()) {
                    settings.push((var.clone(), flag, spec.to_string()));
                }
            } else {
                settings.push((var, flag, v.clone()));
            }
        }
    }
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        if arg == "-h" || arg == "--help" {
            return Ok(Parsed::Help);
        }
        let Some(body) = arg.strip_prefix("--") else {
            return Err(format!(
                "unexpected argument {arg:?} (flags look like --name value)"
            ));
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        let Some(&(flag, _)) = FLAGS.iter().find(|(f, _)| *f == name) else {
            return Err(format!("unknown flag --{name} (see --help)"));
        };
        let value = match inline {
            Some(v) => v,
            None => {
                i += 1;
                args.get(i)
                    .cloned()
                    .ok_or_else(|| format!("--{flag}: missing value"))?
            }
        };
        settings.push((format!("--{flag}"), flag, value));
        i += 1;
    }

    let mut cfg = Config {
        seed: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
        ..Config::default()
    };
    // --antagonist: the highest-precedence source that sets it wins as a whole.
    if let Some(src) = settings
        .iter()
        .rev()
        .find(|(_, f, _)| *f == "antagonist")
        .map(|(s, _, _)| s.clone())
    {
        for (_, _, v) in settings
            .iter()
            .filter(|(s, f, _)| *f == "antagonist" && *s == src)
        {
            cfg.antagonists
                .push(Antagonist::parse(v).map_err(|e| format!("{src}: {v:?}: {e}"))?);
        }
    }
    for (src, flag, v) in &settings {
        apply(&mut cfg, flag, v).map_err(|e| format!("{src}: {e}"))?;
    }
    if cfg.mode != Mode::CpuShare {
        if let Some((src, _, _)) = settings
            .iter()
            .find(|(_, f, _)| CPU_SHARE_FLAGS.contains(f))
        {
            return Err(format!("{src}: only valid with --mode cpu-share"));
        }
    } else {
        check_cpu_share(&cfg)?;
    }
    Ok(Parsed::Run(Box::new(cfg)))
}

/// What only the flags together can say is wrong with a cpu-share machine.
fn check_cpu_share(cfg: &Config) -> Result<(), String> {
    let Some(share) = cfg.share else {
        return Err("--share: required with --mode cpu-share (each replica's allocation, a fraction of the machine in (0, 1])".into());
    };
    if share * cfg.replicas as f64 > 1.0 + 1e-9 {
        return Err(format!(
            "--share {share} × --replicas {} = {}: want <= 1 (a machine cannot allocate more than itself)",
            cfg.replicas,
            share * cfg.replicas as f64
        ));
    }
    if !cfg.antagonists.is_empty() {
        return Err(
            "--antagonist: slot antagonists do not apply to --mode cpu-share; use --machine-load"
                .into(),
        );
    }
    if cfg.machine_index >= cfg.machines {
        return Err(format!(
            "--machine-index {}: want < --machines {}",
            cfg.machine_index, cfg.machines
        ));
    }
    Ok(())
}

fn int<T: std::str::FromStr>(v: &str, what: &str) -> Result<T, String> {
    v.trim().parse().map_err(|_| format!("{v:?} is not {what}"))
}

fn positive(v: &str) -> Result<Duration, String> {
    let d = parse_duration(v)?;
    if d.is_zero() {
        return Err("must be positive".into());
    }
    Ok(d)
}

fn apply(cfg: &mut Config, flag: &str, v: &str) -> Result<(), String> {
    match flag {
        "listen" => {
            if v.parse::<std::net::SocketAddr>().is_err() {
                return Err(format!(
                    "{v:?} is not ip:port (e.g. 0.0.0.0:8080, 127.0.0.1:0, [::1]:0)"
                ));
            }
            cfg.listen = v.to_string();
        }
        "addr-file" => {
            if v.is_empty() {
                return Err("empty path".into());
            }
            cfg.addr_file = Some(v.to_string());
        }
        "mode" => {
            cfg.mode = match v {
                "cpu" => Mode::Cpu,
                "io" => Mode::Io,
                "sleep" => Mode::Sleep,
                "cpu-share" => Mode::CpuShare,
                _ => return Err(format!("{v:?} is not one of cpu, io, sleep, cpu-share")),
            }
        }
        "service-time" => cfg.service_time = parse_duration(v)?,
        "cpu-rounds" => cfg.cpu_rounds = int(v, "a non-negative integer")?,
        "distribution" => cfg.distribution = Distribution::parse(v)?,
        "slow" => {
            let f: f64 = v
                .trim()
                .parse()
                .map_err(|_| format!("{v:?} is not a number"))?;
            if !f.is_finite() || f < 0.0 {
                return Err(format!("{v:?} must be a finite number >= 0"));
            }
            cfg.slow = f;
        }
        "concurrency" => cfg.concurrency = int(v, "a non-negative integer (0 = unlimited)")?,
        "queue-limit" => cfg.queue_limit = int(v, "a non-negative integer")?,
        "antagonist" => {} // handled as a whole in parse
        "probe-fault" => {
            cfg.probe_fault = match v {
                "none" | "" => ProbeFault::None,
                "timeout" => ProbeFault::Timeout,
                "500" => ProbeFault::Status500,
                "malformed" => ProbeFault::Malformed,
                "stale_timestamp" | "stale" => ProbeFault::StaleTimestamp,
                _ => {
                    return Err(format!(
                        "{v:?} is not one of none, timeout, 500, malformed, stale_timestamp"
                    ))
                }
            }
        }
        "fault-timeout" => cfg.fault_timeout = parse_duration(v)?,
        "fault-stale-offset" => cfg.fault_stale_offset = parse_duration(v)?,
        "work-fault" => {
            cfg.work_fault = match v {
                "none" => WorkFault::None,
                "fail_fast" => WorkFault::FailFast,
                "hang" => WorkFault::Hang,
                _ => return Err(format!("{v:?} is not one of none, fail_fast, hang")),
            }
        }
        "latency-window" => cfg.latency_window = parse_duration(v)?,
        "latency-idle-max-age" => cfg.latency_idle_max_age = parse_duration(v)?,
        "seed" => cfg.seed = int(v, "a non-negative integer")?,
        "request-timeout" => cfg.request_timeout = positive(v)?,
        "idle-timeout" => cfg.idle_timeout = positive(v)?,
        "first-request-timeout" => cfg.first_request_timeout = positive(v)?,
        "probe-reserve" => cfg.probe_reserve = int(v, "a non-negative integer")?,
        "max-connections" => {
            cfg.max_connections = int(v, "a positive integer")?;
            if cfg.max_connections == 0 {
                return Err("0 is not a positive integer".into());
            }
        }
        "shutdown-grace" => cfg.shutdown_grace = parse_duration(v)?,
        "drain-timeout" => cfg.drain_timeout = parse_duration(v)?,
        "replicas" => {
            cfg.replicas = int(v, "a positive integer")?;
            if cfg.replicas == 0 {
                return Err("0 is not a positive integer".into());
            }
        }
        "share" => {
            let f: f64 = v
                .trim()
                .parse()
                .map_err(|_| format!("{v:?} is not a number"))?;
            if !(f > 0.0 && f <= 1.0) {
                return Err(format!("{v:?} is not a fraction of the machine in (0, 1]"));
            }
            cfg.share = Some(f);
        }
        "cpu-limit" => {
            cfg.hard_limit = match v {
                "soft" => false,
                "hard" => true,
                _ => return Err(format!("{v:?} is not one of soft, hard")),
            }
        }
        "cores" => cfg.cores = int(v, "a non-negative integer (0 = no per-request cap)")?,
        "machine-load" => cfg.machine_load = Some(MachineLoad::parse(v)?),
        "machine-index" => cfg.machine_index = int(v, "a non-negative integer")?,
        "machines" => {
            cfg.machines = int(v, "a positive integer")?;
            if cfg.machines == 0 {
                return Err("0 is not a positive integer".into());
            }
        }
        _ => unreachable!("flag {flag} is in FLAGS but not handled"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    fn run(a: &[&str], env: &[(&str, &str)]) -> Result<Config, String> {
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        match parse(&args(a), &env)? {
            Parsed::Run(c) => Ok(*c),
            Parsed::Help => Err("help".into()),
        }
    }

    #[test]
    fn defaults() {
        let c = run(&["--seed", "3"], &[]).unwrap();
        assert_eq!(
            c,
            Config {
                seed: 3,
                ..Config::default()
            }
        );
    }

    #[test]
    fn latency_idle_max_age_is_5s_unless_set_and_0_turns_it_off() {
        let age = |a: &[&str]| run(a, &[]).unwrap().latency_idle_max_age;
        assert_eq!(age(&[]), Duration::from_secs(5));
        assert_eq!(age(&["--latency-idle-max-age", "0"]), Duration::ZERO);
        assert_eq!(age(&["--latency-idle-max-age", "0s"]), Duration::ZERO);
    }

    #[test]
    fn usage_states_the_idle_max_age_default_in_force() {
        let want = format!(
            "(default {}s; 0: off)",
            crate::estimator::DEFAULT_IDLE_MAX_AGE_MS / 1000
        );
        let line = usage()
            .lines()
            .find(|l| l.contains("--latency-idle-max-age"))
            .map(str::to_owned)
            .unwrap();
        assert!(line.contains(&want), "{line:?} does not say {want:?}");
    }

    #[test]
    fn every_flag_good_value() {
        let c = run(
            &[
                "--listen",
                "127.0.0.1:0",
                "--addr-file=/tmp/a",
                "--mode",
                "cpu",
                "--service-time",
                "500us",
                "--cpu-rounds",
                "3",
                "--distribution",
                "normal",
                "--slow",
                "2.5",
                "--concurrency",
                "0",
                "--queue-limit",
                "7",
                "--antagonist",
                "at=1s,for=2s,capacity=1",
                "--antagonist",
                "at=5s,for=1s,capacity=0,every=10s",
                "--probe-fault",
                "stale_timestamp",
                "--fault-timeout",
                "50ms",
                "--fault-stale-offset",
                "1m",
                "--work-fault",
                "hang",
                "--latency-window",
                "250ms",
                "--latency-idle-max-age",
                "45s",
                "--seed",
                "99",
                "--request-timeout",
                "2s",
                "--idle-timeout",
                "300ms",
                "--max-connections",
                "7",
                "--first-request-timeout",
                "1500ms",
                "--probe-reserve",
                "0",
                "--shutdown-grace",
                "0",
                "--drain-timeout",
                "1m",
            ],
            &[],
        )
        .unwrap();
        assert_eq!(c.listen, "127.0.0.1:0");
        assert_eq!(c.addr_file.as_deref(), Some("/tmp/a"));
        assert_eq!(c.mode, Mode::Cpu);
        assert_eq!(c.service_time, Duration::from_micros(500));
        assert_eq!(c.cpu_rounds, 3);
        assert_eq!(c.distribution, Distribution::Normal);
        assert_eq!(c.slow, 2.5);
        assert_eq!(c.concurrency, 0);
        assert_eq!(c.queue_limit, 7);
        assert_eq!(c.antagonists.len(), 2);
        assert_eq!(c.antagonists[1].every, Some(Duration::from_secs(10)));
        assert_eq!(c.probe_fault, ProbeFault::StaleTimestamp);
        assert_eq!(c.fault_timeout, Duration::from_millis(50));
        assert_eq!(c.fault_stale_offset, Duration::from_secs(60));
        assert_eq!(c.work_fault, WorkFault::Hang);
        assert_eq!(c.latency_window, Duration::from_millis(250));
        assert_eq!(c.latency_idle_max_age, Duration::from_secs(45));
        assert_eq!(c.seed, 99);
        assert_eq!(c.request_timeout, Duration::from_secs(2));
        assert_eq!(c.idle_timeout, Duration::from_millis(300));
        assert_eq!(c.max_connections, 7);
        assert_eq!(c.first_request_timeout, Duration::from_millis(1500));
        assert_eq!(c.probe_reserve, 0);
        assert_eq!(c.shutdown_grace, Duration::ZERO);
        assert_eq!(c.drain_timeout, Duration::from_secs(60));
        for (v, want) in [
            ("none", ProbeFault::None),
            ("timeout", ProbeFault::Timeout),
            ("500", ProbeFault::Status500),
            ("malformed", ProbeFault::Malformed),
        ] {
            assert_eq!(run(&["--probe-fault", v], &[]).unwrap().probe_fault, want);
        }
        assert_eq!(
            run(&["--work-fault", "fail_fast"], &[]).unwrap().work_fault,
            WorkFault::FailFast
        );
        assert_eq!(run(&["--mode", "sleep"], &[]).unwrap().mode, Mode::Sleep);
        assert_eq!(
            run(&["--distribution", "exp"], &[]).unwrap().distribution,
            Distribution::Exp
        );
    }

    #[test]
    fn every_flag_bad_value_names_the_flag() {
        let cases: &[(&str, &str, &str)] = &[
            ("listen", "nowhere", "ip:port"),
            ("addr-file", "", "empty"),
            ("mode", "gpu", "cpu, io, sleep, cpu-share"),
            ("service-time", "20", "unit"),
            ("cpu-rounds", "-1", "non-negative integer"),
            ("distribution", "gamma", "fixed, exp, normal"),
            ("slow", "fast", "number"),
            ("slow", "-1", ">= 0"),
            ("concurrency", "x", "non-negative integer"),
            ("queue-limit", "1.5", "non-negative integer"),
            ("antagonist", "at=1s", "missing"),
            (
                "probe-fault",
                "404",
                "none, timeout, 500, malformed, stale_timestamp",
            ),
            ("fault-timeout", "soon", "want e.g. 20ms"),
            ("fault-stale-offset", "1", "unit"),
            ("work-fault", "slow", "none, fail_fast, hang"),
            ("latency-window", "1", "unit"),
            ("latency-idle-max-age", "soon", "want e.g. 20ms"),
            ("seed", "abc", "non-negative integer"),
            ("request-timeout", "0", "positive"),
            ("idle-timeout", "10", "unit"),
            ("max-connections", "0", "positive integer"),
            ("max-connections", "-3", "positive integer"),
            ("first-request-timeout", "0", "positive"),
            ("probe-reserve", "some", "non-negative integer"),
            ("shutdown-grace", "3", "unit"),
            ("drain-timeout", "x", "want e.g. 20ms"),
            ("replicas", "0", "positive integer"),
            ("share", "1.5", "(0, 1]"),
            ("share", "0", "(0, 1]"),
            ("share", "half", "not a number"),
            ("cpu-limit", "firm", "soft, hard"),
            ("cores", "-2", "non-negative integer"),
            (
                "machine-load",
                "levels=0.1/0.6,hold=4s",
                "one hold per level",
            ),
            ("machine-load", "levels=2,hold=1s", "levels[0]"),
            ("machine-index", "x", "non-negative integer"),
            ("machines", "0", "positive integer"),
        ];
        let mut seen: Vec<&str> = Vec::new();
        for (flag, value, want) in cases {
            let err = run(&[&format!("--{flag}"), value], &[]).expect_err(flag);
            assert!(err.starts_with(&format!("--{flag}: ")), "{flag}: {err}");
            assert!(err.contains(want), "{flag}: {err:?} lacks {want:?}");
            seen.push(flag);
        }
        for (flag, _) in FLAGS {
            assert!(seen.contains(flag), "no bad-value case for --{flag}");
        }
    }

    #[test]
    fn cpu_share_flags() {
        let c = run(
            &[
                "--mode",
                "cpu-share",
                "--replicas",
                "4",
                "--share",
                "0.25",
                "--cpu-limit",
                "hard",
                "--cores",
                "10",
                "--machine-load",
                "levels=0.1/0.6,hold=4s/1s,random",
                "--machine-index",
                "1",
                "--machines",
                "2",
                "--concurrency",
                "0",
            ],
            &[],
        )
        .unwrap();
        assert_eq!(c.mode, Mode::CpuShare);
        assert_eq!(c.replicas, 4);
        assert_eq!(c.share, Some(0.25));
        assert!(c.hard_limit);
        assert_eq!(c.cores, 10);
        let load = c.machine_load.unwrap();
        assert_eq!(load.levels, [0.1, 0.6]);
        assert_eq!(load.hold_ns, [4_000_000_000, 1_000_000_000]);
        assert!(load.random);
        assert_eq!((c.machine_index, c.machines), (1, 2));
        // Defaults, and the environment works as for every flag.
        let c = run(
            &["--mode", "cpu-share"],
            &[
                ("PREQUAL_BACKEND_SHARE", "0.1"),
                ("PREQUAL_BACKEND_MACHINE_LOAD", "levels=0.5,hold=1s"),
            ],
        )
        .unwrap();
        assert_eq!(
            (c.replicas, c.share, c.hard_limit, c.cores),
            (1, Some(0.1), false, 0)
        );
        assert_eq!((c.machine_index, c.machines), (0, 1));
        assert!(!c.machine_load.unwrap().random);
        assert_eq!(
            run(&["--mode", "cpu-share", "--share", "1"], &[])
                .unwrap()
                .machine_load,
            None
        );
        // What only the flags together can get wrong.
        for (a, want) in [
            (&["--mode", "cpu-share"][..], "--share: required"),
            (
                &["--mode", "cpu-share", "--share", "0.3", "--replicas", "4"][..],
                "--share 0.3 × --replicas 4",
            ),
            (
                &[
                    "--mode",
                    "cpu-share",
                    "--share",
                    "0.1",
                    "--antagonist",
                    "at=1s,for=1s,capacity=1",
                ][..],
                "--antagonist: slot antagonists do not apply to --mode cpu-share; use --machine-load",
            ),
            (
                &[
                    "--mode",
                    "cpu-share",
                    "--share",
                    "0.1",
                    "--machine-index",
                    "2",
                    "--machines",
                    "2",
                ][..],
                "--machine-index 2: want < --machines 2",
            ),
            (
                &["--replicas", "2"][..],
                "--replicas: only valid with --mode cpu-share",
            ),
            (
                &["--mode", "io", "--share", "0.5"][..],
                "--share: only valid with --mode cpu-share",
            ),
        ] {
            let err = run(a, &[]).unwrap_err();
            assert!(err.starts_with(want), "{a:?}: {err:?}, want {want:?}");
        }
    }

    #[test]
    fn argument_errors() {
        assert!(run(&["--nope", "1"], &[])
            .unwrap_err()
            .contains("unknown flag --nope"));
        assert!(run(&["--mode"], &[])
            .unwrap_err()
            .contains("--mode: missing value"));
        assert!(run(&["mode"], &[])
            .unwrap_err()
            .contains("unexpected argument"));
        assert_eq!(run(&["--help"], &[]).unwrap_err(), "help");
    }

    #[test]
    fn env_variables_and_precedence() {
        let c = run(
            &["--slow", "3"],
            &[
                ("PREQUAL_BACKEND_SLOW", "2"),
                ("WORK_MULTIPLIER", "16"),
                ("PREQUAL_BACKEND_CONCURRENCY", "9"),
                ("PREQUAL_BACKEND_LATENCY_WINDOW", "2s"),
                (
                    "PREQUAL_BACKEND_ANTAGONIST",
                    "at=1s,for=1s,capacity=1;at=3s,for=1s,capacity=2",
                ),
            ],
        )
        .unwrap();
        assert_eq!(c.slow, 3.0);
        assert_eq!(c.concurrency, 9);
        assert_eq!(c.latency_window, Duration::from_secs(2));
        assert_eq!(c.latency_idle_max_age, Duration::from_secs(5));
        assert_eq!(c.antagonists.len(), 2);
        // A flag replaces the environment's schedules instead of adding to them.
        let c = run(
            &["--antagonist", "at=9s,for=1s,capacity=0"],
            &[("PREQUAL_BACKEND_ANTAGONIST", "at=1s,for=1s,capacity=1")],
        )
        .unwrap();
        assert_eq!(c.antagonists.len(), 1);
        assert_eq!(c.antagonists[0].at, Duration::from_secs(9));
        let err = run(&[], &[("PREQUAL_BACKEND_MODE", "gpu")]).unwrap_err();
        assert!(err.starts_with("PREQUAL_BACKEND_MODE: "), "{err}");
    }

    #[test]
    fn seed_env_names() {
        let c = run(
            &[],
            &[
                ("PORT", "9090"),
                ("WORK_MULTIPLIER", "16"),
                ("IO_BOUND_MODE", "true"),
                ("FAULT_PROBE_MODE", "malformed"),
                ("FAULT_TIMEOUT_MS", "250"),
                ("FAULT_STALE_OFFSET_MS", "60000"),
            ],
        )
        .unwrap();
        assert_eq!(c.listen, "0.0.0.0:9090");
        assert_eq!(c.slow, 16.0);
        assert_eq!(c.mode, Mode::Io);
        assert_eq!(c.probe_fault, ProbeFault::Malformed);
        assert_eq!(c.fault_timeout, Duration::from_millis(250));
        assert_eq!(c.fault_stale_offset, Duration::from_secs(60));
        assert_eq!(run(&[], &[("IO_BOUND_MODE", "0")]).unwrap().mode, Mode::Cpu);
        assert!(run(&[], &[("PORT", "http")])
            .unwrap_err()
            .starts_with("PORT: "));
        assert!(run(&[], &[("FAULT_TIMEOUT_MS", "5s")])
            .unwrap_err()
            .starts_with("FAULT_TIMEOUT_MS: "));
        // The new names win over the seed's.
        assert_eq!(
            run(
                &[],
                &[("PORT", "9090"), ("PREQUAL_BACKEND_LISTEN", "127.0.0.1:1")]
            )
            .unwrap()
            .listen,
            "127.0.0.1:1"
        );
    }
}
