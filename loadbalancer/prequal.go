package loadbalancer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// prequal is the asynchronous Prequal policy (Wydrowski et al., NSDI '24,
// §4): queries trigger probes, probe answers fill a small pool, and each pick
// applies the hot-cold lexicographic (HCL) rule to the pool.
//
// How the paper's rules are built, and the decisions it leaves open
// (docs/prequal.md keeps the two apart, with the paper's sections):
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
//     At most one such exploratory request is in flight per replica: until
//     it finishes, the replica's unknown probe is only a last resort (a
//     16x-slow replica would otherwise take one request per compensation
//     step from every client before its first answer came back).
//   - Latency memory (off by default). With LatencyMemory > 0 a replica's
//     last known latency stands in for that long when its probe reports
//     none: for backends whose estimate has a time window, where a slow
//     replica that gets little traffic sees its history age out and would
//     otherwise look "unknown" and win on RIF again and again (the seed's
//     C2 with a 1 s window: 1.9% of requests to the 16x-slow pair). The
//     backend's default estimate is recent by count and ages out only
//     while the replica is idle (5 s), so the memory is not needed there
//     (see LatencyMemory).
//   - Slow memory (30 s). That idle age makes an idle replica "unknown"
//     every 5 s so that it is explored again; a replica remembered, from
//     an idle answer, as at least SlowFactor (6) times the median of fresh
//     answers keeps its memory for SlowMemory instead, because each
//     exploration costs a whole request at its speed (C2's 16x pair; see
//     SlowMemory).
//   - Eq. 1 just past its pole. Where the denominator (1 − m/n)·r_probe −
//     r_remove is <= 0 (at the defaults n <= 24) the paper's own max{1, ·}
//     gives 1 (§4, read literally). Just past the pole the budget rises by
//     at most one per replica (read literally it jumps to n at n = 25),
//     then follows Eq. 1 up to MaxReuse (default 16); see reuseBudget and
//     ReuseWarning.
//   - A reused probe is made pessimistic as well as busier: each use adds
//     one request to its RIF (the paper's compensation) and ReuseLatency
//     (default 1; 0 is the paper's rule) times the latency of one request
//     at RIF 1 (unitLatency) to its latency, which the paper says it would
//     ideally do. Without it any budget above 1 herded onto
//     the probe of an idle replica with 10 clients (p99 +10-30% at every
//     n >= 25), and a rule that made the budget 1 whenever the pool was
//     over half full, tried before, starved the pool at the paper's own
//     probe-rate sweep (r_probe = 1, r_remove = 0.25: queues growing
//     without bound, p99 590 ms against least-request's 118 ms).
//   - Per-query removal never shrinks the pool below half of m (see
//     removeFloor), and a spent probe stays while the pool holds only
//     MinProbes, so removal alone cannot push picks into the random
//     fallback.
//   - The RIF quantile comes from the last RIFWindow probe answers (a count
//     window longer than the pool), nearest-rank; hot means RIF above it.
//     Its endpoints (Q_RIF 1 all cold, 0.999 ties at the maximum hot) are
//     the paper's (§5.3); see hotThreshold.
//   - Ties (equal cold key, equal hot RIF) are broken uniformly at
//     random, so identical replicas are not herded; ties for "worst" go to
//     the oldest probe.
//   - Probe failures are counted, and the replica's entry stays until it
//     ages out or is removed: the paper leaves error aversion unspecified.
//     Request failures drive it here (erroraversion.go): a replica whose
//     recent requests fail is ranked below every other probe (catAverse).
type prequal struct {
	base
	cfg PrequalConfig
	sel selector // the rule applied to the pool: HCL, or linear / RIF-only

	pool []probeEntry // oldest receipt first; at most one entry per endpoint
	cats []uint8      // scratch: each pool entry's HCL category (or scored tier) in the pick in progress
	// scores is scratch for the scored rules: each entry's score in the
	// pick in progress, so ties are found without scoring twice.
	scores []float64

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

	// replicas holds per-endpoint state, indexed like eps.
	replicas []replicaState
	stale    uint64 // answers dropped as older than one already received
	// coalesced counts probes owed but not sent because every target not
	// yet drawn for them already had a probe in flight.
	coalesced uint64
	// reusedPicks counts picks made on a probe already used for a pick.
	reusedPicks uint64
	// slowHeld counts unknown answers SlowMemory answered with a
	// remembered latency.
	slowHeld   uint64
	latScratch []time.Duration // farSlower's, kept to avoid an allocation per answer

	// unitLatency is an EWMA (ns) of the latencies answered at RIF <= 1:
	// the processing time with one request in flight, the paper's scale
	// for RIF in its Linear rule (§5.2). 0 until such an answer arrives.
	unitLatency float64
}

// probeEntry is one pool entry, kept small (40 bytes) because the pool is
// scanned and shifted on every pick.
type probeEntry struct {
	received int64 // local receipt time, a clock reading (base.instant)
	latency  time.Duration
	ep       int32 // index into eps
	rif      int32
	uses     int32
	budget   int32 // reuse budget, drawn at first use; 0 until then
	known    bool
	// remembered: the latency is a memory standing in for an unknown
	// answer, not the replica's current estimate.
	remembered bool
}

// replicaState is what the policy keeps per endpoint besides its pool entry.
type replicaState struct {
	memory latencyMemory
	// lastAnswer is the receipt clock of the newest answer taken in; an
	// answer received earlier is stale and must not replace it.
	lastAnswer int64
	answered   bool
	// exploring is set while a request to this replica is in flight and
	// its latency is unknown: one exploratory request at a time.
	exploring bool
	// latencyKnown: the last answer taken in had a latency.
	latencyKnown bool
	// probing is set from planning a probe to this replica until its
	// answer or failure comes back (or, as a safety net, MaxAge passes):
	// with one pool entry per replica a second probe in flight would only
	// replace the first one's answer a moment later.
	probing   bool
	probeSent int64 // clock reading when the probe in flight was planned
}

// latencyMemory is an endpoint's last known latency, when and at what RIF
// it was learned, and whether slow memory holds it (see holdSlow).
type latencyMemory struct {
	latency time.Duration
	at      int64 // receipt clock; valid only when set
	rif     int32
	set     bool
	// decided: holdSlow has judged this memory; held is its verdict.
	decided, held bool
}

var _ Policy = (*prequal)(nil)

// Caps: prequal plans probes and reads their answers.
func (p *prequal) Caps() Caps { return Caps{Probes: true} }

func newPrequal(cfg PrequalConfig) *prequal { return newPoolPolicy(NamePrequal, cfg, hcl{}) }

// newPoolPolicy is prequal's pool and probing with selection rule sel.
func newPoolPolicy(name string, cfg PrequalConfig, sel selector) *prequal {
	return &prequal{
		base:      newBase(name),
		cfg:       cfg,
		sel:       sel,
		pool:      make([]probeEntry, 0, cfg.PoolSize),
		cats:      make([]uint8, cfg.PoolSize),
		scores:    make([]float64, cfg.PoolSize),
		rifRing:   make([]int, 0, cfg.RIFWindow),
		rifSorted: make([]int, 0, cfg.RIFWindow),
		bReuse:    1,
		fullRank:  quantileRank(cfg.QRIF, cfg.RIFWindow),
	}
}

// reuseBudget is Eq. 1: b_reuse = max{1, (1+δ)/((1−m/n)·r_probe − r_remove)},
// bounded by maxReuse. A denominator <= 0 (the pole and beyond) gives 1, the
// literal max{1, negative}. Just above the pole, n* = m·r_probe/(r_probe −
// r_remove), Eq. 1 is unbounded; the budget may rise by at most one per
// replica above n* (1 + n − n*), so it leaves 1 without a step (the seed's
// code jumped from 1 to 16 at n = 25) and reaches Eq. 1 a few replicas
// further on. Far from the pole Eq. 1 applies up to maxReuse: at the paper's
// low probe rates (§5.3: r_probe 0.5, r_remove 0.25, n = 100, b = 11.8) a
// fixed cap of 2 drained the pool and made picks random (sim-three-speeds-70:
// p99 4.98 s against 0.24 s with Eq. 1).
func reuseBudget(m, n int, rProbe, rRemove, delta float64, maxReuse int) float64 {
	if n <= 0 {
		return 1
	}
	den := (1-float64(m)/float64(n))*rProbe - rRemove
	if den <= 0 {
		return 1
	}
	pole := float64(m) * rProbe / (rProbe - rRemove) // den > 0 implies rProbe > rRemove
	return min(max(1, (1+delta)/den), float64(maxReuse), 1+float64(n)-pole)
}

// ReuseWarning returns a warning when, for a fleet of n replicas, Eq. 1's
// denominator (1 − m/n)·r_probe − r_remove is not positive: probes then
// cannot refill the pool faster than queries remove them, the formula has
// no finite budget and the policy uses 1. It returns "" when Eq. 1 applies.
func (c PrequalConfig) ReuseWarning(n int) string {
	if n <= 0 {
		return ""
	}
	den := (1-float64(c.PoolSize)/float64(n))*c.ProbesPerQuery - c.RemovePerQuery
	if den > 0 {
		return ""
	}
	return fmt.Sprintf("prequal: with %d replicas, (1 - m/n)*r_probe = (1 - %d/%d)*%g = %.3g <= r_remove = %g: "+
		"Eq. 1 has no finite reuse budget (the pool cannot refill faster than queries drain it); using b_reuse = 1. "+
		"Raise probes_per_query or lower remove_per_query or pool_size to stay in the paper's regime",
		n, c.PoolSize, n, c.ProbesPerQuery, (1-float64(c.PoolSize)/float64(n))*c.ProbesPerQuery, c.RemovePerQuery)
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
	replicas := make([]replicaState, len(p.eps))
	for i, ep := range p.eps {
		if j, ok := oldIdx[ep.addr]; ok && j < len(p.replicas) {
			replicas[i] = p.replicas[j]
		}
	}
	p.replicas = replicas
	n := len(p.eps)
	p.perm = make([]int, n)
	for i := range p.perm {
		p.perm[i] = i
	}
	p.bReuse = reuseBudget(p.cfg.PoolSize, n, p.cfg.ProbesPerQuery, p.cfg.RemovePerQuery, p.cfg.Delta, p.cfg.MaxReuse)
	p.perQuery = min(int(math.Ceil(p.cfg.ProbesPerQuery)), n)
}

// expire drops probes older than MaxAge, by local receipt time. The pool
// is in receipt order, so the expired ones are a prefix: the scan stops
// at the first live probe (on most picks the first one).
func (p *prequal) expire(clk int64) {
	limit := clk - int64(p.cfg.MaxAge)
	k := 0
	for k < len(p.pool) && p.pool[k].received < limit {
		k++
	}
	if k > 0 {
		p.removals[removeAge] += uint64(k)
		p.pool = append(p.pool[:0], p.pool[k:]...)
	}
}

func (p *prequal) removeAt(i int, reason int) {
	p.pool = append(p.pool[:i], p.pool[i+1:]...)
	p.removals[reason]++
}

// hotThreshold returns t such that a probe is hot when its RIF is above t:
// the Q_RIF quantile θ (nearest rank) of recent probe RIFs, with the paper's
// endpoints. Q_RIF >= 1 means θ = ∞: every probe is cold (latency-only
// control). When Q_RIF is so close to 1 that the nearest rank is the
// window's last (Q > (k−1)/k), θ is the maximum and replicas tied at it are
// hot, as the paper describes for Q_RIF = 0.999; otherwise no probe could
// ever be hot there. Whether Q is that close to 1 is decided on the full
// window: in a window still filling (k < 1/(1−Q)) any Q's rank is the last,
// and the default 0.84 made ties at the maximum of the first few answers
// hot. A window of one value throughout has no spread to split, and stays
// cold. At lower Q a θ that happens to equal the maximum
// keeps "above θ": applying the tie rule there too made a third of the
// fast replicas hot on the C2 fleet in the simulation and sent 0.5% of
// picks to the 16x-slow pair (0 without it).
func (p *prequal) hotThreshold() int32 {
	k := len(p.rifSorted)
	if k == 0 || p.cfg.QRIF >= 1 {
		return math.MaxInt32
	}
	r := p.fullRank
	if k < cap(p.rifSorted) {
		r = quantileRank(p.cfg.QRIF, k)
	}
	theta := p.rifSorted[r]
	if p.fullRank == cap(p.rifSorted)-1 && theta > p.rifSorted[0] {
		return int32(theta - 1)
	}
	return int32(theta)
}

// quantileRank is the nearest-rank index of quantile q among k sorted values.
func quantileRank(q float64, k int) int {
	r := int(math.Ceil(q*float64(k))) - 1
	return min(max(r, 0), k-1)
}

// recordRIF adds a probe RIF to the quantile window, evicting the oldest.
// With the window full the new value takes the evicted one's place and
// only the values between the two positions move (RIFs are mostly close
// together, so usually few or none): a removal and an insertion each
// moved the whole tail.
func (p *prequal) recordRIF(rif int) {
	if len(p.rifRing) < cap(p.rifRing) {
		p.rifRing = append(p.rifRing, rif)
		i := searchInts(p.rifSorted, rif)
		p.rifSorted = append(p.rifSorted, 0)
		copy(p.rifSorted[i+1:], p.rifSorted[i:])
		p.rifSorted[i] = rif
		return
	}
	old := p.rifRing[p.rifNext]
	p.rifRing[p.rifNext] = rif
	p.rifNext = (p.rifNext + 1) % len(p.rifRing)
	if old == rif {
		return
	}
	sorted := p.rifSorted
	i := searchInts(sorted, old) // old's place
	j := searchInts(sorted, rif) // the first value >= rif
	if j > i {                   // old < rif: the values in (i, j) move down one
		copy(sorted[i:j-1], sorted[i+1:j])
		sorted[j-1] = rif
	} else { // rif < old: the values in [j, i) move up one
		copy(sorted[j+1:i+1], sorted[j:i])
		sorted[j] = rif
	}
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
	p.expire(p.see(now))
	// A pool can hold at most one probe per replica, so a fleet smaller
	// than MinProbes needs only as many as it has replicas.
	if len(p.pool) < min(p.cfg.MinProbes, n) {
		i := p.redrawHealthy(rng.IntN(n), rng)
		pk := p.pick(i)
		if n > 1 { // with one replica there is no choice to fall back from
			p.fallbacks++
			pk.Fallback = true
		}
		p.markExploring(i, &pk)
		return pk, nil
	}
	thr := p.hotThreshold()
	c, hot := p.sel.choose(p, thr, rng)
	if ep := int(p.pool[c].ep); p.averse(ep) {
		// Only averse replicas in the pool: a healthy one outside it wins.
		if i := p.redrawHealthy(ep, rng); i != ep {
			pk := p.pick(i)
			p.markExploring(i, &pk)
			p.removePerQuery(thr)
			return pk, nil
		}
	}
	e := &p.pool[c]
	pk := p.pick(int(e.ep))
	pk.Hot = hot
	p.markExploring(int(e.ep), &pk)
	if hot {
		p.hotPicks++
	} else {
		p.coldPicks++
	}
	if e.uses > 0 {
		p.reusedPicks++
	}
	// Compensation: the replica now has one more request in flight than it
	// reported, and a request's worth more latency (the paper's "ideally we
	// would also increase its latency estimate"), so clients reusing the
	// probe of an idle replica do not herd onto it. A request's worth is
	// the fleet's latency at RIF 1 (unitLatency, Linear's scale too). The
	// replica's own latency per request in flight, or a clamp between one
	// and two of it, herded more with 10 clients (p99 up to +15% at
	// n = 26-40 in the fleet simulation); the fleet's figure has a flaw
	// left as a known limit: idle slow replicas dominate it, so in a pool
	// down to MinProbes a reused fast probe can look as slow as a 16x-slow
	// one (see the README).
	if e.known && p.unitLatency > 0 {
		e.latency = min(e.latency+time.Duration(p.cfg.ReuseLatency*p.unitLatency), maxLatency)
	}
	e.rif++
	e.uses++
	pk.counted = true
	if e.budget == 0 {
		e.budget = int32(randRound(p.bReuse, rng))
	}
	// A spent probe leaves the pool, except the last MinProbes: until
	// fresh answers arrive they serve (compensated) rather than let the
	// pick fall back to random.
	if e.uses >= e.budget && len(p.pool) > p.cfg.MinProbes {
		p.removeAt(c, removeReuse)
	}
	p.removePerQuery(thr)
	return pk, nil
}

// Probe categories for HCL.
const (
	catHot       = iota // RIF above the threshold; ranked by RIF
	catCold             // cold with known latency; ranked by latency
	catUnknown          // cold with unknown latency; ranked by RIF
	catExploring        // unknown and already explored by a request in flight; a last resort
	catAverse           // recent error rate above AversionThreshold: "hot" below every other; ranked by RIF
	numCats
)

func (p *prequal) category(e *probeEntry, thr int32) int {
	switch {
	case p.averse(int(e.ep)):
		return catAverse
	case !e.known && (p.replicas[e.ep].exploring || e.rif > 0):
		// Unknown with a request in flight: being explored, by this client
		// or another (the backend's estimate by count is unknown only until
		// a first request there finishes), so one exploration at a time
		// across clients too.
		return catExploring
	case e.rif > thr:
		return catHot
	case e.known:
		return catCold
	}
	return catUnknown
}

// rankKey is an entry's key within its category, lowest first: a cold
// probe's latency (times 1 + ColdRIFWeight·RIF when that is set), else its
// RIF.
func (p *prequal) rankKey(e *probeEntry, cat int) int64 {
	if cat != catCold {
		return int64(e.rif)
	}
	if w := p.cfg.ColdRIFWeight; w > 0 {
		// Clamped: a float beyond int64 converts to MinInt64 on amd64,
		// which would rank the slowest, busiest probe first.
		return int64(min(float64(e.latency)*(1+w*float64(e.rif)), maxRankKey))
	}
	return int64(e.latency)
}

// maxRankKey bounds a scaled rank key, with room for the tolerance's
// multiple of it (at most 2×).
const maxRankKey = 1 << 61

// choose applies HCL to the pool and returns the chosen entry's index and
// whether every probe was hot. One pass finds each category's best key and
// how many entries tie for it; ties are then broken uniformly at random with
// one draw (equivalent to reservoir sampling, with fewer draws).
func (p *prequal) choose(thr int32, rng *rand.Rand) (int, bool) {
	var best [numCats]int64
	var ties [numCats]int
	cats := p.cats[:len(p.pool)] // nthTie reads them back instead of asking again
	for i := range p.pool {
		e := &p.pool[i]
		c := p.category(e, thr)
		cats[i] = uint8(c)
		k := p.rankKey(e, c)
		if ties[c] == 0 || k < best[c] {
			best[c], ties[c] = k, 1
		} else if k == best[c] {
			ties[c]++
		}
	}
	if ties[catAverse] > 0 && ties[catAverse] < len(p.pool) {
		p.aversions++ // an averse replica in the pool loses to the others
	}
	switch {
	case ties[catCold] > 0:
		var c int
		if tol := p.cfg.LatencyTolerance; tol > 0 {
			c = p.nearFastest(int64(float64(best[catCold])*(1+tol)), rng)
		} else {
			c = p.nthTie(catCold, best[catCold], ties[catCold], rng)
		}
		if ties[catUnknown] > 0 && best[catUnknown] <= int64(p.pool[c].rif) {
			return p.nthTie(catUnknown, best[catUnknown], ties[catUnknown], rng), false
		}
		return c, false
	case ties[catUnknown] > 0:
		return p.nthTie(catUnknown, best[catUnknown], ties[catUnknown], rng), false
	case ties[catHot] > 0:
		return p.nthTie(catHot, best[catHot], ties[catHot], rng), true
	case ties[catExploring] > 0:
		return p.nthTie(catExploring, best[catExploring], ties[catExploring], rng), false
	}
	return p.nthTie(catAverse, best[catAverse], ties[catAverse], rng), true
}

// nearFastest returns, among the cold probes whose latency is at most
// limit (the best cold key's within LatencyTolerance), a uniformly random one of
// those with the lowest RIF.
func (p *prequal) nearFastest(limit int64, rng *rand.Rand) int {
	var rif int32
	ties := 0
	for i := range p.pool {
		e := &p.pool[i]
		if p.cats[i] != catCold || p.rankKey(e, catCold) > limit {
			continue
		}
		switch {
		case ties == 0 || e.rif < rif:
			rif, ties = e.rif, 1
		case e.rif == rif:
			ties++
		}
	}
	n := 0
	if ties > 1 {
		n = rng.IntN(ties)
	}
	for i := range p.pool {
		e := &p.pool[i]
		if p.cats[i] == catCold && p.rankKey(e, catCold) <= limit && e.rif == rif {
			if n == 0 {
				return i
			}
			n--
		}
	}
	panic("loadbalancer: prequal near-fastest count out of step with the pool")
}

// nthTie returns a uniformly random one of the ties entries of category cat
// whose key is key, reading the categories choose recorded.
func (p *prequal) nthTie(cat int, key int64, ties int, rng *rand.Rand) int {
	n := 0
	if ties > 1 {
		n = rng.IntN(ties)
	}
	for i := range p.pool {
		e := &p.pool[i]
		if int(p.cats[i]) == cat && p.rankKey(e, cat) == key {
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
		if len(p.pool) <= p.removeFloor() {
			continue
		}
		if p.removeWorst {
			p.removeAt(p.sel.worst(p, thr), removeWorst)
		} else {
			p.removeAt(0, removeOldest)
		}
		p.removeWorst = !p.removeWorst
	}
}

// removeFloor is the pool size below which per-query removal stops: half the
// pool, and never below MinProbes. With one entry per replica, answers from
// replicas already in the pool only replace entries, so on fleets near or
// below m in size the pool refills slower than r_remove plus the reuse
// budget drain it; removing down to MinProbes put 1-11% of picks into the
// random fallback in the fleet simulation (n = 8-24), half the pool ~0.
func (p *prequal) removeFloor() int {
	return max(p.cfg.MinProbes, p.cfg.PoolSize/2)
}

// worst ranks as HCL does, in reverse: a probe of an averse replica first,
// then one being explored (both last resorts for a pick), then the hot
// probe with the highest RIF if any probe is hot, else the cold probe with
// the highest key, latency or coldrif's (known latency ranks first, then
// the highest RIF).
// Ties go to the oldest. The paper (§4) ranks "worst" by the selection
// ranking reversed and says nothing of ties; age is its other removal
// criterion, so it is the second key here: of equally bad probes the one
// kept carries the newest load. (Selection breaks ties at random to spread
// picks over identical replicas; removal has no herd to avoid, and a
// random draw here would cost a random number per query.)
func (p *prequal) worst(thr int32) int {
	w, wHot, wTier := -1, false, 0
	for i := range p.pool {
		e := &p.pool[i]
		h := e.rif > thr
		tier := 0
		switch p.category(e, thr) {
		case catAverse:
			tier = 2
		case catExploring:
			tier = 1
		}
		if w < 0 || tier > wTier || tier == wTier && p.worse(e, h, &p.pool[w], wHot) {
			w, wHot, wTier = i, h, tier
		}
	}
	return w
}

// worse reports whether a ranks strictly worse than b for removal; known
// cold probes by the selection's key (latency, or coldrif's).
func (p *prequal) worse(a *probeEntry, aHot bool, b *probeEntry, bHot bool) bool {
	if aHot != bHot {
		return aHot
	}
	if aHot {
		return a.rif > b.rif
	}
	if a.known != b.known {
		return a.known
	}
	if ka, kb := p.rankKey(a, catCold), p.rankKey(b, catCold); a.known && ka != kb {
		return ka > kb
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

// markExploring makes pk the exploratory request of replica i when i's
// latency is unknown and no exploration is in flight.
func (p *prequal) markExploring(i int, pk *Picked) {
	r := &p.replicas[i]
	if !r.latencyKnown && !r.exploring {
		r.exploring, pk.explore = true, true
	}
}

func (p *prequal) Done(now time.Time, pk Picked, _ time.Duration, status int) {
	// base.done skips its decrement for an endpoint that left and came
	// back since the pick; so does CompletionRIF.
	i, ok := p.lookup(pk)
	wasInFlight := ok && p.gates[i].inFlight > 0
	if i = p.done(now, pk, status); i < 0 {
		return
	}
	if pk.explore {
		p.replicas[i].exploring = false
	}
	// A timeout or a client giving up (status < 100, 499) may leave the
	// request still at the replica.
	if p.cfg.CompletionRIF && wasInFlight && status >= 100 && status != 499 {
		p.uncount(i, pk)
	}
}

// uncount takes a finished request off its replica's pool entry when the
// entry counted it: it was in flight when the probe's answer arrived, or
// compensation added it. A retry or a random fallback picked after the
// answer was never counted. An unknown-latency entry keeps its RIF: RIF
// above 0 there marks a replica being explored (see category), and
// lowering it would invite a second exploration.
func (p *prequal) uncount(i int, pk Picked) {
	for j := range p.pool {
		if e := &p.pool[j]; int(e.ep) == i {
			if e.known && e.rif > 0 && (pk.at < e.received || pk.counted) {
				e.rif--
			}
			return
		}
	}
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
	clk := p.instant(now)
	for p.pending > 0 {
		k := min(p.pending, p.perQuery)
		// Partial Fisher-Yates: perm[:i] becomes a uniform sample without
		// replacement; perm stays a permutation, so no reset is needed. A
		// replica with a probe in flight is passed over (its answer is on
		// the way), so a group may come out short: on small fleets at high
		// query rates that spares probes that carry no new information.
		sent := 0
		for i := 0; i < n && sent < k; i++ {
			j := i + rng.IntN(n-i)
			p.perm[i], p.perm[j] = p.perm[j], p.perm[i]
			r := &p.replicas[p.perm[i]]
			if r.probing && clk-r.probeSent < int64(p.cfg.MaxAge) {
				continue
			}
			r.probing, r.probeSent = true, clk
			dst = append(dst, p.eps[p.perm[i]].addr)
			sent++
		}
		p.pending -= k
		p.probesPlanned += uint64(sent)
		p.coalesced += uint64(k - sent)
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
	clk := p.instant(now)
	rs := &p.replicas[ep]
	rs.probing = false
	if rs.answered && clk < rs.lastAnswer {
		// Received before the answer already taken in (the caller
		// delivered it late): it must not replace newer information.
		p.stale++
		return
	}
	rs.lastAnswer, rs.answered = clk, true
	rif := min(max(r.RIF, 0), math.MaxInt32/2)
	known := r.LatencyKnown && r.Latency >= 0
	r.Latency = min(r.Latency, maxLatency)
	p.recordRIF(rif)
	p.expire(clk)
	for i := range p.pool {
		if int(p.pool[i].ep) == ep {
			p.removeAt(i, removeReplaced)
			break
		}
	}
	if len(p.pool) >= p.cfg.PoolSize {
		if clk < p.pool[0].received {
			// Received before every entry, handed in late: it is the
			// oldest probe, the one overflow drops.
			p.removals[removeOverflow]++
			return
		}
		p.removeAt(0, removeOverflow)
	}
	e := probeEntry{ep: int32(ep), received: clk, rif: int32(rif), known: known}
	m := &p.replicas[ep].memory
	switch {
	case known:
		e.latency = r.Latency
		*m = latencyMemory{latency: r.Latency, at: clk, rif: int32(rif), set: true}
	case m.set && p.cfg.LatencyMemory > 0 && clk-m.at <= int64(p.cfg.LatencyMemory):
		e.latency, e.known, e.remembered = m.latency, true, true
	case p.holdSlow(m, clk):
		e.latency, e.known, e.remembered = m.latency, true, true
		p.slowHeld++
	}
	rs.latencyKnown = e.known
	if known && rif <= 1 {
		if p.unitLatency == 0 {
			p.unitLatency = float64(r.Latency)
		} else {
			p.unitLatency += (float64(r.Latency) - p.unitLatency) / unitLatencyWindow
		}
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

// holdSlow reports whether slow memory answers for a replica whose probe
// reported no latency: its memory is younger than SlowMemory, was learned
// idle (RIF <= 1: a latency learned busy says how long its queue was, not
// how slow it is), and was far slower than the pool when first asked. The
// answer is kept until the next known answer: decided afresh on every
// unknown answer (dozens a second), one reading of the median below the
// factor released an exploration, and with 4 of 16 replicas 16x slow that
// was about every 5 s (p99.9 801 ms in sim, against 51 ms without the
// memory and a 30 s idle age).
func (p *prequal) holdSlow(m *latencyMemory, clk int64) bool {
	if !m.set || p.cfg.SlowMemory <= 0 || clk-m.at > int64(p.cfg.SlowMemory) || m.rif > 1 {
		return false
	}
	if !m.decided {
		held, judged := p.farSlower(m.latency)
		if !judged {
			return false // nothing fresh to compare with: ask again next time
		}
		m.held, m.decided = held, true
	}
	return m.held
}

// farSlower reports whether latency is at least SlowFactor times the
// (upper) median latency the pool knows from fresh answers of replicas
// that are not averse; judged is false when there is none. Remembered
// latencies are left out: held slow replicas would otherwise pull the
// median up. The median, not the
// fastest: one replica that read low would make the whole slower part of
// a heterogeneous fleet "far slower" (hetero16-70's slow group held at
// max/min 3.4 against the fastest, in --env sim).
func (p *prequal) farSlower(latency time.Duration) (held, judged bool) {
	known := p.latScratch[:0]
	for i := range p.pool {
		if e := &p.pool[i]; e.known && !e.remembered && !p.averse(int(e.ep)) {
			known = append(known, e.latency)
		}
	}
	p.latScratch = known[:0]
	if len(known) == 0 {
		return false, false
	}
	slices.Sort(known)
	median := known[len(known)/2]
	return median > 0 && float64(latency) >= p.cfg.SlowFactor*float64(median), true
}

// ProbeFailed counts a failed probe. The replica's pool entry, if any, stays
// until it ages out: the paper leaves error aversion unspecified.
func (p *prequal) ProbeFailed(_ time.Time, endpoint string, reason ProbeOutcome) {
	if ep, ok := p.byAddr[endpoint]; ok {
		p.countOutcome(reason)
		p.replicas[ep].probing = false
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
	for i := range p.replicas {
		// exploring stays: it tracks a request in flight, whose Done is to
		// come. Without answers the latency is unknown again.
		// probing stays too: that probe's answer or failure is to come.
		p.replicas[i] = replicaState{exploring: p.replicas[i].exploring,
			probing: p.replicas[i].probing, probeSent: p.replicas[i].probeSent}
	}
	p.stale, p.coalesced, p.reusedPicks, p.slowHeld = 0, 0, 0, 0
	p.unitLatency = 0
}

// maxLatency bounds a reported latency (a day, as the prober's parser), so
// compensation and the tolerance's limit never overflow.
const maxLatency = 24 * time.Hour

// unitLatencyWindow is the EWMA's weight of memory: about the last 16
// answers at RIF <= 1.
const unitLatencyWindow = 16

func (p *prequal) Stats() Stats {
	s := p.stats(len(p.pool))
	s.ReuseBudget = p.bReuse
	s.StaleAnswers = p.stale
	s.ProbesCoalesced = p.coalesced
	s.ReusedPicks = p.reusedPicks
	s.SlowHeld = p.slowHeld
	return s
}
