package loadbalancer

import (
	"math"
	"math/rand/v2"
	"time"
)

// probeless carries the parts of Policy shared by the baselines that decide
// from local state only: they plan no probes and only count probe answers
// (none should arrive, since UsesProbes is false for them).
type probeless struct{ base }

func (p *probeless) SetEndpoints(_ time.Time, endpoints []string) { p.setEndpoints(endpoints) }

func (p *probeless) Done(now time.Time, pk Picked, _ time.Duration, status int) {
	p.done(now, pk, status)
}

func (p *probeless) ProbesDue(_ time.Time, _ *rand.Rand, dst []string) []string { return dst }

func (p *probeless) ProbeResult(_ time.Time, endpoint string, _ ProbeReply) {
	if _, ok := p.byAddr[endpoint]; ok {
		p.countOutcome(ProbeOK)
	}
}

func (p *probeless) ProbeFailed(_ time.Time, endpoint string, reason ProbeOutcome) {
	if _, ok := p.byAddr[endpoint]; ok {
		p.countOutcome(reason)
	}
}

func (p *probeless) Reset(time.Time) { p.resetCounters() }

func (p *probeless) Stats() Stats { return p.stats(0) }

// roundRobin cycles through the route's endpoints with its own counter (the
// seed shared one counter across all routes). The first pick after creation
// or Reset starts at a random offset, so ingress replicas do not march in
// step.
type roundRobin struct {
	probeless
	next    int
	started bool
}

var _ Policy = (*roundRobin)(nil)

func newRoundRobin() *roundRobin {
	return &roundRobin{probeless: probeless{newBase(NameRoundRobin)}}
}

func (r *roundRobin) Pick(now time.Time, rng *rand.Rand) (Picked, error) {
	n := len(r.eps)
	if n == 0 {
		return Picked{}, ErrNoEndpoints
	}
	r.see(now)
	if !r.started {
		r.next, r.started = rng.IntN(n), true
	}
	i := r.next % n
	// Skip averse endpoints while a healthy one is left in the cycle.
	if r.averse(i) {
		for k := 1; k < n; k++ {
			if j := (i + k) % n; !r.averse(j) {
				r.aversions++
				i = j
				break
			}
		}
	}
	r.next = (i + 1) % n
	return r.pick(i), nil
}

func (r *roundRobin) Reset(now time.Time) {
	r.probeless.Reset(now)
	r.started = false
}

// leastRequest scans every endpoint for the fewest local in-flight requests,
// breaking ties uniformly at random (the seed's coin flip favoured later
// endpoints).
type leastRequest struct{ probeless }

var _ Policy = (*leastRequest)(nil)

func newLeastRequest() *leastRequest {
	return &leastRequest{probeless{newBase(NameLeastRequest)}}
}

func (l *leastRequest) Pick(now time.Time, rng *rand.Rand) (Picked, error) {
	if len(l.eps) == 0 {
		return Picked{}, ErrNoEndpoints
	}
	l.see(now)
	// Averse endpoints take part only when every endpoint is averse; a
	// pick counts as an aversion when an averse one was at least as idle
	// as the chosen. One pass finds the fewest in flight among the healthy
	// (and how many tie) and among all; an endpoint busier than the
	// healthy best so far cannot matter, so its aversion is not asked.
	least, ties, averseLeast := math.MaxInt, 0, math.MaxInt
	leastAll, tiesAll := math.MaxInt, 0
	for i := range l.eps {
		f := l.gates[i].inFlight
		switch {
		case f < leastAll:
			leastAll, tiesAll = f, 1
		case f == leastAll:
			tiesAll++
		}
		switch {
		case f > least:
		case l.averse(i):
			averseLeast = min(averseLeast, f)
		case f < least:
			least, ties = f, 1
		default:
			ties++
		}
	}
	allAverse := ties == 0
	if allAverse {
		least, ties = leastAll, tiesAll
	} else if averseLeast <= least {
		l.aversions++
	}
	// Then the chosen one among the ties, with one random draw.
	n := 0
	if ties > 1 {
		n = rng.IntN(ties)
	}
	for i := range l.eps {
		if l.gates[i].inFlight == least && (allAverse || !l.averse(i)) {
			if n == 0 {
				return l.pick(i), nil
			}
			n--
		}
	}
	panic("loadbalancer: least-request tie count out of step")
}

// p2c is Envoy's LEAST_REQUEST with equal weights: two endpoints drawn at
// random without replacement, the one with fewer in-flight requests wins, a
// tie goes to either with equal chance.
type p2c struct{ probeless }

var _ Policy = (*p2c)(nil)

func newP2C() *p2c { return &p2c{probeless{newBase(NameP2C)}} }

func (p *p2c) Pick(now time.Time, rng *rand.Rand) (Picked, error) {
	a, b, w, err := p.drawTwo(now, rng)
	if err != nil {
		return Picked{}, err
	}
	if w >= 0 {
		return p.pick(w), nil
	}
	fa, fb := p.gates[a].inFlight, p.gates[b].inFlight
	if fb < fa || (fb == fa && rng.IntN(2) == 0) {
		a = b
	}
	return p.pick(a), nil
}

// twoDistinct draws two different indexes below n uniformly; with n == 1
// both are 0.
func twoDistinct(n int, rng *rand.Rand) (int, int, error) {
	switch n {
	case 0:
		return 0, 0, ErrNoEndpoints
	case 1:
		return 0, 0, nil
	}
	a := rng.IntN(n)
	b := rng.IntN(n - 1)
	if b >= a {
		b++
	}
	return a, b, nil
}

// random picks an endpoint uniformly at random.
type random struct{ probeless }

var _ Policy = (*random)(nil)

func newRandom() *random { return &random{probeless{newBase(NameRandom)}} }

func (r *random) Pick(now time.Time, rng *rand.Rand) (Picked, error) {
	if len(r.eps) == 0 {
		return Picked{}, ErrNoEndpoints
	}
	r.see(now)
	return r.pick(r.redrawHealthy(rng.IntN(len(r.eps)), rng)), nil
}
