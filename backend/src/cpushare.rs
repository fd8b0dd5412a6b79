//! The cpu-share model of one machine, a port of sim/cpushare.go (whose
//! README section "The cpu-share model" gives the equations): replicas with
//! an allocation of `share` of the machine, processor sharing inside each,
//! max-min fair division of what the co-tenant antagonist leaves, a soft
//! (may borrow idle CPU) or hard limit, and an optional one-core cap per
//! request. It is a fluid: no CPU is burnt, the work a request has received
//! is computed from the rates.
//!
//! Pure: no I/O, no clock. Time is passed in as ns since the machine
//! started, so tests drive it with a fake clock and the shared vectors
//! (testdata/cpushare-vectors.json) replay exactly what sim computes.
//! machine.rs runs it on wall time. The thread cap is not here: the
//! server's gate (FIFO, queue limit, clients that leave) admits requests
//! into the model, as sim's psArrive admits them into service.
//!
//! Units: rates in allocations (1 = a replica running exactly at its
//! share), work in ns at the allocation's speed.

use crate::dist::Rng;
use crate::duration::parse_duration;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Never (no event scheduled).
pub const NEVER: u64 = u64::MAX;

/// The co-tenant's demand, a fraction of the machine: `levels[k]` held for
/// `hold_ns[k]`, cyclic (staggered by machine index) or, with `random`,
/// exponential holds of those means from a seeded random start. No levels:
/// no antagonist.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MachineLoad {
    pub levels: Vec<f64>,
    pub hold_ns: Vec<u64>,
    pub random: bool,
}

impl MachineLoad {
    /// Parses "levels=0.1/0.6,hold=4s/1s[,random]".
    pub fn parse(spec: &str) -> Result<MachineLoad, String> {
        let mut load = MachineLoad::default();
        let (mut levels, mut holds) = (None, None);
        for part in spec.split(',').map(str::trim) {
            if part == "random" {
                load.random = true;
                continue;
            }
            let Some((key, value)) = part.split_once('=') else {
                return Err(format!(
                    "{part:?} is not key=value (want levels=0.1/0.6,hold=4s/1s[,random])"
                ));
            };
            match key.trim() {
                "levels" => levels = Some(value),
                "hold" => holds = Some(value),
                other => return Err(format!("unknown key {other:?} (want levels, hold, random)")),
            }
        }
        let levels = levels.ok_or("missing levels=")?;
        let holds = holds.ok_or("missing hold=")?;
        for (k, v) in levels.split('/').enumerate() {
            let f: f64 = v
                .trim()
                .parse()
                .map_err(|_| format!("levels[{k}]: {v:?} is not a number"))?;
            if !(0.0..=1.0).contains(&f) {
                return Err(format!(
                    "levels[{k}]: {f} is not a fraction of the machine in [0, 1]"
                ));
            }
            load.levels.push(f);
        }
        for (k, v) in holds.split('/').enumerate() {
            let d = parse_duration(v.trim()).map_err(|e| format!("hold[{k}]: {e}"))?;
            if d.is_zero() {
                return Err(format!("hold[{k}]: must be > 0"));
            }
            load.hold_ns
                .push(d.as_nanos().min(u64::MAX as u128 / 2) as u64);
        }
        if load.levels.len() != load.hold_ns.len() {
            return Err(format!(
                "{} levels and {} holds: want one hold per level",
                load.levels.len(),
                load.hold_ns.len()
            ));
        }
        Ok(load)
    }
}

/// One machine's settings (sim's CPUShare for one machine).
#[derive(Debug, Clone, PartialEq)]
pub struct MachineConfig {
    /// Each replica's allocation, a fraction of the machine.
    pub share: f64,
    pub replicas: usize,
    /// Caps a replica at its allocation even when the machine idles.
    pub hard: bool,
    /// One request runs on at most one of this many cores (0: no cap).
    pub cores: u32,
    pub load: MachineLoad,
    /// This machine is `index` of `machines`: a cyclic antagonist starts at
    /// phase index/machines of its cycle.
    pub index: usize,
    pub machines: usize,
}

/// A finish tag ordered by value, then by request id (a total order, so
/// it can sit in a heap).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Tag(f64, u64);

impl Eq for Tag {}

impl PartialOrd for Tag {
    fn partial_cmp(&self, other: &Tag) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Tag {
    fn cmp(&self, other: &Tag) -> Ordering {
        self.0.total_cmp(&other.0).then(self.1.cmp(&other.1))
    }
}

/// A replica's processor sharing: its requests in service progress
/// together on a virtual clock `v` (work received by each); each leaves
/// when `v` reaches its finish tag.
#[derive(Debug, Default)]
struct Replica {
    rate: f64,
    v: f64,
    tags: BinaryHeap<Reverse<Tag>>,
    /// When its first tag comes due at the current speed (NEVER: none).
    /// Recomputed only when its speed or request count changes, as sim
    /// reschedules its event only then, so both round alike.
    due: u64,
}

impl Replica {
    fn per_request(&self) -> f64 {
        match self.tags.len() {
            0 => 0.0,
            n => self.rate / n as f64,
        }
    }
}

pub struct Model {
    /// The machine in allocations: 1/share.
    capacity: f64,
    /// One request's cap (one core) in allocations; infinite without cores.
    per_req: f64,
    hard: bool,
    load: MachineLoad,
    level: usize,
    /// The antagonist's demand now, in allocations.
    demand: f64,
    next_step: u64,
    /// Time the replicas' progress was advanced to.
    last: u64,
    rng: Rng,
    reps: Vec<Replica>,
    caps: Vec<f64>,
    rates: Vec<f64>,
}

/// Max-min fair division (progressive filling, equal weights) of
/// `available` among demands capped at `caps`: nobody gets more than its
/// cap, and what a capped one leaves goes to the rest. Writes `rates`.
pub fn share_rates(available: f64, caps: &[f64], rates: &mut Vec<f64>) {
    rates.clear();
    rates.resize(caps.len(), 0.0);
    let mut idx: Vec<usize> = (0..caps.len()).filter(|&i| caps[i] > 0.0).collect();
    idx.sort_by(|&a, &b| caps[a].total_cmp(&caps[b]));
    let mut left = available.max(0.0);
    for (k, &i) in idx.iter().enumerate() {
        let fair = left / (idx.len() - k) as f64;
        let r = caps[i].min(fair);
        rates[i] = r;
        left -= r;
    }
}

impl Model {
    /// The machine at time 0, every replica idle, the antagonist placed as
    /// sim's start(index, of) places it (`seed` drives random schedules).
    pub fn new(cfg: &MachineConfig, seed: u64) -> Model {
        let mut m = Model {
            capacity: 1.0 / cfg.share,
            per_req: if cfg.cores > 0 {
                1.0 / (cfg.share * cfg.cores as f64)
            } else {
                f64::INFINITY
            },
            hard: cfg.hard,
            load: cfg.load.clone(),
            level: 0,
            demand: 0.0,
            next_step: NEVER,
            last: 0,
            rng: Rng::new(seed),
            reps: (0..cfg.replicas)
                .map(|_| Replica {
                    due: NEVER,
                    ..Replica::default()
                })
                .collect(),
            caps: Vec::new(),
            rates: Vec::new(),
        };
        m.next_step = m.start(cfg.index as u128, cfg.machines.max(1) as u128);
        m
    }

    fn start(&mut self, index: u128, of: u128) -> u64 {
        let n = self.load.levels.len();
        if n == 0 {
            return NEVER;
        }
        if self.load.random {
            let k = (self.rng.next_u64() % n as u64) as usize;
            self.set_level(k);
            return self.hold(self.level);
        }
        let cycle: u128 = self.load.hold_ns.iter().map(|&h| h as u128).sum();
        let mut phase = cycle * index / of;
        for k in 0..n {
            let h = self.load.hold_ns[k] as u128;
            if phase < h {
                self.set_level(k);
                return (h - phase) as u64;
            }
            phase -= h;
        }
        1 // unreachable: phase < cycle
    }

    fn set_level(&mut self, k: usize) {
        self.level = k;
        self.demand = self.load.levels[k] * self.capacity;
    }

    fn hold(&mut self, k: usize) -> u64 {
        let mut h = self.load.hold_ns[k] as f64;
        if self.load.random {
            h *= -self.rng.next_open01().ln();
        }
        (h as u64).max(1)
    }

    /// The antagonist's level now, a fraction of the machine (0 without one).
    pub fn antagonist_level(&self) -> f64 {
        self.load.levels.get(self.level).copied().unwrap_or(0.0)
    }

    /// Replica k's CPU rate now, in allocations.
    pub fn rate(&self, k: usize) -> f64 {
        self.reps[k].rate
    }

    /// Requests of replica k in service.
    #[cfg(test)]
    pub fn in_service(&self, k: usize) -> usize {
        self.reps[k].tags.len()
    }

    /// When the next completion or antagonist step is due (NEVER: none).
    pub fn next_event(&self) -> u64 {
        self.reps
            .iter()
            .map(|r| r.due)
            .fold(self.next_step, u64::min)
    }

    /// Request `id` of replica k enters service at `now` with `work_ns` of
    /// work. Call `poll(now)` first, so that what was due happened first.
    pub fn arrive(&mut self, now: u64, k: usize, id: u64, work_ns: u64) {
        let now = now.max(self.last);
        self.advance(now);
        let r = &mut self.reps[k];
        r.tags.push(Reverse(Tag(r.v + work_ns as f64, id)));
        self.reshare(now, Some(k));
    }

    /// Processes every completion and antagonist step due at or before
    /// `now`, each at its own time, in time order; appends the finished
    /// requests as (replica, id, finish time).
    pub fn poll(&mut self, now: u64, done: &mut Vec<(usize, u64, u64)>) {
        loop {
            let (at, who) = self
                .reps
                .iter()
                .enumerate()
                .map(|(k, r)| (r.due, Some(k)))
                .fold((self.next_step, None), |a, b| if b.0 < a.0 { b } else { a });
            if at > now || at == NEVER {
                return;
            }
            self.advance(at);
            match who {
                Some(k) => {
                    let r = &mut self.reps[k];
                    let Some(Reverse(Tag(tag, id))) = r.tags.pop() else {
                        r.due = NEVER;
                        continue;
                    };
                    r.v = r.v.max(tag);
                    done.push((k, id, at));
                    self.reshare(at, Some(k));
                }
                None => {
                    self.set_level((self.level + 1) % self.load.levels.len());
                    self.next_step = at.saturating_add(self.hold(self.level));
                    self.reshare(at, None);
                }
            }
        }
    }

    /// Brings every replica's virtual clock to `now`.
    fn advance(&mut self, now: u64) {
        if now > self.last {
            let dt = (now - self.last) as f64;
            for r in &mut self.reps {
                r.v += dt * r.per_request();
            }
            self.last = now;
        }
    }

    /// How much CPU replica k could use now, in allocations.
    fn demand_cap(&self, k: usize) -> f64 {
        let n = self.reps[k].tags.len();
        if n == 0 {
            return 0.0;
        }
        let c = n as f64 * self.per_req;
        if self.hard {
            c.min(1.0)
        } else {
            c
        }
    }

    /// Recomputes the rates after the demand changed and replans the next
    /// completion of every replica whose rate changed, and of `changed`,
    /// whose request count did.
    fn reshare(&mut self, now: u64, changed: Option<usize>) {
        let mut caps = std::mem::take(&mut self.caps);
        caps.clear();
        caps.extend((0..self.reps.len()).map(|k| self.demand_cap(k)));
        share_rates(self.capacity - self.demand, &caps, &mut self.rates);
        self.caps = caps;
        for k in 0..self.reps.len() {
            let r = &mut self.reps[k];
            if r.rate == self.rates[k] && changed != Some(k) {
                continue;
            }
            r.rate = self.rates[k];
            let speed = r.per_request();
            r.due = match r.tags.peek() {
                Some(Reverse(Tag(tag, _))) if speed > 0.0 => {
                    let left = (tag - r.v).max(0.0);
                    now.saturating_add((left / speed).ceil() as u64)
                }
                // Nothing in service, or the antagonist holds the machine.
                _ => NEVER,
            };
        }
    }
}

/// Replays arrivals `(t_ns, replica, work_ns)` (in time order) on a fresh
/// model with a thread cap per replica (0: none; beyond it FIFO, as the
/// server's gate) and returns each arrival's finish time in ns. For tests:
/// the unit tests here and tests/cpushare_vectors.rs.
#[cfg(test)]
pub fn replay(cfg: &MachineConfig, threads: usize, arrivals: &[(u64, usize, u64)]) -> Vec<u64> {
    use std::collections::VecDeque;
    struct Run<'a> {
        m: Model,
        arrivals: &'a [(u64, usize, u64)],
        threads: usize,
        fifo: Vec<VecDeque<usize>>,
        finish: Vec<u64>,
        left: usize,
        done: Vec<(usize, u64, u64)>,
    }
    impl Run<'_> {
        /// Processes the model's events up to `until`; a finish starts
        /// the replica's next FIFO waiter at once, as the gate does.
        fn until(&mut self, until: u64) {
            loop {
                let at = self.m.next_event();
                if at > until || at == NEVER {
                    return;
                }
                self.m.poll(at, &mut self.done);
                for (k, id, at) in std::mem::take(&mut self.done) {
                    self.finish[id as usize] = at;
                    self.left -= 1;
                    if let Some(j) = self.fifo[k].pop_front() {
                        self.m.arrive(at, k, j as u64, self.arrivals[j].2);
                    }
                }
            }
        }

        fn arrive(&mut self, i: usize) {
            let (t, k, work) = self.arrivals[i];
            self.until(t);
            if self.threads > 0 && self.m.in_service(k) >= self.threads {
                self.fifo[k].push_back(i);
            } else {
                self.m.arrive(t, k, i as u64, work);
            }
        }
    }
    let mut run = Run {
        m: Model::new(cfg, 1),
        arrivals,
        threads,
        fifo: vec![VecDeque::new(); cfg.replicas],
        finish: vec![NEVER; arrivals.len()],
        left: arrivals.len(),
        done: Vec::new(),
    };
    for i in 0..arrivals.len() {
        run.arrive(i);
    }
    // Steps of a cyclic antagonist go on for ever: stop once all are done.
    while run.left > 0 {
        let at = run.m.next_event();
        assert!(at != NEVER, "requests that never finish");
        run.until(at);
    }
    run.finish
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn machine(share: f64, replicas: usize) -> MachineConfig {
        MachineConfig {
            share,
            replicas,
            hard: false,
            cores: 0,
            load: MachineLoad::default(),
            index: 0,
            machines: 1,
        }
    }

    /// sim's TestCPUShare_AntagonistStepClosedForm: machine = 2 allocations
    /// (share 0.5); the antagonist wants half the machine from 50 ms on.
    fn step_load() -> MachineLoad {
        MachineLoad {
            levels: vec![0.0, 0.5],
            hold_ns: vec![50 * MS, 3_600_000 * MS],
            random: false,
        }
    }

    fn us(v: Vec<u64>) -> Vec<u64> {
        v.into_iter().map(|ns| (ns + 500) / 1000).collect()
    }

    #[test]
    fn antagonist_step_closed_form() {
        let half = |replicas, hard, cores| MachineConfig {
            hard,
            cores,
            load: step_load(),
            ..machine(0.5, replicas)
        };
        // Two replicas, two requests on A and one on B, 100 ms each: until
        // 50 ms each replica runs at 1 (A's do 25 each, B's 50); then the 1
        // allocation left splits 0.5/0.5: B is done at 150; A's get 25 more
        // by then, then A alone at 1 does the last 50 by 250.
        let got = replay(
            &half(2, false, 0),
            0,
            &[(0, 0, 100 * MS), (0, 1, 100 * MS), (0, 0, 100 * MS)],
        );
        assert_eq!(us(got), [250_000, 150_000, 250_000]);
        // Alone with 300 ms: soft borrows the idle allocation (2 until 50
        // ms, 100 done, then 1 for 200): 250; hard stays at 1: 300; one
        // core per request (cores 2 = one allocation) cannot borrow: 300.
        for (hard, cores, want) in [(false, 0, 250_000), (true, 0, 300_000), (false, 2, 300_000)] {
            let got = replay(&half(1, hard, cores), 0, &[(0, 0, 300 * MS)]);
            assert_eq!(us(got), [want], "hard {hard} cores {cores}");
        }
        // Thread cap 1: FIFO, 100 and 200; without a cap they share: 200, 200.
        let two = [(0, 0, 100 * MS), (0, 0, 100 * MS)];
        assert_eq!(us(replay(&machine(1.0, 1), 1, &two)), [100_000, 200_000]);
        assert_eq!(us(replay(&machine(1.0, 1), 0, &two)), [200_000, 200_000]);
    }

    #[test]
    fn share_rates_max_min_fair() {
        let inf = f64::INFINITY;
        let cases: &[(f64, &[f64], &[f64])] = &[
            (
                10.0,
                &[inf, inf, 0.0, inf],
                &[10.0 / 3.0, 10.0 / 3.0, 0.0, 10.0 / 3.0],
            ),
            (10.0, &[1.0, inf, 1.0], &[1.0, 8.0, 1.0]),
            (1.0, &[1.0, 1.0, 1.0, 1.0], &[0.25, 0.25, 0.25, 0.25]),
            (-3.0, &[1.0, inf], &[0.0, 0.0]),
        ];
        let mut rates = Vec::new();
        for (avail, caps, want) in cases {
            share_rates(*avail, caps, &mut rates);
            for (g, w) in rates.iter().zip(want.iter()) {
                assert!(
                    (g - w).abs() < 1e-12,
                    "{avail} {caps:?}: {rates:?}, want {want:?}"
                );
            }
        }
    }

    /// M/G/1-PS: one replica holding its whole machine, Poisson arrivals at
    /// ρ = 0.8, fixed 20 ms work. Sharing gives a mean response of
    /// 1/(μ − λ) = 100 ms; FIFO would give Pollaczek-Khinchine's 60 ms.
    #[test]
    fn mg1_ps_mean_response() {
        let (work, n) = (20 * MS, 200_000);
        let lambda = 0.8 / work as f64; // per ns
        let mut rng = Rng::new(5);
        let mut t = 0.0;
        let arrivals: Vec<(u64, usize, u64)> = (0..n)
            .map(|_| {
                t += -rng.next_open01().ln() / lambda;
                (t as u64, 0, work)
            })
            .collect();
        let finish = replay(&machine(1.0, 1), 0, &arrivals);
        let mean = arrivals
            .iter()
            .zip(&finish)
            .map(|(a, f)| (f - a.0) as f64)
            .sum::<f64>()
            / n as f64
            / MS as f64;
        assert!(
            (mean - 100.0).abs() / 100.0 < 0.04,
            "mean {mean:.2} ms, want 100 ± 4%"
        );
    }

    /// A random antagonist holds level k for an exponential time of mean
    /// hold[k] (sim's schedule), starts at either level, and so spends
    /// hold[k] / Σ hold of its time at level k. Seeded: exact every run.
    #[test]
    fn random_holds_are_exponential_with_the_given_means() {
        let load = MachineLoad {
            levels: vec![0.1, 0.6],
            hold_ns: vec![400 * MS, 100 * MS],
            random: true,
        };
        let (mut time, mut count, mut above_mean) = ([0u64; 2], [0u64; 2], [0u64; 2]);
        let mut starts = [0u32; 2];
        for seed in 0..200u64 {
            let mut m = Model::new(
                &MachineConfig {
                    load: load.clone(),
                    ..machine(0.25, 4)
                },
                seed,
            );
            starts[usize::from(m.antagonist_level() > 0.5)] += 1;
            let mut now = 0;
            for _ in 0..50 {
                let k = usize::from(m.antagonist_level() > 0.5);
                let t = m.next_event();
                let held = t - now;
                time[k] += held;
                count[k] += 1;
                above_mean[k] += u64::from(held > load.hold_ns[k]);
                now = t;
                m.poll(t, &mut Vec::new());
            }
        }
        assert!(
            starts[0] > 60 && starts[1] > 60,
            "random start levels {starts:?}"
        );
        for k in 0..2 {
            let mean = time[k] as f64 / count[k] as f64 / load.hold_ns[k] as f64;
            // An exponential's mean over ~5,000 holds: within 5%; and
            // P(X > mean) = 1/e (0.368), where a uniform would give 0.5.
            let tail = above_mean[k] as f64 / count[k] as f64;
            assert!(
                (mean - 1.0).abs() < 0.05,
                "level {k}: mean hold {mean:.3} of hold[{k}]"
            );
            assert!(
                (tail - 0.368).abs() < 0.03,
                "level {k}: P(hold > mean) = {tail:.3}, want 1/e"
            );
        }
    }

    #[test]
    fn cyclic_start_is_staggered_and_random_start_is_seeded() {
        let load = MachineLoad {
            levels: vec![0.1, 0.6],
            hold_ns: vec![400 * MS, 100 * MS],
            random: false,
        };
        let at = |index, machines| {
            let m = Model::new(
                &MachineConfig {
                    load: load.clone(),
                    index,
                    machines,
                    ..machine(0.25, 4)
                },
                1,
            );
            (m.antagonist_level(), m.next_event())
        };
        assert_eq!(at(0, 1), (0.1, 400 * MS));
        // Phase 1/2 of 500 ms: 250 ms into the 400 ms level.
        assert_eq!(at(1, 2), (0.1, 150 * MS));
        // Phase 4/5: 400 ms, the start of the 100 ms level.
        assert_eq!(at(4, 5), (0.6, 100 * MS));
        let random = |seed| {
            let mut m = Model::new(
                &MachineConfig {
                    load: MachineLoad {
                        random: true,
                        ..load.clone()
                    },
                    ..machine(0.25, 4)
                },
                seed,
            );
            let mut steps = Vec::new();
            for _ in 0..4 {
                let t = m.next_event();
                steps.push((m.antagonist_level(), t));
                m.poll(t, &mut Vec::new());
            }
            steps
        };
        assert_eq!(random(3), random(3));
        assert_ne!(random(3), random(4));
        // Levels alternate; holds are exponential, not the means.
        let s = random(3);
        assert_ne!(s[0].0, s[1].0);
        assert!(s.windows(2).all(|w| w[1].1 > w[0].1));
    }

    #[test]
    fn machine_load_parses_and_names_what_is_wrong() {
        assert_eq!(
            MachineLoad::parse("levels=0.1/0.6,hold=4s/1s,random"),
            Ok(MachineLoad {
                levels: vec![0.1, 0.6],
                hold_ns: vec![4_000 * MS, 1_000 * MS],
                random: true
            })
        );
        assert!(!MachineLoad::parse("levels=0.5,hold=1s").unwrap().random);
        for (bad, want) in [
            ("levels=0.1/0.6,hold=4s", "one hold per level"),
            ("levels=1.5,hold=1s", "levels[0]"),
            ("levels=x,hold=1s", "levels[0]"),
            ("levels=0.5,hold=0s", "hold[0]"),
            ("levels=0.5,hold=1", "hold[0]"),
            ("hold=1s", "missing levels"),
            ("levels=0.5", "missing hold"),
            ("levels=0.5,hold=1s,every=2s", "unknown key"),
            ("levels=0.5,hold=1s,rand", "key=value"),
        ] {
            let err = MachineLoad::parse(bad).unwrap_err();
            assert!(err.contains(want), "{bad}: {err:?} lacks {want:?}");
        }
    }
}
