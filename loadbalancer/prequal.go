package loadbalancer

import (
	"math"
	"math/rand/v2"
	"time"
)

// prequal is the asynchronous Prequal policy (Wydrowski et al., NSDI '24,
// §4): queries trigger probes, probe answers fill a small pool, and each pick
// applies the hot-cold lexicographic (HCL) rule to the pool.
//
// Decisions the paper leaves open, made here:
//
//   - One entry per replica. A new answer from a replica replaces its entry
//     (counted as "replaced"). Duplicates would give a replica several votes
//     and make RIF compensation touch only one of its entries (the seed's
//     bookkeeping bug); with one entry, compensation is exact.
//   - Unknown latency. A replica with no history reports no latency; it is
//     neither 0 ms (it would look fastest and attract a herd) nor infinitely
//     slow (it would never get the traffic that builds its history). A cold
//     unknown-latency probe competes with the fastest known cold probe on
//     RIF: it wins when it is no busier. Compensation (+1 per use) means it
//     then loses the next tie, so it gets a trickle, not a herd. With no
//     known cold probe, the least busy unknown one wins. As a removal
//     candidate ("worst" among cold probes) a known latency ranks first.
//   - Latency memory. A replica's last known latency is remembered for
//     LatencyMemory (10 s) and stands in when its probe reports none: a
//     slow replica that gets little traffic sees its backend history age
//     out, and would otherwise look "unknown" and win on RIF again and
//     again (measured on the seed's C2: 1.9% of requests to the 16x-slow
//     pair, past the 1% that sets p99). Once the memory expires the replica
//     is explored again, so a replica that recovered is re-learned.
//   - Eq. 1 with a negative denominator (n <= m): with one entry per
//     replica a fresh probe refreshes an entry rather than adding one, so
//     the (1 − m/n) discount is dropped: b = (1+δ)/(r_probe − r_remove),
//     which is 1 at the defaults. A first version used MaxReuse there and
//     herded bursts onto one replica (quickstart, n = 8: p99 153 ms with
//     MaxReuse, 134 ms with 1). Where that denominator is <= 0 too (e.g.
//     r_probe = r_remove = 1) the pool never refills and the budget is
//     MaxReuse; a budget of 1 there drained the pool into 54% random
//     fallbacks (paper-90 with r_probe = 1).
//   - Per-query removal never shrinks the pool below MinProbes, so removal
//     alone cannot push picks into the random fallback.
//   - The RIF quantile comes from the last RIFWindow probe answers (a count
//     window longer than the pool), nearest-rank; hot means RIF above it.
//   - Ties (equal cold latency, equal hot RIF) are broken uniformly at
//     random, so identical replicas are not herded; ties for "worst" go to
//     the oldest probe.
//   - Probe failures are counted, and the replica's entry stays until it
//     ages out or is removed: the paper leaves error aversion unspecified.
type prequal struct {
	base
	cfg PrequalConfig

	pool []probeEntry // oldest receipt first; at most one entry per endpoint

	rifRing   []int // last RIFWindow probe RIFs in arrival order
	rifSorted []int // the same values, sorted
	rifNext   int
	fullRank  int // quantileRank(QRIF, RIFWindow), the rank once the window is full

	perm        []int   // a permutation of endpoint indexes, for sampling without replacement
	bReuse      float64 // Eq. 1 for the current n
	probeAcc    float64 // fractional probes owed, carried between queries
	pending     int     // whole probes owed to ProbesDue
	perQuery    int     // most distinct targets for one query's probes
	lastProbe   time.Time
	haveProbed  bool
	removeAcc   float64
	removeWorst bool // the next per-query removal takes the worst, else the oldest

	// memory holds each endpoint's last known latency (see LatencyMemory),
	// indexed like eps.
	memory []latencyMemory

	// epoch anchors receipt times; entries store ns since it, so age checks
	// are integer compares (and monotonic when the caller's times are).
	epoch     time.Time
	haveEpoch bool
}

// clock returns now as ns since the epoch, fixing the epoch on first use.
func (p *prequal) clock(now time.Time) int64 {
	if !p.haveEpoch {
		p.epoch, p.haveEpoch = now, true
	}
	return int64(now.Sub(p.epoch))
}

// probeEntry is one pool entry, kept small (40 bytes) because the pool is
// scanned and shifted on every pick.
type probeEntry struct {
	received int64 // local receipt time, ns since the policy's epoch
	latency  time.Duration
	ep       int32 // index into eps
	rif      int32
	uses     int32
	budget   int32 // reuse budget, drawn at first use; 0 until then
	known    bool
}

// latencyMemory is an endpoint's last known latency and when it was learned.
type latencyMemory struct {
	latency time.Duration
	at      int64 // receipt clock; valid only when set
	set     bool
}

var _ Policy = (*prequal)(nil)

func newPrequal(cfg PrequalConfig) *prequal {
	return &prequal{
		base:      newBase(NamePrequal),
		cfg:       cfg,
		pool:      make([]probeEntry, 0, cfg.PoolSize),
		rifRing:   make([]int, 0, cfg.RIFWindow),
		rifSorted: make([]int, 0, cfg.RIFWindow),
		bReuse:    1,
		fullRank:  quantileRank(cfg.QRIF, cfg.RIFWindow),
	}
}

// reuseBudget is Eq. 1: b_reuse = max{1, (1+δ)/((1−m/n)·r_probe − r_remove)},
// capped at maxReuse; for a negative denominator see the policy comment, and
// a denominator <= 0 after that gives maxReuse (the pole).
func reuseBudget(m, n int, rProbe, rRemove, delta float64, maxReuse int) float64 {
	if n <= 0 {
		return 1
	}
	den := (1-float64(m)/float64(n))*rProbe - rRemove
	if den < 0 {
		// n <= m (nearly): every replica already has its one entry, so a
		// fresh probe refreshes an entry (new RIF, uses back to 0) instead
		// of adding one. For the budget that is a refill: drop the
		// (1 − m/n) discount.
		den = rProbe - rRemove
	}
	if den <= 0 {
		return float64(maxReuse) // the pole of Eq. 1: the pool never refills
	}
	return min(max(1, (1+delta)/den), float64(maxReuse))
}

func (p *prequal) SetEndpoints(_ time.Time, endpoints []string) {
	old, oldIdx := p.setEndpoints(endpoints)
	// Carry pool entries of endpoints that stay over to their new index.
	kept := p.pool[:0]
	for _, e := range p.pool {
		if i, ok := p.byAddr[old[e.ep].addr]; ok {
			e.ep = int32(i)
			kept = append(kept, e)
		}
	}
	p.pool = kept
	memory := make([]latencyMemory, len(p.eps))
	for i, ep := range p.eps {
		if j, ok := oldIdx[ep.addr]; ok && j < len(p.memory) {
			memory[i] = p.memory[j]
		}
	}
	p.memory = memory
	n := len(p.eps)
	p.perm = make([]int, n)
	for i := range p.perm {
		p.perm[i] = i
	}
	p.bReuse = reuseBudget(p.cfg.PoolSize, n, p.cfg.ProbesPerQuery, p.cfg.RemovePerQuery, p.cfg.Delta, p.cfg.MaxReuse)
	p.perQuery = min(int(math.Ceil(p.cfg.ProbesPerQuery)), n)
}

// expire drops probes older than MaxAge, by local receipt time.
func (p *prequal) expire(clk int64) {
	limit := clk - int64(p.cfg.MaxAge)
	n := 0
	for i := range p.pool {
		if p.pool[i].received < limit {
			p.removals[removeAge]++
			continue
		}
		if n != i {
			p.pool[n] = p.pool[i]
		}
		n++
	}
	p.pool = p.pool[:n]
}

func (p *prequal) removeAt(i int, reason int) {
	p.pool = append(p.pool[:i], p.pool[i+1:]...)
	p.removals[reason]++
}

// hotThreshold is the Q_RIF quantile (nearest rank) of recent probe RIFs; a
// probe is hot when its RIF is above it.
func (p *prequal) hotThreshold() int32 {
	k := len(p.rifSorted)
	if k == 0 {
		return math.MaxInt32
	}
	r := p.fullRank
	if k < cap(p.rifSorted) {
		r = quantileRank(p.cfg.QRIF, k)
	}
	return int32(p.rifSorted[r])
}

// quantileRank is the nearest-rank index of quantile q among k sorted values.
func quantileRank(q float64, k int) int {
	r := int(math.Ceil(q*float64(k))) - 1
	return min(max(r, 0), k-1)
}

// recordRIF adds a probe RIF to the quantile window, evicting the oldest.
func (p *prequal) recordRIF(rif int) {
	if len(p.rifRing) == cap(p.rifRing) {
		old := p.rifRing[p.rifNext]
		p.rifRing[p.rifNext] = rif
		p.rifNext = (p.rifNext + 1) % len(p.rifRing)
		i := searchInts(p.rifSorted, old)
		p.rifSorted = append(p.rifSorted[:i], p.rifSorted[i+1:]...)
	} else {
		p.rifRing = append(p.rifRing, rif)
	}
	i := searchInts(p.rifSorted, rif)
	p.rifSorted = append(p.rifSorted, 0)
	copy(p.rifSorted[i+1:], p.rifSorted[i:])
	p.rifSorted[i] = rif
}

// searchInts is the first index in sorted a whose value is >= x.
func searchInts(a []int, x int) int {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a[m] < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func (p *prequal) Pick(now time.Time, rng *rand.Rand) (Picked, error) {
	n := len(p.eps)
	if n == 0 {
		return Picked{}, ErrNoEndpoints
	}
	p.oweProbes(now)
	p.expire(p.clock(now))
	if len(p.pool) < p.cfg.MinProbes {
		p.fallbacks++
		pk := p.pick(rng.IntN(n))
		pk.Fallback = true
		return pk, nil
	}
	thr := p.hotThreshold()
	c, hot := p.choose(thr, rng)
	e := &p.pool[c]
	pk := p.pick(int(e.ep))
	pk.Hot = hot
	if hot {
		p.hotPicks++
	} else {
		p.coldPicks++
	}
	// Compensation: the replica now has one more request in flight than it
	// reported. Latency is left alone, as in the paper.
	e.rif++
	e.uses++
	if e.budget == 0 {
		e.budget = int32(randRound(p.bReuse, rng))
	}
	if e.uses >= e.budget {
		p.removeAt(c, removeReuse)
	}
	p.removePerQuery(thr)
	return pk, nil
}

// Probe categories for HCL.
const (
	catHot     = iota // RIF above the threshold; ranked by RIF
	catCold           // cold with known latency; ranked by latency
	catUnknown        // cold with unknown latency; ranked by RIF
	numCats
)

func category(e *probeEntry, thr int32) int {
	switch {
	case e.rif > thr:
		return catHot
	case e.known:
		return catCold
	}
	return catUnknown
}

func rankKey(e *probeEntry, cat int) int64 {
	if cat == catCold {
		return int64(e.latency)
	}
	return int64(e.rif)
}

// choose applies HCL to the pool and returns the chosen entry's index and
// whether every probe was hot. One pass finds each category's best key and
// how many entries tie for it; ties are then broken uniformly at random with
// one draw (equivalent to reservoir sampling, with fewer draws).
func (p *prequal) choose(thr int32, rng *rand.Rand) (int, bool) {
	var best [numCats]int64
	var ties [numCats]int
	for i := range p.pool {
		e := &p.pool[i]
		c := category(e, thr)
		k := rankKey(e, c)
		if ties[c] == 0 || k < best[c] {
			best[c], ties[c] = k, 1
		} else if k == best[c] {
			ties[c]++
		}
	}
	switch {
	case ties[catCold] > 0:
		c := p.nthTie(catCold, thr, best[catCold], ties[catCold], rng)
		if ties[catUnknown] > 0 && best[catUnknown] <= int64(p.pool[c].rif) {
			return p.nthTie(catUnknown, thr, best[catUnknown], ties[catUnknown], rng), false
		}
		return c, false
	case ties[catUnknown] > 0:
		return p.nthTie(catUnknown, thr, best[catUnknown], ties[catUnknown], rng), false
	}
	return p.nthTie(catHot, thr, best[catHot], ties[catHot], rng), true
}

// nthTie returns a uniformly random one of the ties entries of category cat
// whose key is key.
func (p *prequal) nthTie(cat int, thr int32, key int64, ties int, rng *rand.Rand) int {
	n := 0
	if ties > 1 {
		n = rng.IntN(ties)
	}
	for i := range p.pool {
		e := &p.pool[i]
		if category(e, thr) == cat && rankKey(e, cat) == key {
			if n == 0 {
				return i
			}
			n--
		}
	}
	panic("loadbalancer: prequal tie count out of step with the pool")
}

// randRound rounds x to floor or ceil with probabilities that keep its
// expectation.
func randRound(x float64, rng *rand.Rand) int {
	f := math.Floor(x)
	if rng.Float64() < x-f {
		f++
	}
	return int(f)
}

// removePerQuery removes r_remove probes for this query, alternating the
// oldest and the worst.
func (p *prequal) removePerQuery(thr int32) {
	p.removeAcc += p.cfg.RemovePerQuery
	for p.removeAcc >= 1 {
		p.removeAcc--
		if len(p.pool) <= p.cfg.MinProbes {
			continue
		}
		if p.removeWorst {
			p.removeAt(p.worst(thr), removeWorst)
		} else {
			p.removeAt(0, removeOldest)
		}
		p.removeWorst = !p.removeWorst
	}
}

// worst is the hot probe with the highest RIF if any probe is hot, else the
// cold probe with the highest latency (known latency ranks first, then the
// highest RIF). Ties go to the oldest.
func (p *prequal) worst(thr int32) int {
	w, wHot := -1, false
	for i := range p.pool {
		e := &p.pool[i]
		h := e.rif > thr
		if w < 0 || worse(e, h, &p.pool[w], wHot) {
			w, wHot = i, h
		}
	}
	return w
}

// worse reports whether a ranks strictly worse than b for removal.
func worse(a *probeEntry, aHot bool, b *probeEntry, bHot bool) bool {
	if aHot != bHot {
		return aHot
	}
	if aHot {
		return a.rif > b.rif
	}
	if a.known != b.known {
		return a.known
	}
	if a.known && a.latency != b.latency {
		return a.latency > b.latency
	}
	return a.rif > b.rif
}

// oweProbes adds this query's probes: floor or ceil of r_probe through an
// accumulator, so the long-run mean is exact and the sequence deterministic.
func (p *prequal) oweProbes(now time.Time) {
	p.probeAcc += p.cfg.ProbesPerQuery
	k := math.Floor(p.probeAcc)
	p.probeAcc -= k
	if k > 0 {
		p.pending += min(int(k), len(p.eps))
		p.lastProbe, p.haveProbed = now, true
	}
}

func (p *prequal) Done(_ time.Time, pk Picked, _ time.Duration, status int) {
	p.done(pk, status)
}

// ProbesDue hands out the probes owed by queries, in groups of distinct
// targets (one group per query's worth), or one idle probe when no query has
// triggered a probe for IdleProbeInterval.
func (p *prequal) ProbesDue(now time.Time, rng *rand.Rand, dst []string) []string {
	n := len(p.eps)
	if n == 0 {
		p.pending = 0
		return dst
	}
	if p.pending == 0 && p.cfg.IdleProbeInterval > 0 &&
		(!p.haveProbed || now.Sub(p.lastProbe) >= p.cfg.IdleProbeInterval) {
		p.pending = 1
		p.lastProbe, p.haveProbed = now, true
	}
	for p.pending > 0 {
		k := min(p.pending, p.perQuery)
		// Partial Fisher-Yates: perm[:k] becomes a uniform sample without
		// replacement; perm stays a permutation, so no reset is needed.
		for i := range k {
			j := i + rng.IntN(n-i)
			p.perm[i], p.perm[j] = p.perm[j], p.perm[i]
			dst = append(dst, p.eps[p.perm[i]].addr)
		}
		p.pending -= k
		p.probesPlanned += uint64(k)
	}
	return dst
}

// ProbeResult adds a probe answer to the pool, stamped with its local
// receipt time now. Answers from endpoints outside the set are ignored.
func (p *prequal) ProbeResult(now time.Time, endpoint string, r ProbeReply) {
	ep, ok := p.byAddr[endpoint]
	if !ok {
		return
	}
	p.countOutcome(ProbeOK)
	rif := min(max(r.RIF, 0), math.MaxInt32/2)
	known := r.LatencyKnown && r.Latency >= 0
	p.recordRIF(rif)
	clk := p.clock(now)
	p.expire(clk)
	for i := range p.pool {
		if int(p.pool[i].ep) == ep {
			p.removeAt(i, removeReplaced)
			break
		}
	}
	if len(p.pool) >= p.cfg.PoolSize {
		p.removeAt(0, removeOverflow)
	}
	e := probeEntry{ep: int32(ep), received: clk, rif: int32(rif), known: known}
	m := &p.memory[ep]
	switch {
	case known:
		e.latency = r.Latency
		*m = latencyMemory{latency: r.Latency, at: clk, set: true}
	case m.set && clk-m.at <= int64(p.cfg.LatencyMemory):
		e.latency, e.known = m.latency, true
	}
	// Keep the pool ordered by receipt even if calls arrive out of order.
	i := len(p.pool)
	for i > 0 && p.pool[i-1].received > clk {
		i--
	}
	p.pool = append(p.pool, probeEntry{})
	copy(p.pool[i+1:], p.pool[i:])
	p.pool[i] = e
}

// ProbeFailed counts a failed probe. The replica's pool entry, if any, stays
// until it ages out: the paper leaves error aversion unspecified.
func (p *prequal) ProbeFailed(_ time.Time, endpoint string, reason ProbeOutcome) {
	if _, ok := p.byAddr[endpoint]; ok {
		p.countOutcome(reason)
	}
}

// Reset empties the pool, the RIF window and the probe schedule and zeroes
// the counters; in-flight counts stay.
func (p *prequal) Reset(time.Time) {
	p.resetCounters()
	p.pool = p.pool[:0]
	p.rifRing = p.rifRing[:0]
	p.rifSorted = p.rifSorted[:0]
	p.rifNext = 0
	p.probeAcc, p.pending, p.removeAcc = 0, 0, 0
	p.haveProbed, p.removeWorst = false, false
	p.lastProbe = time.Time{}
	clear(p.memory)
}

func (p *prequal) Stats() Stats { return p.stats(len(p.pool)) }
