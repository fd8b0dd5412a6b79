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
type leastRequest struct {
	probeless
	// ties is scratch for one pick: the healthy endpoints at the fewest
	// in flight so far (capacity len(eps), so it never grows).
	ties []int32
}

var _ Policy = (*leastRequest)(nil)

func newLeastRequest() *leastRequest {
	return &leastRequest{probeless: probeless{newBase(NameLeastRequest)}}
}

func (l *leastRequest) SetEndpoints(now time.Time, endpoints []string) {
	l.probeless.SetEndpoints(now, endpoints)
	l.ties = make([]int32, 0, len(l.eps))
}

func (l *leastRequest) Pick(now time.Time, rng *rand.Rand) (Picked, error) {
	if len(l.eps) == 0 {
		return Picked{}, ErrNoEndpoints
	}
	t := l.see(now)
	// Averse endpoints take part only when every endpoint is averse; a
	// pick counts as an aversion when an averse one was at least as idle
	// as the chosen. One pass finds the fewest in flight among the healthy
	// and lists the endpoints that tie for it, so one draw then chooses
	// (a second pass to find the drawn tie cost as much as the first: at
	// 100 idle endpoints 238-306 ns a pick); an endpoint busier than the
	// healthy best so far cannot matter, so its aversion is not asked.
	least, averseLeast := math.MaxInt, math.MaxInt
	gates := l.gates
	ties := l.ties[:len(gates)]
	n := 0
	for i := range gates {
		g := &gates[i]
		f := g.inFlight
		if f > least {
			continue
		}
		if t < g.until || t > g.stallAt || l.picks < g.retryPick { // averse, read from the gate in hand
			averseLeast = min(averseLeast, f)
			continue
		}
		if f < least {
			least, n = f, 0
		}
		ties[n] = int32(i)
		n++
	}
	ties = ties[:n]
	if len(ties) == 0 {
		// Every endpoint is averse: the rule over all of them (a second
		// pass, only then).
		for i := range l.gates {
			switch f := l.gates[i].inFlight; {
			case f < least:
				least = f
				ties = append(ties[:0], int32(i))
			case f == least:
				ties = append(ties, int32(i))
			}
		}
	} else if averseLeast <= least {
		l.aversions++
	}
	l.ties = ties
	k := 0
	if len(ties) > 1 {
		k = rng.IntN(len(ties))
	}
	return l.pick(int(ties[k])), nil
}

// p2c is Envoy's LEAST_REQUEST with equal weights: Choices endpoints (2 by
// default) drawn at random without replacement, the one with fewer
// in-flight requests wins, a tie goes to any of them with equal chance.
type p2c struct {
	probeless
	choices int
	perm    []int // a permutation of endpoint indexes, for d > 2 draws
}

var _ Policy = (*p2c)(nil)

func newP2C(cfg P2CConfig) *p2c {
	return &p2c{probeless: probeless{newBase(NameP2C)}, choices: max(cfg.Choices, 2)}
}

func (p *p2c) SetEndpoints(now time.Time, endpoints []string) {
	p.probeless.SetEndpoints(now, endpoints)
	p.perm = p.perm[:0]
	for i := range p.eps {
		p.perm = append(p.perm, i)
	}
}

func (p *p2c) Pick(now time.Time, rng *rand.Rand) (Picked, error) {
	if p.choices > 2 && len(p.eps) > 2 {
		return p.pickD(now, rng)
	}
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

// pickD draws d = min(choices, n) distinct endpoints (partial
// Fisher-Yates over perm, which stays a permutation) and takes the one
// with the fewest in flight among the healthy drawn, ties uniformly
// (reservoir); with every drawn endpoint averse, a healthy one elsewhere
// wins as with two choices, else the rule applies to them all.
func (p *p2c) pickD(now time.Time, rng *rand.Rand) (Picked, error) {
	n := len(p.eps)
	p.see(now)
	d := min(p.choices, n)
	best, ties, averseSeen, healthy := -1, 0, false, false
	for k := range d {
		j := k + rng.IntN(n-k)
		p.perm[k], p.perm[j] = p.perm[j], p.perm[k]
		i := p.perm[k]
		if p.averse(i) {
			averseSeen = true
			continue
		}
		healthy = true
		switch f := p.gates[i].inFlight; {
		case best < 0 || f < p.gates[best].inFlight:
			best, ties = i, 1
		case f == p.gates[best].inFlight:
			ties++
			if rng.IntN(ties) == 0 {
				best = i
			}
		}
	}
	if !healthy {
		first := p.perm[0]
		if i := p.redrawHealthy(first, rng); i != first {
			return p.pick(i), nil
		}
		for k := range d { // all averse everywhere: the rule over the drawn
			i := p.perm[k]
			switch f := p.gates[i].inFlight; {
			case best < 0 || f < p.gates[best].inFlight:
				best, ties = i, 1
			case f == p.gates[best].inFlight:
				ties++
				if rng.IntN(ties) == 0 {
					best = i
				}
			}
		}
	} else if averseSeen {
		p.aversions++
	}
	return p.pick(best), nil
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
