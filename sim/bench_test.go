package sim

import (
	"context"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

// BenchmarkWorld_100x100 simulates 100 clients × 100 servers (the
// sim-three-speeds-90 mix, see scenario/catalogue/sim-three-speeds-90.yaml) for 10 s at 10,000
// queries/s with prequal's 3 probes per query; ns/event is the cost of one
// simulation event.
func BenchmarkWorld_100x100(b *testing.B) {
	for range b.N {
		w, err := New(paperMix(1, loadbalancer.NamePrequal))
		if err != nil {
			b.Fatal(err)
		}
		res, err := w.Run(context.Background(), Load{
			Open: []Phase{{Kind: KindConstant, Duration: 10 * time.Second, Rate: 10000}}, Timeout: 10 * time.Second, Targets: evenTargets(100), Seed: 1,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(res.Events)/float64(b.N), "ns/event")
		b.ReportMetric(float64(res.Events), "events")
	}
}

func paperMix(seed uint64, alg string) Config {
	g := func(name string, n int, slow float64, ant []Antagonist) Group {
		return Group{Name: name, Replicas: n, Mode: "io", ServiceTime: 20 * time.Millisecond, Distribution: "normal", Slow: slow, Concurrency: 4, QueueLimit: 1024, Antagonists: ant}
	}
	ant := func(at time.Duration) []Antagonist {
		return []Antagonist{{At: at, For: 2 * time.Second, Capacity: 1, Every: 10 * time.Second}}
	}
	return Config{
		Seed: seed, Clients: 100, Algorithm: alg, Policy: loadbalancer.DefaultConfig(), Network: DefaultNetwork,
		Routes: []Route{{Name: "work", Groups: []Group{
			g("fast", 32, 1, nil), g("fast-antagonized", 8, 1, ant(time.Second)),
			g("medium", 32, 2, nil), g("medium-antagonized", 8, 2, ant(4*time.Second)),
			g("slow", 16, 4, nil), g("slow-antagonized", 4, 4, ant(7*time.Second)),
		}}},
	}
}

// TestWorld_SteadyStateDoesNotAllocate: once the pools and queues have
// grown, simulating (policy calls included: Pick, ProbesDue, ProbeResult,
// Done) allocates next to nothing, so memory stays flat however long the
// run. What remains (about 20 per 100,000 events here) is bounded: an
// estimator bucket on the first sample at a new RIF value, a queue ring
// growing to a new high-water mark. One allocation per request or probe
// would be thousands.
func TestWorld_SteadyStateDoesNotAllocate(t *testing.T) {
	w, err := New(paperMix(1, loadbalancer.NamePrequal))
	if err != nil {
		t.Fatal(err)
	}
	l := Load{Open: []Phase{{Kind: KindConstant, Duration: time.Hour, Rate: 10000}}, Timeout: 10 * time.Second, Targets: evenTargets(100), Seed: 1}
	if err := w.start(l); err != nil {
		t.Fatal(err)
	}
	for range 2_000_000 { // about 20 s of virtual time: every pool full
		w.step()
	}
	allocs := testing.AllocsPerRun(3, func() {
		for range 100_000 {
			w.step()
		}
	})
	t.Logf("%.1f allocations per 100,000 events", allocs)
	if allocs > 100 {
		t.Errorf("%.1f allocations per 100,000 events, want next to none", allocs)
	}
}

// BenchmarkWorld_CPUShare is the 100×100 run with every replica in
// cpu-share mode (4 replicas to a machine, each entitled to a quarter of
// it), so processor sharing's finish-tag heap is on the hot path next to
// the event queue.
func BenchmarkWorld_CPUShare(b *testing.B) {
	cfg := paperMix(1, loadbalancer.NamePrequal)
	for i := range cfg.Routes[0].Groups {
		g := &cfg.Routes[0].Groups[i]
		g.Mode, g.Antagonists, g.Concurrency = "cpu-share", nil, 0
		g.CPUShare = &CPUShare{Share: 0.25, PerMachine: 4}
	}
	for range b.N {
		w, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		res, err := w.Run(context.Background(), Load{
			Open: []Phase{{Kind: KindConstant, Duration: 10 * time.Second, Rate: 10000}}, Timeout: 10 * time.Second, Targets: evenTargets(100), Seed: 1,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(res.Events)/float64(b.N), "ns/event")
		b.ReportMetric(float64(res.Events), "events")
	}
}
