package loadbalancer_test

import (
	"context"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
	"github.com/prequalbench/prequalbench/sim"
)

// p99 runs alg on 100 replicas (half with 2x work, 4 slots, 20 ms) behind
// 10 ingress replicas at 70% of capacity in the simulator, 1 s warmup then
// 4 s measured, and returns the p99 of successes.
func p99(t *testing.T, alg string) time.Duration {
	t.Helper()
	cfg := sim.Config{
		Seed: 5, Clients: 10, Algorithm: alg, Policy: loadbalancer.DefaultConfig(), Network: sim.DefaultNetwork,
		Routes: []sim.Route{{Name: "work", Groups: []sim.Group{
			{Name: "fast", Replicas: 50, Mode: "io", ServiceTime: 20 * time.Millisecond, Distribution: "normal", Concurrency: 4, QueueLimit: 1024},
			{Name: "slow", Replicas: 50, Mode: "io", ServiceTime: 20 * time.Millisecond, Distribution: "normal", Slow: 2, Concurrency: 4, QueueLimit: 1024},
		}}},
	}
	w, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Capacity: 50·4/21.7 ms + 50·4/43.3 ms ≈ 13,850 rps; 70%.
	const rate = 9700
	targets := make([]sim.Target, cfg.Clients)
	for i := range targets {
		targets[i] = sim.Target{Client: i, Weight: 1}
	}
	l := sim.Load{Open: []sim.Phase{{Kind: sim.KindConstant, Duration: time.Second, Rate: rate}}, Timeout: 10 * time.Second, Targets: targets, Seed: 3}
	if _, err := w.Run(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	l.Open[0].Duration = 4 * time.Second
	res, err := w.Run(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(res.Success.ValueAtQuantile(99)) * time.Microsecond
}

// TestPrequal_LowProbeRatesKeepTheTail is the paper's §5.3 sweep in the
// simulator: at r_remove 0.25, probing 0.5 and 1 times per query must keep
// p99 near that at 3 probes per query. Eq. 1 gives budgets 11.8 and 3.4
// there; a fixed cap of 2 on the budget drained the pool and made picks
// near random.
func TestPrequal_LowProbeRatesKeepTheTail(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 5 s of a 100-replica fleet three times")
	}
	base := p99(t, "prequal{remove=0.25}")
	for _, alg := range []string{"prequal{probes=1,remove=0.25}", "prequal{probes=0.5,remove=0.25}"} {
		got := p99(t, alg)
		t.Logf("%s: p99 %v, at 3 probes per query %v (%.2fx)", alg, got, base, float64(got)/float64(base))
		if float64(got) > 1.5*float64(base) {
			t.Errorf("%s: p99 %v, more than 1.5x the %v at 3 probes per query", alg, got, base)
		}
	}
}
