//! Server-reported load for /prequal/probe: the rate of answered /work
//! requests (`qps`), of those answered with 5xx (`eps`) and the fraction of
//! slot-time in use (`utilization`), over the last second.
//!
//! Bucketed: ten 100 ms buckets. A query covers the current (partial)
//! bucket and the nine before it, i.e. the last 0.9–1.0 s, and divides by
//! exactly that span (shorter right after start or /reset), so a rate is a
//! true average over the time it counts. Slot use is integrated exactly:
//! the number of busy slots and the capacity are step functions, and every
//! change adds `count × elapsed` to the buckets the elapsed time falls in.
//! A request still in service counts for the part of its service inside
//! the window. Time is passed in (nanoseconds on a monotonic clock), so
//! tests use a fake clock.

/// Width of one bucket.
pub const BUCKET_NS: u64 = 100_000_000;
/// Buckets per window: the window is BUCKETS × BUCKET_NS = 1 s.
pub const BUCKETS: usize = 10;

#[derive(Clone, Copy, Default)]
struct Bucket {
    /// Which bucket of time (now / BUCKET_NS) this slot of the ring holds.
    epoch: u64,
    done: u64,
    errors: u64,
    /// Busy slot-nanoseconds.
    busy_ns: u64,
    /// Available slot-nanoseconds (capacity × time).
    slot_ns: u64,
}

/// What a probe reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Snapshot {
    pub qps: f64,
    pub eps: f64,
    /// None when the capacity is unlimited (no slots to be a fraction of).
    pub utilization: Option<f64>,
}

pub struct Meter {
    ring: [Bucket; BUCKETS],
    /// Slots in service now.
    busy: u64,
    /// Slots now; None = unlimited.
    capacity: Option<u64>,
    /// Time up to which `busy` and `capacity` have been integrated.
    last_ns: u64,
    /// Counting began here (start or /reset): the window never reaches back
    /// before it.
    origin_ns: u64,
}

impl Meter {
    pub fn new(capacity: Option<usize>, now_ns: u64) -> Meter {
        Meter {
            ring: [Bucket::default(); BUCKETS],
            busy: 0,
            capacity: capacity.map(|c| c as u64),
            last_ns: now_ns,
            origin_ns: now_ns,
        }
    }

    fn bucket(&mut self, epoch: u64) -> &mut Bucket {
        let b = &mut self.ring[(epoch % BUCKETS as u64) as usize];
        if b.epoch != epoch {
            *b = Bucket {
                epoch,
                ..Bucket::default()
            };
        }
        b
    }

    /// Integrates busy slots and capacity from `last_ns` up to `now_ns`.
    fn advance(&mut self, now_ns: u64) {
        if now_ns <= self.last_ns {
            return;
        }
        // Nothing older than the window matters.
        let window_start = now_ns.saturating_sub(BUCKET_NS * BUCKETS as u64);
        let mut t = self.last_ns.max(window_start);
        let (busy, slots) = (self.busy, self.capacity.unwrap_or(0));
        while t < now_ns {
            let epoch = t / BUCKET_NS;
            let end = ((epoch + 1) * BUCKET_NS).min(now_ns);
            let dt = end - t;
            let b = self.bucket(epoch);
            b.busy_ns = b.busy_ns.saturating_add(busy.saturating_mul(dt));
            b.slot_ns = b.slot_ns.saturating_add(slots.saturating_mul(dt));
            t = end;
        }
        self.last_ns = now_ns;
    }

    /// Slots in service now.
    #[cfg(test)]
    pub fn busy(&self) -> u64 {
        self.busy
    }

    /// A request took a slot.
    pub fn start(&mut self, now_ns: u64) {
        self.advance(now_ns);
        self.busy += 1;
    }

    /// A request gave its slot back.
    pub fn stop(&mut self, now_ns: u64) {
        self.advance(now_ns);
        self.busy = self.busy.saturating_sub(1);
    }

    /// Sets the busy amount outright (cpu-share: the replica's CPU rate in
    /// thousandths of its allocation, against a capacity of 1000; above
    /// 1000 while it borrows, the window's ratio is capped at 1 as sim's).
    pub fn set_busy(&mut self, now_ns: u64, busy: u64) {
        self.advance(now_ns);
        self.busy = busy;
    }

    /// A /work response was produced; `server_error` for 5xx.
    pub fn answered(&mut self, now_ns: u64, server_error: bool) {
        self.advance(now_ns);
        let b = self.bucket(now_ns / BUCKET_NS);
        b.done += 1;
        if server_error {
            b.errors += 1;
        }
    }

    /// The capacity changed (antagonists).
    pub fn set_capacity(&mut self, now_ns: u64, capacity: Option<usize>) {
        self.advance(now_ns);
        self.capacity = capacity.map(|c| c as u64);
    }

    /// Forgets what was counted (POST /reset); requests in service keep
    /// counting from now.
    pub fn reset(&mut self, now_ns: u64) {
        self.advance(now_ns);
        self.ring = [Bucket::default(); BUCKETS];
        self.origin_ns = now_ns;
        self.last_ns = now_ns;
    }

    /// The rates and utilization over the last 0.9–1.0 s.
    pub fn snapshot(&mut self, now_ns: u64) -> Snapshot {
        self.advance(now_ns);
        let current = now_ns / BUCKET_NS;
        let oldest = current.saturating_sub(BUCKETS as u64 - 1);
        let from = (oldest * BUCKET_NS).max(self.origin_ns);
        let span_ns = now_ns.saturating_sub(from);
        let (mut done, mut errors, mut busy, mut slots) = (0u64, 0u64, 0u128, 0u128);
        for b in &self.ring {
            if b.epoch >= oldest && b.epoch <= current {
                done += b.done;
                errors += b.errors;
                busy += b.busy_ns as u128;
                slots += b.slot_ns as u128;
            }
        }
        if span_ns == 0 {
            return Snapshot {
                qps: 0.0,
                eps: 0.0,
                utilization: self.capacity.map(|_| 0.0),
            };
        }
        let secs = span_ns as f64 / 1e9;
        let utilization = self.capacity.map(|_| {
            if slots == 0 {
                // No slot at all in the window (capacity 0): nothing can
                // be served, which is as busy as a replica gets.
                1.0
            } else {
                (busy as f64 / slots as f64).clamp(0.0, 1.0)
            }
        });
        Snapshot {
            qps: done as f64 / secs,
            eps: errors as f64 / secs,
            utilization,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const S: u64 = 1000 * MS;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn idle_is_zero() {
        let mut m = Meter::new(Some(4), 0);
        let s = m.snapshot(5 * S);
        assert_eq!(
            s,
            Snapshot {
                qps: 0.0,
                eps: 0.0,
                utilization: Some(0.0)
            }
        );
    }

    #[test]
    fn rates_count_answers_in_the_last_second() {
        let mut m = Meter::new(Some(4), 0);
        // 30 answers, 10 of them 5xx, spread over [2.0 s, 2.3 s).
        for i in 0..30 {
            m.answered(2 * S + i * 10 * MS, i % 3 == 0);
        }
        // At 2.95 s the window is [2.0 s, 2.95 s]: 0.95 s.
        let s = m.snapshot(2 * S + 950 * MS);
        assert!(close(s.qps, 30.0 / 0.95), "{s:?}");
        assert!(close(s.eps, 10.0 / 0.95), "{s:?}");
        // At 3.25 s the window starts at 2.3 s: all of them have left it.
        let s = m.snapshot(3 * S + 250 * MS);
        assert_eq!((s.qps, s.eps), (0.0, 0.0), "{s:?}");
    }

    #[test]
    fn window_is_short_right_after_start() {
        let mut m = Meter::new(Some(1), 10 * S);
        for _ in 0..5 {
            m.answered(10 * S + 100 * MS, false);
        }
        // 5 answers in the 0.5 s since start: 10/s, not 5/s.
        let s = m.snapshot(10 * S + 500 * MS);
        assert!(close(s.qps, 10.0), "{s:?}");
    }

    #[test]
    fn utilization_is_busy_slot_time_over_slot_time() {
        let mut m = Meter::new(Some(4), 0);
        // One of 4 slots busy for the whole of [1 s, 2 s]: 25%.
        m.start(S);
        let s = m.snapshot(2 * S);
        assert!(close(s.utilization.unwrap(), 0.25), "{s:?}");
        // All 4 busy from 2 s on: at 2.5 s the window [1.6 s, 2.5 s] holds
        // 0.4 s at 1 slot and 0.5 s at 4 of 3.6 slot-seconds.
        for _ in 0..3 {
            m.start(2 * S);
        }
        let s = m.snapshot(2 * S + 500 * MS);
        assert!(close(s.utilization.unwrap(), 2.4 / 3.6), "{s:?}");
        // Idle again from 3 s: at 4.5 s nothing busy is in the window.
        for _ in 0..4 {
            m.stop(3 * S);
        }
        let s = m.snapshot(4 * S + 500 * MS);
        assert!(close(s.utilization.unwrap(), 0.0), "{s:?}");
    }

    #[test]
    fn capacity_changes_are_integrated() {
        let mut m = Meter::new(Some(2), 0);
        m.start(0);
        // Capacity drops to 1 at 0.5 s: the one busy slot is then 100%.
        m.set_capacity(500 * MS, Some(1));
        let s = m.snapshot(S);
        // Window [0.1 s, 1 s]: 0.9 busy slot-seconds of 0.4·2 + 0.5·1.
        assert!(close(s.utilization.unwrap(), 0.9 / 1.3), "{s:?}");
        // Capacity 0 for a whole window: 1, nothing can be served.
        m.stop(S);
        m.set_capacity(S, Some(0));
        assert_eq!(m.snapshot(3 * S).utilization, Some(1.0));
        // Unlimited: no fraction to report.
        m.set_capacity(3 * S, None);
        assert_eq!(m.snapshot(5 * S).utilization, None);
    }

    #[test]
    fn more_busy_than_slots_is_clamped() {
        let mut m = Meter::new(Some(2), 0);
        m.start(0);
        m.start(0);
        m.set_capacity(0, Some(1));
        assert_eq!(m.snapshot(S).utilization, Some(1.0));
    }

    #[test]
    fn reset_forgets_counts_but_not_requests_in_service() {
        let mut m = Meter::new(Some(1), 0);
        m.answered(100 * MS, true);
        m.start(100 * MS);
        m.reset(500 * MS);
        let s = m.snapshot(S);
        assert_eq!((s.qps, s.eps), (0.0, 0.0));
        // The slot stays busy: 100% of the 0.5 s since the reset.
        assert!(close(s.utilization.unwrap(), 1.0), "{s:?}");
    }

    #[test]
    fn long_gaps_skip_to_the_window() {
        let mut m = Meter::new(Some(1), 0);
        m.start(0);
        // A day later: cost bounded by the window, the slot 100% busy.
        let s = m.snapshot(86_400 * S);
        assert_eq!(s.utilization, Some(1.0));
        assert_eq!(s.qps, 0.0);
    }
}
