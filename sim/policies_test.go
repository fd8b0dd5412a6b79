package sim

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

// TestWorld_NewPoliciesFavourTheFastGroup runs every policy of issue 14 on
// a heterogeneous fleet (4 fast replicas, 4 with 2x work, 4 slots each;
// capacity share of the fast group 2/3) at 70% load behind 3 ingress
// replicas, and asserts the direction of each one's behaviour: the fast
// group gets more than round-robin's half, and prequal-sync picks from
// its answers (the simulator drives its two-phase pick), not at random.
func TestWorld_NewPoliciesFavourTheFastGroup(t *testing.T) {
	for _, alg := range []string{"wrr{blackout=1s}", "yarp-po2c", "linear", "rif-only", "c3", "prequal-sync", "ewma", "round-robin"} {
		cfg := Config{
			Seed: 7, Clients: 3, Algorithm: alg, Policy: loadbalancer.DefaultConfig(), Network: DefaultNetwork,
			Routes: []Route{{Name: "work", Groups: []Group{
				{Name: "fast", Replicas: 4, Mode: "io", ServiceTime: 20 * time.Millisecond, Distribution: "normal", Concurrency: 4, QueueLimit: 1024},
				{Name: "slow", Replicas: 4, Mode: "io", ServiceTime: 20 * time.Millisecond, Distribution: "normal", Slow: 2, Concurrency: 4, QueueLimit: 1024},
			}}},
		}
		l := Load{Open: []Phase{{Kind: KindConstant, Duration: 4 * time.Second, Rate: 840}}, Timeout: 10 * time.Second, Targets: evenTargets(3), Seed: 3}
		w, res := runTwice(t, cfg, l)
		var fast, all, fallbacks, picks uint64
		for _, c := range w.Snapshot() {
			for _, r := range c.Routes {
				for _, e := range r.Stats.Endpoints {
					all += e.Picks
					if strings.HasPrefix(e.Address, "fast-") {
						fast += e.Picks
					}
				}
				fallbacks += r.Stats.Fallbacks
				picks += r.Stats.Picks
			}
		}
		share := float64(fast) / float64(all)
		t.Logf("%s: fast share %.3f, p99 %v, errors %d, fallbacks %d of %d", alg, share, time.Duration(res.Success.ValueAtQuantile(99))*time.Microsecond, res.Errors, fallbacks, picks)
		if res.Errors != 0 {
			t.Errorf("%s: %d errors", alg, res.Errors)
		}
		if alg == "round-robin" {
			if math.Abs(share-0.5) > 0.01 {
				t.Errorf("round-robin's fast share %.3f, want 0.5 (the harness's baseline)", share)
			}
			continue
		}
		if share < 0.55 {
			t.Errorf("%s: fast group got %.3f of the picks, want more than round-robin's 0.5", alg, share)
		}
		if alg == "prequal-sync" && float64(fallbacks) > 0.01*float64(picks) {
			t.Errorf("prequal-sync: %d fallbacks of %d picks: the simulator does not drive its sync probes", fallbacks, picks)
		}
	}
}

func TestLoadMeter_RatesAndUtilization(t *testing.T) {
	var m loadMeter
	sec := int64(time.Second)
	m.advance(0, 0, 4)
	// One of 4 slots busy for [0, 2 s], 10 answers a second, 2 of them 5xx.
	for k := range 20 {
		tt := int64(k) * sec / 10
		m.advance(tt, 1, 4)
		status := int32(200)
		if k%5 == 0 {
			status = 503
		}
		m.answered(tt, status)
	}
	qps, eps, util, ok := m.report(2*sec, 1, 4)
	if !ok || math.Abs(qps-10) > 1.2 || math.Abs(eps-2) > 1.1 || math.Abs(util-0.25) > 0.01 {
		t.Fatalf("report = qps %.2f eps %.2f util %.3f ok %v; want 10, 2, 0.25", qps, eps, util, ok)
	}
	if _, _, _, ok := m.report(2*sec, 1, unlimited); ok {
		t.Fatal("unlimited capacity reported a utilization")
	}
	// A second later with nothing answered and nothing busy: rates fall to 0.
	m.advance(2*sec, 0, 4)
	qps, _, util, _ = m.report(3*sec+sec/2, 0, 4)
	if qps != 0 || util != 0 {
		t.Fatalf("idle second later: qps %.2f util %.3f", qps, util)
	}
}
