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
// only with PREQUAL_FLEET_TABLE=1; the numbers are in the README.
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
	est := backendWindow
	if os.Getenv("PREQUAL_FLEET_EST") == "count" {
		est = recentByCount
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
