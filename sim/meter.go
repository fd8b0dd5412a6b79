package sim

// loadMeter is the backend's load report for /prequal/probe (backend/src/
// load.rs): answered requests per second (qps), those answered with 5xx
// (eps) and the busy fraction of slot-time (utilization) over the last
// second, in ten 100 ms buckets. A query covers the current (partial)
// bucket and the nine before it and divides by exactly that span (shorter
// right after the start). Busy slots and capacity are step functions,
// integrated exactly: the world calls advance before it changes either.
// With unlimited capacity there are no slots to be a fraction of, and the
// report has no utilization (so LoadKnown is false, as with the backend).
type loadMeter struct {
	ring    [meterBuckets]meterBucket
	last    int64 // integrated up to here
	started bool
}

type meterBucket struct {
	epoch              int64 // which bucket of time (t / meterBucketNS)
	done, errors       uint64
	busySlot, capacity float64 // slot-nanoseconds
}

const (
	meterBucketNS = int64(100e6)
	meterBuckets  = 10
)

func (m *loadMeter) bucket(t int64) *meterBucket {
	e := t / meterBucketNS
	b := &m.ring[e%meterBuckets]
	if b.epoch != e {
		*b = meterBucket{epoch: e}
	}
	return b
}

// advance integrates busy slots and capacity (unlimited: not counted)
// from the last call up to t.
func (m *loadMeter) advance(t int64, busy, capacity int) {
	if !m.started {
		m.started, m.last = true, t
		return
	}
	for m.last < t {
		end := min(t, (m.last/meterBucketNS+1)*meterBucketNS)
		b := m.bucket(m.last)
		dt := float64(end - m.last)
		b.busySlot += float64(busy) * dt
		if capacity != unlimited {
			b.capacity += float64(capacity) * dt
		}
		m.last = end
	}
}

// answered counts one answer at t (advance must have been called at t).
func (m *loadMeter) answered(t int64, status int32) {
	b := m.bucket(t)
	b.done++
	if status >= 500 {
		b.errors++
	}
}

// report returns qps, eps and utilization at t; ok is false with
// unlimited capacity (no utilization).
func (m *loadMeter) report(t int64, busy, capacity int) (qps, eps, util float64, ok bool) {
	m.advance(t, busy, capacity)
	e := t / meterBucketNS
	var done, errs uint64
	var busyNS, capNS float64
	for i := range m.ring {
		b := &m.ring[i]
		if b.epoch > e-meterBuckets && b.epoch <= e {
			done += b.done
			errs += b.errors
			busyNS += b.busySlot
			capNS += b.capacity
		}
	}
	// The span: the current partial bucket and the nine before it, never
	// before time 0 (the world's start).
	from := max((e-meterBuckets+1)*meterBucketNS, 0)
	span := float64(t-from) / 1e9
	if span > 0 {
		qps, eps = float64(done)/span, float64(errs)/span
	}
	if capacity == unlimited {
		return qps, eps, 0, false
	}
	if capNS > 0 {
		util = min(max(busyNS/capNS, 0), 1)
	}
	return qps, eps, util, true
}
