package loadbalancer

import (
	"math"
	"math/rand/v2"
	"time"
)

// Error aversion: a replica that fails fast (an instant 500, a refused
// connection) finishes its requests quickly and so looks idle and fast to
// every policy that reads in-flight counts or latency; without aversion it
// becomes a sinkhole that draws most of the traffic (least-request sent 78%
// of requests to 1 of 4 replicas on fail_fast). Every policy therefore keeps
// a recent error rate per endpoint and avoids endpoints above a threshold
// while a healthy alternative exists.
//
// The rate is a pair of counts, failures and outcomes, that decay with time
// constant AversionDecay. An endpoint is averse while its decayed outcome
// count is above AversionMinSamples − 1 (so that AversionMinSamples outcomes
// in quick succession suffice) and the failure share is above
// AversionThreshold. Decay is what lets an avoided endpoint back in: it gets
// no traffic, its count falls below the minimum sample, it is tried again,
// and one more failure makes it averse again. After 5 failures in a row it is
// also a suspect until a success: each further failure keeps it out for 2n of
// this instance's own picks and at least AversionRetryTime, so its retries
// follow the policy's traffic rather than the clock alone.
const (
	// AversionThreshold is the failure share above which an endpoint is
	// avoided.
	AversionThreshold = 0.25
	// AversionMinSamples is the fewest (decayed) outcomes that can make an
	// endpoint averse: one early failure is no evidence.
	AversionMinSamples = 5
	// AversionDecay is the time constant of the outcome counts.
	AversionDecay = 2 * time.Second
	// AversionStall: an endpoint with requests in flight that has finished
	// none for this long is averse too. A replica that hangs reports its
	// failures only when they time out (seconds later); meanwhile the
	// policies that do not read in-flight counts kept sending it its full
	// share. A replica with at least one working slot finishes a request
	// every service time, far below this. One whose answers legitimately
	// take longer (a slow replica at low load, long requests) gets twice
	// its recent longest wait for an answer instead: with 1 s alone,
	// round-robin sent a healthy 1.5 s replica 32% of the picks, not 50%.
	AversionStall = time.Second
	// AversionShedShare: 503s count neither way (a full queue shedding
	// load), unless they are nearly all an endpoint answers. A replica
	// that answers 503 at once to everything looks idle and fast, as a
	// fail-fast 500 does (least-request sent one of 4 such replicas 86% of
	// the requests in a simulation); one in overload still serves the
	// requests its slots take (at 1.7x a fleet's capacity, round-robin's
	// slowest replicas shed about 60%).
	AversionShedShare = 0.9
	// AversionRetryShare: a suspect endpoint (see retryAfterFailure) is
	// retried after this many times n of the policy's own picks, so its
	// retries take at most 1/(AversionRetryShare·n) of them: half its fair
	// share.
	AversionRetryShare = 2
	// AversionFailRun: this many failures in a row, with no success
	// between, make an endpoint a suspect however far apart they came. A
	// policy instance with little traffic sends an endpoint a request
	// seconds apart, and the decayed counts forgot each failure before the
	// minimum sample was reached: at 5 requests a second over 20
	// endpoints a fail-fast one was never avoided.
	// 5, as the ingress's consecutive-failure ejection and prequal-rs, so
	// the first aversion comes where ejection does and leaves it a run to
	// see.
	AversionFailRun = 5
	// AversionRetryTime: and no sooner than this after its last failure
	// (τ·ln(5/4), the spacing the decayed counts alone gave).
	AversionRetryTime = 446 * time.Millisecond
)

// errorRate is an endpoint's decayed failure and outcome counts.
type errorRate struct {
	fails, total float64
	shed         float64 // 503s, decayed alike; not part of total
	at           int64   // clock reading (base.instant) of the last update
	// averseUntil is when the decayed total falls below the minimum
	// sample; the endpoint is averse before it. excludedUntil is set by
	// Exclude (the ingress's outlier ejection); outcomes do not move it.
	// Both are clock readings (base.instant), precomputed so that a pick
	// only compares integers: every policy asks about every endpoint on
	// every pick.
	averseUntil, excludedUntil int64
}

// failed reports whether status counts against the endpoint: no response
// (0) or a 5xx.
func failed(status int) bool { return status == 0 || status >= 500 }

// observe adds one outcome at now to h. 499 counts neither way (the
// client went away, not the endpoint's doing). A 503 is a full queue
// shedding load, which the load signals (in flight, RIF) already carry:
// counting it as a failure made replicas averse in turn in overload and
// doubled prequal's p99 of successes in c6-overload (simulation: 677 →
// 1320 ms), so it counts only in shed, and only an endpoint that sheds
// more than AversionShedShare of what it is sent is averse for it.
func (b *base) observe(h *errorRate, t int64, status int) {
	if status == 499 {
		return
	}
	if dt := t - h.at; dt > 0 && h.total+h.shed > 0 {
		w := math.Exp(-float64(dt) / float64(AversionDecay))
		h.fails *= w
		h.total *= w
		h.shed *= w
	}
	h.at = max(h.at, t)
	switch {
	case status == 503:
		h.shed++
	case failed(status):
		h.fails++
		h.total++
	default:
		h.total++
	}
	// Averse while the decayed count of the outcomes that make it so
	// stays above the minimum sample (the shares do not change as the
	// counts decay): count·e^(−t/τ) > floor  ⇔  t < τ·ln(count/floor).
	const floor = AversionMinSamples - 1.0
	count := 0.0
	if h.total > floor && h.fails > AversionThreshold*h.total {
		count = h.total
	}
	if all := h.total + h.shed; all > floor && h.shed > AversionShedShare*all {
		count = max(count, all)
	}
	h.averseUntil = 0
	if count > 0 {
		d := float64(AversionDecay) * math.Log(count/floor)
		h.averseUntil = h.at + int64(d) + 1
	}
}

// retryAfterFailure spaces the retries of an endpoint that fails by this
// policy's own traffic, not by time alone. Once the error rate has made
// an endpoint averse, or AversionFailRun requests in a row failed there,
// it is a suspect until a request there succeeds: each
// failure of a suspect makes it averse again at once (not after a fresh
// minimum sample, which the decayed counts had forgotten) for at least
// AversionRetryTime and until this policy has made AversionRetryShare·n
// more picks. A policy instance so sends a fail-fast replica at most
// 1/(AversionRetryShare·n) of its picks, half its fair share, however
// many instances share the fleet and however little traffic each has:
// with time alone each instance retried every 0.45 s whatever its rate,
// and a fail-fast replica among 20 got 13% of prequal's picks behind 50
// ingress replicas, 19% behind 100 (simulation, sim-fail-fast-20; fair
// share 5%), prequal most because a returning fail-fast replica's probe
// (idle, 1 ms) wins the next pick at once.
func (b *base) retryAfterFailure(e *endpoint, t int64, status int) {
	switch {
	case status == 499 || status == 503:
		return
	case !failed(status):
		if status >= 100 {
			e.suspect, e.retryPick, e.failRun = false, 0, 0
		}
		return
	}
	e.failRun++
	h := &e.health
	if !e.suspect && h.averseUntil <= t && e.failRun < AversionFailRun {
		return // no evidence yet
	}
	e.suspect = true
	e.retryPick = b.picks + uint64(AversionRetryShare*len(b.eps))
	h.averseUntil = max(h.averseUntil, t+int64(AversionRetryTime))
}

// averse reports whether endpoint i is to be avoided at the time of the
// call in progress (b.nowClock): before its gate's until (error rate,
// exclusion) or after its stallAt (requests in flight and no answer for
// max(AversionStall, 2·answerGap)).
func (b *base) averse(i int) bool {
	g := &b.gates[i]
	t := b.nowClock
	return t < g.until || t > g.stallAt || b.picks < g.retryPick
}

// regate recomputes endpoint i's gate from its state; every change to
// the fields averse reads goes through it.
func (b *base) regate(i int) {
	e, g := &b.eps[i], &b.gates[i]
	g.until = max(e.health.averseUntil, e.health.excludedUntil)
	g.retryPick = e.retryPick
	g.stallAt = math.MaxInt64
	if g.inFlight > 0 {
		g.stallAt = max(e.busySince, e.lastDone) + max(int64(AversionStall), 2*e.answerGap)
	}
}

// answered records an answer from e at now: the wait for it since e went
// busy or last answered feeds e's answerGap, a peak that fades by 1/16 an
// answer (a hung replica gives none, so it keeps the gap it had).
func (b *base) answered(e *endpoint, t int64) {
	gap := t - max(e.busySince, e.lastDone)
	e.answerGap = max(gap, e.answerGap-e.answerGap/16)
	e.lastDone = max(e.lastDone, t)
}

// clockSpan puts the epoch of base.instant this far before the first time
// seen, so that every reading a policy meets is positive and 0 means long
// ago.
const clockSpan = 50 * 365 * 24 * time.Hour

// instant turns t into nanoseconds since the policy's epoch, an integer
// that a pick can compare cheaply. Readings keep the monotonic clock when
// t has one (Sub uses it).
func (b *base) instant(t time.Time) int64 {
	if b.instantEpoch.IsZero() {
		b.instantEpoch = t.Add(-clockSpan)
	}
	return int64(t.Sub(b.instantEpoch))
}

// see advances the policy's notion of the current time (for Stats, which
// has no time argument; calls may arrive slightly out of order) and
// returns now as a clock reading.
func (b *base) see(now time.Time) int64 {
	t := b.instant(now)
	b.nowClock = max(b.nowClock, t)
	return t
}

// healthyCount counts the endpoints that are not averse.
func (b *base) healthyCount() int {
	n := 0
	for i := range b.eps {
		if !b.averse(i) {
			n++
		}
	}
	return n
}

// nthHealthy returns the index of the k-th (from 0) endpoint that is not
// averse.
func (b *base) nthHealthy(k int) int {
	for i := range b.eps {
		if !b.averse(i) {
			if k == 0 {
				return i
			}
			k--
		}
	}
	panic("loadbalancer: healthy endpoint count out of step")
}

// drawTwo draws two distinct endpoints for a power-of-two-choices pick
// and settles the pick when aversion decides it: w is the endpoint to use
// when exactly one of the two is averse (counted as an aversion), or when
// both are and a healthy endpoint elsewhere wins; otherwise w is -1 and the
// policy's own rule chooses between a and b.
func (b *base) drawTwo(now time.Time, rng *rand.Rand) (a, c, w int, err error) {
	a, c, err = twoDistinct(len(b.eps), rng)
	if err != nil {
		return 0, 0, -1, err
	}
	b.see(now)
	if h, decided := b.preferHealthy(a, c); decided {
		b.aversions++
		return a, c, h, nil
	}
	if b.averse(a) { // both drawn are averse: a healthy one elsewhere wins
		if i := b.redrawHealthy(a, rng); i != a {
			return a, c, i, nil
		}
	}
	return a, c, -1, nil
}

// preferHealthy returns whichever of two candidates is not averse when
// exactly one is, and whether that decided the pick (counted as an
// aversion); otherwise it returns a and false, leaving the choice to the
// policy's own rule.
func (b *base) preferHealthy(a, c int) (int, bool) {
	switch aa, ca := b.averse(a), b.averse(c); {
	case aa && !ca:
		return c, true
	case ca && !aa:
		return a, true
	}
	return -1, false
}

// redrawHealthy handles a pick that landed on averse endpoint i by the
// policy's own rule: every policy picks an averse endpoint only when every
// endpoint is averse, so it returns a uniformly drawn healthy endpoint when
// one exists (counting the aversion), else i.
func (b *base) redrawHealthy(i int, rng *rand.Rand) int {
	if !b.averse(i) {
		return i
	}
	if h := b.healthyCount(); h > 0 {
		b.aversions++
		return b.nthHealthy(rng.IntN(h))
	}
	return i
}

// Exclude keeps endpoint addr out of picks until until, as an averse
// endpoint is kept out (picked only when every endpoint is averse or
// excluded): the ingress's outlier ejection. Excluding rather than
// removing the endpoint keeps its counters, so selection shares stay
// continuous. A zero until lifts the exclusion. It reports whether addr
// is an endpoint.
func (b *base) Exclude(addr string, until time.Time) bool {
	i, ok := b.byAddr[addr]
	if ok {
		b.eps[i].health.excludedUntil = 0
		if !until.IsZero() {
			b.eps[i].health.excludedUntil = b.instant(until)
		}
		b.regate(i)
	}
	return ok
}

// Excluder is implemented by every policy of this package.
type Excluder interface {
	Exclude(addr string, until time.Time) bool
}

// PickOther picks an endpoint other than avoid, uniformly among the
// endpoints that are not averse (among all others when every one is), for a
// retry after avoid failed: asking the policy again would often give the
// same endpoint (least-request: the just-released idle one). The pick is
// counted and must be handed back to Done like any other. ok is false when
// avoid is the only endpoint.
func (b *base) PickOther(now time.Time, rng *rand.Rand, avoid string) (p Picked, ok bool) {
	b.see(now)
	skip, has := b.byAddr[avoid]
	if !has {
		skip = -1
	}
	healthy, others := 0, 0
	for i := range b.eps {
		if i == skip {
			continue
		}
		others++
		if !b.averse(i) {
			healthy++
		}
	}
	if others == 0 {
		return Picked{}, false
	}
	useHealthy := healthy > 0
	k := rng.IntN(others)
	if useHealthy {
		k = rng.IntN(healthy)
	}
	for i := range b.eps {
		if i == skip || (useHealthy && b.averse(i)) {
			continue
		}
		if k == 0 {
			return b.pick(i), true
		}
		k--
	}
	panic("loadbalancer: PickOther count out of step")
}

// OtherPicker is implemented by every policy of this package: a pick that
// avoids one endpoint, for retries.
type OtherPicker interface {
	PickOther(now time.Time, rng *rand.Rand, avoid string) (Picked, bool)
}
