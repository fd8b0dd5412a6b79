package loadbalancer

import (
	"math"
	"math/rand/v2"
)

// selector is the rule a probe-pool policy applies to its pool: the pool,
// its probing, reuse, removal, RIF quantile and aversion are prequal's
// (prequal.go), only the choice differs. The paper's App. A compares HCL
// with RIF-only and linear mixes of RIF and latency on the same pool.
type selector interface {
	// choose returns the index of the pool entry to use and whether the
	// pick counts as hot. The pool is non-empty; thr is the hot threshold.
	choose(p *prequal, thr int32, rng *rand.Rand) (int, bool)
	// worst returns the index of the entry that per-query removal takes
	// when it takes the worst.
	worst(p *prequal, thr int32) int
}

// hcl is the paper's hot-cold lexicographic rule (prequal.choose).
type hcl struct{}

func (hcl) choose(p *prequal, thr int32, rng *rand.Rand) (int, bool) { return p.choose(thr, rng) }
func (hcl) worst(p *prequal, thr int32) int                          { return p.worst(thr) }

// scored is a selector that ranks each entry by a score, lowest wins, ties
// uniformly at random. An averse replica ranks after every other, and an
// unknown-latency replica already explored by a request in flight just
// before those (the same last resorts as HCL).
type scored struct {
	// weight is the RIF coefficient of score = weight·RIF + latency/ℓ̄;
	// rifOnly drops the latency term.
	weight  float64
	rifOnly bool
}

// score is the entry's score; meanLat is the mean known latency in the
// pool (nanoseconds, 0 when none is known).
func (s scored) score(e *probeEntry, meanLat float64) float64 {
	if s.rifOnly {
		return float64(e.rif)
	}
	lat := 1.0
	if e.known && meanLat > 0 {
		lat = float64(e.latency) / meanLat
	}
	return s.weight*float64(e.rif) + lat
}

// rank is the (tier, score) of an entry; tiers: 0 usable, 1 exploring,
// 2 averse.
func (s scored) rank(p *prequal, e *probeEntry, meanLat float64) (int, float64) {
	switch {
	case p.averse(int(e.ep)):
		return 2, float64(e.rif)
	case !e.known && p.replicas[e.ep].exploring:
		return 1, float64(e.rif)
	}
	return 0, s.score(e, meanLat)
}

func meanKnownLatency(pool []probeEntry) float64 {
	sum, n := 0.0, 0
	for i := range pool {
		if pool[i].known {
			sum += float64(pool[i].latency)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

func (s scored) choose(p *prequal, thr int32, rng *rand.Rand) (int, bool) {
	mean := 0.0
	if !s.rifOnly {
		mean = meanKnownLatency(p.pool)
	}
	// One pass finds the best (tier, score) and how many tie for it; one
	// draw then chooses among the ties.
	best, bestTier, bestScore, ties, averse := -1, 0, 0.0, 0, false
	for i := range p.pool {
		t, sc := s.rank(p, &p.pool[i], mean)
		averse = averse || t == 2
		switch {
		case best < 0 || t < bestTier || (t == bestTier && sc < bestScore):
			best, bestTier, bestScore, ties = i, t, sc, 1
		case t == bestTier && sc == bestScore:
			ties++
		}
	}
	if ties > 1 {
		k := rng.IntN(ties)
		for i := best; ; i++ {
			if t, sc := s.rank(p, &p.pool[i], mean); t == bestTier && sc == bestScore {
				if k == 0 {
					best = i
					break
				}
				k--
			}
		}
	}
	if averse && bestTier < 2 {
		p.aversions++ // an averse replica in the pool lost to the others
	}
	return best, p.pool[best].rif > thr
}

func (s scored) worst(p *prequal, _ int32) int {
	mean := 0.0
	if !s.rifOnly {
		mean = meanKnownLatency(p.pool)
	}
	w, wScore := -1, math.Inf(-1)
	for i := range p.pool {
		if sc := s.score(&p.pool[i], mean); w < 0 || sc > wScore {
			w, wScore = i, sc
		}
	}
	return w
}

// rifOnly ranks by reported RIF (compensated), ignoring latency: the
// paper's RIF-only rule (App. A).
func rifOnly() selector { return scored{rifOnly: true} }

// linearRule is the paper's "Linear" comparison (App. A; Fig. 7): a linear
// combination of RIF and latency, lowest wins. The paper does not give its
// coefficients; here score = weight·RIF + latency/ℓ̄, with ℓ̄ the mean
// known latency in the pool, so weight is unit-free: the number of
// requests in flight that cost as much as one mean latency (weight 0 is
// latency-only, a large weight RIF-only). An unknown latency counts as ℓ̄.
func linearRule(weight float64) selector { return scored{weight: weight} }
