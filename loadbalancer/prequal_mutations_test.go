package loadbalancer

import (
	"math"
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

// TestPrequalSync_LearnsTheRIFQuantileFromItsAnswers: sync mode's hot
// threshold comes from the RIFs its own answers report, driven only
// through PlanSync and PickSync. After answers with RIF 0-2, a fast answer
// at RIF 9 is hot and loses to the fastest cold one; with every answer
// above the quantile the lowest RIF wins, hot. A sync mode that took no
// RIF into its window (threshold at infinity: latency only), or ranked by
// RIF or latency alone, passed TestPrequalSync_AppliesTheHotColdSplit,
// which fills the window by hand.
func TestPrequalSync_LearnsTheRIFQuantileFromItsAnswers(t *testing.T) {
	ms := time.Millisecond
	p := newPolicy(t, "prequal-sync{d=3}", 10, nil)
	s := p.(*prequalSync)
	rng := newRNG()
	query := func(q int, replies ...ProbeReply) (Picked, []string) {
		t.Helper()
		plan := s.PlanSync(at(q), rng, nil)
		ans := make([]SyncAnswer, len(replies))
		for i, r := range replies {
			ans[i] = SyncAnswer{Endpoint: plan[i], Reply: r, OK: true}
		}
		pk, err := s.PickSync(at(q), rng, ans)
		if err != nil {
			t.Fatalf("query %d: PickSync: %v", q, err)
		}
		p.Done(at(q), pk, ms, 200)
		return pk, plan
	}
	for q := range 30 { // 90 answers: the window holds RIFs 0, 1 and 2 only
		query(q, known(0, 5*ms), known(1, 5*ms), known(2, 5*ms))
	}
	for q := 30; q < 90; q++ {
		if q%4 != 0 { // keep RIF 9 rare in the window (under 1/6 of it)
			query(q, known(0, 5*ms), known(1, 5*ms), known(2, 5*ms))
			continue
		}
		pk, plan := query(q, known(9, ms), known(1, 20*ms), known(0, 40*ms))
		if pk.Endpoint != plan[1] || pk.Hot {
			t.Fatalf("query %d: picked %s (hot %v); want %s, the fastest cold answer (RIF 9 is hot)", q, pk.Endpoint, pk.Hot, plan[1])
		}
	}
	pk, plan := query(90, known(9, ms), known(5, 30*ms), known(7, 2*ms))
	if pk.Endpoint != plan[1] || !pk.Hot {
		t.Fatalf("all hot: picked %s (hot %v); want %s, the lowest RIF, hot", pk.Endpoint, pk.Hot, plan[1])
	}
	// Once the answers report RIFs 8-10, RIF 9 is below the quantile and
	// cold: the window holds the answers' own RIFs, not a constant or a
	// scaled copy.
	for q := 91; q < 121; q++ {
		query(q, known(8, 5*ms), known(9, 5*ms), known(10, 5*ms))
	}
	pk, plan = query(121, known(9, ms), known(8, 20*ms), known(10, 40*ms))
	if pk.Endpoint != plan[0] || pk.Hot {
		t.Fatalf("after RIFs 8-10: picked %s (hot %v); want %s, RIF 9 cold and fastest", pk.Endpoint, pk.Hot, plan[0])
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

// TestScoredWorstTiesGoToTheOldest: linear and rif-only remove the oldest
// of the probes tied for the highest score, as HCL does.
func TestScoredWorstTiesGoToTheOldest(t *testing.T) {
	for _, name := range []string{"linear", "rif-only"} {
		p := newPolicy(t, name, 6, nil).(*prequal)
		// Endpoints 1, 2, 3 answer alike, in that order: 1 is the oldest.
		for i, r := range []ProbeReply{known(0, time.Millisecond), known(7, 9*time.Millisecond), known(7, 9*time.Millisecond), known(7, 9*time.Millisecond)} {
			p.ProbeResult(at(i), p.eps[i].addr, r)
		}
		w := p.sel.worst(p, p.hotThreshold())
		if got := int(p.pool[w].ep); got != 1 {
			t.Errorf("%s: worst = endpoint %d, want 1 (the oldest of those tied)", name, got)
		}
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

// TestPeakEWMA_DecaysAsTower: the estimate follows tower's PeakEwma
// (linkerd2-proxy's balancer): a read decays it toward 0 and stores it, a
// sample above the stored value replaces it, a lower one blends with the
// weight of the time since the last update, and a new endpoint starts at
// DefaultRTT and decays from its arrival. Values computed by hand from
// tower/src/load/peak_ewma.rs with τ = 10 s and a 30 ms default.
func TestPeakEWMA_DecaysAsTower(t *testing.T) {
	ms := float64(time.Millisecond)
	sec := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	near := func(got, want float64) bool { return math.Abs(got-want) < 0.01*ms }

	p := newPolicy(t, "peak-ewma", 1, nil).(*peakEWMA)
	if got := p.estimate(0, sec(10)); !near(got, 30*ms*math.Exp(-1)) {
		t.Errorf("new endpoint after τ: %.3f ms, want the 30 ms default decayed to %.3f", got/ms, 30*math.Exp(-1))
	}
	p.Reset(t0)
	p.Done(t0, p.pick(0), 100*time.Millisecond, 200) // a peak: 100 ms
	p.cost(0, sec(10))                               // a read after τ: 36.79 ms stored
	p.Done(sec(10), p.pick(0), 50*time.Millisecond, 200)
	if got := p.rtt[0].ns; !near(got, 50*ms) {
		t.Errorf("50 ms after a read decayed 100 ms to 36.8: estimate %.3f ms, want 50 (a peak over the stored value)", got/ms)
	}

	p.Reset(t0)
	p.Done(t0, p.pick(0), 100*time.Millisecond, 200)
	p.cost(0, sec(1)) // 100·e^-0.1 = 90.484
	p.Done(sec(1.1), p.pick(0), 10*time.Millisecond, 200)
	w := math.Exp(-0.01)
	want := 100*ms*math.Exp(-0.1)*w + 10*ms*(1-w)
	if got := p.rtt[0].ns; !near(got, want) {
		t.Errorf("10 ms sample 0.1 s after a read: estimate %.3f ms, want %.3f", got/ms, want/ms)
	}
}

// TestReuseBudget_Eq1AtLowProbeRates: far from the pole Eq. 1 applies up to
// MaxReuse (the paper's §5.3 sweep: r_probe 0.5 and 1 with r_remove 0.25 at
// n = 100 give 11.8 and 3.39), and just above the pole the budget rises by
// at most one per replica.
func TestReuseBudget_Eq1AtLowProbeRates(t *testing.T) {
	for _, tc := range []struct {
		n              int
		rProbe, remove float64
		want           float64
	}{
		{100, 0.5, 0.25, 2 / (0.84*0.5 - 0.25)},
		{100, 1, 0.25, 2 / (0.84 - 0.25)},
		{100, 3, 1, 2 / (0.84*3 - 1)},
		{25, 3, 1, 2}, // Eq. 1 gives 25; the pole is at 24
		{26, 3, 1, 3},
		{40, 3, 1, 2.5},
	} {
		got := reuseBudget(16, tc.n, tc.rProbe, tc.remove, 1, DefaultConfig().Prequal.MaxReuse)
		if math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("n %d, r_probe %g, r_remove %g: budget %v, want %v", tc.n, tc.rProbe, tc.remove, got, tc.want)
		}
	}
}
