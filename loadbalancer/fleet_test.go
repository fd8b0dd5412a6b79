package loadbalancer

import (
	"testing"
	"time"
)

// Fleet-simulation tests: deterministic (seeded, virtual time), so their
// thresholds are about behaviour, never about the host's speed.

// TestPrequal_NoFallbackDrainOnSmallFleets: with one entry per replica,
// answers from replicas already in the pool only replace entries; on fleets
// of m replicas or fewer the pool used to drain below MinProbes (1-11% random
// fallbacks with a 3 ms probe round trip). Removal stops at half the pool and
// the last MinProbes probes stay, so fallbacks stay below 1%.
func TestPrequal_NoFallbackDrainOnSmallFleets(t *testing.T) {
	const mean = 10 * time.Millisecond
	for _, n := range []int{8, 16} {
		for _, load := range []float64{0.8, 0.9} {
			r := runFleet(t, fleetSetup{
				clients: 1, rps: load * halfSlowCapacity(n, 2, mean),
				dur: 4 * time.Second, warmup: time.Second, probeDelay: 3 * time.Millisecond, seed: 1,
				newPolicy: policyMaker(t, NamePrequal, nil), replicas: halfSlowFleet(n, 2, mean, backendWindow),
			})
			t.Logf("n = %d, load %.0f%%: %v", n, 100*load, r)
			if r.fallbacks >= 0.01 {
				t.Errorf("n = %d, load %.0f%%: %.2f%% of picks were random fallbacks, want < 1%%", n, 100*load, 100*r.fallbacks)
			}
		}
	}
}

// TestPrequal_NoReuseHerdingPastThePole: just past Eq. 1's pole (n = 25-30
// at the defaults) the formula's budget is 16 to 5. With 10 clients any
// reuse while the pool has fresh probes herds; prequal's p99 must stay
// within 10% of the same policy with reuse off (MaxReuse 1).
func TestPrequal_NoReuseHerdingPastThePole(t *testing.T) {
	const mean = 10 * time.Millisecond
	for _, n := range []int{25, 30} {
		run := func(maxReuse int) fleetResult {
			return runFleet(t, fleetSetup{
				clients: 10, rps: 0.8 * halfSlowCapacity(n, 2, mean),
				dur: 4 * time.Second, warmup: time.Second, probeDelay: time.Millisecond, seed: 1,
				newPolicy: policyMaker(t, NamePrequal, func(c *PrequalConfig) {
					if maxReuse > 0 {
						c.MaxReuse = maxReuse
					}
				}),
				replicas: halfSlowFleet(n, 2, mean, backendWindow),
			})
		}
		def, off := run(0), run(1)
		t.Logf("n = %d: default (budget %.2f): %v; reuse off: %v", n, def.reuseBudget, def, off)
		if float64(def.p99) > 1.1*float64(off.p99) {
			t.Errorf("n = %d: p99 %v with the default budget, %v with reuse off: reuse herds", n, def.p99, off.p99)
		}
	}
}

// c2Fleet is the seed's C2 fleet: 14 replicas sleeping 50 ms and 2 sleeping
// 800 ms (16x), no capacity limit.
func c2Fleet(est func() fleetEstimator) func() []*fleetReplica {
	return func() []*fleetReplica {
		reps := make([]*fleetReplica, 16)
		for i := range reps {
			reps[i] = &fleetReplica{mean: 50 * time.Millisecond, fixed: true, est: est()}
			if i >= 14 {
				reps[i].mean, reps[i].group = 800*time.Millisecond, 1
			}
		}
		return reps
	}
}

// TestPrequal_OneExplorationPerSlowReplica: before a 16x-slow replica's
// first request finishes its latency is unknown; it gets a few exploratory
// requests, not one per compensation step, nor one per client (a probe
// that reports a request in flight and no latency counts as explored by
// another client): 6 picks of the pair with 10 clients here, 15 when each
// client explored on its own.
func TestPrequal_OneExplorationPerSlowReplica(t *testing.T) {
	const clients = 10
	r := runFleet(t, fleetSetup{
		clients: clients, rps: 1000, dur: 790 * time.Millisecond, probeDelay: time.Millisecond, seed: 1,
		newPolicy: policyMaker(t, NamePrequal, nil), replicas: c2Fleet(recentByCount),
	})
	slow := r.probedPicksOf[14] + r.probedPicksOf[15] // random fallbacks aside
	t.Logf("picks of the slow pair on probes before their first answer: %d (%v)", slow, r)
	if slow > 10 {
		t.Errorf("%d picks of the 16x-slow pair in their first 790 ms by %d clients, want at most 10", slow, clients)
	}
}

// TestPrequal_C2SlowPairAvoided: on the seed's C2 fleet (500 rps) with the
// backend's default estimate (recent by count) the slow pair gets well under
// 0.1% of picks, with one client and with four.
func TestPrequal_C2SlowPairAvoided(t *testing.T) {
	for _, clients := range []int{1, 4} {
		r := runFleet(t, fleetSetup{
			clients: clients, rps: 500, dur: 20 * time.Second, warmup: 2 * time.Second, probeDelay: time.Millisecond, seed: 1,
			newPolicy: policyMaker(t, NamePrequal, nil), replicas: c2Fleet(recentByCount),
		})
		var all uint64
		for _, c := range r.picks {
			all += c
		}
		slow := r.picks[14] + r.picks[15]
		t.Logf("%d client(s): slow pair %d of %d picks; %v", clients, slow, all, r)
		if slow*2000 > all {
			t.Errorf("%d client(s): slow pair got %d of %d picks, want < 0.05%%", clients, slow, all)
		}
		if r.p999 > 60*time.Millisecond {
			t.Errorf("%d client(s): p99.9 %v, want <= 60 ms", clients, r.p999)
		}
	}
}

// TestPrequal_NoCollapseWhenNFarAboveM: 64 capacity-limited replicas (half
// with 2x work, 2 slots, N(50 ms, σ = μ)) behind 3 clients at 80% load, the
// fleet where a 1 s backend time window let the fast half's queues grow for
// the whole run (p99 2.3-2.6 s). With the estimate recent by count the
// queues stay flat and p99 is within 10% of least-request's.
func TestPrequal_NoCollapseWhenNFarAboveM(t *testing.T) {
	const n, mean = 64, 50 * time.Millisecond
	run := func(name string) fleetResult {
		return runFleet(t, fleetSetup{
			clients: 3, rps: 0.8 * halfSlowCapacity(n, 2, mean), dur: 16 * time.Second, warmup: 3 * time.Second,
			probeDelay: time.Millisecond, seed: 1,
			newPolicy: policyMaker(t, name, nil), replicas: halfSlowFleet(n, 2, mean, recentByCount),
		})
	}
	pq, lr := run(NamePrequal), run(NameLeastRequest)
	t.Logf("prequal: %v", pq)
	t.Logf("least-request: %v", lr)
	if pq.maxRIF[3] > pq.maxRIF[0]+4 {
		t.Errorf("prequal's largest queue grew over the window: %v per quarter", pq.maxRIF)
	}
	if float64(pq.p99) > 1.1*float64(lr.p99) {
		t.Errorf("prequal p99 %v, least-request %v: want within 10%%", pq.p99, lr.p99)
	}
}

// TestPrequal_IdleMaxAgeEndsStarvation: with the estimate by count and no
// age limit, a slow replica whose last samples near RIF 0 came out high is
// avoided by every client and never gets the samples that would clear it
// (in the 48-replica capacity fleet 2-3 slow replicas got no pick in a
// minute). With the backend's idle max age (30 s) such a replica answers
// "unknown" once its samples are that old, one exploratory request decides
// again, and every replica is picked; on C2 the 16x-slow pair pays only the
// explorations (< 0.05% of picks, p99.9 <= 60 ms).
func TestPrequal_IdleMaxAgeEndsStarvation(t *testing.T) {
	const idle = 30 * time.Second
	capped := func() fleetEstimator { return fleetEstimator{perRIF: 16, minSamples: 5, idleMaxAge: idle} }
	const n, mean = 48, 50 * time.Millisecond
	reps := halfSlowFleet(n, 2, mean, capped)
	r := runFleet(t, fleetSetup{
		clients: 3, rps: 0.8 * halfSlowCapacity(n, 2, mean), dur: 45 * time.Second, warmup: 3 * time.Second,
		probeDelay: time.Millisecond, seed: 1,
		newPolicy: policyMaker(t, NamePrequal, nil), replicas: reps,
	})
	t.Logf("48 replicas, idle max age %v: %v; picks %v", idle, r, r.picks)
	for i, c := range r.picks {
		if c == 0 {
			t.Errorf("replica %d (group %d) got no pick in the window: starved", i, reps()[i].group)
		}
	}
	for _, clients := range []int{1, 4} {
		r := runFleet(t, fleetSetup{
			clients: clients, rps: 500, dur: 45 * time.Second, warmup: 2 * time.Second, probeDelay: time.Millisecond, seed: 1,
			newPolicy: policyMaker(t, NamePrequal, nil), replicas: c2Fleet(capped),
		})
		var all uint64
		for _, c := range r.picks {
			all += c
		}
		slow := r.picks[14] + r.picks[15]
		t.Logf("C2, %d client(s), idle max age %v: slow pair %d of %d picks; %v", clients, idle, slow, all, r)
		if slow*2000 > all {
			t.Errorf("C2, %d client(s): slow pair got %d of %d picks, want < 0.05%%", clients, slow, all)
		}
		if r.p999 > 60*time.Millisecond {
			t.Errorf("C2, %d client(s): p99.9 %v, want <= 60 ms", clients, r.p999)
		}
	}
}
