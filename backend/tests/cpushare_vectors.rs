//! The cpu-share model against the vectors it shares with sim's
//! (sim/cpushare.go, replayed there by sim/cpushare_vectors_test.go):
//! backend/testdata/cpushare-vectors.json gives machine settings,
//! arrivals, and the µs at which each must finish
//! (testdata/cpushare-vectors.md).

#[allow(dead_code)]
#[path = "../src/cpushare.rs"]
mod cpushare;
#[allow(dead_code)]
#[path = "../src/dist.rs"]
mod dist;
#[allow(dead_code)]
#[path = "../src/duration.rs"]
mod duration;
#[path = "support/json.rs"]
mod json;

use cpushare::{replay, MachineConfig, MachineLoad};
use json::{get, Json, Parser};

fn num(o: &Json, key: &str) -> Option<f64> {
    match get(o, key) {
        Some(Json::Num(v, _)) => Some(*v),
        None => None,
        other => panic!("{key}: {other:?}"),
    }
}

fn nums(o: &Json, key: &str) -> Vec<f64> {
    match get(o, key) {
        Some(Json::Arr(a)) => a
            .iter()
            .map(|v| match v {
                Json::Num(v, _) => *v,
                other => panic!("{key}: {other:?}"),
            })
            .collect(),
        None => Vec::new(),
        other => panic!("{key}: {other:?}"),
    }
}

#[test]
fn cpushare_model_matches_shared_vectors() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/cpushare-vectors.json"
    );
    let text = std::fs::read(path).expect("read vectors");
    let root = Parser { s: &text, i: 0 }.value();
    let Some(Json::Arr(cases)) = get(&root, "cases") else {
        panic!("no cases")
    };
    assert!(cases.len() >= 10, "only {} cases", cases.len());
    for case in cases {
        let Some(Json::Str(name)) = get(case, "name") else {
            panic!("case without name")
        };
        let cfg = MachineConfig {
            share: num(case, "share").expect("share"),
            replicas: num(case, "replicas").expect("replicas") as usize,
            hard: matches!(get(case, "hard"), Some(Json::Bool(true))),
            cores: num(case, "cores").unwrap_or(0.0) as u32,
            load: MachineLoad {
                levels: nums(case, "levels"),
                hold_ns: nums(case, "hold_ms")
                    .iter()
                    .map(|ms| (ms * 1e6) as u64)
                    .collect(),
                random: false,
            },
            index: num(case, "machine").unwrap_or(0.0) as usize,
            machines: num(case, "machines").unwrap_or(1.0) as usize,
        };
        let threads = num(case, "threads").unwrap_or(0.0) as usize;
        let Some(Json::Arr(rows)) = get(case, "arrivals") else {
            panic!("{name}: no arrivals")
        };
        let rows: Vec<Vec<f64>> = rows
            .iter()
            .map(|r| match r {
                Json::Arr(v) => v
                    .iter()
                    .map(|x| match x {
                        Json::Num(x, _) => *x,
                        other => panic!("{name}: {other:?}"),
                    })
                    .collect(),
                other => panic!("{name}: {other:?}"),
            })
            .collect();
        let arrivals: Vec<(u64, usize, u64)> = rows
            .iter()
            .map(|r| ((r[0] * 1e6) as u64, r[1] as usize, (r[2] * 1e6) as u64))
            .collect();
        let finish = replay(&cfg, threads, &arrivals);
        for (k, (row, ns)) in rows.iter().zip(&finish).enumerate() {
            let got_us = (*ns as f64 / 1e3).round() as u64;
            assert_eq!(
                got_us, row[3] as u64,
                "{name}: arrival {k} {row:?} finished at {ns} ns"
            );
        }
    }
}
