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
	// weight is the RIF coefficient of score = weight·RIF + latency/a
	// (a: see invLatencyScale); rifOnly drops the latency term.
	weight  float64
	rifOnly bool
}

// score is the entry's score; inv is 1 / the latency scale (per
// nanosecond; see invLatencyScale; 0 when none is known, and then every
// latency counts as one scale unit).
func (s scored) score(e *probeEntry, inv float64) float64 {
	if s.rifOnly {
		return float64(e.rif)
	}
	lat := 1.0
	if e.known && inv > 0 {
		lat = float64(e.latency) * inv
	}
	return s.weight*float64(e.rif) + lat
}

// rank is the (tier, score) of an entry; tiers: 0 usable, 1 exploring,
// 2 averse.
func (s scored) rank(p *prequal, e *probeEntry, inv float64) (uint8, float64) {
	switch {
	case p.averse(int(e.ep)):
		return 2, float64(e.rif)
	case !e.known && p.replicas[e.ep].exploring:
		return 1, float64(e.rif)
	}
	return 0, s.score(e, inv)
}

// invLatencyScale is 1 / the latency that one request in flight is worth
// (per nanosecond), 0 for the RIF-only rule or when no latency is known:
// the pool's estimate of the processing time at RIF <= 1 (the paper's
// scale for Linear), else the mean known latency in the pool until such an
// answer has arrived. The rule multiplies by it rather than divide per
// entry.
func (s scored) invLatencyScale(p *prequal) float64 {
	if s.rifOnly {
		return 0
	}
	if p.unitLatency > 0 {
		return 1 / p.unitLatency
	}
	sum, n := 0.0, 0
	for i := range p.pool {
		if p.pool[i].known {
			sum += float64(p.pool[i].latency)
			n++
		}
	}
	if n == 0 || sum <= 0 {
		return 0
	}
	return float64(n) / sum
}

func (s scored) choose(p *prequal, thr int32, rng *rand.Rand) (int, bool) {
	inv := s.invLatencyScale(p)
	// One pass ranks every entry once (kept in the scratch slices for the
	// tie pass) and finds the best (tier, score) and how many tie for it;
	// one draw then chooses among the ties.
	tiers, scores := p.cats[:len(p.pool)], p.scores[:len(p.pool)]
	best, bestTier, bestScore, ties, averse := -1, uint8(0), 0.0, 0, false
	for i := range p.pool {
		t, sc := s.rank(p, &p.pool[i], inv)
		tiers[i], scores[i] = t, sc
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
			if tiers[i] == bestTier && scores[i] == bestScore {
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

// worst is the entry with the highest score, the oldest of those tied
// (as HCL's worst breaks ties; unlike HCL's, it does not rank the
// averse and exploring tiers first).
func (s scored) worst(p *prequal, _ int32) int {
	inv := s.invLatencyScale(p)
	w, wScore := -1, math.Inf(-1)
	for i := range p.pool {
		if sc := s.score(&p.pool[i], inv); w < 0 || sc > wScore {
			w, wScore = i, sc
		}
	}
	return w
}

// rifOnly ranks by reported RIF (compensated), ignoring latency: the
// paper's RIF-only rule (App. A).
func rifOnly() selector { return scored{rifOnly: true} }

// linearRule is the paper's "Linear" comparison (§5.2, Fig. 7; App. A): a
// replica's score is the equally weighted average of its latency and its
// RIF scaled by a, the median processing time of a query on a replica
// with one request in flight (75 ms on the paper's testbed); lowest wins.
// Here score = weight·RIF + latency/a, which ranks as the paper's
// (1−λ)·latency + λ·a·RIF with weight = λ/(1−λ): weight 1 is the paper's
// equal weighting, 0 latency-only, a large weight RIF-only. a is
// estimated from the probe answers at RIF <= 1 (an EWMA of their
// latencies); until one has arrived the mean known latency in the pool
// stands in. An unknown latency counts as a.
func linearRule(weight float64) selector { return scored{weight: weight} }
