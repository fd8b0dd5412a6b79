package loadbalancer

import (
	"testing"
	"time"
)

// TestPrequalSync_AppliesTheHotColdSplit: sync mode ranks its answers by
// HCL, not by latency alone: a fast answer whose RIF is above the Q_RIF
// quantile of recent answers loses to a slower cold one, and when every
// answer is hot the lowest RIF wins and the pick is marked hot.
func TestPrequalSync_AppliesTheHotColdSplit(t *testing.T) {
	ms := time.Millisecond
	p := newPolicy(t, "prequal-sync{d=3}", 10, nil)
	s := p.(*prequalSync)
	rng := newRNG()
	for q := range 50 {
		for i := range 64 {
			s.recordRIF(i % 4) // θ = 3 at Q_RIF 2^-0.25: RIF 4 and up are hot
		}
		plan := s.PlanSync(at(q), rng, nil)
		ans := []SyncAnswer{
			{Endpoint: plan[0], Reply: known(9, ms), OK: true},    // fastest, hot
			{Endpoint: plan[1], Reply: known(1, 20*ms), OK: true}, // cold, slower
			{Endpoint: plan[2], Reply: known(0, 40*ms), OK: true}, // cold, slowest
		}
		pk, err := s.PickSync(at(q), rng, ans)
		if err != nil || pk.Endpoint != plan[1] || pk.Hot {
			t.Fatalf("query %d: PickSync = %+v, %v; want the fastest cold answer %s", q, pk, err, plan[1])
		}
		p.Done(at(q), pk, ms, 200)
	}
	for range 64 {
		s.recordRIF(0) // θ = 0: every answer with a request in flight is hot
	}
	plan := s.PlanSync(at(100), rng, nil)
	ans := []SyncAnswer{
		{Endpoint: plan[0], Reply: known(5, ms), OK: true},
		{Endpoint: plan[1], Reply: known(2, 30*ms), OK: true},
	}
	pk, err := s.PickSync(at(100), rng, ans)
	if err != nil || pk.Endpoint != plan[1] || !pk.Hot {
		t.Fatalf("all hot: PickSync = %+v, %v; want the lowest RIF %s, hot", pk, err, plan[1])
	}
}

// TestPrequal_WorstTiesGoToTheOldest: among probes tied for "worst" the
// oldest is removed, as among the rest of the pool; the newest of the tied
// carries the most recent information.
func TestPrequal_WorstTiesGoToTheOldest(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		replies map[int]ProbeReply
	}{
		{"cold, tied at the highest latency", map[int]ProbeReply{0: known(0, ms), 1: known(1, 9*ms), 2: known(1, 9*ms), 3: known(1, 9*ms)}},
		{"hot, tied at the highest RIF", map[int]ProbeReply{0: known(0, ms), 1: known(12, 2*ms), 2: known(12, 5*ms), 3: known(12, ms)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPrequalT(t, 6, nil)
			for range 64 {
				p.recordRIF(5)
			}
			// Endpoints 1, 2, 3 answer in that order: 1 is the oldest tie.
			for i := range 4 {
				p.ProbeResult(at(i), p.eps[i].addr, tc.replies[i])
			}
			w := p.worst(p.hotThreshold())
			if got := int(p.pool[w].ep); got != 1 {
				t.Fatalf("worst = endpoint %d, want 1 (the oldest of those tied)", got)
			}
		})
	}
}

// TestPrequal_SingleEndpointIsNoFallback: behind one replica there is no
// choice, so no pick counts as a random fallback (every pick did: a pool
// holds one probe per replica and MinProbes is 2), with a probe in the
// pool or without; sync mode likewise.
func TestPrequal_SingleEndpointIsNoFallback(t *testing.T) {
	for _, name := range []string{"prequal", "prequal-sync"} {
		p := newPolicy(t, name, 1, nil)
		rng := newRNG()
		for q := range 100 {
			if q == 50 {
				p.ProbeResult(at(q), addrs(1)[0], known(0, time.Millisecond))
			}
			pk := mustPick(t, p, at(q), rng)
			if pk.Fallback {
				t.Fatalf("%s, pick %d: a fallback with one replica", name, q)
			}
			p.Done(at(q), pk, time.Millisecond, 200)
		}
		if s := p.Stats(); s.Fallbacks != 0 || s.Picks != 100 {
			t.Errorf("%s: fallbacks %d of %d picks, want 0", name, s.Fallbacks, s.Picks)
		}
	}
	// Two replicas and one probe: still a fallback (a choice exists).
	p := newPrequalT(t, 2, nil)
	p.ProbeResult(t0, p.eps[0].addr, known(0, time.Millisecond))
	if pk := mustPick(t, p, t0, newRNG()); !pk.Fallback {
		t.Errorf("two replicas, one probe: pick %+v, want a fallback", pk)
	}
}
