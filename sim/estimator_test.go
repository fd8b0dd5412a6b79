package sim

import (
	"encoding/json"

	"os"
	"path/filepath"
	"testing"
	"time"
)

// vectorsFile is shared with the backend's cargo test
// (estimator::tests::shared_vectors): the same records in, the same probe
// answers out. backend/testdata/estimator-vectors.md describes the format.
var vectorsFile = filepath.Join("..", "backend", "testdata", "estimator-vectors.json")

type vectorCase struct {
	Name     string            `json:"name"`
	WindowMS int64             `json:"window_ms"`
	Events   []json.RawMessage `json:"events"`
	// IdleMaxAgeMS is absent for the default (DefaultIdleMaxAge).
	IdleMaxAgeMS *int64 `json:"idle_max_age_ms"`
	// The first version of the file: window_ns and ops objects.
	WindowNS int64      `json:"window_ns"`
	Ops      []vectorOp `json:"ops"`
}

type vectorOp struct {
	Op          string   `json:"op"`
	RIF         uint64   `json:"rif"`
	LatencyMS   float64  `json:"latency_ms"`
	FinishNS    int64    `json:"finish_ns"`
	NowNS       int64    `json:"now_ns"`
	WantMedian  *float64 `json:"want_median_ms"`
	WantSamples int      `json:"want_samples"`
}

// replayOps replays a case of the file's first version.
func replayOps(t *testing.T, c vectorCase) int {
	t.Helper()
	e, probes := NewEstimator(c.WindowNS), 0
	for i, op := range c.Ops {
		switch op.Op {
		case "record":
			e.Record(op.RIF, op.LatencyMS, op.FinishNS)
		case "clear":
			e.Clear()
		case "estimate":
			probes++
			want := Estimate{Samples: op.WantSamples}
			if op.WantMedian != nil {
				want.MedianMS, want.Known = *op.WantMedian, true
			}
			if got := e.Estimate(op.RIF, op.NowNS); got != want {
				t.Errorf("%s op %d: Estimate(rif %d, now %d) = %+v, want %+v", c.Name, i, op.RIF, op.NowNS, got, want)
			}
		default:
			t.Fatalf("%s op %d: unknown op %q", c.Name, i, op.Op)
		}
	}
	return probes
}

// TestEstimatorVectors replays every case of the shared file on the Go
// estimator: ["record", rif, latency_ms, finish_ms] and ["probe", rif,
// now_ms, median_ms (null = unknown), samples].
func TestEstimatorVectors(t *testing.T) {
	b, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []vectorCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) < 5 {
		t.Fatalf("%d cases in %s, want at least 5", len(f.Cases), vectorsFile)
	}
	probes := 0
	for _, c := range f.Cases {
		if c.Ops != nil {
			probes += replayOps(t, c)
			continue
		}
		idleAge := int64(DefaultIdleMaxAge)
		if c.IdleMaxAgeMS != nil {
			idleAge = *c.IdleMaxAgeMS * ms
		}
		e := NewEstimator(c.WindowMS * ms).WithIdleMaxAge(idleAge)
		for i, raw := range c.Events {
			var ev []any
			if err := json.Unmarshal(raw, &ev); err != nil || len(ev) < 4 {
				t.Fatalf("%s event %d: %s is not [kind, ...]", c.Name, i, raw)
			}
			num := func(j int) float64 {
				v, ok := ev[j].(float64)
				if !ok {
					t.Fatalf("%s event %d: field %d is %v, want a number", c.Name, i, j, ev[j])
				}
				return v
			}
			switch ev[0] {
			case "record":
				e.Record(uint64(num(1)), num(2), int64(num(3))*ms)
			case "probe":
				probes++
				got := e.Estimate(uint64(num(1)), int64(num(2))*ms)
				want := Estimate{Samples: int(num(4))}
				if ev[3] != nil {
					want.MedianMS, want.Known = num(3), true
				}
				if got != want {
					t.Errorf("%s event %d: Estimate(rif %v, now %v ms) = %+v, want %+v", c.Name, i, ev[1], ev[2], got, want)
				}
			default:
				t.Fatalf("%s event %d: unknown kind %v", c.Name, i, ev[0])
			}
		}
	}
	t.Logf("%d cases, %d probes", len(f.Cases), probes)
}

const ms = int64(1_000_000)

// TestEstimator_RandomHistoriesAgreeWithReference cross-checks the ring
// buffers against a direct computation over every sample ever recorded,
// on seeded histories that cross the exact/geometric bucket boundary, age
// out, overflow rings and widen far, in both modes, and by count with an
// idle max age (probes at RIF 0 are a quarter of them).
func TestEstimator_RandomHistoriesAgreeWithReference(t *testing.T) {
	type sample struct {
		rif      uint64
		lat      float64
		finishNS int64
	}
	for _, mode := range []struct{ window, idleAge int64 }{{0, 0}, {50 * ms, 0}, {1000 * ms, 0}, {0, 30 * ms}, {1000 * ms, 30 * ms}} {
		window := mode.window
		for seed := uint64(1); seed <= 4; seed++ {
			r := NewRng(seed * 7919)
			e := NewEstimator(window).WithIdleMaxAge(mode.idleAge)
			var all []sample
			var now int64
			for step := range 3000 {
				now += int64(r.Uint64() % uint64(3*ms))
				if r.Float64() < 0.7 {
					rif := r.Uint64() % 40
					if r.Float64() < 0.2 {
						rif = 40 + r.Uint64()%300
					}
					s := sample{rif, float64(int(Exp.Draw(20, &r)*1000)) / 1000, now}
					e.Record(s.rif, s.lat, s.finishNS)
					all = append(all, s)
					continue
				}
				rif, at := r.Uint64()%80, now+int64(r.Uint64()%uint64(100*ms))
				if r.Float64() < 0.25 {
					rif = 0
				}
				got := e.Estimate(rif, at)
				want := referenceEstimate(all, window, mode.idleAge, rif, at, func(s sample) (uint64, float64, int64) { return s.rif, s.lat, s.finishNS })
				if got != want {
					t.Fatalf("window %d ms, idle max age %d ms, seed %d step %d: Estimate(%d, %d) = %+v, reference %+v", window/ms, mode.idleAge/ms, seed, step, rif, at, got, want)
				}
			}
		}
	}
}

// referenceEstimate recomputes an estimate from the full history: per
// bucket the newest samples (up to the ring, or EstimatorRecent by count)
// that are recent, widening nearest first. By count, at RIF 0, samples
// older than idleAge (if > 0) are not recent.
func referenceEstimate[S any](all []S, window, idleAge int64, rif uint64, now int64, get func(S) (uint64, float64, int64)) Estimate {
	perBucket := map[int][]float64{} // newest first, recent only
	counts := map[int]int{}
	cutoff, limit := int64(0), EstimatorRecent
	if window > 0 {
		cutoff, limit = max(now-window, 0), EstimatorRing
	} else if rif == 0 && idleAge > 0 {
		cutoff = max(now-idleAge, 0)
	}
	for i := len(all) - 1; i >= 0; i-- {
		r, lat, fin := get(all[i])
		b := BucketOf(r)
		counts[b]++
		if counts[b] > limit || fin < cutoff {
			counts[b] = limit + 1 // older ones are past the ring or aged out
			continue
		}
		perBucket[b] = append(perBucket[b], lat)
	}
	c := BucketOf(rif)
	vals := append([]float64(nil), perBucket[c]...)
	for d := 1; len(vals) < EstimatorMinSamples && (c >= d || c+d < estNumBuckets); d++ {
		if c >= d {
			vals = append(vals, perBucket[c-d]...)
		}
		if c+d < estNumBuckets {
			vals = append(vals, perBucket[c+d]...)
		}
	}
	if len(vals) == 0 {
		return Estimate{}
	}
	return Estimate{MedianMS: median(vals), Known: true, Samples: len(vals)}
}

// TestGroup_LatencyIdleMaxAgeReachesTheEstimator: a group's idle max age
// is its replicas' (0 the default, negative off), as the backend's flag.
func TestGroup_LatencyIdleMaxAgeReachesTheEstimator(t *testing.T) {
	const age = 30 * time.Millisecond
	for _, c := range []struct {
		set  time.Duration
		want time.Duration // 0: off
	}{{age, age}, {-1, 0}, {0, DefaultIdleMaxAge}} {
		s, err := newServer(Group{Name: "g", Replicas: 1, ServiceTime: 10 * time.Millisecond, LatencyIdleMaxAge: c.set}, 0, 0, 0, 1000, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		s.est.Record(0, 400, 0)
		// An hour idle without the age, just past it with one.
		late := int64(time.Hour)
		if c.want > 0 {
			if got := s.est.Estimate(0, int64(c.want)); !got.Known {
				t.Errorf("LatencyIdleMaxAge %v: unknown at the age, want the sample", c.set)
			}
			late = int64(c.want) + 1
		}
		if got := s.est.Estimate(0, late); got.Known == (c.want > 0) {
			t.Errorf("LatencyIdleMaxAge %v: idle for %v: %+v, want known %v", c.set, time.Duration(late), got, c.want == 0)
		}
	}
}
