package loadbalancer

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// fill hands in one probe answer per (endpoint index, reply) at now.
func fill(p *prequal, now time.Time, replies map[int]ProbeReply) {
	for i := range len(p.eps) {
		if r, ok := replies[i]; ok {
			p.ProbeResult(now, p.eps[i].addr, r)
		}
	}
}

func TestReuseBudget_Eq1(t *testing.T) {
	tests := []struct {
		name                 string
		m, n                 int
		rProbe, rRemove, dlt float64
		maxReuse             int
		want                 float64
	}{
		{"paper testbed", 16, 100, 3, 1, 1, 16, 2 / 1.52},
		{"n equals m: negative denominator, literally max{1, negative}", 16, 16, 3, 1, 1, 16, 1},
		{"n below m: negative denominator", 16, 4, 2, 1, 2, 7, 1},
		{"denominator exactly 0: the pole gives 1, not the cap", 16, 24, 3, 1, 1, 16, 1},
		{"just past the pole: capped", 16, 25, 3, 1, 1, 2, 2},
		{"removal keeps pace with probes: the pool never refills", 16, 100, 1, 1, 1, 16, 1},
		{"floor of 1", 16, 1_000_000, 3, 1, 0, 16, 1},
		{"capped", 16, 100, 1.2, 1, 1, 5, 5},
		{"no endpoints", 16, 0, 3, 1, 1, 16, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := reuseBudget(tt.m, tt.n, tt.rProbe, tt.rRemove, tt.dlt, tt.maxReuse)
			if math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("reuseBudget = %v, want %v", got, tt.want)
			}
		})
	}
	if got := reuseBudget(16, 100, 3, 1, 1, 16); math.Abs(got-1.3158) > 1e-3 {
		t.Errorf("testbed b_reuse = %.4f, want ≈ 1.32", got)
	}
}

// TestPrequal_ReuseBudgetRandomRounding checks that with the testbed values
// (b_reuse ≈ 1.32) a probe serves 1 or 2 queries, 1.32 on average.
func TestPrequal_ReuseBudgetRandomRounding(t *testing.T) {
	// A fast probe and two slow ones under latency-only control: every pick
	// uses the fast probe until its budget removes it (per-query removal
	// stops at half the pool, so it removes none of the three).
	p := newPrequalT(t, 100, func(c *PrequalConfig) { c.MinProbes, c.QRIF, c.MaxReuse = 1, 1, 16 })
	rng := newRNG()
	uses := 0
	const trials = 3000
	for trial := range trials {
		p.Reset(t0)
		fast := p.eps[trial%98].addr
		p.ProbeResult(t0, fast, known(0, time.Millisecond))
		p.ProbeResult(t0, p.eps[98].addr, known(0, time.Second))
		p.ProbeResult(t0, p.eps[99].addr, known(0, time.Second))
		for n := 0; len(p.pool) == 3; n++ {
			if n == 100 {
				t.Fatal("a probe served 100 queries: no reuse budget")
			}
			pk := mustPick(t, p, t0, rng)
			if pk.Fallback || pk.Endpoint != fast {
				t.Fatalf("pick %+v, want the fast probe %s", pk, fast)
			}
			uses++
		}
	}
	mean := float64(uses) / trials
	if math.Abs(mean-2/1.52) > 0.03 {
		t.Errorf("mean uses per probe = %.3f, want ≈ %.3f", mean, 2/1.52)
	}
	if got := p.Stats().PoolRemovals["reuse"]; got != 1 {
		t.Errorf("reuse removals in the last trial = %d, want 1", got)
	}
}

// TestPrequal_ReuseBudgetDenominatorNegative checks the documented rule:
// with n <= m, Eq. 1's denominator is negative; refreshes count as refills,
// so b_reuse = (1+δ)/(r_probe − r_remove) = 2/3, floored at 1: each probe
// serves one query.
func TestPrequal_ReuseBudgetDenominatorNegative(t *testing.T) {
	p := newPrequalT(t, 10, func(c *PrequalConfig) { c.RemovePerQuery = 0; c.MaxReuse = 5; c.QRIF = 1 })
	rng := newRNG()
	fill(p, t0, map[int]ProbeReply{0: known(0, time.Millisecond), 1: known(100, 9*time.Millisecond), 2: known(0, 5*time.Millisecond)})
	if pk := mustPick(t, p, t0, rng); pk.Endpoint != p.eps[0].addr {
		t.Fatalf("first pick = %s, want the fastest %s", pk.Endpoint, p.eps[0].addr)
	}
	if got := p.Stats().PoolRemovals["reuse"]; got != 1 {
		t.Fatalf("reuse removals after one pick = %d, want 1", got)
	}
	if pk := mustPick(t, p, t0, rng); pk.Endpoint == p.eps[0].addr {
		t.Error("probe used beyond its reuse budget of 1")
	}
}

// TestPrequal_ReuseBudgetNoStepAtThePole: the budget in force (in Stats)
// never exceeds MaxReuse at any fleet size and is 1 up to the pole; the
// seed's code jumped from 1 to 16 at n = 24.
func TestPrequal_ReuseBudgetNoStepAtThePole(t *testing.T) {
	p := newPrequalT(t, 1, nil)
	prev := 0.0
	for n := 1; n <= 200; n++ {
		p.SetEndpoints(t0, addrs(n))
		b := p.Stats().ReuseBudget
		if b < 1 || b > float64(p.cfg.MaxReuse) {
			t.Fatalf("n = %d: reuse budget %v outside [1, MaxReuse=%d]", n, b, p.cfg.MaxReuse)
		}
		if n <= 24 && b != 1 {
			t.Errorf("n = %d: reuse budget %v, want 1 where Eq. 1's denominator is <= 0", n, b)
		}
		if n > 1 && b-prev > 1 {
			t.Errorf("n = %d: budget steps from %v to %v", n, prev, b)
		}
		prev = b
	}
	if got := newPolicy(t, NameRoundRobin, 3, nil).Stats().ReuseBudget; got != 0 {
		t.Errorf("round-robin reports a reuse budget %v", got)
	}
}

// TestPrequalConfig_ReuseWarning: the warning appears exactly where
// (1 − m/n)·r_probe <= r_remove and names the quantities.
func TestPrequalConfig_ReuseWarning(t *testing.T) {
	c := DefaultConfig().Prequal
	for _, tt := range []struct {
		n    int
		warn bool
	}{{8, true}, {16, true}, {24, true}, {25, false}, {100, false}, {0, false}} {
		w := c.ReuseWarning(tt.n)
		if (w != "") != tt.warn {
			t.Errorf("n = %d: warning %q, want warning=%v", tt.n, w, tt.warn)
		}
		if tt.warn && !strings.Contains(w, "r_remove") {
			t.Errorf("n = %d: warning %q does not name r_remove", tt.n, w)
		}
	}
	c.RemovePerQuery = c.ProbesPerQuery
	if c.ReuseWarning(1000) == "" {
		t.Error("r_probe = r_remove: no warning at n = 1000")
	}
}

// TestPrequal_RemovalAlternatesOldestAndWorst: per-query removal alternates
// the oldest and the worst.
func TestPrequal_RemovalAlternatesOldestAndWorst(t *testing.T) {
	p := newPrequalT(t, 25, func(c *PrequalConfig) { c.QRIF = 1; c.MaxReuse = 1 })
	rng := newRNG()
	p.recordRIF(50) // threshold 50: no probe turns hot through use here
	// Endpoint i answers at t0+i ms with latency 1+i ms, so the oldest is
	// the fastest and the newest the slowest (the worst).
	for i := range 16 {
		p.ProbeResult(at(i), p.eps[i].addr, known(0, time.Duration(1+i)*time.Millisecond))
	}
	now := at(20)
	for range 4 {
		mustPick(t, p, now, rng)
	}
	// Each pick uses the fastest probe, which leaves (budget 1), then
	// removes the oldest, the worst, the oldest, the worst.
	s := p.Stats()
	if s.PoolRemovals["oldest"] != 2 || s.PoolRemovals["worst"] != 2 || s.PoolRemovals["reuse"] != 4 {
		t.Fatalf("removals = %v, want 4 reuse, 2 oldest and 2 worst", s.PoolRemovals)
	}
	in := map[int]bool{}
	for _, e := range p.pool {
		in[int(e.ep)] = true
	}
	// Used: 0, 2, 3, 5; oldest: 1, 4; worst: 15, 14.
	for _, gone := range []int{0, 1, 2, 3, 4, 5, 14, 15} {
		if in[gone] {
			t.Errorf("endpoint %d still in the pool", gone)
		}
	}
	if len(p.pool) != 8 {
		t.Errorf("pool size = %d, want 8", len(p.pool))
	}
}

// TestPrequal_WorstRanking: "worst" is a probe being explored if any, then
// the hot probe with the highest RIF if any is hot, else the cold probe
// with the highest latency; a known latency ranks worse than an unknown one.
func TestPrequal_WorstRanking(t *testing.T) {
	ms := time.Millisecond
	unknown := func(rif int) ProbeReply { return ProbeReply{RIF: rif} }
	tests := []struct {
		name    string
		replies map[int]ProbeReply
		want    int
	}{
		{"hot highest RIF beats slow cold", map[int]ProbeReply{0: known(10, ms), 1: known(12, 2*ms), 2: known(0, 50*ms), 3: known(1, 3*ms)}, 1},
		{"no hot: highest latency", map[int]ProbeReply{0: known(2, ms), 1: known(1, 2*ms), 2: known(0, 50*ms), 3: known(3, 3*ms)}, 2},
		{"known slow before unknown", map[int]ProbeReply{0: unknown(0), 1: known(0, 9*ms), 2: known(0, 2*ms)}, 1},
		{"being explored (unknown, busy) before the slowest", map[int]ProbeReply{0: unknown(3), 1: known(0, 9*ms), 2: known(0, 2*ms)}, 0},
		{"only unknown: highest RIF", map[int]ProbeReply{0: unknown(3), 1: unknown(4), 2: unknown(0)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPrequalT(t, 4, nil)
			for range 40 {
				p.recordRIF(5) // threshold 5, the window's maximum: RIF 10 and 12 are hot
			}
			fill(p, t0, tt.replies)
			if w := p.worst(p.hotThreshold()); int(p.pool[w].ep) != tt.want {
				t.Errorf("worst = endpoint %d, want %d", p.pool[w].ep, tt.want)
			}
		})
	}
}

func TestPrequal_FractionalRemovalRate(t *testing.T) {
	// A pool of 32 stays above its half through 8 picks.
	p := newPrequalT(t, 100, func(c *PrequalConfig) { c.RemovePerQuery = 0.25; c.QRIF = 1; c.PoolSize = 32 })
	rng := newRNG()
	for i := range 32 {
		p.ProbeResult(at(i), p.eps[i].addr, known(0, time.Duration(1+i)*time.Millisecond))
	}
	for range 8 {
		mustPick(t, p, at(20), rng)
	}
	s := p.Stats()
	if got := s.PoolRemovals["oldest"] + s.PoolRemovals["worst"]; got != 2 {
		t.Errorf("removals after 8 queries at r_remove=0.25 = %d, want 2", got)
	}
}

// TestPrequal_RemovalStopsAtHalfThePool: per-query removal never takes the
// pool below half of m; a spent probe still leaves down to MinProbes.
func TestPrequal_RemovalStopsAtHalfThePool(t *testing.T) {
	p := newPrequalT(t, 100, func(c *PrequalConfig) { c.RemovePerQuery = 5 })
	for i := range 10 {
		p.ProbeResult(t0, p.eps[i].addr, known(0, time.Duration(1+i)*time.Millisecond))
	}
	mustPick(t, p, t0, newRNG())
	if len(p.pool) != 8 {
		t.Errorf("pool after heavy removal = %d, want PoolSize/2 = 8", len(p.pool))
	}
	q := newPrequalT(t, 16, nil)
	fill(q, t0, map[int]ProbeReply{0: known(0, time.Millisecond), 1: known(0, 2*time.Millisecond), 2: known(0, 3*time.Millisecond)})
	rng := newRNG()
	for range 3 {
		if pk := mustPick(t, q, t0, rng); pk.Fallback {
			t.Fatalf("fallback with %d probes in the pool", len(q.pool))
		}
	}
	if len(q.pool) != 2 {
		t.Errorf("pool after three picks at budget 1 = %d, want MinProbes = 2 (spent probes stay at the minimum)", len(q.pool))
	}
}

func TestPrequal_HCLRule(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		window  []int // extra RIFs from other replicas, fed to the quantile first
		replies map[int]ProbeReply
		mod     func(*PrequalConfig)
		want    int
		wantHot bool
	}{
		{
			name:    "cold lowest latency beats lower RIF",
			window:  []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
			replies: map[int]ProbeReply{0: known(0, 9*ms), 1: known(3, 2*ms), 2: known(1, 5*ms)},
			want:    1,
		},
		{
			// 7·1 < 2·(1+3) < 5·(1+1): the paper's rule would take 1.
			name:    "coldrif ranks latency times 1 + w·RIF",
			window:  []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
			replies: map[int]ProbeReply{0: known(0, 7*ms), 1: known(3, 2*ms), 2: known(1, 5*ms)},
			mod:     func(c *PrequalConfig) { c.ColdRIFWeight = 1 },
			want:    0,
		},
		{
			// Within the tolerance of the best key (8 ms·1.25 = 10 ms), RIF
			// decides: the tolerance applies to the key, not the latency.
			name:    "coldrif with a tolerance ties on the key",
			window:  []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
			replies: map[int]ProbeReply{0: known(2, 4*ms), 1: known(3, 2*ms), 2: known(1, 7*ms)},
			mod:     func(c *PrequalConfig) { c.ColdRIFWeight, c.LatencyTolerance = 1, 0.25 },
			want:    1,
		},
		{
			name:    "hot probe excluded despite lowest latency",
			window:  []int{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
			replies: map[int]ProbeReply{0: known(50, ms), 1: known(1, 8*ms), 2: known(0, 9*ms)},
			want:    1,
		},
		{
			name:    "all hot picks lowest RIF",
			window:  []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
			replies: map[int]ProbeReply{0: known(12, ms), 1: known(10, 30*ms), 2: known(11, 2*ms)},
			want:    1,
			wantHot: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPrequalT(t, 40, tt.mod)
			for i, r := range tt.window {
				p.ProbeResult(t0, p.eps[10+i%30].addr, known(r, 100*ms))
			}
			// The window fillers are old; let them age out of the pool but
			// stay in the RIF window.
			p.expire(p.instant(at(1100)))
			p.pool = p.pool[:0]
			fill(p, at(1100), tt.replies)
			pk := mustPick(t, p, at(1100), newRNG())
			if pk.Endpoint != p.eps[tt.want].addr || pk.Hot != tt.wantHot || pk.Fallback {
				t.Errorf("Pick = %+v, want endpoint %d hot=%v", pk, tt.want, tt.wantHot)
			}
			s := p.Stats()
			if tt.wantHot && s.HotPicks != 1 || !tt.wantHot && s.ColdPicks != 1 {
				t.Errorf("hot/cold picks = %d/%d", s.HotPicks, s.ColdPicks)
			}
		})
	}
}

// TestPrequal_AllHotReachable: the threshold comes from the RIF window, not
// the pool, so a pool of probes all above the recent quantile is all hot.
// (The seed took the threshold from the pool itself, which made this branch
// unreachable.)
func TestPrequal_AllHotReachable(t *testing.T) {
	p := newPrequalT(t, 100, nil)
	rng := newRNG()
	for i := range 60 {
		p.ProbeResult(t0, p.eps[i].addr, known(1, 10*time.Millisecond))
	}
	later := at(900)
	fill(p, later, map[int]ProbeReply{90: known(20, time.Millisecond), 91: known(8, 50*time.Millisecond), 92: known(15, 5*time.Millisecond)})
	pk := mustPick(t, p, at(1050), rng)
	if !pk.Hot || pk.Endpoint != p.eps[91].addr {
		t.Errorf("Pick = %+v, want the lowest-RIF probe %s, hot", pk, p.eps[91].addr)
	}
}

// TestPrequal_ColdRIFKey: the coldrif key in every place HCL ranks cold
// probes (the pick with and without a tolerance, removal's "worst"), for a
// weight other than 1, and clamped where latency·w·RIF leaves int64.
func TestPrequal_ColdRIFKey(t *testing.T) {
	ms := time.Millisecond
	cfg := func(w, tol float64) func(*PrequalConfig) {
		return func(c *PrequalConfig) { c.ColdRIFWeight, c.LatencyTolerance, c.QRIF, c.RemovePerQuery = w, tol, 1, 0 }
	}
	pickOf := func(p *prequal, replies map[int]ProbeReply) int {
		t.Helper()
		fill(p, t0, replies)
		return p.byAddr[mustPick(t, p, t0, newRNG()).Endpoint]
	}
	// w = 0.5, exact: keys 4 and 5 ms (6 and 5 at w = 1); the best has RIF 2.
	if got := pickOf(newPrequalT(t, 2, cfg(0.5, 0)), map[int]ProbeReply{0: known(2, 2*ms), 1: known(0, 5*ms)}); got != 0 {
		t.Errorf("w=0.5: picked %d, want 0 (key 4 ms)", got)
	}
	// A tolerance of 0.5 on keys 4 (RIF 3), 5.7 (RIF 2) and 10 ms (RIF 1):
	// the band is 6 ms of key, so 0 and 2 tie and the lower RIF, 2, wins;
	// 1 is inside on latency (5 ms) but not on its key.
	if got := pickOf(newPrequalT(t, 3, cfg(1, 0.5)), map[int]ProbeReply{0: known(3, ms), 1: known(1, 5*ms), 2: known(2, 1900*time.Microsecond)}); got != 2 {
		t.Errorf("tol=0.5: picked %d, want 2 (inside the band on its key, lower RIF)", got)
	}
	// Removal's worst is the highest key, not the highest latency.
	p := newPrequalT(t, 3, cfg(1, 0))
	fill(p, t0, map[int]ProbeReply{0: known(10, 2*ms), 1: known(0, 5*ms), 2: known(6, 3*ms)})
	if w := int(p.pool[p.worst(p.hotThreshold())].ep); w != 0 {
		t.Errorf("worst = %d, want 0 (key 22 ms)", w)
	}
	// latency·w·RIF past int64: the busiest, slowest probe must not wrap
	// to the lowest key, and a tolerance over it must not panic.
	if got := pickOf(newPrequalT(t, 3, cfg(100, 0)), map[int]ProbeReply{0: known(2000, 24*time.Hour), 1: known(0, ms), 2: known(0, 2*ms)}); got != 1 {
		t.Errorf("overflowing key: picked %d, want 1", got)
	}
	_ = pickOf(newPrequalT(t, 3, cfg(100, 0.05)), map[int]ProbeReply{0: known(1050, 24*time.Hour), 1: known(1055, 24*time.Hour), 2: known(1060, 24*time.Hour)})
}

// TestPrequal_CompletionRIFCountsOnlyWhatTheEntryCounted: a retry picked
// after the answer (never in the entry) finishing does not lower it, and
// an unknown-latency entry keeps the RIF that marks it being explored.
func TestPrequal_CompletionRIFCountsOnlyWhatTheEntryCounted(t *testing.T) {
	cfg := func(c *PrequalConfig) { c.CompletionRIF, c.RemovePerQuery = true, 0 }
	p := newPrequalT(t, 2, cfg)
	fill(p, t0, map[int]ProbeReply{0: known(5, time.Millisecond), 1: known(0, 9*time.Millisecond)})
	for range 5 {
		pk, ok := p.PickOther(at(1), newRNG(), p.eps[1].addr)
		if !ok || p.byAddr[pk.Endpoint] != 0 {
			t.Fatalf("PickOther = %+v, %v", pk, ok)
		}
		p.Done(at(2), pk, time.Millisecond, 200)
	}
	if got := p.pool[0].rif; got != 5 {
		t.Errorf("RIF after five retries finished = %d, want 5 (they were never counted)", got)
	}
	// A request in flight before the answer arrived was counted by it.
	// A timeout (status 0) may leave it at the replica: not taken off.
	q := newPrequalT(t, 2, cfg)
	early, timedOut := q.pick(0), q.pick(0)
	fill(q, at(1), map[int]ProbeReply{0: known(5, time.Millisecond), 1: known(0, 9*time.Millisecond)})
	q.Done(at(2), early, time.Millisecond, 200)
	q.Done(at(2), timedOut, time.Second, 0)
	if got := q.pool[0].rif; got != 4 {
		t.Errorf("RIF after a request from before the answer finished and one timed out = %d, want 4", got)
	}
	// An endpoint that left and came back: the old pick is not its load.
	r := newPrequalT(t, 2, cfg)
	old := r.pick(0)
	r.SetEndpoints(at(1), []string{r.eps[1].addr})
	r.SetEndpoints(at(1), addrs(2))
	fill(r, at(2), map[int]ProbeReply{0: known(1, time.Millisecond), 1: known(0, 9*time.Millisecond)})
	r.Done(at(3), old, time.Millisecond, 200)
	if got := r.pool[len(r.pool)-1].rif + r.pool[0].rif; got != 1 {
		t.Errorf("RIFs after a pick from before the endpoint left finished = %d, want 1", got)
	}

	// MinProbes 3: the spent unknown probe stays in the pool of three.
	u := newPrequalT(t, 3, func(c *PrequalConfig) { cfg(c); c.MinProbes = 3 })
	fill(u, t0, map[int]ProbeReply{0: {RIF: 0}, 1: known(0, time.Millisecond), 2: known(0, time.Millisecond)})
	first := mustPick(t, u, t0, newRNG())
	if u.byAddr[first.Endpoint] != 0 || !first.explore {
		t.Fatalf("first pick = %+v, want the unknown replica 0, exploring", first)
	}
	u.Done(at(1), first, time.Millisecond, 200)
	for i := range 4 {
		pk := mustPick(t, u, at(2+i), newRNG())
		if u.byAddr[pk.Endpoint] == 0 {
			t.Fatalf("pick %d went to the unknown replica again before a fresh answer", i)
		}
		u.Done(at(2+i), pk, time.Millisecond, 200)
	}
}

// TestPrequal_CompletionRIF: with donerif a finished request lowers its
// replica's pool entry by one, floored at 0; without it only compensation
// moves the entry, upwards.
func TestPrequal_CompletionRIF(t *testing.T) {
	for _, on := range []bool{false, true} {
		p := newPrequalT(t, 3, func(c *PrequalConfig) { c.CompletionRIF, c.RemovePerQuery, c.MaxReuse = on, 0, 16 })
		fill(p, t0, map[int]ProbeReply{0: known(2, time.Millisecond), 1: known(0, 10*time.Millisecond)})
		pk := mustPick(t, p, t0, newRNG()) // 0: the fastest, now at RIF 3
		if p.byAddr[pk.Endpoint] != 0 {
			t.Fatalf("picked %s, want replica 0", pk.Endpoint)
		}
		rifOf := func(ep int) int32 {
			for _, e := range p.pool {
				if int(e.ep) == ep {
					return e.rif
				}
			}
			t.Fatalf("replica %d not in the pool", ep)
			return -1
		}
		p.Done(at(5), pk, 5*time.Millisecond, 200)
		if got, want := rifOf(0), map[bool]int32{false: 3, true: 2}[on]; got != want {
			t.Errorf("donerif=%v: RIF after the pick finished = %d, want %d", on, got, want)
		}
		// A request to replica 1 picked before its entry was compensated:
		// its completion cannot take the entry below 0.
		p.Done(at(6), p.pick(1), 5*time.Millisecond, 200)
		if got := rifOf(1); got != 0 {
			t.Errorf("donerif=%v: replica 1's RIF = %d, want 0 (floored)", on, got)
		}
	}
}

// TestPrequal_Compensation: each use adds 1 to the probe's RIF and the
// latency of one request at RIF 1 to its latency, so a probe stops winning
// once either makes it worse than the next.
func TestPrequal_Compensation(t *testing.T) {
	// m = 2, n = 3, no removal and δ = 15: b_reuse = 16/((1−2/3)·3) = 16,
	// so only compensation can stop A's reuse.
	cfg := func(c *PrequalConfig) {
		c.PoolSize, c.RemovePerQuery, c.QRIF, c.Delta, c.MaxReuse = 2, 0, 0.5, 15, 16
	}
	p := newPrequalT(t, 3, cfg)
	rng := newRNG()
	for _, r := range []int{1, 1, 1, 1, 5} { // with A and B: [0 0 1 1 1 1 5], median 1
		p.recordRIF(r)
	}
	// A at 1 ms, B at 10 ms: the latency at RIF 1 is 1 + (10 − 1)/16 =
	// 1.5625 ms, so A stays faster after two uses (4.125 ms); RIF turns it
	// hot (2 > 1) first.
	fill(p, t0, map[int]ProbeReply{0: known(0, time.Millisecond), 1: known(0, 10*time.Millisecond)})
	var got []int
	for range 3 {
		pk := mustPick(t, p, t0, rng)
		got = append(got, p.byAddr[pk.Endpoint])
	}
	if got[0] != 0 || got[1] != 0 || got[2] != 1 {
		t.Errorf("picks = %v, want [0 0 1]: A turns hot after two uses", got)
	}
	if want := time.Millisecond + 2*1562500*time.Nanosecond; p.pool[0].latency != want {
		t.Errorf("A's latency after two uses = %v, want %v", p.pool[0].latency, want)
	}
	// A at 1 ms, B at 2 ms: one use makes A's latency 2.0625 ms, so B wins
	// the second pick although A is still cold.
	q := newPrequalT(t, 3, cfg)
	for _, r := range []int{1, 1, 1, 1, 5} {
		q.recordRIF(r)
	}
	fill(q, t0, map[int]ProbeReply{0: known(0, time.Millisecond), 1: known(0, 2*time.Millisecond)})
	got = got[:0]
	for range 2 {
		pk := mustPick(t, q, t0, rng)
		got = append(got, q.byAddr[pk.Endpoint])
	}
	if got[0] != 0 || got[1] != 1 {
		t.Errorf("picks = %v, want [0 1]: one use makes A slower than B", got)
	}
	if p.pool[0].rif != 2 {
		t.Errorf("A's RIF after two uses = %d, want 2", p.pool[0].rif)
	}
}

// TestPrequal_ReuseLatency: the latency each use adds is ReuseLatency
// requests' worth; at 0 (the paper's rule) only the RIF moves, so A stays
// the fastest until its RIF turns it hot.
func TestPrequal_ReuseLatency(t *testing.T) {
	for _, tt := range []struct {
		perUse   float64
		picks    []int
		latency1 time.Duration // A's latency after its first use
	}{
		{0, []int{0, 0, 1}, time.Millisecond},
		{1, []int{0, 1, 0}, time.Millisecond + 1062500},
		{2, []int{0, 1, 0}, time.Millisecond + 2*1062500},
	} {
		p := newPrequalT(t, 3, func(c *PrequalConfig) {
			c.PoolSize, c.RemovePerQuery, c.QRIF, c.Delta, c.MaxReuse = 2, 0, 0.5, 15, 16
			c.ReuseLatency = tt.perUse
		})
		for _, r := range []int{1, 1, 1, 1, 5} {
			p.recordRIF(r)
		}
		// A at 1 ms, B at 2 ms, both at RIF 0: the latency at RIF 1 is
		// 1 + (2 − 1)/16 = 1.0625 ms.
		fill(p, t0, map[int]ProbeReply{0: known(0, time.Millisecond), 1: known(0, 2*time.Millisecond)})
		var got []int
		for k := range 3 {
			pk := mustPick(t, p, t0, newRNG())
			got = append(got, p.byAddr[pk.Endpoint])
			if k == 0 {
				if a := p.pool[0]; a.ep != 0 || a.latency != tt.latency1 {
					t.Errorf("reuselat %v: A's entry after one use = %+v, want latency %v", tt.perUse, a, tt.latency1)
				}
			}
		}
		if !slices.Equal(got, tt.picks) {
			t.Errorf("reuselat %v: picks = %v, want %v", tt.perUse, got, tt.picks)
		}
	}
}

func TestPrequal_OneEntryPerReplica(t *testing.T) {
	p := newPrequalT(t, 4, nil)
	p.ProbeResult(t0, p.eps[0].addr, known(5, 9*time.Millisecond))
	p.ProbeResult(at(1), p.eps[1].addr, known(0, 5*time.Millisecond))
	p.ProbeResult(at(2), p.eps[0].addr, known(0, time.Millisecond))
	if len(p.pool) != 2 {
		t.Fatalf("pool size = %d, want 2 (one entry per replica)", len(p.pool))
	}
	if e := p.pool[1]; e.ep != 0 || e.rif != 0 || e.latency != time.Millisecond || e.received != p.instant(at(2)) {
		t.Errorf("replica 0's entry = %+v, want the newest answer", e)
	}
	if got := p.Stats().PoolRemovals["replaced"]; got != 1 {
		t.Errorf("replaced = %d, want 1", got)
	}
}

func TestPrequal_PoolOverflowEvictsOldest(t *testing.T) {
	p := newPrequalT(t, 30, nil)
	for i := range 20 {
		p.ProbeResult(at(i), p.eps[i].addr, known(0, time.Millisecond))
	}
	s := p.Stats()
	if s.PoolSize != 16 || s.PoolRemovals["overflow"] != 4 {
		t.Fatalf("pool = %d, overflow = %d; want 16 and 4", s.PoolSize, s.PoolRemovals["overflow"])
	}
	for _, e := range p.pool {
		if e.ep < 4 {
			t.Errorf("endpoint %d survived; the 4 oldest should be evicted", e.ep)
		}
	}
}

// TestPrequal_AgeFromLocalReceipt: a probe lives MaxAge from the time the
// caller received it.
func TestPrequal_AgeFromLocalReceipt(t *testing.T) {
	p := newPrequalT(t, 4, nil)
	rng := newRNG()
	fill(p, at(500), map[int]ProbeReply{0: known(0, time.Millisecond), 1: known(0, 2*time.Millisecond)})
	if pk := mustPick(t, p, at(1500), rng); pk.Fallback {
		t.Fatal("probe received 1 s ago already expired")
	}
	if pk := mustPick(t, p, at(1501), rng); !pk.Fallback {
		t.Error("probes older than MaxAge still used")
	}
	if got := p.Stats().PoolRemovals["age"]; got == 0 {
		t.Error("no age removals counted")
	}
}

func TestPrequal_FallbackCounted(t *testing.T) {
	p := newPrequalT(t, 5, nil)
	rng := newRNG()
	pk := mustPick(t, p, t0, rng)
	if !pk.Fallback {
		t.Fatal("empty pool: Pick did not fall back")
	}
	p.ProbeResult(t0, p.eps[0].addr, known(0, time.Millisecond))
	if pk := mustPick(t, p, t0, rng); !pk.Fallback {
		t.Fatal("one probe (< MinProbes): Pick did not fall back")
	}
	p.ProbeResult(t0, p.eps[1].addr, known(0, time.Millisecond))
	p.ProbeResult(t0, p.eps[2].addr, known(0, time.Millisecond))
	if pk := mustPick(t, p, t0, rng); pk.Fallback {
		t.Fatal("three probes: Pick fell back")
	}
	s := p.Stats()
	if s.Fallbacks != 2 || s.Picks != 3 || s.ColdPicks != 1 {
		t.Errorf("fallbacks/picks/cold = %d/%d/%d, want 2/3/1", s.Fallbacks, s.Picks, s.ColdPicks)
	}
}

// TestPrequal_TiesBrokenAtRandom: equal cold latencies share the picks.
func TestPrequal_TiesBrokenAtRandom(t *testing.T) {
	for _, hot := range []bool{false, true} {
		p := newPrequalT(t, 4, func(c *PrequalConfig) { c.RemovePerQuery = 0 })
		rng := newRNG()
		count := make([]int, 4)
		const trials = 4000
		for range trials {
			p.Reset(t0)
			if hot {
				for range 40 {
					p.recordRIF(0)
				}
			}
			fill(p, t0, map[int]ProbeReply{0: known(3, 5*time.Millisecond), 1: known(3, 5*time.Millisecond), 2: known(3, 5*time.Millisecond), 3: known(3, 5*time.Millisecond)})
			pk := mustPick(t, p, t0, rng)
			if pk.Hot != hot {
				t.Fatalf("Hot = %v, want %v", pk.Hot, hot)
			}
			count[p.byAddr[pk.Endpoint]]++
		}
		for i, c := range count {
			if c < trials/4*85/100 || c > trials/4*115/100 {
				t.Errorf("hot=%v: endpoint %d won %d of %d ties, want ≈ %d", hot, i, c, trials, trials/4)
			}
		}
	}
}

func TestPrequal_UnknownLatency(t *testing.T) {
	ms := time.Millisecond
	unknown := func(rif int) ProbeReply { return ProbeReply{RIF: rif, Latency: 0, LatencyKnown: false} }
	tests := []struct {
		name    string
		replies map[int]ProbeReply
		want    int
	}{
		{"idle, no busier than fastest known: unknown wins", map[int]ProbeReply{0: known(0, 5*ms), 1: unknown(0)}, 1},
		{"a request in flight there: being explored, known wins", map[int]ProbeReply{0: known(1, 5*ms), 1: unknown(1)}, 0},
		{"busier than fastest known: known wins, not read as 0 ms", map[int]ProbeReply{0: known(1, 5*ms), 1: unknown(2)}, 0},
		{"idler than fastest known: unknown wins, not read as infinite", map[int]ProbeReply{0: known(2, 5*ms), 1: known(0, 9*ms), 2: unknown(0)}, 2},
		{"only unknown: lowest RIF", map[int]ProbeReply{0: unknown(3), 1: unknown(1), 2: unknown(2)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPrequalT(t, 4, func(c *PrequalConfig) { c.QRIF = 1 })
			fill(p, t0, tt.replies)
			pk := mustPick(t, p, t0, newRNG())
			if got := p.byAddr[pk.Endpoint]; got != tt.want || pk.Fallback || pk.Hot {
				t.Errorf("picked endpoint %d (%+v), want %d", got, pk, tt.want)
			}
		})
	}
	// One pick of an unknown replica adds 1 to its RIF, so it loses the
	// next tie: a trickle, not a herd.
	p := newPrequalT(t, 4, func(c *PrequalConfig) { c.QRIF = 1; c.RemovePerQuery = 0 })
	rng := newRNG()
	fill(p, t0, map[int]ProbeReply{0: known(1, 5*ms), 1: unknown(0)})
	first, second := mustPick(t, p, t0, rng), mustPick(t, p, t0, rng)
	if first.Endpoint != p.eps[1].addr || second.Endpoint != p.eps[0].addr {
		t.Errorf("picks = %s, %s; want the unknown replica once, then the known one", first.Endpoint, second.Endpoint)
	}
}

func TestPrequal_ProbesWithoutReplacement(t *testing.T) {
	for _, tt := range []struct {
		rProbe float64
		n      int
		want   int
	}{{3, 3, 3}, {2, 2, 2}, {3, 100, 3}, {5, 3, 3}} {
		p := newPrequalT(t, tt.n, func(c *PrequalConfig) { c.ProbesPerQuery = tt.rProbe })
		rng := newRNG()
		var dst []string
		for q := range 500 {
			mustPick(t, p, at(q), rng)
			dst = p.ProbesDue(at(q), rng, dst[:0])
			if len(dst) != tt.want {
				t.Fatalf("r=%v n=%d: %d probes for one query, want %d", tt.rProbe, tt.n, len(dst), tt.want)
			}
			seen := map[string]bool{}
			for _, a := range dst {
				if seen[a] {
					t.Fatalf("r=%v n=%d: query %d probes %s twice: %v", tt.rProbe, tt.n, q, a, dst)
				}
				seen[a] = true
				p.ProbeResult(at(q), a, known(0, time.Millisecond))
			}
		}
	}
}

func TestPrequal_FractionalProbeRateExact(t *testing.T) {
	for _, r := range []float64{0.25, 1.5, 2.5, 3} {
		p := newPrequalT(t, 50, func(c *PrequalConfig) { c.ProbesPerQuery = r; c.IdleProbeInterval = 0 })
		rng := newRNG()
		var dst []string
		total := 0
		for q := range 1000 {
			mustPick(t, p, at(q), rng)
			dst = p.ProbesDue(at(q), rng, dst[:0])
			if k := float64(len(dst)); k != math.Floor(r) && k != math.Ceil(r) && (r >= 1 || k > 1) {
				t.Fatalf("r=%v: %v probes for one query", r, k)
			}
			total += len(dst)
			for _, a := range dst {
				p.ProbeFailed(at(q), a, ProbeTimeout)
			}
		}
		if want := int(r * 1000); total != want {
			t.Errorf("r=%v: %d probes for 1000 queries, want %d", r, total, want)
		}
		if got := p.Stats().ProbesPlanned; got != uint64(total) {
			t.Errorf("ProbesPlanned = %d, want %d", got, total)
		}
	}
}

func TestPrequal_IdleProbes(t *testing.T) {
	p := newPrequalT(t, 5, nil)
	rng := newRNG()
	steps := []struct {
		ms   int
		pick bool
		want int
	}{
		{0, false, 1},   // never probed: one idle probe at once
		{50, false, 0},  // within the interval
		{100, false, 1}, // interval passed
		{150, true, 3},  // a query's probes reset the idle clock
		{200, false, 0}, // 50 ms after the query
		{250, false, 1}, // 100 ms after the query
		{251, false, 0},
	}
	for _, s := range steps {
		if s.pick {
			mustPick(t, p, at(s.ms), rng)
		}
		due := p.ProbesDue(at(s.ms), rng, nil)
		if len(due) != s.want {
			t.Errorf("t=%d ms: %d probes due, want %d", s.ms, len(due), s.want)
		}
		for _, a := range due {
			p.ProbeResult(at(s.ms), a, known(0, time.Millisecond))
		}
	}
	off := newPrequalT(t, 5, func(c *PrequalConfig) { c.IdleProbeInterval = 0 })
	if got := off.ProbesDue(at(5000), rng, nil); len(got) != 0 {
		t.Errorf("idle probing disabled, got %v", got)
	}
}

func TestPrequal_ProbeResultUnknownEndpointIgnored(t *testing.T) {
	p := newPrequalT(t, 3, nil)
	p.ProbeResult(t0, "192.0.2.1:1", known(0, time.Millisecond))
	p.ProbeFailed(t0, "192.0.2.1:1", ProbeTimeout)
	s := p.Stats()
	if s.PoolSize != 0 || s.ProbeOutcomes[ProbeOK] != 0 || s.ProbeOutcomes[ProbeTimeout] != 0 {
		t.Errorf("answer from an unknown endpoint changed state: %+v", s)
	}
	p.ProbeFailed(t0, p.eps[0].addr, ProbeStale)
	p.ProbeFailed(t0, p.eps[0].addr, ProbeOutcome("weird"))
	p.ProbeResult(t0, p.eps[1].addr, known(0, time.Millisecond))
	s = p.Stats()
	if s.ProbeOutcomes[ProbeStale] != 1 || s.ProbeOutcomes["other"] != 1 || s.ProbeOutcomes[ProbeOK] != 1 {
		t.Errorf("outcomes = %v", s.ProbeOutcomes)
	}
}

func TestPrequal_SetEndpointsKeepsSurvivingProbes(t *testing.T) {
	p := newPrequalT(t, 4, nil)
	a := addrs(4)
	fill(p, t0, map[int]ProbeReply{0: known(0, time.Millisecond), 1: known(0, 2*time.Millisecond), 3: known(0, 3*time.Millisecond)})
	p.SetEndpoints(t0, []string{a[3], "10.9.9.9:80", a[0]})
	if len(p.pool) != 2 {
		t.Fatalf("pool = %d entries, want 2 (endpoint 1 left)", len(p.pool))
	}
	for _, e := range p.pool {
		if e.ep < 0 || int(e.ep) >= len(p.eps) || (p.eps[e.ep].addr != a[0] && p.eps[e.ep].addr != a[3]) {
			t.Errorf("entry %+v points at the wrong endpoint", e)
		}
	}
	pk := mustPick(t, p, t0, newRNG())
	if pk.Endpoint != a[0] {
		t.Errorf("Pick = %s, want the fastest surviving %s", pk.Endpoint, a[0])
	}
}

func TestPrequal_ResetEmptiesPoolKeepsInFlight(t *testing.T) {
	p := newPrequalT(t, 4, nil)
	rng := newRNG()
	fill(p, t0, map[int]ProbeReply{0: known(0, time.Millisecond), 1: known(0, 2*time.Millisecond), 2: known(0, 2*time.Millisecond)})
	pk := mustPick(t, p, t0, rng)
	p.ProbesDue(t0, rng, nil)
	p.Reset(at(1))
	s := p.Stats()
	if s.PoolSize != 0 || s.Picks != 0 || s.ProbesPlanned != 0 || s.ColdPicks != 0 || s.ProbeOutcomes[ProbeOK] != 0 || len(p.rifSorted) != 0 {
		t.Errorf("after Reset: %+v", s)
	}
	inflight := 0
	for _, e := range s.Endpoints {
		inflight += e.InFlight
	}
	if inflight != 1 {
		t.Errorf("in flight after Reset = %d, want 1", inflight)
	}
	p.Done(at(2), pk, time.Millisecond, 200)
	if got := p.Stats().Endpoints[0].InFlight; got != 0 {
		t.Errorf("in flight after Done = %d", got)
	}
}

func TestPrequal_PoolOrderedByReceiptEvenOutOfOrder(t *testing.T) {
	p := newPrequalT(t, 4, nil)
	p.ProbeResult(at(10), p.eps[0].addr, known(0, time.Millisecond))
	p.ProbeResult(at(5), p.eps[1].addr, known(0, time.Millisecond))
	p.ProbeResult(at(20), p.eps[2].addr, known(0, time.Millisecond))
	var order []int32
	for _, e := range p.pool {
		order = append(order, e.ep)
	}
	if len(order) != 3 || order[0] != 1 || order[1] != 0 || order[2] != 2 {
		t.Errorf("pool order = %v, want [1 0 2] (oldest receipt first)", order)
	}
}

func TestQuantileRank_NearestRank(t *testing.T) {
	for _, tt := range []struct {
		q    float64
		k    int
		want int
	}{{0.84, 64, 53}, {math.Exp2(-0.25), 64, 53}, {0, 10, 0}, {1, 10, 9}, {0.5, 4, 1}, {0.5, 5, 2}, {0.84, 1, 0}} {
		if got := quantileRank(tt.q, tt.k); got != tt.want {
			t.Errorf("quantileRank(%v, %d) = %d, want %d", tt.q, tt.k, got, tt.want)
		}
	}
}

// A slow replica whose backend history aged out reports "unknown"; the
// policy's memory of its last latency must keep it ranked as slow until the
// memory expires, then let it be explored again.
func TestPrequal_LatencyMemory(t *testing.T) {
	ms := time.Millisecond
	unknown := ProbeReply{RIF: 0}
	p := newPrequalT(t, 4, func(c *PrequalConfig) { c.QRIF = 1; c.RemovePerQuery = 0; c.LatencyMemory = 10 * time.Second })
	// Learn that replica 1 is slow, then its backend forgets.
	fill(p, t0, map[int]ProbeReply{1: known(0, 800*ms)})
	now := t0.Add(500 * ms)
	fill(p, now, map[int]ProbeReply{0: known(2, 50*ms), 1: unknown})
	if pk := mustPick(t, p, now, newRNG()); p.byAddr[pk.Endpoint] != 0 {
		t.Fatalf("picked %s: a remembered 800 ms replica beat a 50 ms one on RIF", pk.Endpoint)
	}

	// Past the memory, the unknown replica is explored again (it is idler).
	later := t0.Add(p.cfg.LatencyMemory + time.Second)
	fill(p, later, map[int]ProbeReply{0: known(2, 50*ms), 1: unknown})
	pk := mustPick(t, p, later, newRNG())
	if p.byAddr[pk.Endpoint] != 1 {
		t.Fatalf("picked %s: an expired memory still hid the replica", pk.Endpoint)
	}
	p.Done(later, pk, 0, 200) // end the exploration

	// Reset forgets the memory too.
	p.Reset(later)
	fill(p, later, map[int]ProbeReply{1: known(0, 800*ms)})
	p.Reset(later)
	fill(p, later, map[int]ProbeReply{0: known(2, 50*ms), 1: unknown})
	if pk := mustPick(t, p, later, newRNG()); p.byAddr[pk.Endpoint] != 1 {
		t.Fatalf("picked %s: Reset kept the latency memory", pk.Endpoint)
	}
}

// TestPrequal_NoMemoryWhenOff: with both memories off an unknown answer is
// unknown, even one received at the same instant as the known answer it
// replaces (a zero duration once read as "remember for 0 s, inclusive").
func TestPrequal_NoMemoryWhenOff(t *testing.T) {
	p := newPrequalT(t, 4, func(c *PrequalConfig) { c.LatencyMemory, c.SlowMemory = 0, 0 })
	fill(p, t0, map[int]ProbeReply{0: known(0, 50*time.Millisecond), 2: known(0, 50*time.Millisecond)})
	fill(p, t0, map[int]ProbeReply{1: known(0, 800*time.Millisecond)})
	fill(p, t0, map[int]ProbeReply{1: {RIF: 0}})
	if p.replicas[1].latencyKnown {
		t.Error("an unknown answer took the remembered latency with LatencyMemory and SlowMemory 0")
	}
}

// TestPrequal_SlowMemory: an idle replica whose backend answers "unknown"
// is explored again unless the policy remembers it, learned idle, as at
// least SlowFactor times slower than the median of the pool's fresh
// answers; then its memory stands in until SlowMemory has passed since it
// was learned, whatever the pool reads in between.
func TestPrequal_SlowMemory(t *testing.T) {
	ms := time.Millisecond
	unknown := ProbeReply{RIF: 0}
	p := newPrequalT(t, 5, func(c *PrequalConfig) {
		c.QRIF = 1
		c.RemovePerQuery = 0
		c.SlowMemory = 10 * time.Second
	})
	// Replica 1 was 16x slower than replica 0, replica 2 only 2x, replica
	// 3 16x but busy (RIF 3) when last heard.
	fill(p, t0, map[int]ProbeReply{1: known(0, 800*ms), 2: known(0, 100*ms), 3: known(3, 800*ms)})
	now := t0.Add(500 * ms)
	fill(p, now, map[int]ProbeReply{0: known(2, 50*ms), 1: unknown, 2: unknown, 3: unknown})
	if !p.replicas[1].latencyKnown {
		t.Fatal("the 16x-slow replica's unknown answer was not held by its memory")
	}
	if p.replicas[2].latencyKnown {
		t.Fatal("the 2x-slow replica's unknown answer was held: it would not be explored")
	}
	if p.replicas[3].latencyKnown {
		t.Fatal("a latency learned at RIF 3 (a queue, not a slow replica) was held")
	}
	if got := p.Stats().SlowHeld; got != 1 {
		t.Errorf("Stats().SlowHeld = %d, want 1", got)
	}

	// Held answers neither renew the memory nor are judged again: a pool
	// that now reads as slow as the replica does not release it early.
	for i := range 4 {
		at := t0.Add(time.Duration(2+2*i) * time.Second)
		fill(p, at, map[int]ProbeReply{0: known(0, 700*ms), 4: known(0, 700*ms), 1: unknown})
		if !p.replicas[1].latencyKnown {
			t.Fatalf("at %v the held replica was released before SlowMemory", at.Sub(t0))
		}
	}

	// Past SlowMemory from the last known answer it is explored.
	later := t0.Add(p.cfg.SlowMemory + time.Second)
	fill(p, later, map[int]ProbeReply{0: known(2, 50*ms), 1: unknown})
	if p.replicas[1].latencyKnown {
		t.Fatal("an expired slow memory still held the replica (held answers renewed it)")
	}
	if pk := mustPick(t, p, later, newRNG()); p.byAddr[pk.Endpoint] != 1 {
		t.Fatalf("picked %s: want the expired, idle, unknown replica explored", pk.Endpoint)
	}
}

// TestPrequal_SlowMemoryReference: the yardstick is the median of fresh,
// non-averse answers. Against the fastest, a replica 2x the fleet is held
// when one replica reads low; counting held memories, four slow replicas
// of a small pool pull the median up until none is held.
func TestPrequal_SlowMemoryReference(t *testing.T) {
	ms := time.Millisecond
	unknown := ProbeReply{RIF: 0}
	mk := func() *prequal {
		return newPrequalT(t, 6, func(c *PrequalConfig) { c.QRIF, c.RemovePerQuery, c.SlowMemory = 1, 0, 10*time.Second })
	}

	p := mk()
	fill(p, t0, map[int]ProbeReply{1: known(0, 100*ms)})
	fill(p, t0.Add(ms), map[int]ProbeReply{0: known(0, 10*ms), 2: known(0, 50*ms), 3: known(0, 50*ms)})
	fill(p, t0.Add(2*ms), map[int]ProbeReply{1: unknown})
	if p.replicas[1].latencyKnown {
		t.Error("a replica 2x the median (10x the fastest) was held")
	}

	p = mk()
	// The slow replicas' known answers age out of the pool (MaxAge 1 s);
	// their memories stay.
	fill(p, t0, map[int]ProbeReply{1: known(0, 800*ms), 2: known(0, 800*ms), 3: known(0, 800*ms), 4: known(0, 800*ms)})
	next := t0.Add(1500 * ms)
	fill(p, next, map[int]ProbeReply{0: known(0, 50*ms), 5: known(0, 50*ms)})
	for _, i := range []int{2, 3, 4, 1} {
		next = next.Add(ms)
		fill(p, next, map[int]ProbeReply{i: unknown})
	}
	for i := 1; i <= 4; i++ {
		if !p.replicas[i].latencyKnown {
			t.Errorf("slow replica %d not held: held memories counted in the median", i)
		}
	}

	// With no fresh answer to compare with nothing is decided: the next
	// unknown answer, once the pool has one, is judged.
	p = mk()
	fill(p, t0, map[int]ProbeReply{1: known(0, 800*ms)})
	fill(p, t0.Add(1500*ms), map[int]ProbeReply{1: unknown})
	if p.replicas[1].latencyKnown {
		t.Error("held with nothing fresh in the pool to compare with")
	}
	fill(p, t0.Add(1600*ms), map[int]ProbeReply{0: known(0, 50*ms)})
	fill(p, t0.Add(1700*ms), map[int]ProbeReply{1: unknown})
	if !p.replicas[1].latencyKnown {
		t.Error("a verdict taken with an empty reference was kept: the 16x-slow replica was not held")
	}

	p = mk()
	fill(p, t0, map[int]ProbeReply{1: known(0, 400*ms)})
	for range 10 { // replicas 2-4 fail every request: averse
		for i := 2; i <= 4; i++ {
			p.Done(t0, Picked{Endpoint: p.eps[i].addr}, ms, 500)
		}
	}
	fill(p, t0.Add(ms), map[int]ProbeReply{0: known(0, 200*ms), 2: known(0, ms), 3: known(0, ms), 4: known(0, ms)})
	for i := 2; i <= 4; i++ {
		if !p.averse(i) {
			t.Fatalf("replica %d not averse after 10 failures", i)
		}
	}
	fill(p, t0.Add(2*ms), map[int]ProbeReply{1: unknown})
	if p.replicas[1].latencyKnown {
		t.Error("a replica 2x the healthy one was held: fail-fast replicas' 1 ms answers counted in the median")
	}
}

// TestPrequal_QRIFEndpoints: at Q_RIF = 1 the threshold is infinite and
// every probe is cold, even the busiest; at Q_RIF = 0.999 (nearest rank: the
// window maximum) replicas tied at the maximum are hot.
func TestPrequal_QRIFEndpoints(t *testing.T) {
	ms := time.Millisecond
	window := func(p *prequal) {
		for i := range 64 {
			p.recordRIF(i % 8) // maximum 7
		}
	}
	p := newPrequalT(t, 4, func(c *PrequalConfig) { c.QRIF = 1 })
	window(p)
	fill(p, t0, map[int]ProbeReply{0: known(50, ms), 1: known(0, 9*ms), 2: known(3, 2*ms)})
	if pk := mustPick(t, p, t0, newRNG()); pk.Hot || pk.Endpoint != p.eps[0].addr {
		t.Errorf("Q_RIF 1: pick %+v, want the fastest (endpoint 0, at the window's maximum RIF), cold", pk)
	}

	p = newPrequalT(t, 4, func(c *PrequalConfig) { c.QRIF = 0.999 })
	window(p)
	fill(p, t0, map[int]ProbeReply{0: known(7, ms), 1: known(7, 2*ms), 2: known(6, 9*ms)})
	if pk := mustPick(t, p, t0, newRNG()); pk.Hot || pk.Endpoint != p.eps[2].addr {
		t.Errorf("Q_RIF 0.999: pick %+v, want endpoint 2: the two tied at the maximum RIF are hot", pk)
	}
	// All tied at the maximum: all hot.
	p = newPrequalT(t, 4, func(c *PrequalConfig) { c.QRIF = 0.999 })
	window(p)
	fill(p, t0, map[int]ProbeReply{0: known(7, ms), 1: known(7, 2*ms)})
	if pk := mustPick(t, p, t0, newRNG()); !pk.Hot {
		t.Errorf("Q_RIF 0.999, all tied at the maximum: pick %+v, want a hot pick", pk)
	}
	// At Q_RIF 0.84 a θ that equals the maximum keeps "above θ": cold.
	p = newPrequalT(t, 4, nil)
	for i := range 64 {
		p.recordRIF(min(i%8, 5)) // 0-4 once each per 8, 5 three times: θ = max = 5
	}
	fill(p, t0, map[int]ProbeReply{0: known(5, ms), 1: known(0, 9*ms)})
	if pk := mustPick(t, p, t0, newRNG()); pk.Hot || pk.Endpoint != p.eps[0].addr {
		t.Errorf("Q_RIF 0.84, RIF at a θ equal to the maximum: pick %+v, want endpoint 0, cold", pk)
	}
	// A window of one value has nothing to split: all cold, latency decides.
	p = newPrequalT(t, 4, func(c *PrequalConfig) { c.QRIF = 0.999 })
	for range 64 {
		p.recordRIF(0)
	}
	fill(p, t0, map[int]ProbeReply{0: known(0, 9*ms), 1: known(0, 2*ms)})
	if pk := mustPick(t, p, t0, newRNG()); pk.Hot || pk.Endpoint != p.eps[1].addr {
		t.Errorf("uniform window: pick %+v, want the fastest (endpoint 1), cold", pk)
	}
}

// TestPrequal_QRIFTieRuleNotInAFillingWindow: while the RIF window is still
// filling, nearest rank puts any Q on the last value; the tie rule (ties at
// the maximum hot) belongs to Q so close to 1 that its rank in the full
// window is the last, so at the default Q_RIF the first answers keep "above
// θ" and latency decides among them.
func TestPrequal_QRIFTieRuleNotInAFillingWindow(t *testing.T) {
	ms := time.Millisecond
	p := newPrequalT(t, 4, nil) // Q_RIF 2^-0.25, window 64
	fill(p, t0, map[int]ProbeReply{0: known(2, ms), 1: known(2, 2*ms), 2: known(0, 9*ms)})
	if pk := mustPick(t, p, t0, newRNG()); pk.Hot || pk.Endpoint != p.eps[0].addr {
		t.Errorf("three answers, default Q_RIF: pick %+v, want the fastest (endpoint 0), cold", pk)
	}
	// Q_RIF 0.999 in the same filling window: ties at the maximum are hot.
	p = newPrequalT(t, 4, func(c *PrequalConfig) { c.QRIF = 0.999 })
	fill(p, t0, map[int]ProbeReply{0: known(2, ms), 1: known(2, 2*ms), 2: known(0, 9*ms)})
	if pk := mustPick(t, p, t0, newRNG()); pk.Hot || pk.Endpoint != p.eps[2].addr {
		t.Errorf("three answers, Q_RIF 0.999: pick %+v, want endpoint 2 (the two at the maximum are hot)", pk)
	}
}

// TestPrequal_StaleAnswerNeverReplacesNewer: an answer received before the
// replica's last one taken in (delivered late by the caller) is dropped and
// counted, whether or not the newer entry is still in the pool.
func TestPrequal_StaleAnswerNeverReplacesNewer(t *testing.T) {
	p := newPrequalT(t, 4, func(c *PrequalConfig) { c.QRIF = 1 })
	p.ProbeResult(at(10), p.eps[0].addr, known(0, time.Millisecond))
	p.ProbeResult(at(5), p.eps[0].addr, known(9, time.Second))
	if len(p.pool) != 1 || p.pool[0].rif != 0 || p.pool[0].latency != time.Millisecond {
		t.Fatalf("pool = %+v, want the answer received at 10 ms", p.pool)
	}
	if got := p.Stats().StaleAnswers; got != 1 {
		t.Errorf("stale answers = %d, want 1", got)
	}
	// Equal receipt times are not stale: the later call wins.
	p.ProbeResult(at(10), p.eps[0].addr, known(2, 3*time.Millisecond))
	if p.pool[0].rif != 2 {
		t.Errorf("an answer received at the same time was dropped: %+v", p.pool[0])
	}
	// The entry used up and gone, an older answer still does not come back.
	p.pool = p.pool[:0]
	p.ProbeResult(at(7), p.eps[0].addr, known(0, time.Millisecond))
	if len(p.pool) != 0 {
		t.Errorf("an answer older than the last one taken in re-entered the pool: %+v", p.pool)
	}
	p.Reset(at(20))
	p.ProbeResult(at(7), p.eps[0].addr, known(0, time.Millisecond))
	if len(p.pool) != 1 {
		t.Errorf("Reset kept the receipt order: pool %+v", p.pool)
	}
}

// TestPrequal_OneExplorationPerUnknownReplica: a replica whose latency is
// unknown gets one request; until it finishes, its probe is a last resort.
func TestPrequal_OneExplorationPerUnknownReplica(t *testing.T) {
	ms := time.Millisecond
	unknown := ProbeReply{RIF: 0}
	p := newPrequalT(t, 4, func(c *PrequalConfig) { c.QRIF = 1; c.RemovePerQuery = 0; c.MaxReuse = 16; c.Delta = 100 })
	rng := newRNG()
	fill(p, t0, map[int]ProbeReply{0: known(3, 5*ms), 1: unknown})
	first := mustPick(t, p, t0, rng)
	if first.Endpoint != p.eps[1].addr {
		t.Fatalf("first pick %s, want the unknown replica (idler than the known one)", first.Endpoint)
	}
	// A fresh answer still reports unknown at RIF 0 (the backend has not
	// finished the request yet): it must not win again.
	fill(p, at(1), map[int]ProbeReply{1: unknown})
	if pk := mustPick(t, p, at(1), rng); pk.Endpoint != p.eps[0].addr {
		t.Fatalf("second pick %s while the exploration is in flight, want the known replica", pk.Endpoint)
	}
	p.Done(at(2), first, ms, 200)
	fill(p, at(2), map[int]ProbeReply{1: unknown})
	if pk := mustPick(t, p, at(2), rng); pk.Endpoint != p.eps[1].addr {
		t.Errorf("after the exploration finished, pick %s, want the unknown replica again", pk.Endpoint)
	}
	// With nothing else in the pool, an explored replica is still usable.
	q := newPrequalT(t, 4, func(c *PrequalConfig) { c.QRIF = 1; c.MinProbes = 1 })
	fill(q, t0, map[int]ProbeReply{1: unknown})
	mustPick(t, q, t0, rng)
	fill(q, at(1), map[int]ProbeReply{1: unknown})
	if pk := mustPick(t, q, at(1), rng); pk.Fallback || pk.Endpoint != q.eps[1].addr {
		t.Errorf("last-resort pick %+v, want the explored replica", pk)
	}
}

// A replica with a probe in flight is not probed again until its answer or
// failure comes back: with one pool entry per replica the second answer
// would only replace the first. The probes owed are counted as coalesced,
// and MaxAge without any word lets the replica be probed again.
func TestPrequal_CoalescesProbesInFlight(t *testing.T) {
	p := newPrequalT(t, 3, func(c *PrequalConfig) { c.IdleProbeInterval = 0 })
	rng := newRNG()
	mustPick(t, p, at(0), rng)
	first := p.ProbesDue(at(0), rng, nil)
	if len(first) != 3 {
		t.Fatalf("first query: %d probes, want 3", len(first))
	}
	mustPick(t, p, at(1), rng)
	if again := p.ProbesDue(at(1), rng, nil); len(again) != 0 {
		t.Fatalf("every replica has a probe in flight, yet %v were probed again", again)
	}
	if s := p.Stats(); s.ProbesCoalesced != 3 || s.ProbesPlanned != 3 {
		t.Errorf("coalesced %d, planned %d; want 3 and 3", s.ProbesCoalesced, s.ProbesPlanned)
	}
	// One answer and one failure free their replicas; the third stays busy.
	p.ProbeResult(at(2), first[0], known(0, time.Millisecond))
	p.ProbeFailed(at(2), first[1], ProbeDropped)
	mustPick(t, p, at(3), rng)
	got := p.ProbesDue(at(3), rng, nil)
	slices.Sort(got)
	want := []string{first[0], first[1]}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("after an answer and a failure: probed %v, want %v", got, want)
	}
	// A probe whose word never comes blocks its replica for MaxAge only.
	mustPick(t, p, at(1000), rng)
	if got := p.ProbesDue(at(1000), rng, nil); !slices.Contains(got, first[2]) {
		t.Errorf("after MaxAge without an answer: probed %v, want %s among them", got, first[2])
	}
}

// The quantile window stays the sorted ring of the last RIFWindow values,
// whatever order they come in.
func TestRecordRIF_WindowStaysSorted(t *testing.T) {
	p := newPrequalT(t, 4, nil)
	rng := newRNG()
	for step := range 5000 {
		rif := rng.IntN(12)
		if step%97 == 0 {
			rif = rng.IntN(1000)
		}
		p.recordRIF(rif)
		want := slices.Clone(p.rifRing)
		slices.Sort(want)
		if !slices.Equal(p.rifSorted, want) {
			t.Fatalf("step %d: sorted window %v, want %v", step, p.rifSorted, want)
		}
	}
}
