package sim

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/load"
	"github.com/prequalbench/prequalbench/scenario"
)

// runOnce runs one algorithm on s as the campaign runner does (warmup and
// window in one load, a fresh world) and returns the run's summary.
func runOnce(t *testing.T, s *scenario.Scenario, alg string, seed uint64) artifacts.LoadResult {
	t.Helper()
	e, err := New(s, seed, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.SetAlgorithm(ctx, alg); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Reset(ctx, scenario.ResetAdmin); err != nil {
		t.Fatal(err)
	}
	cfg := load.Config{Users: s.Load.Users, Duration: s.Load.Duration.Std(), Timeout: s.Load.Timeout.Std(), Seed: seed*1_000_003 + 1}
	for _, tg := range e.LoadTargets() {
		cfg.Targets = append(cfg.Targets, load.Target{URL: tg.URL, Host: tg.Host, Weight: tg.Weight})
	}
	for _, p := range s.Load.Open {
		cfg.Open = append(cfg.Open, load.Phase{Kind: p.Kind, Duration: p.Duration.Std(), Rate: p.Rate, From: p.From, To: p.To, Steps: p.Steps,
			High: p.High, Low: p.Low, HighFor: p.HighFor.Std(), LowFor: p.LowFor.Std()})
	}
	if w := s.Protocol.Warmup.Std(); w > 0 {
		cfg.Warmup = w
		if !cfg.Closed() {
			cfg.WarmupRate = s.Load.StartRate()
		}
	}
	res, err := e.RunLoad(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res.Summary()
}

func tablesWanted(t *testing.T) {
	if os.Getenv("SIM_TABLES") == "" {
		t.Skip("set SIM_TABLES=1 to print the simulator's result tables (minutes of CPU)")
	}
}

// TestTables_Paper prints, per algorithm, one seeded run of sim-three-speeds-70,
// sim-three-speeds-90 and sim-three-speeds-ramp (or of SIM_TABLES_SCENARIOS), a quick check
// of the campaign numbers in the README.
func TestTables_Paper(t *testing.T) {
	tablesWanted(t)
	names := os.Getenv("SIM_TABLES_SCENARIOS") // comma-separated; default all three
	if names == "" {
		names = "sim-three-speeds-70,sim-three-speeds-90,sim-three-speeds-ramp"
	}
	for _, name := range strings.Split(names, ",") {
		s, err := scenario.Catalogue(name)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "\n%s (seed 1)\n| algorithm | p50 ms | p99 ms | p99.9 ms | error rate | goodput rps | timeouts | 5xx |\n|---|---|---|---|---|---|---|---|\n", name)
		for _, alg := range s.Protocol.Algorithms {
			r := runOnce(t, s, alg, 1)
			fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f | %.2f%% | %.0f | %d | %d |\n", alg, r.P50, r.P99, r.P999, 100*r.ErrorRate, r.Goodput, r.Timeouts, r.Failed5xx)
		}
		t.Log(b.String())
	}
}

// TestTables_FleetSizes prints prequal's p99 against least-request's and
// p2c's for each fleet of sim-fleet-sizes, run alone, behind 1 and 10
// ingress replicas.
func TestTables_FleetSizes(t *testing.T) {
	tablesWanted(t)
	base, err := scenario.Catalogue("sim-fleet-sizes")
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, r := range base.Workload.Routes {
		total += r.Weight
	}
	rate := base.Load.Open[0].Rate
	var b strings.Builder
	fmt.Fprintf(&b, "\n| n | clients | prequal p99 ms | least-request p99 ms | p2c p99 ms | prequal/LR | prequal/p2c |\n|---|---|---|---|---|---|---|\n")
	for _, r := range base.Workload.Routes {
		for _, clients := range []int{1, 10} {
			s := *base
			s.Workload.Routes = []scenario.Route{r}
			s.Workload.Routes[0].Weight = 1
			s.Load.Open = []scenario.Phase{base.Load.Open[0]}
			s.Load.Open[0].Rate = rate * r.Weight / total
			s.Ingress.Replicas = clients
			p99 := map[string]float64{}
			for _, alg := range []string{"prequal", "least-request", "p2c"} {
				p99[alg] = runOnce(t, &s, alg, 1).P99
			}
			fmt.Fprintf(&b, "| %d | %d | %.1f | %.1f | %.1f | %.2f | %.2f |\n", int(r.Weight), clients, p99["prequal"], p99["least-request"], p99["p2c"],
				p99["prequal"]/p99["least-request"], p99["prequal"]/p99["p2c"])
		}
	}
	t.Log(b.String())
}
