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
