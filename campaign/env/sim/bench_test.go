package sim

import (
	"context"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/load"
	"github.com/prequalbench/prequalbench/scenario"
)

// BenchmarkSimPaper90_60s simulates the catalogue's sim-three-speeds-90 testbed
// (100 ingress replicas x 100 backend replicas) for 60 s of virtual time
// at 10,000 queries/s with prequal (3 probes per query), one iteration per
// run: wall time per op is the cost of a 60 s run; ns/event the cost of
// one simulation event.
//
//	go test -run '^$' -bench SimPaper90 -benchtime 1x ./campaign/env/sim
func BenchmarkSimPaper90_60s(b *testing.B) {
	s, err := scenario.Catalogue("sim-three-speeds-90")
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(s, 1, "")
	if err != nil {
		b.Fatal(err)
	}
	cfg := load.Config{Timeout: 10 * time.Second, Seed: 1, Open: []load.Phase{{Kind: load.KindConstant, Duration: 60 * time.Second, Rate: 10000}}}
	for _, t := range e.LoadTargets() {
		cfg.Targets = append(cfg.Targets, load.Target{URL: t.URL, Host: t.Host, Weight: t.Weight})
	}
	var events, probes uint64
	for range b.N {
		if err := e.SetAlgorithm(context.Background(), "prequal"); err != nil {
			b.Fatal(err)
		}
		if _, err := e.Reset(context.Background(), scenario.ResetAdmin); err != nil {
			b.Fatal(err)
		}
		res, err := e.RunLoad(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		if res.Sent != 600_000 {
			b.Fatalf("sent %d, want 600,000", res.Sent)
		}
		events += e.world.Events()
		st, err := e.Snapshot(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for _, in := range st {
			probes += in.Routes[0].Policy.ProbesPlanned
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
	b.ReportMetric(float64(probes)/float64(b.N)/600_000, "probes/query")
}
