package load

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"
)

// BenchmarkOpenLoop10k offers 10 000 requests/s for 3 s, after a 1 s
// warmup on the same client, to a trivial loopback server in the same
// process, and reports how much of the target was held: with unlimited
// connections, with connections capped at 256, and with workers capped
// too. Run it alone:
//
//	go test -run '^$' -bench OpenLoop10k -benchtime 1x ./load
//
// LOAD_BENCH_RATE overrides the rate. Metrics:
//
//	achieved/target  completed per second of Run's wall time ÷ target rate
//	sent/planned     sends ÷ the schedule's hits
//	late-frac        share of sends that left > 1 ms behind schedule
//	p99-ms           p99 latency from the intended send time
func BenchmarkOpenLoop10k(b *testing.B) {
	rate := 10000.0
	if v, err := strconv.ParseFloat(os.Getenv("LOAD_BENCH_RATE"), 64); err == nil && v > 0 {
		rate = v // to find where a busy machine stops holding the rate
	}
	for _, tc := range []struct {
		name           string
		conns, workers int
	}{
		{"conns=unlimited", 0, 0},
		{"conns=256", 256, 0},
		{"conns=256,workers=256", 256, 256},
	} {
		b.Run(tc.name, func(b *testing.B) { benchOpen(b, rate, tc.conns, tc.workers) })
	}
}

func benchOpen(b *testing.B, rate float64, conns, workers int) {
	s := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer s.Close()
	phases := []Phase{{Kind: KindConstant, Rate: rate, Duration: 3 * time.Second}}
	planned := plannedHits(phases)
	cfg := Config{Targets: []Target{{URL: s.URL}}, MaxConnections: conns, MaxWorkers: workers}
	cfg.Client = NewClient(cfg)
	defer cfg.Client.CloseIdleConnections()
	var achieved, sent, late, p99 float64
	for b.Loop() {
		warm := cfg
		warm.Open = []Phase{{Kind: KindConstant, Rate: rate, Duration: time.Second}}
		if _, err := Run(context.Background(), warm); err != nil {
			b.Fatal(err)
		}
		cfg.Open = phases
		began := time.Now()
		res, err := Run(context.Background(), cfg)
		took := time.Since(began)
		if err != nil {
			b.Fatal(err)
		}
		// Over the wall time Run took, drain included: a sender that
		// falls behind finishes late and scores below 1.
		achieved += float64(res.Completed) / max(took, res.Duration).Seconds() / res.TargetRate
		sent += float64(res.Sent) / float64(planned)
		late += float64(res.Late) / float64(res.Sent)
		p99 += res.Summary().P99
	}
	n := float64(b.N)
	b.ReportMetric(achieved/n, "achieved/target")
	b.ReportMetric(sent/n, "sent/planned")
	b.ReportMetric(late/n, "late-frac")
	b.ReportMetric(p99/n, "p99-ms")
}
