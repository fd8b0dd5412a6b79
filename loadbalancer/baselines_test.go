package loadbalancer

import (
	"testing"
	"time"
)

func TestRoundRobin_CyclesPerRoute(t *testing.T) {
	rng := newRNG()
	a := newPolicy(t, "rr", 3, nil)
	b := newPolicy(t, "rr", 3, nil)
	var seqA []string
	for range 6 {
		seqA = append(seqA, mustPick(t, a, t0, rng).Endpoint)
		mustPick(t, b, t0, rng) // another route's picks must not disturb a's cycle
	}
	for i := 3; i < 6; i++ {
		if seqA[i] != seqA[i-3] {
			t.Fatalf("route a's sequence %v is not a cycle of 3", seqA)
		}
	}
	if seqA[0] == seqA[1] || seqA[1] == seqA[2] || seqA[0] == seqA[2] {
		t.Errorf("one cycle %v does not visit every endpoint", seqA[:3])
	}
}

func TestLeastRequest_FullScanRandomTies(t *testing.T) {
	p := newPolicy(t, "least-request", 4, nil)
	rng := newRNG()
	a := addrs(4)
	// Load endpoints 0, 1 and 3 with requests that stay in flight.
	var held []Picked
	for len(held) < 3 {
		pk := mustPick(t, p, t0, rng)
		held = append(held, pk)
	}
	// Three picks on an empty fleet hit three distinct endpoints.
	seen := map[string]bool{}
	for _, h := range held {
		seen[h.Endpoint] = true
	}
	if len(seen) != 3 {
		t.Fatalf("first three picks %v are not distinct", held)
	}
	var free string
	for _, x := range a {
		if !seen[x] {
			free = x
		}
	}
	if pk := mustPick(t, p, t0, rng); pk.Endpoint != free {
		t.Errorf("Pick = %s, want the only idle endpoint %s", pk.Endpoint, free)
	}
	// Ties are spread evenly, not biased to an end of the list.
	q := newPolicy(t, "least-request", 4, nil)
	count := map[string]int{}
	for range 4000 {
		pk := mustPick(t, q, t0, rng)
		count[pk.Endpoint]++
		q.Done(t0, pk, time.Millisecond, 200)
	}
	for _, x := range a {
		if count[x] < 850 || count[x] > 1150 {
			t.Errorf("tie-break share of %s = %d of 4000", x, count[x])
		}
	}
}

// TestP2C_TwoChoicesWithoutReplacement: with two endpoints, sampling two
// without replacement always compares both, so the busier never wins.
func TestP2C_TwoChoicesWithoutReplacement(t *testing.T) {
	p := newPolicy(t, "p2c", 2, nil)
	rng := newRNG()
	busy := mustPick(t, p, t0, rng)
	for range 1000 {
		pk := mustPick(t, p, t0, rng)
		if pk.Endpoint == busy.Endpoint {
			t.Fatal("p2c picked the busier of two endpoints")
		}
		p.Done(t0, pk, time.Millisecond, 200)
	}
}

func TestRandom_Uniform(t *testing.T) {
	p := newPolicy(t, "random", 5, nil)
	rng := newRNG()
	for range 5000 {
		mustPick(t, p, t0, rng)
	}
	for a, c := range picksByAddr(p.Stats()) {
		if c < 850 || c > 1150 {
			t.Errorf("%s got %d of 5000", a, c)
		}
	}
}

func TestPeakEWMA_PrefersLowerCostAndDecays(t *testing.T) {
	p := newPolicy(t, "peak-ewma", 2, nil)
	rng := newRNG()
	a := addrs(2)
	// Teach it: endpoint 0 takes 100 ms, endpoint 1 takes 10 ms.
	pe := p.(*peakEWMA)
	p.Done(t0, pe.pick(0), 100*time.Millisecond, 200)
	p.Done(t0, pe.pick(1), 10*time.Millisecond, 200)
	if e0, e1 := pe.estimate(0, t0), pe.estimate(1, t0); e0 < float64(100*time.Millisecond) || e1 > e0 {
		t.Fatalf("estimates = %v, %v", e0, e1)
	}
	for range 100 {
		pk := mustPick(t, p, at(1), rng)
		if pk.Endpoint != a[1] {
			t.Fatal("picked the slow endpoint while both are idle")
		}
		p.Done(at(1), pk, 10*time.Millisecond, 200)
	}
	// In-flight multiplies the cost: 10 requests held on the fast one make
	// it costlier than the idle slow one.
	for range 10 {
		pe.pick(1)
	}
	if pk := mustPick(t, p, at(2), rng); pk.Endpoint != a[0] {
		t.Errorf("Pick = %s, want the idle slow endpoint once the fast one is loaded", pk.Endpoint)
	}
	// A peak replaces the estimate at once.
	pe.Done(at(3), Picked{Endpoint: a[1], index: 1, gen: pe.gen}, time.Second, 200)
	if got := pe.estimate(1, at(3)); got != float64(time.Second) {
		t.Errorf("estimate after a 1 s peak = %v", time.Duration(got))
	}
	// Decay: after τ the estimate is 1/e of the peak.
	if got := pe.estimate(1, at(3).Add(10*time.Second)); got > 0.37*float64(time.Second) || got < 0.36*float64(time.Second) {
		t.Errorf("estimate 10 s after the peak = %v, want ≈ 368 ms", time.Duration(got))
	}
}

// TestAllPolicies_DoneAcrossSetEndpoints covers the token contract for every
// policy: Done finds its endpoint after the set changed, ignores an endpoint
// that left, and Reset keeps in-flight counts.
func TestAllPolicies_DoneAcrossSetEndpoints(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			p := newPolicy(t, name, 3, nil)
			rng := newRNG()
			a := addrs(3)
			var toks []Picked
			for range 6 {
				toks = append(toks, mustPick(t, p, t0, rng))
			}
			p.SetEndpoints(at(1), []string{a[2], a[0]}) // a[1] leaves, the rest move
			p.Reset(at(1))
			want := map[string]int{}
			for _, tk := range toks {
				if tk.Endpoint != a[1] {
					want[tk.Endpoint]++
				}
			}
			s := p.Stats()
			if s.Picks != 0 || len(s.Endpoints) != 2 {
				t.Fatalf("after Reset: picks %d, endpoints %d", s.Picks, len(s.Endpoints))
			}
			for _, e := range s.Endpoints {
				if e.InFlight != want[e.Address] || e.Picks != 0 {
					t.Errorf("%s: in flight %d (want %d), picks %d", e.Address, e.InFlight, want[e.Address], e.Picks)
				}
			}
			for _, tk := range toks {
				p.Done(at(2), tk, time.Millisecond, 502)
			}
			for _, e := range p.Stats().Endpoints {
				if e.InFlight != 0 || e.Errors != uint64(want[e.Address]) {
					t.Errorf("%s after Done: in flight %d, errors %d (want 0, %d)", e.Address, e.InFlight, e.Errors, want[e.Address])
				}
			}
			// A Done arriving twice, or for an endpoint that came back
			// fresh, never drives the count negative.
			p.Done(at(3), toks[0], time.Millisecond, 200)
			for _, e := range p.Stats().Endpoints {
				if e.InFlight < 0 {
					t.Errorf("%s in flight %d", e.Address, e.InFlight)
				}
			}
			p.SetEndpoints(at(4), nil)
			if _, err := p.Pick(at(4), rng); err == nil {
				t.Error("Pick with no endpoints succeeded")
			}
			if due := p.ProbesDue(at(4), rng, nil); len(due) != 0 {
				t.Errorf("probes due with no endpoints: %v", due)
			}
		})
	}
}

func TestAllPolicies_StatsCounters(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			p := newPolicy(t, name, 4, nil)
			rng := newRNG()
			var due []string
			for i := range 20 {
				mustPick(t, p, at(i), rng)
				n := len(due)
				due = p.ProbesDue(at(i), rng, due)
				for _, d := range due[n:] {
					p.ProbeFailed(at(i), d, ProbeTimeout)
				}
			}
			s := p.Stats()
			if s.Algorithm != name || s.Picks != 20 {
				t.Errorf("stats = %+v", s)
			}
			var sum uint64
			for _, e := range s.Endpoints {
				sum += e.Picks
			}
			if sum != 20 {
				t.Errorf("per-endpoint picks sum to %d", sum)
			}
			if len(s.ProbeOutcomes) != len(ProbeOutcomes) {
				t.Errorf("ProbeOutcomes has %d keys, want all %d", len(s.ProbeOutcomes), len(ProbeOutcomes))
			}
			if UsesProbes(name) {
				least := uint64(60) // r_probe = 3 a query
				if name == NameWRR || name == NameYARPPo2C {
					least = 4 // one poll of every endpoint
				}
				if s.ProbesPlanned != uint64(len(due)) || s.ProbesPlanned < least || s.ProbeOutcomes[ProbeTimeout] != s.ProbesPlanned {
					t.Errorf("probes planned %d, due %d, timeouts %d", s.ProbesPlanned, len(due), s.ProbeOutcomes[ProbeTimeout])
				}
			} else if len(due) != 0 || s.ProbesPlanned != 0 {
				t.Errorf("%s planned probes: %v", name, due)
			}
		})
	}
}

func TestPeakEWMA_SetEndpointsKeepsEstimates(t *testing.T) {
	p := newPolicy(t, "peak-ewma", 3, nil).(*peakEWMA)
	a := addrs(3)
	p.Done(t0, Picked{Endpoint: a[2], index: 2, gen: p.gen}, 80*time.Millisecond, 200)
	p.SetEndpoints(t0, []string{"10.9.9.9:80", a[2]})
	if got := p.estimate(1, t0); got != float64(80*time.Millisecond) {
		t.Errorf("estimate of a surviving endpoint = %v, want 80ms", time.Duration(got))
	}
	if got := p.estimate(0, t0); got != float64(30*time.Millisecond) {
		t.Errorf("estimate of a new endpoint = %v, want the 30ms default", time.Duration(got))
	}
	p.Reset(t0)
	if got := p.estimate(1, t0); got != float64(30*time.Millisecond) {
		t.Errorf("estimate after Reset = %v, want the default", time.Duration(got))
	}
}

// Done calls that carry the same time (or arrive slightly out of order, as
// concurrent requests finish) must not throw the estimate away.
func TestPeakEWMA_NoElapsedTimeKeepsEstimate(t *testing.T) {
	p := newPolicy(t, "peak-ewma", 1, nil)
	pe := p.(*peakEWMA)
	rng := newRNG()
	pk := mustPick(t, p, t0, rng)
	p.Done(t0, pk, 100*time.Millisecond, 200)
	pk = mustPick(t, p, t0, rng)
	p.Done(t0, pk, time.Millisecond, 200)
	if e := pe.estimate(0, t0); e < float64(99*time.Millisecond) {
		t.Fatalf("estimate after a fast sample at the same instant = %v, want ~100ms kept", time.Duration(e))
	}
	pk = mustPick(t, p, t0, rng)
	p.Done(t0.Add(-time.Millisecond), pk, time.Millisecond, 200) // out of order
	if e := pe.estimate(0, t0); e < float64(99*time.Millisecond) {
		t.Fatalf("estimate after an out-of-order sample = %v, want ~100ms kept", time.Duration(e))
	}
}
