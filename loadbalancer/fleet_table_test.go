package loadbalancer

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestFleetSizeTable prints p99 by fleet size for prequal (reuse budget
// variants), least-request and p2c: half the replicas with 2x work, 2 slots,
// N(10 ms, σ = μ), 80% load, 1 and 10 clients. It takes minutes, so it runs
// only with PREQUAL_FLEET_TABLE=1 (PREQUAL_FLEET_SIZES=8,16 picks sizes,
// PREQUAL_FLEET_EST=window the backend's 1 s time window); the numbers are
// in the README.
func TestFleetSizeTable(t *testing.T) {
	if os.Getenv("PREQUAL_FLEET_TABLE") == "" {
		t.Skip("set PREQUAL_FLEET_TABLE=1 to print the fleet-size table")
	}
	sizes := []int{8, 16, 22, 24, 25, 26, 28, 30, 40, 64, 100}
	if s := os.Getenv("PREQUAL_FLEET_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			var n int
			fmt.Sscan(f, &n)
			sizes = append(sizes, n)
		}
	}
	type variant struct {
		name string
		make func() Policy
	}
	est := recentByCount // the backend's default
	if os.Getenv("PREQUAL_FLEET_EST") == "window" {
		est = backendWindow
	}
	capped := func(c int) func() Policy {
		return policyMaker(t, NamePrequal, func(p *PrequalConfig) { p.MaxReuse = c })
	}
	variants := []variant{
		{"prequal", policyMaker(t, NamePrequal, nil)},
		{"prequal reuse off", capped(1)},
		{"prequal cap 16", capped(16)},
		{"least-request", policyMaker(t, NameLeastRequest, nil)},
		{"p2c", policyMaker(t, NameP2C, nil)},
	}
	const mean = 10 * time.Millisecond
	for _, clients := range []int{1, 10} {
		var b strings.Builder
		fmt.Fprintf(&b, "\n%d client(s): p99 ms (fallback %%)\n| n |", clients)
		for _, v := range variants {
			fmt.Fprintf(&b, " %s |", v.name)
		}
		b.WriteString("\n")
		for _, n := range sizes {
			fmt.Fprintf(&b, "| %d |", n)
			for _, v := range variants {
				r := runFleet(t, fleetSetup{
					clients: clients, rps: 0.8 * halfSlowCapacity(n, 2, mean),
					dur: 6 * time.Second, warmup: time.Second, probeDelay: time.Millisecond, seed: 1,
					newPolicy: v.make, replicas: halfSlowFleet(n, 2, mean, est),
				})
				fmt.Fprintf(&b, " %.0f (%.1f) |", float64(r.p99)/float64(time.Millisecond), 100*r.fallbacks)
			}
			b.WriteString("\n")
		}
		t.Log(b.String())
	}
}

// TestCollapseDifferences prints, for the collapse fleets, prequal under
// each difference between our controller and the reference repository's
// (1 probe per query, Q_RIF 0.75, reuse limit 3, a latency window that
// never empties), with either backend estimator, beside least-request.
// PREQUAL_FLEET_TABLE=1 runs it.
func TestCollapseDifferences(t *testing.T) {
	if os.Getenv("PREQUAL_FLEET_TABLE") == "" {
		t.Skip("set PREQUAL_FLEET_TABLE=1 to print the table")
	}
	const mean = 50 * time.Millisecond
	fleets := []struct {
		name    string
		n       int
		clients int
		load    float64
	}{{"64 replicas, 3 clients, 80%", 64, 3, 0.8}, {"32 replicas, 1 client, 75%", 32, 1, 0.75}}
	variants := []struct {
		name string
		mod  func(*PrequalConfig)
	}{
		{"defaults", nil},
		{"latency memory 10 s", func(c *PrequalConfig) { c.LatencyMemory = 10 * time.Second }},
		{"Q_RIF 0.75", func(c *PrequalConfig) { c.QRIF = 0.75 }},
		{"1 probe per query", func(c *PrequalConfig) { c.ProbesPerQuery = 1 }},
		{"reuse limit 3", func(c *PrequalConfig) { c.MaxReuse = 3 }},
	}
	for _, f := range fleets {
		var b strings.Builder
		fmt.Fprintf(&b, "\n%s: p99 / p50 ms, fast share, max queue first→last quarter\n", f.name)
		row := func(name string, est func() fleetEstimator, mk func() Policy) {
			r := runFleet(t, fleetSetup{
				clients: f.clients, rps: f.load * halfSlowCapacity(f.n, 2, mean),
				dur: 20 * time.Second, warmup: 3 * time.Second, probeDelay: time.Millisecond, seed: 1,
				newPolicy: mk, replicas: halfSlowFleet(f.n, 2, mean, est),
			})
			fmt.Fprintf(&b, "| %s | %.0f / %.0f | %.1f%% | %d→%d |\n", name,
				float64(r.p99)/float64(time.Millisecond), float64(r.p50)/float64(time.Millisecond),
				100*r.groupShare[0], r.maxRIF[0], r.maxRIF[3])
		}
		for _, e := range []struct {
			name string
			f    func() fleetEstimator
		}{{"1 s window", backendWindow}, {"by count", recentByCount}} {
			for _, v := range variants {
				row("prequal, "+e.name+", "+v.name, e.f, policyMaker(t, NamePrequal, v.mod))
			}
		}
		row("least-request", recentByCount, policyMaker(t, NameLeastRequest, nil))
		row("p2c", recentByCount, policyMaker(t, NameP2C, nil))
		t.Log(b.String())
	}
}
