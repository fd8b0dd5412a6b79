package sim

import (
	"math/bits"
	"slices"
	"time"
)

// The latency estimator behind a replica's probe answer, ported from
// backend/src/estimator.rs: every finished request is recorded with its RIF
// at arrival; a probe returns the median latency of recent requests whose
// arrival RIF is at or near the current RIF, widening to neighbouring RIF
// buckets until it has EstimatorMinSamples. backend/testdata/
// estimator-vectors.json keeps the two in step (read by go test and cargo
// test).
//
// By count, a replica whose last samples near RIF 0 came out slow is
// avoided by every client and so never gets the samples that would clear
// it. The idle max age (WithIdleMaxAge) bounds that as the backend's
// --latency-idle-max-age does: at RIF 0 only, samples older than the age do
// not count, so the replica answers "unknown" and is explored again.

// Constants of estimator.rs.
const (
	EstimatorRing       = 64 // samples kept per bucket
	EstimatorMinSamples = 5
	// EstimatorRecent is how many newest samples per bucket count when
	// the window is 0 ("recent by count", no age limit).
	EstimatorRecent = 16
	estExact        = 64 // RIFs below this have a bucket each
	estSubBits      = 3  // above it, 8 buckets per power of two
	estNumBuckets   = estExact + 8*(64-6)
)

// DefaultIdleMaxAge is the backend's default --latency-idle-max-age
// (backend/src/estimator.rs DEFAULT_IDLE_MAX_AGE_MS; the shared vectors
// check that the two agree). 5 s spreads a slow group's picks evenly (max/min
// 2.1-2.5 on capacity-limited fleets, against 7-185 at 30 s); the balancer's SlowMemory keeps replicas
// far slower than the rest from being explored that often (docs/results.md,
// 2026-12-06).
const DefaultIdleMaxAge = 5 * time.Second

type estSample struct {
	latencyMS float64
	finishNS  int64
}

type estBucket struct {
	ring      [EstimatorRing]estSample
	len, next int
}

func (b *estBucket) push(s estSample) {
	b.ring[b.next] = s
	b.next = (b.next + 1) % EstimatorRing
	b.len = min(b.len+1, EstimatorRing)
}

// newestRecent reports whether the bucket's newest sample finished at or
// after cutoff.
func (b *estBucket) newestRecent(cutoff int64) bool {
	return b != nil && b.len > 0 && b.ring[(b.next+EstimatorRing-1)%EstimatorRing].finishNS >= cutoff
}

func (b *estBucket) collectRecent(cutoff int64, limit int, out []float64) []float64 {
	for i := range min(b.len, limit) {
		s := b.ring[(b.next+EstimatorRing-1-i)%EstimatorRing]
		if s.finishNS < cutoff {
			break
		}
		out = append(out, s.latencyMS)
	}
	return out
}

// BucketOf is the bucket index of a RIF value.
func BucketOf(rif uint64) int {
	if rif < estExact {
		return int(rif)
	}
	msb := uint64(63 - bits.LeadingZeros64(rif))
	sub := (rif >> (msb - estSubBits)) & (1<<estSubBits - 1)
	return estExact + int(msb-6)*8 + int(sub)
}

// Estimator is one replica's latency history. Buckets are allocated on
// first use: a replica only ever sees a few dozen RIF values.
type Estimator struct {
	buckets  [estNumBuckets]*estBucket
	windowNS int64
	// idleMaxAgeNS applies by count (windowNS 0) at RIF 0 only; 0 is off.
	idleMaxAgeNS int64
	newestNS     int64
	any          bool
	scratch      []float64
}

// NewEstimator returns an empty estimator whose samples count for windowNS,
// or, with 0, the last EstimatorRecent samples per RIF bucket whatever
// their age.
func NewEstimator(windowNS int64) *Estimator {
	return &Estimator{windowNS: windowNS, scratch: make([]float64, 0, 2*EstimatorRing)}
}

// WithIdleMaxAge makes an estimator by count (window 0) ignore, while the
// replica is idle (RIF 0), samples older than ageNS, so a replica avoided
// since a slow spell answers "unknown" and is explored again. Only an idle
// replica needs it: with a request in flight a fresh sample is on its way.
// 0 turns it off; a time window ignores it.
func (e *Estimator) WithIdleMaxAge(ageNS int64) *Estimator {
	e.idleMaxAgeNS = max(ageNS, 0)
	return e
}

// Record adds a finished request; finishNS must not go backwards.
func (e *Estimator) Record(rifAtArrival uint64, latencyMS float64, finishNS int64) {
	i := BucketOf(rifAtArrival)
	b := e.buckets[i]
	if b == nil {
		b = &estBucket{}
		e.buckets[i] = b
	}
	b.push(estSample{latencyMS: latencyMS, finishNS: finishNS})
	if !e.any || finishNS > e.newestNS {
		e.newestNS = finishNS
	}
	e.any = true
}

// Clear drops all history.
func (e *Estimator) Clear() {
	for _, b := range e.buckets {
		if b != nil {
			b.len, b.next = 0, 0
		}
	}
	e.any = false
}

// Estimate is what a probe reports about latency.
type Estimate struct {
	MedianMS float64
	Known    bool // false: no recent sample ("unknown", never 0)
	Samples  int
}

// Estimate returns the median of recent latencies at currentRIF's bucket,
// widening to neighbours (nearest first, both sides per step) until at
// least EstimatorMinSamples are found or every bucket has been looked at.
func (e *Estimator) Estimate(currentRIF uint64, nowNS int64) Estimate {
	cutoff, limit := int64(0), EstimatorRecent
	switch {
	case e.windowNS > 0:
		cutoff, limit = max(nowNS-e.windowNS, 0), EstimatorRing // saturating_sub on u64
	case currentRIF == 0 && e.idleMaxAgeNS > 0:
		cutoff = max(nowNS-e.idleMaxAgeNS, 0)
	}
	if !e.any || e.newestNS < cutoff {
		return Estimate{}
	}
	centre := BucketOf(currentRIF)
	values := e.scratch[:0]
	take := func(i int) {
		if b := e.buckets[i]; b.newestRecent(cutoff) {
			values = b.collectRecent(cutoff, limit, values)
		}
	}
	take(centre)
	for d := 1; len(values) < EstimatorMinSamples && (centre >= d || centre+d < estNumBuckets); d++ {
		if centre >= d {
			take(centre - d)
		}
		if centre+d < estNumBuckets {
			take(centre + d)
		}
	}
	e.scratch = values[:0]
	if len(values) == 0 {
		return Estimate{}
	}
	return Estimate{MedianMS: median(values), Known: true, Samples: len(values)}
}

// median sorts values; for an even count it is the mean of the middle two.
func median(values []float64) float64 {
	slices.Sort(values)
	n := len(values)
	if n%2 == 1 {
		return values[n/2]
	}
	return (values[n/2-1] + values[n/2]) / 2
}
