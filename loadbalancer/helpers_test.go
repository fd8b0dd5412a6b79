package loadbalancer

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// t0 is the fake clock's origin.
var t0 = time.Unix(1_700_000_000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func newRNG() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

func addrs(n int) []string {
	a := make([]string, n)
	for i := range a {
		a[i] = fmt.Sprintf("10.0.%d.%d:8080", i/250, i%250+1)
	}
	return a
}

// newPolicy builds a policy with default config modified by mod, and n
// endpoints.
func newPolicy(t testing.TB, name string, n int, mod func(*Config)) Policy {
	t.Helper()
	cfg := DefaultConfig()
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(name, cfg)
	if err != nil {
		t.Fatalf("New(%q): %v", name, err)
	}
	p.SetEndpoints(t0, addrs(n))
	return p
}

func newPrequalT(t testing.TB, n int, mod func(*PrequalConfig)) *prequal {
	t.Helper()
	return newPolicy(t, NamePrequal, n, func(c *Config) {
		if mod != nil {
			mod(&c.Prequal)
		}
	}).(*prequal)
}

func known(rif int, lat time.Duration) ProbeReply {
	return ProbeReply{RIF: rif, Latency: lat, LatencyKnown: true}
}

func mustPick(t testing.TB, p Policy, now time.Time, rng *rand.Rand) Picked {
	t.Helper()
	pk, err := p.Pick(now, rng)
	if err != nil {
		t.Fatalf("Pick: %v", err)
	}
	return pk
}

func picksByAddr(s Stats) map[string]uint64 {
	m := map[string]uint64{}
	for _, e := range s.Endpoints {
		m[e.Address] = e.Picks
	}
	return m
}
