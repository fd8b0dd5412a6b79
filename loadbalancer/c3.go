package loadbalancer

import (
	"math"
	"math/rand/v2"
	"time"
)

// c3 is C3's replica ranking (Suresh et al., "C3: Cutting Tail Latency in
// Cloud Data Stores via Adaptive Replica Selection", NSDI '15, §4.1): each
// server's score is
//
//	Ψ = (R − 1/μ̄) + q̂³/μ̄,   q̂ = 1 + os·n + q̄,
//
// with R an EWMA of the response time seen here, 1/μ̄ an EWMA of the
// service time and q̄ an EWMA of the queue size, both piggybacked on
// responses (the X-Prequal-Queue and X-Prequal-Service-Us headers, via
// ServerFeedback), os this client's requests outstanding to the server and
// n the number of clients (Clients). As in C3's Cassandra ScoreTracker the
// EWMAs weigh the newest sample by Alpha (0.9) and R − 1/μ̄ is kept as one
// EWMA of (latency − service time). The lowest score wins among all
// endpoints, ties at random.
//
// Left out: C3's second half, the per-server cubic rate control
// (backpressure that queues requests at the client when every server's
// rate limit is reached). A load balancer here must send each request at
// once.
//
// Not the paper's "C3" row (Prequal §5.2, Fig. 7): there the score ran on
// Prequal's asynchronous probing, q̄ an EWMA of the probed server-local
// RIF (in service and waiting) and 1/μ̄ of the server-local response
// time. This is C3 as Suresh et al. built it, on feedback piggybacked on
// every response, with q̄ the queue waiting for a slot; compare it with
// the paper's numbers with that in mind.
//
// Without feedback (an old backend) a server's score is q̂³·R, R the EWMA
// of latency, the formula with the service time taken as the whole
// latency and no queue. A server with no sample yet scores 0 while it has
// nothing outstanding here (so each is tried) and os·c3Unsampled, above
// every measured score, while it has: one request at a time until its
// first sample, the fewest outstanding first among such servers. (It
// scored os in nanoseconds, below every measured score, so a new server
// took every pick until its first answer.)
//
// Samples: a failed answer (status 0 or >= 500) gives no service time and
// no R, and neither does a service time of 0, which is how the backend
// answers a request it shed (503, full queue, X-Prequal-Service-Us: 0):
// folding that 0 into 1/μ̄ made the cubic queue term vanish on exactly
// the replica whose queue was full. The queue size of any answer that
// carried it is a sample.
type c3 struct {
	probeless
	cfg    C3Config
	st     []c3State // parallel to eps
	scores []float64 // Ψ of each endpoint, kept current (see rescore)
}

type c3State struct {
	rMinusS, svc, queue float64 // EWMAs with feedback (ns, ns, requests)
	lat                 float64 // EWMA of latency, for servers without feedback
	// fb: rMinusS and svc hold a sample; queued: queue does; seen: lat does.
	fb, queued, seen bool
	pending          ServerFeedback // handed in just before Done
}

// c3Unsampled is the score of a server with no sample yet per request
// outstanding here: far above any measured score (those stay below
// 1e40 even at a million requests queued), so such a server waits for
// its first answer while any sampled one is healthy.
const c3Unsampled = 1e300

var _ Policy = (*c3)(nil)
var _ FeedbackUser = (*c3)(nil)

func newC3(cfg C3Config) *c3 { return &c3{probeless: probeless{newBase(NameC3)}, cfg: cfg} }

func (c *c3) Caps() Caps { return Caps{Feedback: true} }

func (c *c3) SetEndpoints(_ time.Time, endpoints []string) {
	old := c.st
	_, oldIdx := c.setEndpoints(endpoints)
	c.st = carry(old, oldIdx, c.eps)
	c.scores = make([]float64, len(c.eps))
	for i := range c.eps {
		c.rescore(i)
	}
}

// rescore recomputes endpoint i's Ψ; called whenever its outstanding
// count or its EWMAs change, so a pick only compares.
func (c *c3) rescore(i int) {
	s := &c.st[i]
	os := float64(c.gates[i].inFlight)
	qhat := 1 + os*float64(c.cfg.Clients)
	if s.queued {
		qhat += s.queue
	}
	switch {
	case s.fb:
		c.scores[i] = s.rMinusS + qhat*qhat*qhat*s.svc
	case s.seen:
		c.scores[i] = qhat * qhat * qhat * s.lat
	default:
		c.scores[i] = os * c3Unsampled
	}
}

func (c *c3) Pick(now time.Time, rng *rand.Rand) (Picked, error) {
	if len(c.eps) == 0 {
		return Picked{}, ErrNoEndpoints
	}
	c.see(now)
	// One pass finds the lowest healthy score and how many tie for it;
	// one draw then chooses among the ties.
	best, ties, averseBetter := -1, 0, false
	bestScore := math.Inf(1)
	for i, sc := range c.scores {
		if sc > bestScore {
			continue
		}
		if c.averse(i) {
			averseBetter = true
			continue
		}
		if sc < bestScore {
			best, bestScore, ties = i, sc, 1
		} else {
			ties++
		}
	}
	if best < 0 { // every endpoint averse: the rule over all of them
		for i, sc := range c.scores {
			if best < 0 || sc < bestScore {
				best, bestScore = i, sc
			}
		}
	} else {
		if averseBetter {
			c.aversions++
		}
		if ties > 1 {
			k := rng.IntN(ties)
			for i := best; ; i++ {
				if c.scores[i] == bestScore && !c.averse(i) {
					if k == 0 {
						best = i
						break
					}
					k--
				}
			}
		}
	}
	pk := c.pick(best)
	c.rescore(best)
	return pk, nil
}

// ServerFeedback keeps the response's queue size and service time for the
// Done that follows.
func (c *c3) ServerFeedback(_ time.Time, pk Picked, fb ServerFeedback) {
	if i, ok := c.lookup(pk); ok {
		c.st[i].pending = fb
	}
}

func (c *c3) Done(now time.Time, pk Picked, latency time.Duration, status int) {
	i := c.done(now, pk, status)
	if i < 0 {
		return
	}
	s := &c.st[i]
	a := c.cfg.Alpha
	ew := func(old, x float64, first bool) float64 {
		if first {
			return x
		}
		return a*x + (1-a)*old
	}
	lat := float64(max(latency, 0))
	ok := !failed(status)
	if fb := s.pending; fb.Known {
		s.queue = ew(s.queue, float64(max(fb.QueueSize, 0)), !s.queued)
		s.queued = true
		if svc := float64(fb.ServiceTime); ok && svc > 0 {
			s.rMinusS = ew(s.rMinusS, max(lat-svc, 0), !s.fb)
			s.svc = ew(s.svc, svc, !s.fb)
			s.fb = true
		}
	}
	if ok {
		s.lat = ew(s.lat, lat, !s.seen)
		s.seen = true
	}
	s.pending = ServerFeedback{}
	c.rescore(i)
}

func (c *c3) Reset(now time.Time) {
	c.probeless.Reset(now)
	clear(c.st)
	for i := range c.eps {
		c.rescore(i)
	}
}
