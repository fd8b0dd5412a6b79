package loadbalancer

import (
	"math"
	"math/rand/v2"
	"time"
)

// peakEWMA is the Linkerd/Finagle baseline: two endpoints drawn at random
// without replacement, the lower cost wins, where cost is a peak-sensitive
// EWMA of observed latency times (in flight + 1). It follows tower's
// PeakEwma (tower/src/load/peak_ewma.rs), which linkerd2-proxy runs:
//
//   - every read of an endpoint's cost (each pick reads both candidates)
//     decays its estimate toward 0 by e^(−Δt/τ) since the last update and
//     stores it, so an avoided endpoint is retried;
//   - a latency above the stored estimate replaces it at once; otherwise
//     the estimate moves toward the sample with weight 1 − e^(−Δt/τ), Δt
//     the time since the last update (usually the pick that read it);
//   - an endpoint starts at DefaultRTT when it appears and decays from
//     there like any estimate.
//
// One deviation: a failure counts as at least the estimate and DefaultRTT
// (see Done).
type peakEWMA struct {
	probeless
	cfg PeakEWMAConfig
	rtt []ewma // parallel to eps
}

type ewma struct {
	ns float64   // estimate in nanoseconds
	at time.Time // when ns was last updated (a sample, or a read that decayed it)
}

var _ Policy = (*peakEWMA)(nil)

func newPeakEWMA(cfg PeakEWMAConfig) *peakEWMA {
	return &peakEWMA{probeless: probeless{newBase(NamePeakEWMA)}, cfg: cfg}
}

func (p *peakEWMA) SetEndpoints(now time.Time, endpoints []string) {
	oldRTT := p.rtt
	_, oldIdx := p.setEndpoints(endpoints)
	p.rtt = make([]ewma, len(p.eps))
	for i := range p.eps {
		if j, ok := oldIdx[p.eps[i].addr]; ok {
			p.rtt[i] = oldRTT[j]
		} else {
			p.rtt[i] = p.fresh(now)
		}
	}
}

// fresh is a new endpoint's estimate: DefaultRTT as of now.
func (p *peakEWMA) fresh(now time.Time) ewma {
	return ewma{ns: float64(p.cfg.DefaultRTT), at: now}
}

// estimate is endpoint i's latency estimate at now, in nanoseconds: the
// stored one decayed toward 0 for the time since its last update.
func (p *peakEWMA) estimate(i int, now time.Time) float64 {
	e := p.rtt[i]
	dt := now.Sub(e.at)
	if dt <= 0 {
		return e.ns
	}
	return e.ns * math.Exp(-float64(dt)/float64(p.cfg.Decay))
}

// cost reads endpoint i's load as tower's load() does: the decayed
// estimate is stored, so the next sample blends from it.
func (p *peakEWMA) cost(i int, now time.Time) float64 {
	e := &p.rtt[i]
	if now.After(e.at) {
		e.ns, e.at = p.estimate(i, now), now
	}
	return e.ns * float64(p.gates[i].inFlight+1)
}

func (p *peakEWMA) Pick(now time.Time, rng *rand.Rand) (Picked, error) {
	a, b, w, err := p.drawTwo(now, rng)
	if err != nil {
		return Picked{}, err
	}
	if w >= 0 {
		return p.pick(w), nil
	}
	ca, cb := p.cost(a, now), p.cost(b, now)
	if cb < ca || (cb == ca && rng.IntN(2) == 0) {
		a = b
	}
	return p.pick(a), nil
}

// Done feeds the request's latency into the estimate. A failure must not
// look fast (Linkerd learns a 1 ms latency from a fail-fast 500 and sends
// the replica more): it counts as at least the endpoint's estimate and at
// least DefaultRTT, so it never lowers the estimate. (Doubling it instead
// kept a healed replica out for good.) Error aversion does the avoiding.
func (p *peakEWMA) Done(now time.Time, pk Picked, latency time.Duration, status int) {
	i := p.done(now, pk, status)
	if i < 0 {
		return
	}
	sample := float64(max(latency, 0))
	e := &p.rtt[i]
	if failed(status) {
		sample = max(sample, float64(p.cfg.DefaultRTT), e.ns)
	}
	if sample > e.ns {
		e.ns = sample // the peak, at once
	} else if dt := now.Sub(e.at); dt > 0 {
		// No time passed (or Done calls arrive slightly out of order, as
		// concurrent requests finish): weight 1 keeps the estimate.
		w := math.Exp(-float64(dt) / float64(p.cfg.Decay))
		e.ns = e.ns*w + sample*(1-w)
	}
	if now.After(e.at) {
		e.at = now
	}
}

func (p *peakEWMA) Reset(now time.Time) {
	p.probeless.Reset(now)
	for i := range p.rtt {
		p.rtt[i] = p.fresh(now)
	}
}
