package loadbalancer

import (
	"math"
	"math/rand/v2"
	"time"
)

// poller plans periodic probes of every endpoint: n probes per period,
// spread evenly in time and handed out round-robin from a cursor, so each
// endpoint is probed about once a period (YARP's active polling, gRPC
// WRR's load reports). The first call probes every endpoint at once.
type poller struct {
	period  int64 // nanoseconds
	acc     float64
	last    int64
	cursor  int
	started bool
}

func (pl *poller) due(b *base, t int64, dst []string) []string {
	n := len(b.eps)
	if n == 0 {
		return dst
	}
	k := n
	if pl.started {
		dt := t - pl.last
		if dt <= 0 {
			return dst
		}
		pl.acc += float64(n) * float64(dt) / float64(pl.period)
		k = int(pl.acc)
		if k >= n { // a long gap owes one round, not several
			k, pl.acc = n, 0
		} else {
			pl.acc -= float64(k)
		}
	}
	pl.started, pl.last = true, t
	for range k {
		pl.cursor %= n
		dst = append(dst, b.eps[pl.cursor].addr)
		pl.cursor++
	}
	b.probesPlanned += uint64(k)
	return dst
}

func (pl *poller) reset() { pl.acc, pl.started = 0, false }

// carry returns a slice parallel to the new endpoint set with the state of
// the endpoints that stayed (old was parallel to the previous set).
func carry[T any](old []T, oldIdx map[string]int, eps []endpoint) []T {
	out := make([]T, len(eps))
	for i := range eps {
		if j, ok := oldIdx[eps[i].addr]; ok && j < len(old) {
			out[i] = old[j]
		}
	}
	return out
}

// yarpPo2c is the paper's YARP-Po2C comparison: power of two choices on
// the servers' own RIF as polled every Poll (500 ms in the paper, 30x
// faster than YARP's default), not on local in-flight counts. Between
// polls the values are stale: that staleness is what the comparison
// measures. A never-polled endpoint counts as RIF 0.
type yarpPo2c struct {
	probeless
	cfg  YARPConfig
	poll poller
	rif  []int32 // last polled RIF, parallel to eps
}

var _ Policy = (*yarpPo2c)(nil)

func newYARPPo2c(cfg YARPConfig) *yarpPo2c {
	return &yarpPo2c{probeless: probeless{newBase(NameYARPPo2C)}, cfg: cfg, poll: poller{period: int64(cfg.Poll)}}
}

func (y *yarpPo2c) Caps() Caps { return Caps{Probes: true} }

func (y *yarpPo2c) SetEndpoints(_ time.Time, endpoints []string) {
	old := y.rif
	_, oldIdx := y.setEndpoints(endpoints)
	y.rif = carry(old, oldIdx, y.eps)
}

func (y *yarpPo2c) Pick(now time.Time, rng *rand.Rand) (Picked, error) {
	a, b, w, err := y.drawTwo(now, rng)
	if err != nil {
		return Picked{}, err
	}
	if w >= 0 {
		return y.pick(w), nil
	}
	if ra, rb := y.rif[a], y.rif[b]; rb < ra || (rb == ra && rng.IntN(2) == 0) {
		a = b
	}
	return y.pick(a), nil
}

func (y *yarpPo2c) ProbesDue(now time.Time, _ *rand.Rand, dst []string) []string {
	return y.poll.due(&y.base, y.see(now), dst)
}

func (y *yarpPo2c) ProbeResult(_ time.Time, endpoint string, r ProbeReply) {
	if i, ok := y.byAddr[endpoint]; ok {
		y.countOutcome(ProbeOK)
		y.rif[i] = int32(min(max(r.RIF, 0), math.MaxInt32))
	}
}

func (y *yarpPo2c) Reset(now time.Time) {
	y.probeless.Reset(now)
	clear(y.rif)
	y.poll.reset()
}

// nginxEWMA is ingress-nginx's "ewma" balancer (rootfs/etc/nginx/lua/
// balancer/ewma.lua, after Finagle's PeakEwma): two distinct endpoints at
// random (PICK_SET_SIZE 2), the lower score wins, where the score is an
// EWMA of connect + response time decayed toward 0 since its last update
// (weight e^(−Δt/DECAY_TIME), DECAY_TIME 10 s). Unlike peak-ewma there is
// no peak rule and no in-flight term. New endpoints start at the mean
// EWMA of the others (its slow start). Here latency is the attempt's
// whole duration. Failures: nginx learns a fail-fast error's short time
// and sends it more (kubernetes/ingress-nginx#5540); here the shared error
// aversion keeps such an endpoint out, as for every policy.
type nginxEWMA struct {
	probeless
	cfg EWMAConfig
	st  []decayed // parallel to eps
}

// decayed is an EWMA that decays toward 0 between updates.
type decayed struct {
	ns float64
	at int64 // clock reading of the last update
}

var _ Policy = (*nginxEWMA)(nil)

func newNginxEWMA(cfg EWMAConfig) *nginxEWMA {
	return &nginxEWMA{probeless: probeless{newBase(NameEWMA)}, cfg: cfg}
}

func (e *nginxEWMA) SetEndpoints(now time.Time, endpoints []string) {
	old := e.st
	_, oldIdx := e.setEndpoints(endpoints)
	e.st = carry(old, oldIdx, e.eps)
	t := e.instant(now)
	sum, kept := 0.0, 0
	for i := range e.eps {
		if _, ok := oldIdx[e.eps[i].addr]; ok {
			sum += e.score(i, t)
			kept++
		}
	}
	if kept == 0 {
		return
	}
	for i := range e.eps {
		if _, ok := oldIdx[e.eps[i].addr]; !ok {
			e.st[i] = decayed{ns: sum / float64(kept), at: t}
		}
	}
}

func (e *nginxEWMA) score(i int, t int64) float64 {
	s := e.st[i]
	if dt := t - s.at; dt > 0 && s.ns > 0 {
		return s.ns * math.Exp(-float64(dt)/float64(e.cfg.Decay))
	}
	return s.ns
}

func (e *nginxEWMA) Pick(now time.Time, rng *rand.Rand) (Picked, error) {
	a, b, w, err := e.drawTwo(now, rng)
	if err != nil {
		return Picked{}, err
	}
	if w >= 0 {
		return e.pick(w), nil
	}
	t := e.nowClock
	if sa, sb := e.score(a, t), e.score(b, t); sb < sa || (sb == sa && rng.IntN(2) == 0) {
		a = b
	}
	return e.pick(a), nil
}

func (e *nginxEWMA) Done(now time.Time, pk Picked, latency time.Duration, status int) {
	i := e.done(now, pk, status)
	if i < 0 {
		return
	}
	t := e.instant(now)
	s := &e.st[i]
	w := 1.0
	if dt := t - s.at; dt > 0 {
		w = math.Exp(-float64(dt) / float64(e.cfg.Decay))
	}
	s.ns = s.ns*w + float64(max(latency, 0))*(1-w)
	s.at = max(s.at, t)
}

func (e *nginxEWMA) Reset(now time.Time) {
	e.probeless.Reset(now)
	clear(e.st)
}
