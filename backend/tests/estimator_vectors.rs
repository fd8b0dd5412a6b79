//! The estimator against the test vectors it shares with its Go model
//! (sim/estimator.go): backend/testdata/estimator-vectors.json lists
//! records and the answer each probe must give. Both layouts of the file
//! are read: cases with "events" (testdata/estimator-vectors.md) and the
//! first version's cases with "ops".

#[allow(dead_code)]
#[path = "../src/estimator.rs"]
mod estimator;

use estimator::{Estimate, Estimator, DEFAULT_IDLE_MAX_AGE_MS};
#[path = "support/json.rs"]
mod json;

use json::{get, Json, Parser};

/// An integer field, exact (no f64 round trip); absent means 0.
fn int(o: &Json, key: &str) -> u64 {
    match get(o, key) {
        Some(Json::Num(_, text)) => text.parse().expect(key),
        None => 0,
        other => panic!("{key}: {other:?}"),
    }
}

fn float(o: &Json, key: &str) -> Option<f64> {
    match get(o, key) {
        Some(Json::Num(v, _)) => Some(*v),
        None | Some(Json::Null) => None,
        other => panic!("{key}: {other:?}"),
    }
}

#[test]
fn estimator_matches_shared_vectors() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/estimator-vectors.json"
    );
    let text = std::fs::read(path).expect("read vectors");
    let root = Parser { s: &text, i: 0 }.value();
    let Some(Json::Arr(cases)) = get(&root, "cases") else {
        panic!("no cases")
    };
    assert!(cases.len() >= 10, "only {} cases", cases.len());
    let mut estimates = 0;
    for case in cases {
        let name = match get(case, "name") {
            Some(Json::Str(s)) => s.clone(),
            _ => panic!("case without name"),
        };
        if let Some(Json::Arr(events)) = get(case, "events") {
            // Without idle_max_age_ms a case runs at the backend's default.
            let idle_max_age_ms = match get(case, "idle_max_age_ms") {
                Some(_) => int(case, "idle_max_age_ms"),
                None => DEFAULT_IDLE_MAX_AGE_MS,
            };
            let e =
                Estimator::new(int(case, "window_ms") * MS).with_idle_max_age(idle_max_age_ms * MS);
            estimates += replay_events(&name, e, events);
            continue;
        }
        let mut e = Estimator::new(int(case, "window_ns"));
        let Some(Json::Arr(ops)) = get(case, "ops") else {
            panic!("{name}: neither events nor ops")
        };
        for (i, op) in ops.iter().enumerate() {
            match get(op, "op") {
                Some(Json::Str(s)) if s == "record" => e.record(
                    int(op, "rif"),
                    float(op, "latency_ms").unwrap_or(0.0),
                    int(op, "finish_ns"),
                ),
                Some(Json::Str(s)) if s == "clear" => e.clear(),
                Some(Json::Str(s)) if s == "estimate" => {
                    estimates += 1;
                    let got = e.estimate(int(op, "rif"), int(op, "now_ns"));
                    let want = Estimate {
                        median_ms: float(op, "want_median_ms"),
                        samples: int(op, "want_samples") as usize,
                    };
                    assert_eq!(got, want, "{name} op {i}");
                }
                other => panic!("{name} op {i}: unknown op {other:?}"),
            }
        }
    }
    assert!(estimates >= 5, "only {estimates} probes");
}

const MS: u64 = 1_000_000;

/// Replays ["record", rif, latency_ms, finish_ms] and ["probe", rif,
/// now_ms, median_ms or null, samples] on e; returns the number of probes.
fn replay_events(name: &str, mut e: Estimator, events: &[Json]) -> usize {
    let mut probes = 0;
    for (i, ev) in events.iter().enumerate() {
        let Json::Arr(f) = ev else {
            panic!("{name} event {i}: not an array")
        };
        let n = |j: usize| match &f[j] {
            Json::Num(_, text) => text.parse::<f64>().unwrap(),
            other => panic!("{name} event {i}: field {j} is {other:?}"),
        };
        match &f[0] {
            Json::Str(k) if k == "record" => e.record(n(1) as u64, n(2), n(3) as u64 * MS),
            Json::Str(k) if k == "probe" => {
                probes += 1;
                let want = Estimate {
                    median_ms: match &f[3] {
                        Json::Null => None,
                        _ => Some(n(3)),
                    },
                    samples: n(4) as usize,
                };
                assert_eq!(
                    e.estimate(n(1) as u64, n(2) as u64 * MS),
                    want,
                    "{name} event {i}"
                );
            }
            other => panic!("{name} event {i}: unknown kind {other:?}"),
        }
    }
    probes
}
