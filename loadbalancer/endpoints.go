package loadbalancer

import "time"

// endpoint is the state every policy keeps per endpoint.
type endpoint struct {
	addr   string
	picks  uint64
	errors uint64
	health errorRate // recent outcomes, for error aversion
	// busySince is when the endpoint last went from idle to busy and
	// lastDone when it last finished a request (base.instant readings): for
	// stall detection.
	busySince, lastDone int64
	// answerGap is the recent longest wait for an answer while busy.
	answerGap int64
	// suspect: the endpoint has been averse for failures and has not
	// answered a request successfully since; one failure makes it averse
	// again (see retryAfterFailure).
	suspect bool
	// failRun counts failures since the last success.
	failRun int
	// retryPick: averse until the policy's pick count reaches this.
	retryPick uint64
}

// gate is what every pick reads about an endpoint, kept apart from the
// endpoint (32 bytes, contiguous) so that the scans every policy makes over
// all endpoints touch one small record each: asking base.averse used to
// read five fields spread over a 100-byte endpoint (prequal pick 293–439
// ns, least-request 392–520 ns, over the 250 ns budget).
type gate struct {
	// until: averse before this clock reading (the error rate's
	// averseUntil or the exclusion, whichever is later).
	until int64
	// stallAt: averse after this reading, from the stall rule; MaxInt64
	// while nothing is in flight.
	stallAt  int64
	inFlight int
	// retryPick: averse while the policy's pick count is below this (the
	// endpoint's retryPick).
	retryPick uint64
}

// Pool removal reasons, indexes into base.removals.
const (
	removeOverflow = iota
	removeReuse
	removeAge
	removeOldest
	removeWorst
	removeReplaced
	numRemovalReasons
)

var removalNames = [numRemovalReasons]string{"overflow", "reuse", "age", "oldest", "worst", "replaced"}

// base holds the endpoint set and the counters shared by every policy.
type base struct {
	name   string
	eps    []endpoint
	gates  []gate // parallel to eps; see regate
	byAddr map[string]int
	gen    uint64 // bumped by every SetEndpoints
	// nowClock is the latest time a call brought, as a clock reading (see
	// base.instant); aversion is judged at it.
	nowClock     int64
	instantEpoch time.Time

	aversions uint64 // picks that passed over an averse endpoint

	picks, fallbacks, hotPicks, coldPicks, probesPlanned uint64
	outcomes                                             [len(outcomeIndex)]uint64
	removals                                             [numRemovalReasons]uint64
}

// outcomeIndex orders the counters in base.outcomes; the last slot counts
// reasons outside ProbeOutcomes, reported as "other".
var outcomeIndex = [...]ProbeOutcome{ProbeOK, ProbeTimeout, ProbeStatus, ProbeMalformed, ProbeStale, ProbeDropped, "other"}

func outcomeSlot(o ProbeOutcome) int {
	for i := range len(outcomeIndex) - 1 {
		if outcomeIndex[i] == o {
			return i
		}
	}
	return len(outcomeIndex) - 1
}

func newBase(name string) base {
	return base{name: name, byAddr: map[string]int{}}
}

func (b *base) Name() string { return b.name }

// setName gives the policy its canonical variant spelling (New).
func (b *base) setName(n string) { b.name = n }

// Caps: by default a policy decides from local state only.
func (b *base) Caps() Caps { return Caps{} }

// setEndpoints installs a new endpoint set, keeping the counters and
// in-flight counts of addresses that stay. Duplicate addresses are kept once.
// It returns the previous slice and index so a policy can carry its own
// state over.
func (b *base) setEndpoints(addrs []string) (old []endpoint, oldIdx map[string]int) {
	old, oldIdx = b.eps, b.byAddr
	eps := make([]endpoint, 0, len(addrs))
	byAddr := make(map[string]int, len(addrs))
	for _, a := range addrs {
		if _, dup := byAddr[a]; dup {
			continue
		}
		e := endpoint{addr: a}
		if i, ok := oldIdx[a]; ok {
			e = old[i]
		}
		byAddr[a] = len(eps)
		eps = append(eps, e)
	}
	gates := make([]gate, len(eps))
	for i := range eps {
		if j, ok := oldIdx[eps[i].addr]; ok {
			gates[i].inFlight = b.gates[j].inFlight
		}
	}
	b.eps, b.byAddr, b.gates = eps, byAddr, gates
	for i := range eps {
		b.regate(i)
	}
	b.gen++
	return old, oldIdx
}

// pick records a pick of endpoint i and returns its token.
func (b *base) pick(i int) Picked {
	e, g := &b.eps[i], &b.gates[i]
	if g.inFlight == 0 {
		e.busySince = b.nowClock
	}
	e.picks++
	g.inFlight++
	if g.inFlight == 1 {
		b.regate(i)
	}
	b.picks++
	return Picked{Endpoint: e.addr, index: i, gen: b.gen, at: b.nowClock}
}

// lookup finds the endpoint of a token in O(1): by position when the set has
// not changed since the pick, else by address. ok is false when it is gone.
func (b *base) lookup(p Picked) (int, bool) {
	if p.gen == b.gen && p.index >= 0 && p.index < len(b.eps) && b.eps[p.index].addr == p.Endpoint {
		return p.index, true
	}
	i, ok := b.byAddr[p.Endpoint]
	return i, ok
}

// done settles a finished request and returns its endpoint's index, or -1
// when the endpoint has left the set.
func (b *base) done(now time.Time, p Picked, status int) int {
	t := b.see(now)
	i, ok := b.lookup(p)
	if !ok {
		return -1
	}
	e, g := &b.eps[i], &b.gates[i]
	// An endpoint that left and came back starts from zero in flight; a Done
	// for a pick made before it left must not drive the count negative.
	if g.inFlight > 0 {
		g.inFlight--
	}
	if failed(status) {
		e.errors++
	}
	b.observe(&e.health, t, status)
	b.retryAfterFailure(e, t, status)
	// Only an answer shows the endpoint working: timeouts and clients
	// giving up on a hung endpoint arrive steadily and must not.
	if status >= 100 && status != 499 {
		b.answered(e, t)
	}
	b.regate(i)
	return i
}

// countOutcome counts one probe result or failure.
func (b *base) countOutcome(o ProbeOutcome) { b.outcomes[outcomeSlot(o)]++ }

// resetCounters zeroes the per-run counters, keeping in-flight counts.
func (b *base) resetCounters() {
	for i := range b.eps {
		b.eps[i].picks = 0
		b.eps[i].errors = 0
		b.eps[i].health = errorRate{}
		b.eps[i].answerGap = 0
		b.eps[i].suspect, b.eps[i].retryPick, b.eps[i].failRun = false, 0, 0
		b.regate(i)
	}
	b.aversions = 0
	b.picks, b.fallbacks, b.hotPicks, b.coldPicks, b.probesPlanned = 0, 0, 0, 0, 0
	b.outcomes = [len(outcomeIndex)]uint64{}
	b.removals = [numRemovalReasons]uint64{}
}

// stats copies the counters; poolSize is the policy's current pool size.
func (b *base) stats(poolSize int) Stats {
	s := Stats{
		Algorithm:     b.name,
		Endpoints:     make([]EndpointStats, len(b.eps)),
		Picks:         b.picks,
		Fallbacks:     b.fallbacks,
		HotPicks:      b.hotPicks,
		ColdPicks:     b.coldPicks,
		ProbesPlanned: b.probesPlanned,
		Aversions:     b.aversions,
		ProbeOutcomes: make(map[ProbeOutcome]uint64, len(outcomeIndex)),
		PoolSize:      poolSize,
		PoolRemovals:  make(map[string]uint64, numRemovalReasons),
	}
	for i, e := range b.eps {
		s.Endpoints[i] = EndpointStats{Address: e.addr, Picks: e.picks, InFlight: b.gates[i].inFlight, Errors: e.errors, Averse: b.averse(i)}
	}
	for i, o := range outcomeIndex {
		if i < len(outcomeIndex)-1 || b.outcomes[i] > 0 {
			s.ProbeOutcomes[o] = b.outcomes[i]
		}
	}
	for i, name := range removalNames {
		s.PoolRemovals[name] = b.removals[i]
	}
	return s
}
