//! Antagonist schedules: windows of time during which a replica's capacity
//! drops (a co-tenant steals its CPU), then recovers.

use crate::duration::parse_duration;
use std::time::Duration;

/// One capacity drop: from `at` after start, for `for_`, capacity is at most
/// `capacity` slots; with `every`, the drop repeats at at + k*every.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Antagonist {
    pub at: Duration,
    pub for_: Duration,
    pub capacity: usize,
    pub every: Option<Duration>,
}

impl Antagonist {
    /// Parses "at=10s,for=5s,capacity=1[,every=30s]".
    pub fn parse(spec: &str) -> Result<Antagonist, String> {
        let (mut at, mut for_, mut capacity, mut every) = (None, None, None, None);
        for part in spec.split(',') {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not key=value"))?;
            let value = value.trim();
            match key.trim() {
                "at" => at = Some(parse_duration(value).map_err(|e| format!("at: {e}"))?),
                "for" => for_ = Some(parse_duration(value).map_err(|e| format!("for: {e}"))?),
                "capacity" => {
                    capacity = Some(value.parse::<usize>().map_err(|_| {
                        format!("capacity: {value:?} is not a non-negative integer")
                    })?)
                }
                "every" => every = Some(parse_duration(value).map_err(|e| format!("every: {e}"))?),
                other => {
                    return Err(format!(
                        "unknown key {other:?} (want at, for, capacity, every)"
                    ))
                }
            }
        }
        let at = at.ok_or("missing at=")?;
        let for_ = for_.ok_or("missing for=")?;
        let capacity = capacity.ok_or("missing capacity=")?;
        if for_.is_zero() {
            return Err("for: must be positive".into());
        }
        if let Some(e) = every {
            if e < for_ {
                return Err(format!(
                    "every: {e:?} is shorter than for={for_:?} (drops would overlap)"
                ));
            }
        }
        Ok(Antagonist {
            at,
            for_,
            capacity,
            every,
        })
    }

    /// Whether the drop is in effect `elapsed` after start.
    pub fn active(&self, elapsed: Duration) -> bool {
        if elapsed < self.at {
            return false;
        }
        let since = elapsed - self.at;
        let offset = match self.every {
            Some(every) => Duration::from_nanos((since.as_nanos() % every.as_nanos()) as u64),
            None => since,
        };
        offset < self.for_
    }
}

/// The effective capacity `elapsed` after start: the base capacity (0 means
/// unlimited) lowered to the smallest active antagonist's capacity.
/// Returns None for unlimited.
pub fn capacity_at(base: usize, schedule: &[Antagonist], elapsed: Duration) -> Option<usize> {
    let mut cap = if base == 0 { None } else { Some(base) };
    for a in schedule.iter().filter(|a| a.active(elapsed)) {
        cap = Some(cap.map_or(a.capacity, |c| c.min(a.capacity)));
    }
    cap
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn parses_spec() {
        assert_eq!(
            Antagonist::parse("at=10s,for=5s,capacity=1"),
            Ok(Antagonist {
                at: s(10),
                for_: s(5),
                capacity: 1,
                every: None
            })
        );
        assert_eq!(
            Antagonist::parse("capacity=0, at=0 ,for=500ms,every=30s"),
            Ok(Antagonist {
                at: Duration::ZERO,
                for_: Duration::from_millis(500),
                capacity: 0,
                every: Some(s(30))
            })
        );
    }

    #[test]
    fn rejects_bad_specs() {
        let cases = [
            ("", "not key=value"),
            ("at=10s,for=5s", "missing capacity"),
            ("for=5s,capacity=1", "missing at"),
            ("at=1s,capacity=1", "missing for"),
            ("at=1s,for=5s,capacity=-1", "capacity"),
            ("at=1s,for=5s,capacity=1,every=2s", "every"),
            ("at=1s,for=0,capacity=1", "for"),
            ("at=1s,for=5s,capacity=1,color=red", "unknown key"),
            ("at=soon,for=5s,capacity=1", "at:"),
        ];
        for (spec, want) in cases {
            let err = Antagonist::parse(spec).expect_err(spec);
            assert!(
                err.contains(want),
                "spec {spec:?}: error {err:?} lacks {want:?}"
            );
        }
    }

    #[test]
    fn one_shot_window() {
        let a = Antagonist::parse("at=10s,for=5s,capacity=1").unwrap();
        assert!(!a.active(s(9)));
        assert!(a.active(s(10)));
        assert!(a.active(Duration::from_millis(14_999)));
        assert!(!a.active(s(15)));
        assert!(!a.active(s(100)));
    }

    #[test]
    fn repeating_window() {
        let a = Antagonist::parse("at=10s,for=5s,capacity=1,every=30s").unwrap();
        assert!(a.active(s(12)));
        assert!(!a.active(s(20)));
        assert!(a.active(s(40)));
        assert!(a.active(s(74)));
        assert!(!a.active(s(75)));
    }

    #[test]
    fn capacity_takes_the_smallest_active_drop() {
        let sched = vec![
            Antagonist::parse("at=0,for=10s,capacity=3").unwrap(),
            Antagonist::parse("at=5s,for=10s,capacity=1").unwrap(),
        ];
        assert_eq!(capacity_at(4, &sched, s(1)), Some(3));
        assert_eq!(capacity_at(4, &sched, s(6)), Some(1));
        assert_eq!(capacity_at(4, &sched, s(12)), Some(1));
        assert_eq!(capacity_at(4, &sched, s(20)), Some(4));
        assert_eq!(capacity_at(2, &sched, s(1)), Some(2));
        assert_eq!(capacity_at(0, &sched, s(20)), None);
        assert_eq!(capacity_at(0, &sched, s(1)), Some(3));
    }
}
