package loadbalancer

import (
	"math"
	"math/rand/v2"
	"time"
)

// wrr is gRPC's weighted_round_robin (gRFC A58; grpc-go
// balancer/weightedroundrobin), the incumbent Prequal replaced at YouTube.
// Each endpoint's weight is qps / (utilization + penalty·eps/qps) from its
// load reports, which here are probe answers polled every Period (as
// gRPC's out-of-band reporting would deliver them). A weight is used only
// after Blackout since it first appeared, and is dropped when no report
// refreshed it for Expiry (its blackout then starts over). Reports with
// qps or utilization 0 are ignored, as gRPC does. Every Period the
// scheduler is rebuilt from the weights: endpoints without a usable
// weight get the mean of the others; with fewer than two usable weights
// every endpoint weighs the same (round-robin). The pick is gRPC's static
// stride scheduler (grpc static_stride_scheduler.cc; grpc-go's
// edfScheduler): weights clamped to [1%, 10×] of their mean (C++'s
// kMinRatio and kMaxRatio, so a pick takes at most about 10 rounds) and
// scaled so the largest is 65535; endpoint i = seq mod n is taken on its
// turn when (w·(seq div n) + i·32767) mod 65535 >= 65535 − w, so each
// endpoint gets w/65535 of its turns. The i·32767 offset staggers the
// skips of endpoints with equal weights, which would otherwise skip the
// same generations together.
//
// The turns are not tested one by one. Endpoint i's test at generation g
// is acc = (w·g + i·32767) mod 65535 >= 65535 − w, and acc grows by w a
// generation, so from any generation the next one that takes i is found
// with one division (nextTake). Each endpoint keeps that generation
// (due), and a pick walks the cursor (generation, index) to the first
// endpoint due now, one comparison per turn. The picks are exactly the
// rejection loop's, but a skipped turn costs a comparison instead of two
// 64-bit divisions and a modulus: with one endpoint clamped to 10× the
// mean weight among 100 (the mean of the scheduled weights then about
// 1/90 of the largest) a pick skips ~90 turns: 239–303 ns as a rejection
// loop, 104–116 ns walking (BenchmarkPick/wrr/skewed). The largest weight is always 65535, taken every generation, so a
// pick walks at most n turns.
type wrr struct {
	probeless
	cfg   WRRConfig
	poll  poller
	st    []wrrState // parallel to eps
	sched []uint16   // scaled weights of the last rebuild, parallel to eps
	due   []uint64   // the next generation that takes each endpoint, parallel to eps
	// gen and idx are the scheduler's cursor: the turn of endpoint idx in
	// generation gen (gRPC's sequence number gen·n + idx) is next.
	gen uint64
	idx int
	// nextBuild is when the scheduler is rebuilt next (clock reading);
	// seeded is false until the first pick drew the starting sequence.
	nextBuild int64
	seeded    bool
}

type wrrState struct {
	weight        float64
	nonEmptySince int64 // first report of the current run of reports; 0: none
	lastUpdated   int64
}

const (
	wrrMaxWeight = math.MaxUint16
	wrrMinRatio  = 0.01 // of the mean weight, as gRPC C++'s kMinRatio
	wrrMaxRatio  = 10   // of the mean weight, as gRPC C++'s kMaxRatio
)

var _ Policy = (*wrr)(nil)

func newWRR(cfg WRRConfig) *wrr {
	return &wrr{probeless: probeless{newBase(NameWRR)}, cfg: cfg, poll: poller{period: int64(cfg.Period)}}
}

func (w *wrr) Caps() Caps { return Caps{Probes: true} }

func (w *wrr) SetEndpoints(now time.Time, endpoints []string) {
	old := w.st
	seq := w.gen*uint64(len(w.sched)) + uint64(w.idx) // the sequence goes on over the new set
	_, oldIdx := w.setEndpoints(endpoints)
	w.st = carry(old, oldIdx, w.eps)
	w.sched = make([]uint16, len(w.eps))
	w.due = make([]uint64, len(w.eps))
	w.seek(seq)
	w.rebuild(w.instant(now))
}

// seek puts the cursor at sequence number seq.
func (w *wrr) seek(seq uint64) {
	if n := uint64(len(w.eps)); n > 0 {
		w.gen, w.idx = seq/n, int(seq%n)
	}
}

// usable is endpoint i's weight at t, 0 when it has none, is in its
// blackout or has expired.
func (w *wrr) usable(i int, t int64) float64 {
	s := &w.st[i]
	if s.nonEmptySince == 0 {
		return 0
	}
	if t-s.lastUpdated >= int64(w.cfg.Expiry) {
		s.nonEmptySince = 0 // the blackout starts over with the next report
		return 0
	}
	if t-s.nonEmptySince < int64(w.cfg.Blackout) {
		return 0
	}
	return s.weight
}

// rebuild recomputes the scaled weights at t.
func (w *wrr) rebuild(t int64) {
	w.nextBuild = t + int64(w.cfg.Period)
	sum, hi, usable := 0.0, 0.0, 0
	for i := range w.eps {
		if x := w.usable(i, t); x > 0 {
			sum += x
			hi = max(hi, x)
			usable++
		}
	}
	if usable < 2 {
		for i := range w.sched {
			w.sched[i] = wrrMaxWeight
		}
		w.redue()
		return
	}
	mean := sum / float64(usable)
	hi = min(hi, wrrMaxRatio*mean)
	scale := wrrMaxWeight / hi
	lo := max(math.Round(mean*scale*wrrMinRatio), 1)
	for i := range w.eps {
		x := w.usable(i, t)
		if x == 0 {
			x = mean
		}
		w.sched[i] = uint16(min(max(math.Round(x*scale), lo), wrrMaxWeight))
	}
	w.redue()
}

// redue recomputes every endpoint's next generation from the cursor,
// after the weights or the cursor changed.
func (w *wrr) redue() {
	for i := range w.due {
		g := w.gen
		if i < w.idx { // its turn in this generation is past
			g++
		}
		w.due[i] = w.nextTake(i, g)
	}
}

// wrrOffset staggers the turns of equal weights (gRPC's kOffset).
const wrrOffset = wrrMaxWeight / 2

// nextTake is the first generation from g on in which endpoint i's turn
// takes it: the smallest g' >= g with (w·g' + i·offset) mod 65535 >=
// 65535 − w. With acc the left side at g, acc grows by w a generation
// and the window is w wide, so it is reached, without wrapping, after
// ceil((65535 − w − acc) / w) generations.
func (w *wrr) nextTake(i int, g uint64) uint64 {
	wt := uint64(w.sched[i])
	acc := (wt*g + uint64(i)*wrrOffset) % wrrMaxWeight
	if acc >= wrrMaxWeight-wt {
		return g
	}
	return g + (wrrMaxWeight-wt-acc+wt-1)/wt
}

// next is the stride scheduler's next endpoint: the first turn from the
// cursor whose endpoint is due, the cursor then past it.
func (w *wrr) next() int {
	n := len(w.due)
	i, g := w.idx, w.gen
	for w.due[i] > g {
		if i++; i == n {
			i, g = 0, g+1
		}
	}
	w.due[i] = w.nextTake(i, g+1)
	if w.idx, w.gen = i+1, g; w.idx == n {
		w.idx, w.gen = 0, g+1
	}
	return i
}

func (w *wrr) Pick(now time.Time, rng *rand.Rand) (Picked, error) {
	n := len(w.eps)
	if n == 0 {
		return Picked{}, ErrNoEndpoints
	}
	t := w.see(now)
	if t >= w.nextBuild {
		w.rebuild(t)
	}
	if !w.seeded { // replicas must not march in step (gRPC draws it too)
		w.seek(rng.Uint64N(1 << 32))
		w.redue()
		w.seeded = true
	}
	i := w.next()
	// An averse endpoint loses its turn to the next in the schedule while
	// a healthy one takes a turn within n tries; else a healthy one at
	// random, else the rule.
	if w.averse(i) {
		for k := 0; w.averse(i) && k < n; k++ {
			i = w.next()
		}
		if w.averse(i) {
			i = w.redrawHealthy(i, rng)
		} else {
			w.aversions++
		}
	}
	return w.pick(i), nil
}

func (w *wrr) ProbesDue(now time.Time, _ *rand.Rand, dst []string) []string {
	return w.poll.due(&w.base, w.see(now), dst)
}

// ProbeResult takes a load report (gRPC's OnLoadReport).
func (w *wrr) ProbeResult(now time.Time, endpoint string, r ProbeReply) {
	i, ok := w.byAddr[endpoint]
	if !ok {
		return
	}
	w.countOutcome(ProbeOK)
	if !r.LoadKnown || !(r.QPS > 0) || !(r.Utilization > 0) {
		return
	}
	t := w.instant(now)
	s := &w.st[i]
	s.weight = r.QPS / (r.Utilization + max(r.EPS, 0)/r.QPS*w.cfg.Penalty)
	if s.nonEmptySince == 0 {
		s.nonEmptySince = t
	}
	s.lastUpdated = max(s.lastUpdated, t)
}

func (w *wrr) Reset(now time.Time) {
	w.probeless.Reset(now)
	clear(w.st)
	w.poll.reset()
	w.seeded = false
	w.rebuild(w.instant(now))
}
