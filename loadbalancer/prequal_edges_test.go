package loadbalancer

// Regression tests from the adversarial review of issue 12: each fails when
// its mechanism is removed.

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// ReusedPicks counts the picks made on a probe already used, beside the
// budget in force.
func TestPrequal_ReusedPicksCounted(t *testing.T) {
	// One replica in the pool with a large budget: every pick after the
	// first reuses its probe.
	// Six replicas: Eq. 1 gives 16/((1 − 2/6)·3) = 8, held to 5 by the
	// rise of one per replica above the pole n* = 2.
	p := newPrequalT(t, 6, func(c *PrequalConfig) {
		c.PoolSize, c.MinProbes, c.RemovePerQuery, c.QRIF, c.Delta, c.MaxReuse = 2, 1, 0, 1, 15, 16
	})
	rng := newRNG()
	fill(p, t0, map[int]ProbeReply{0: known(0, time.Millisecond)})
	for range 3 {
		mustPick(t, p, t0, rng)
	}
	if s := p.Stats(); s.ReusedPicks != 2 || s.ReuseBudget != 5 {
		t.Errorf("reused picks %d, budget %v; want 2 and 5", s.ReusedPicks, s.ReuseBudget)
	}
}

// At most one exploratory request in flight per replica across clients:
// client A explores replica 1 (no history); client B's probe then reports
// RIF 1 and no latency (A's request): B must not send a second one.
func TestPrequal_OneExplorationAcrossClients(t *testing.T) {
	ms := time.Millisecond
	cfg := func(c *PrequalConfig) { c.QRIF = 1; c.RemovePerQuery = 0 }
	a, b := newPrequalT(t, 4, cfg), newPrequalT(t, 4, cfg)
	rng := newRNG()
	fill(a, t0, map[int]ProbeReply{0: known(1, 5*ms), 1: {RIF: 0}})
	if pk := mustPick(t, a, t0, rng); pk.Endpoint != a.eps[1].addr {
		t.Fatalf("client A did not explore the unknown replica: %+v", pk)
	}
	fill(b, at(1), map[int]ProbeReply{0: known(1, 5*ms), 1: {RIF: 1}})
	if pk := mustPick(t, b, at(1), rng); pk.Endpoint == b.eps[1].addr {
		t.Errorf("client B sent a second exploratory request to replica 1 while A's is in flight")
	}
}

// "Whenever a new probe arrives that would increase the pool beyond its
// size limit, we drop the oldest probe": an answer received before every
// pool entry and handed in late is itself the oldest.
func TestPrequal_OverflowDropsTheOldestEvenIfItIsTheArrival(t *testing.T) {
	p := newPrequalT(t, 20, nil)
	for i := range 16 {
		p.ProbeResult(at(100+i), p.eps[i].addr, known(0, time.Millisecond))
	}
	p.ProbeResult(at(50), p.eps[16].addr, known(0, time.Millisecond))
	for _, e := range p.pool {
		if e.ep == 16 {
			t.Errorf("the answer received at 50 ms evicted the one received at 100 ms")
		}
	}
	if len(p.pool) != 16 || p.Stats().PoolRemovals["overflow"] != 1 {
		t.Errorf("pool %d, removals %v; want 16 and one overflow", len(p.pool), p.Stats().PoolRemovals)
	}
}

// An averse replica's probe ranks below every other, also below a healthy
// probe that is busier and slower.
func TestPrequal_AverseRankedBelowOtherProbes(t *testing.T) {
	p := newPrequalT(t, 4, func(c *PrequalConfig) { c.RemovePerQuery = 0; c.MaxReuse = 16; c.Delta = 1000 })
	rng := newRNG()
	makeAverse(t, p, rng)
	for i := 0; i < 20; i++ {
		fill(p, at(10), map[int]ProbeReply{0: known(0, time.Millisecond), 1: known(1, 5*time.Millisecond)})
		if pk := mustPick(t, p, at(10), rng); pk.Endpoint != p.eps[1].addr {
			t.Fatalf("pick %d: %s, want the healthy probe %s", i, pk.Endpoint, p.eps[1].addr)
		}
	}
}

// SetEndpoints carries each staying replica's state (exploration in
// flight, last answer) to its new index.
func TestPrequal_SetEndpointsKeepsReplicaState(t *testing.T) {
	p := newPrequalT(t, 4, func(c *PrequalConfig) { c.QRIF = 1; c.RemovePerQuery = 0 })
	rng := newRNG()
	a := addrs(5)
	fill(p, t0, map[int]ProbeReply{0: known(3, 5*time.Millisecond), 1: {RIF: 0}})
	if pk := mustPick(t, p, t0, rng); pk.Endpoint != a[1] {
		t.Fatalf("first pick %s, want the unknown replica", pk.Endpoint)
	}
	p.SetEndpoints(at(1), []string{a[4], a[1], a[0], a[2], a[3]})
	p.ProbeResult(at(2), a[1], ProbeReply{RIF: 0})
	p.ProbeResult(at(2), a[0], known(3, 5*time.Millisecond))
	if pk := mustPick(t, p, at(2), rng); pk.Endpoint == a[1] {
		t.Errorf("a second exploratory request went to %s after SetEndpoints", a[1])
	}
	p.ProbeResult(at(1), a[0], known(0, time.Millisecond))
	if s := p.Stats().StaleAnswers; s != 1 {
		t.Errorf("stale answers = %d after SetEndpoints, want 1", s)
	}
}

// Reset keeps a replica's probe in flight as in flight: its answer or
// failure is still to come, so the replica is not probed twice.
func TestPrequal_ResetKeepsProbesInFlight(t *testing.T) {
	p := newPrequalT(t, 3, func(c *PrequalConfig) { c.IdleProbeInterval = 0 })
	rng := newRNG()
	mustPick(t, p, t0, rng)
	if due := p.ProbesDue(t0, rng, nil); len(due) != 3 {
		t.Fatalf("first query: %v", due)
	}
	p.Reset(at(1))
	mustPick(t, p, at(2), rng)
	if due := p.ProbesDue(at(2), rng, nil); len(due) != 0 {
		t.Errorf("after Reset, replicas with a probe in flight were probed again: %v", due)
	}
}

// The pool stays in receipt order (expire drops its prefix) through late
// and out-of-order answers, picks, SetEndpoints and Reset: a property test
// over random operation sequences.
func TestPrequal_PoolReceiptOrderInvariant(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		all := addrs(40)
		cur := append([]string(nil), all[:20]...)
		p := newPolicy(t, NamePrequal, 0, func(c *Config) {
			c.Prequal.MaxReuse = 1 + r.IntN(4)
			c.Prequal.RemovePerQuery = []float64{0, 0.25, 1, 2}[r.IntN(4)]
		}).(*prequal)
		p.SetEndpoints(t0, cur)
		var inflight []Picked
		clock := 0
		check := func(op string, afterPick bool) {
			seen := map[int32]bool{}
			for i, e := range p.pool {
				if i > 0 && p.pool[i-1].received > e.received {
					t.Fatalf("seed %d after %s: pool out of receipt order at %d", seed, op, i)
				}
				if seen[e.ep] || int(e.ep) >= len(p.eps) {
					t.Fatalf("seed %d after %s: bad entry %+v", seed, op, e)
				}
				seen[e.ep] = true
				if afterPick && e.received < p.instant(at(clock))-int64(p.cfg.MaxAge) {
					t.Fatalf("seed %d after %s: expired entry left in the pool", seed, op)
				}
			}
		}
		for step := 0; step < 3000; step++ {
			clock += r.IntN(40)
			switch k := r.IntN(100); {
			case k < 55:
				lag := 0
				if r.IntN(3) == 0 {
					lag = r.IntN(1500)
				}
				p.ProbeResult(at(clock-lag), cur[r.IntN(len(cur))], ProbeReply{RIF: r.IntN(8), Latency: time.Duration(1+r.IntN(50)) * time.Millisecond, LatencyKnown: r.IntN(5) > 0})
				check("ProbeResult", false)
			case k < 85:
				inflight = append(inflight, mustPick(t, p, at(clock), r))
				check("Pick", true)
			case k < 93:
				if len(inflight) > 0 {
					i := r.IntN(len(inflight))
					p.Done(at(clock), inflight[i], time.Millisecond, 200)
					inflight = append(inflight[:i], inflight[i+1:]...)
				}
			case k < 99:
				r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
				cur = append(cur[:0], all[:5+r.IntN(30)]...)
				p.SetEndpoints(at(clock), cur)
				check("SetEndpoints", false)
			default:
				p.Reset(at(clock))
				check("Reset", false)
			}
		}
	}
}

// Cold latencies within LatencyTolerance of the fastest tie, and the lower
// RIF among them wins; outside it, and with a tolerance of 0, the fastest
// wins outright.
func TestPrequal_LatencyToleranceBreaksNearTiesByRIF(t *testing.T) {
	us := time.Microsecond
	replies := map[int]ProbeReply{0: known(3, 50000*us), 1: known(1, 50300*us), 2: known(0, 60000*us)}
	for _, tt := range []struct {
		tol  float64
		want int
	}{{0.05, 1}, {0, 0}, {0.25, 2}} {
		p := newPrequalT(t, 4, func(c *PrequalConfig) { c.QRIF = 1; c.LatencyTolerance = tt.tol })
		fill(p, t0, replies)
		if got := p.byAddr[mustPick(t, p, t0, newRNG()).Endpoint]; got != tt.want {
			t.Errorf("tolerance %v: picked %d, want %d", tt.tol, got, tt.want)
		}
	}
}

// A latency near the largest Duration neither overflows compensation nor
// the tolerance's limit (Pick panicked on three answers at MaxInt64).
func TestPrequal_HugeLatenciesDoNotOverflow(t *testing.T) {
	p := newPrequalT(t, 4, nil)
	fill(p, t0, map[int]ProbeReply{0: known(0, math.MaxInt64), 1: known(0, math.MaxInt64), 2: known(0, math.MaxInt64)})
	rng := newRNG()
	for range 5 {
		pk := mustPick(t, p, at(1), rng)
		if pk.Fallback {
			t.Fatalf("fallback pick with a full pool: %+v", pk)
		}
	}
	for _, e := range p.pool {
		if e.latency < 0 {
			t.Errorf("latency overflowed to %v", e.latency)
		}
	}
}

// Removal of "the worst" takes an averse replica's probe before any other,
// even one that would otherwise be the best.
func TestPrequal_WorstTakesAverseFirst(t *testing.T) {
	p := newPrequalT(t, 4, func(c *PrequalConfig) { c.RemovePerQuery = 0; c.MaxReuse = 16; c.Delta = 1000 })
	rng := newRNG()
	makeAverse(t, p, rng)
	fill(p, at(10), map[int]ProbeReply{0: known(0, time.Millisecond), 1: known(1, 5*time.Millisecond), 2: known(2, 9*time.Millisecond)})
	if w := p.worst(p.hotThreshold()); p.pool[w].ep != 0 {
		t.Errorf("worst = endpoint %d, want the averse endpoint 0", p.pool[w].ep)
	}
}

// makeAverse fails AversionMinSamples requests to endpoint 0 (endpoint 1
// kept out of the picks), so endpoint 0 is averse.
func makeAverse(t *testing.T, p *prequal, rng *rand.Rand) {
	t.Helper()
	// Failures in a row make it averse before the minimum sample.
	for ms := 0; ms < AversionMinSamples && !p.averse(0); ms++ {
		pk, _ := p.PickOther(at(ms), rng, p.eps[1].addr)
		for pk.Endpoint != p.eps[0].addr {
			p.Done(at(ms), pk, time.Millisecond, 200)
			pk, _ = p.PickOther(at(ms), rng, p.eps[1].addr)
		}
		p.Done(at(ms), pk, time.Millisecond, 500)
	}
	if !p.averse(0) {
		t.Fatal("endpoint 0 not averse")
	}
}
