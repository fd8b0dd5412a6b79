//! The latency estimator behind /prequal/probe: every finished /work request
//! is recorded with its RIF at arrival; a probe returns the median latency of
//! recent requests whose arrival RIF is at or near the current RIF.
//!
//! "Recent" has two meanings, chosen by the window:
//!
//! - window 0 (the default): recent by count, as in the paper. Each RIF
//!   bucket contributes its last RECENT samples, however old. After warm-up
//!   a busy replica is never "unknown" (an idle one only past the idle max
//!   age, below), and a replica that gets little traffic
//!   (because it is slow, or because its queue is long) still reports what
//!   its last requests at that RIF saw. With a 1 s time window a replica
//!   serving 10-20 requests/s had a handful of samples, fewer near its
//!   current RIF, and its queue was invisible: in the fleet simulation
//!   (loadbalancer tests; 64 replicas, half with 2x work, 2 slots, 3
//!   clients, 80% load) the time window let the fast half take 79% of
//!   picks and its queues grew (p99 2.6 s); by count: 74%, flat queues,
//!   p99 0.39 s.
//! - window > 0: only samples that finished within the window count, up to
//!   RING per bucket; with none, the answer is "unknown".
//!
//! By count has one failure the paper's busy replicas never meet: a replica
//! whose last samples near RIF 0 came out slow (an antagonist, or an unlucky
//! draw of a wide service time) is avoided by every client, so it gets no
//! new samples and is avoided forever. An idle max age (5 s by default,
//! DEFAULT_IDLE_MAX_AGE_MS; 0 turns it off) bounds that: while the replica
//! is idle (RIF 0) samples older than it do not count, so its answer turns
//! "unknown" and a client sends it one exploratory request, whose sample
//! decides again. Only an idle replica needs it: with a request in flight a
//! fresh sample is on its way. In --env sim (docs/results.md, 2026-12-06)
//! a 30 s age left a slow group's picks max/min at 7-185 on capacity-limited
//! heterogeneous fleets, 5 s at 2.1-2.5, p99 within 1%. An exploration
//! costs a whole request at the replica's speed, so the balancer does not
//! explore every 5 s a replica it remembers as far slower than the rest
//! (prequal's SlowMemory, 30 s: C2's 16x-slow pair).
//! Estimator::new has none; the server applies the configured age.
//!
//! Samples live in per-RIF-bucket ring buffers (bounded memory, O(1) record).
//! Within a ring, samples are in finish order, so a query walks each bucket
//! from newest to oldest and stops at the first aged-out sample (or after
//! RECENT): its cost is bounded by the samples it actually uses. Time is
//! passed in by the caller (nanoseconds on any monotonic clock), so tests
//! use a fake clock. testdata/estimator-vectors.json holds shared test
//! vectors (records in, probe answers out) for this estimator and the
//! simulator's model of it.

/// Samples kept per bucket. At moderate load these span the last few tens
/// of milliseconds, as in the paper.
pub const RING: usize = 64;
/// A query widens to neighbouring buckets until it has this many samples.
pub const MIN_SAMPLES: usize = 5;
/// Without a time window, each bucket contributes its newest RECENT samples.
pub const RECENT: usize = 16;
/// The default idle max age (`--latency-idle-max-age`), in ms (0 would be
/// off). 5 s: see the module comment.
/// The simulator's sim.DefaultIdleMaxAge must agree: the shared vectors'
/// cases without `idle_max_age_ms` run at this default in both.
pub const DEFAULT_IDLE_MAX_AGE_MS: u64 = 5_000;
/// RIF values below this have a bucket each; above it, buckets are
/// geometric (8 per power of two).
const EXACT: u64 = 64;
const SUB_BITS: u32 = 3;
const NUM_BUCKETS: usize = EXACT as usize + 8 * (64 - 6) as usize;

#[derive(Clone, Copy, Default)]
struct Sample {
    latency_ms: f64,
    finish_ns: u64,
}

#[derive(Clone)]
struct Bucket {
    ring: [Sample; RING],
    len: usize,
    next: usize,
}

impl Bucket {
    fn new() -> Bucket {
        Bucket {
            ring: [Sample::default(); RING],
            len: 0,
            next: 0,
        }
    }

    fn push(&mut self, s: Sample) {
        self.ring[self.next] = s;
        self.next = (self.next + 1) % RING;
        self.len = (self.len + 1).min(RING);
    }

    /// Newest finish time, or None when empty.
    fn newest(&self) -> Option<u64> {
        (self.len > 0).then(|| self.ring[(self.next + RING - 1) % RING].finish_ns)
    }

    /// Appends latencies of at most `limit` samples finished at or after
    /// `cutoff`, newest first.
    fn collect_recent(&self, cutoff: u64, limit: usize, out: &mut Vec<f64>) {
        for i in 0..self.len.min(limit) {
            let s = self.ring[(self.next + RING - 1 - i) % RING];
            if s.finish_ns < cutoff {
                break;
            }
            out.push(s.latency_ms);
        }
    }
}

/// The bucket index of a RIF value.
pub fn bucket_of(rif: u64) -> usize {
    if rif < EXACT {
        return rif as usize;
    }
    let msb = 63 - rif.leading_zeros(); // >= 6
    let sub = (rif >> (msb - SUB_BITS)) & ((1 << SUB_BITS) - 1);
    EXACT as usize + ((msb - 6) as usize) * 8 + sub as usize
}

/// What a probe reports about latency.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// None when no sample is recent enough ("unknown", never 0).
    pub median_ms: Option<f64>,
    /// The number of samples the median was taken over.
    pub samples: usize,
}

pub struct Estimator {
    buckets: Vec<Bucket>,
    /// 0: recent by count (RECENT per bucket, no age limit).
    window_ns: u64,
    /// By count, at RIF 0 only: samples older than this do not count (0: off).
    idle_max_age_ns: u64,
    /// Newest finish time over all buckets, to answer "nothing recent" in O(1).
    newest_ns: Option<u64>,
}

impl Estimator {
    /// An estimator over samples younger than `window_ns`, or, with 0, over
    /// the last RECENT samples per RIF bucket whatever their age.
    pub fn new(window_ns: u64) -> Estimator {
        Estimator {
            buckets: vec![Bucket::new(); NUM_BUCKETS],
            window_ns,
            idle_max_age_ns: 0,
            newest_ns: None,
        }
    }

    /// By count (window 0), an idle replica's samples older than
    /// `idle_max_age_ns` do not count, so a replica avoided since a slow
    /// spell answers "unknown" and is explored again. 0 turns it off.
    pub fn with_idle_max_age(mut self, idle_max_age_ns: u64) -> Estimator {
        self.idle_max_age_ns = idle_max_age_ns;
        self
    }

    /// Records a finished request. `finish_ns` must not go backwards
    /// between calls (the caller records under one lock with a monotonic clock).
    pub fn record(&mut self, rif_at_arrival: u64, latency_ms: f64, finish_ns: u64) {
        self.buckets[bucket_of(rif_at_arrival)].push(Sample {
            latency_ms,
            finish_ns,
        });
        self.newest_ns = Some(self.newest_ns.map_or(finish_ns, |n| n.max(finish_ns)));
    }

    /// Drops all history.
    pub fn clear(&mut self) {
        for b in &mut self.buckets {
            b.len = 0;
            b.next = 0;
        }
        self.newest_ns = None;
    }

    /// The median of recent latencies at the current RIF's bucket, widening to
    /// neighbouring buckets (nearest first, both sides per step) until at
    /// least MIN_SAMPLES are found or every bucket has been looked at.
    pub fn estimate(&self, current_rif: u64, now_ns: u64) -> Estimate {
        let (cutoff, limit) = if self.window_ns == 0 {
            if current_rif == 0 && self.idle_max_age_ns > 0 {
                (now_ns.saturating_sub(self.idle_max_age_ns), RECENT)
            } else {
                (0, RECENT)
            }
        } else {
            (now_ns.saturating_sub(self.window_ns), RING)
        };
        let unknown = Estimate {
            median_ms: None,
            samples: 0,
        };
        match self.newest_ns {
            Some(n) if n >= cutoff => {}
            _ => return unknown,
        }
        let centre = bucket_of(current_rif);
        let mut values = Vec::with_capacity(2 * MIN_SAMPLES);
        let take = |i: usize, values: &mut Vec<f64>| {
            let b = &self.buckets[i];
            if b.newest().is_some_and(|n| n >= cutoff) {
                b.collect_recent(cutoff, limit, values);
            }
        };
        take(centre, &mut values);
        let mut d = 1;
        while values.len() < MIN_SAMPLES && (centre >= d || centre + d < NUM_BUCKETS) {
            if centre >= d {
                take(centre - d, &mut values);
            }
            if centre + d < NUM_BUCKETS {
                take(centre + d, &mut values);
            }
            d += 1;
        }
        if values.is_empty() {
            return unknown;
        }
        Estimate {
            median_ms: Some(median(&mut values)),
            samples: values.len(),
        }
    }
}

/// Median; the mean of the two middle values for even counts.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const WINDOW: u64 = 1000 * MS;

    #[test]
    fn unknown_without_history() {
        let e = Estimator::new(WINDOW);
        assert_eq!(
            e.estimate(0, 5 * MS),
            Estimate {
                median_ms: None,
                samples: 0
            }
        );
    }

    #[test]
    fn exact_rif_bucket_first() {
        let mut e = Estimator::new(WINDOW);
        let mut t = 0;
        for i in 0..5 {
            t += MS;
            e.record(2, 10.0 + i as f64, t);
            e.record(3, 100.0, t);
        }
        let got = e.estimate(2, t);
        assert_eq!(got.median_ms, Some(12.0));
        assert_eq!(got.samples, 5);
        assert_eq!(e.estimate(3, t).median_ms, Some(100.0));
    }

    #[test]
    fn widens_to_neighbours_when_exact_bucket_is_thin() {
        let mut e = Estimator::new(WINDOW);
        e.record(5, 50.0, MS);
        e.record(4, 40.0, MS);
        e.record(6, 60.0, MS);
        e.record(3, 30.0, MS);
        e.record(7, 70.0, MS);
        e.record(20, 999.0, MS);
        let got = e.estimate(5, 2 * MS);
        assert_eq!(got.samples, 5);
        assert_eq!(got.median_ms, Some(50.0));
        // Far away but the only data: still used rather than "unknown".
        let mut e = Estimator::new(WINDOW);
        e.record(40, 7.0, MS);
        assert_eq!(e.estimate(0, 2 * MS).median_ms, Some(7.0));
    }

    #[test]
    fn median_of_even_count_is_mean_of_middle_pair() {
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut [5.0]), 5.0);
        let mut e = Estimator::new(WINDOW);
        for (i, v) in [10.0, 20.0, 30.0, 40.0, 50.0, 60.0].iter().enumerate() {
            e.record(1, *v, i as u64 * MS);
        }
        assert_eq!(e.estimate(1, 10 * MS).median_ms, Some(35.0));
    }

    #[test]
    fn ageing_drops_old_samples_then_reports_unknown() {
        let mut e = Estimator::new(WINDOW);
        e.record(0, 500.0, 0);
        e.record(0, 500.0, 100 * MS);
        for i in 0..3 {
            e.record(0, 1.0, 900 * MS + i * MS);
        }
        // At 1050 ms the sample at 0 is out; the one at 100 ms is still in.
        let got = e.estimate(0, 1050 * MS);
        assert_eq!(got.samples, 4);
        assert_eq!(got.median_ms, Some(1.0));
        // Past the window of the newest sample, nothing is recent: unknown.
        let got = e.estimate(0, 902 * MS + WINDOW + 1);
        assert_eq!(got.median_ms, None);
        assert_eq!(got.samples, 0);
    }

    #[test]
    fn ring_is_bounded_and_keeps_newest() {
        let mut e = Estimator::new(WINDOW);
        for i in 0..(RING as u64 * 3) {
            e.record(1, if i < RING as u64 * 2 { 1000.0 } else { 1.0 }, i);
        }
        let got = e.estimate(1, RING as u64 * 3);
        assert_eq!(got.samples, RING);
        assert_eq!(got.median_ms, Some(1.0));
    }

    #[test]
    fn by_count_never_ages_out() {
        let mut e = Estimator::new(0);
        e.record(0, 40.0, 0);
        let got = e.estimate(0, 3600 * 1000 * MS);
        assert_eq!(got.median_ms, Some(40.0));
        assert_eq!(got.samples, 1);
    }

    #[test]
    fn idle_max_age_ends_avoidance_by_old_samples() {
        const AGE: u64 = 30_000 * MS;
        let mut e = Estimator::new(0).with_idle_max_age(AGE);
        for i in 0..RECENT as u64 {
            e.record(0, 400.0, i * MS); // a slow spell
            e.record(1, 500.0, i * MS);
        }
        // Idle and within the age: the slow spell still counts.
        assert_eq!(e.estimate(0, AGE).median_ms, Some(400.0));
        // Idle past it: unknown, so a client explores.
        let late = 20 * MS + AGE;
        assert_eq!(
            e.estimate(0, late),
            Estimate {
                median_ms: None,
                samples: 0
            }
        );
        // Busy: a fresh sample is on its way, the old ones still count.
        assert_eq!(e.estimate(1, late).median_ms, Some(500.0));
        // The exploratory request's sample alone decides at RIF 0.
        e.record(0, 100.0, late);
        let got = e.estimate(0, late + MS);
        assert_eq!(got.median_ms, Some(100.0));
        assert_eq!(got.samples, 1);
        // Off (Estimator::new without an age): old samples never age out.
        let mut off = Estimator::new(0);
        off.record(0, 400.0, 0);
        assert_eq!(off.estimate(0, late).median_ms, Some(400.0));
        // A time window ignores it: the window decides.
        let mut w = Estimator::new(WINDOW).with_idle_max_age(MS);
        w.record(0, 40.0, 0);
        assert_eq!(w.estimate(0, 500 * MS).median_ms, Some(40.0));
    }

    #[test]
    fn by_count_takes_the_newest_recent_samples() {
        let mut e = Estimator::new(0);
        for i in 0..4 {
            e.record(1, 1000.0, i * MS);
        }
        for i in 4..(4 + RECENT as u64) {
            e.record(1, 10.0, i * MS);
        }
        let got = e.estimate(1, 100 * MS);
        assert_eq!(got.samples, RECENT);
        assert_eq!(got.median_ms, Some(10.0));
    }

    #[test]
    fn by_count_a_queue_shows() {
        // Few requests a second at a long queue: a 1 s window has nothing
        // left at RIF 6 and falls back to the idle samples; by count the
        // queue's cost stays visible.
        let mut window = Estimator::new(WINDOW);
        let mut count = Estimator::new(0);
        for e in [&mut window, &mut count] {
            for i in 0..5 {
                e.record(6, 300.0, i * 100 * MS);
            }
            for i in 0..5 {
                e.record(0, 50.0, 1500 * MS + i * MS);
            }
        }
        assert_eq!(count.estimate(6, 1600 * MS).median_ms, Some(300.0));
        assert_eq!(window.estimate(6, 1600 * MS).median_ms, Some(50.0));
    }

    /// A minimal JSON reader for the test vectors: objects, arrays,
    /// numbers, strings without escapes, null.
    #[derive(Debug, Clone)]
    enum J {
        Null,
        Num(f64),
        Str(String),
        Arr(Vec<J>),
        Obj(Vec<(String, J)>),
    }

    impl J {
        fn get(&self, key: &str) -> &J {
            match self {
                J::Obj(kv) => &kv.iter().find(|(k, _)| k == key).expect(key).1,
                _ => panic!("not an object looking for {key}"),
            }
        }
        fn arr(&self) -> &[J] {
            match self {
                J::Arr(a) => a,
                other => panic!("not an array: {other:?}"),
            }
        }
        fn num(&self) -> f64 {
            match self {
                J::Num(n) => *n,
                other => panic!("not a number: {other:?}"),
            }
        }
        fn str(&self) -> &str {
            match self {
                J::Str(s) => s,
                other => panic!("not a string: {other:?}"),
            }
        }
    }

    fn parse_json(s: &[u8], i: &mut usize) -> J {
        while s[*i].is_ascii_whitespace() {
            *i += 1;
        }
        match s[*i] {
            b'{' | b'[' => {
                let obj = s[*i] == b'{';
                *i += 1;
                let (mut kv, mut items) = (Vec::new(), Vec::new());
                loop {
                    while s[*i].is_ascii_whitespace() || s[*i] == b',' {
                        *i += 1;
                    }
                    if s[*i] == b'}' || s[*i] == b']' {
                        *i += 1;
                        return if obj { J::Obj(kv) } else { J::Arr(items) };
                    }
                    if obj {
                        let k = parse_json(s, i);
                        while s[*i] != b':' {
                            *i += 1;
                        }
                        *i += 1;
                        kv.push((k.str().to_string(), parse_json(s, i)));
                    } else {
                        items.push(parse_json(s, i));
                    }
                }
            }
            b'"' => {
                let start = *i + 1;
                *i = start + s[start..].iter().position(|&c| c == b'"').unwrap();
                *i += 1;
                J::Str(String::from_utf8(s[start..*i - 1].to_vec()).unwrap())
            }
            b'n' => {
                *i += 4;
                J::Null
            }
            _ => {
                let start = *i;
                while *i < s.len()
                    && (s[*i] == b'-' || s[*i] == b'.' || s[*i].is_ascii_alphanumeric())
                {
                    *i += 1;
                }
                J::Num(std::str::from_utf8(&s[start..*i]).unwrap().parse().unwrap())
            }
        }
    }

    #[test]
    fn shared_vectors() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/testdata/estimator-vectors.json"
        );
        let text = std::fs::read(path).expect("testdata/estimator-vectors.json");
        let doc = parse_json(&text, &mut 0);
        let cases = doc.get("cases").arr();
        assert!(cases.len() >= 5, "only {} cases", cases.len());
        for c in cases {
            // The first version's "ops" cases are replayed by
            // tests/estimator_vectors.rs.
            let J::Obj(kv) = c else {
                panic!("case is not an object")
            };
            if !kv.iter().any(|(k, _)| k == "events") {
                continue;
            }
            let name = c.get("name").str();
            let idle_max_age_ms = match kv.iter().find(|(k, _)| k == "idle_max_age_ms") {
                Some((_, v)) => v.num() as u64,
                None => DEFAULT_IDLE_MAX_AGE_MS,
            };
            let mut e = Estimator::new(c.get("window_ms").num() as u64 * MS)
                .with_idle_max_age(idle_max_age_ms * MS);
            for (k, ev) in c.get("events").arr().iter().enumerate() {
                let f = ev.arr();
                let n = |j: usize| f[j].num();
                match f[0].str() {
                    "record" => e.record(n(1) as u64, n(2), n(3) as u64 * MS),
                    "probe" => {
                        let got = e.estimate(n(1) as u64, n(2) as u64 * MS);
                        let want = Estimate {
                            median_ms: match &f[3] {
                                J::Null => None,
                                v => Some(v.num()),
                            },
                            samples: n(4) as usize,
                        };
                        assert_eq!(got, want, "case {name:?}, event {k}");
                    }
                    other => panic!("case {name:?}: unknown event {other:?}"),
                }
            }
        }
    }

    #[test]
    fn clear_forgets() {
        let mut e = Estimator::new(WINDOW);
        e.record(0, 3.0, MS);
        e.clear();
        assert_eq!(e.estimate(0, MS).median_ms, None);
    }

    #[test]
    fn buckets_are_monotonic_and_in_range() {
        let mut last = 0;
        for r in (0..5000u64).chain([u64::MAX / 2, u64::MAX]) {
            let b = bucket_of(r);
            assert!(b >= last && b < NUM_BUCKETS, "rif {r} -> {b}");
            last = b;
        }
        assert_eq!(bucket_of(63), 63);
        assert_eq!(bucket_of(64), 64);
        assert_eq!(bucket_of(72), 65);
        assert_eq!(bucket_of(u64::MAX), NUM_BUCKETS - 1);
    }
}
