package sim

import (
	"context"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

// BenchmarkWorld_100x100 simulates 100 clients × 100 servers (the
// sim-paper-90 mix, see scenarios/sim-paper-90.yaml) for 10 s at 10,000
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
