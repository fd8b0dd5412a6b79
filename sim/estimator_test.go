package sim

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// vectorsFile is shared with the backend's cargo test
// (backend/tests/estimator_vectors.rs): the same inputs, the same answers.
var vectorsFile = filepath.Join("..", "backend", "testdata", "estimator-vectors.json")

var updateVectors = flag.Bool("update-vectors", false, "regenerate "+vectorsFile+" from the Go estimator (then run cargo test to confirm the Rust one agrees)")

// vectorOp is one step: "record" (rif, latency_ms, finish_ns), "estimate"
// (rif, now_ns and the wanted answer; want_median_ms null = unknown) or
// "clear".
type vectorOp struct {
	Op          string   `json:"op"`
	RIF         uint64   `json:"rif,omitempty"`
	LatencyMS   float64  `json:"latency_ms,omitempty"`
	FinishNS    int64    `json:"finish_ns,omitempty"`
	NowNS       int64    `json:"now_ns,omitempty"`
	WantMedian  *float64 `json:"want_median_ms"`
	WantSamples int      `json:"want_samples"`
}

type vectorCase struct {
	Name     string     `json:"name"`
	WindowNS int64      `json:"window_ns"`
	Ops      []vectorOp `json:"ops"`
}

type vectorFile struct {
	About string       `json:"about"`
	Cases []vectorCase `json:"cases"`
}

func TestEstimatorVectors(t *testing.T) {
	if *updateVectors {
		writeVectors(t)
	}
	b, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f vectorFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) < 10 {
		t.Fatalf("%d cases in %s, want at least 10", len(f.Cases), vectorsFile)
	}
	estimates := 0
	for _, c := range f.Cases {
		e := NewEstimator(c.WindowNS)
		for i, op := range c.Ops {
			switch op.Op {
			case "record":
				e.Record(op.RIF, op.LatencyMS, op.FinishNS)
			case "clear":
				e.Clear()
			case "estimate":
				estimates++
				got := e.Estimate(op.RIF, op.NowNS)
				want := Estimate{Samples: op.WantSamples}
				if op.WantMedian != nil {
					want.MedianMS, want.Known = *op.WantMedian, true
				}
				if got != want {
					t.Errorf("%s op %d: Estimate(rif %d, now %d) = %+v, want %+v", c.Name, i, op.RIF, op.NowNS, got, want)
				}
			default:
				t.Fatalf("%s op %d: unknown op %q", c.Name, i, op.Op)
			}
		}
	}
	t.Logf("%d cases, %d estimates", len(f.Cases), estimates)
}

const ms = int64(1_000_000)

// writeVectors regenerates the shared file: the backend's own unit-test
// cases, then seeded random histories that cross the exact/geometric bucket
// boundary, age out, overflow rings and widen far.
func writeVectors(t *testing.T) {
	t.Helper()
	var cases []vectorCase
	add := func(name string, window int64, build func(e *Estimator, ops *[]vectorOp)) {
		e := NewEstimator(window)
		var ops []vectorOp
		build(e, &ops)
		cases = append(cases, vectorCase{Name: name, WindowNS: window, Ops: ops})
	}
	rec := func(e *Estimator, ops *[]vectorOp, rif uint64, lat float64, fin int64) {
		e.Record(rif, lat, fin)
		*ops = append(*ops, vectorOp{Op: "record", RIF: rif, LatencyMS: lat, FinishNS: fin})
	}
	est := func(e *Estimator, ops *[]vectorOp, rif uint64, now int64) {
		got := e.Estimate(rif, now)
		op := vectorOp{Op: "estimate", RIF: rif, NowNS: now, WantSamples: got.Samples}
		if got.Known {
			m := got.MedianMS
			op.WantMedian = &m
		}
		*ops = append(*ops, op)
	}
	window := 1000 * ms
	add("unknown_without_history", window, func(e *Estimator, ops *[]vectorOp) { est(e, ops, 0, 5*ms) })
	add("exact_rif_bucket_first", window, func(e *Estimator, ops *[]vectorOp) {
		var tt int64
		for i := range 5 {
			tt += ms
			rec(e, ops, 2, 10+float64(i), tt)
			rec(e, ops, 3, 100, tt)
		}
		est(e, ops, 2, tt)
		est(e, ops, 3, tt)
	})
	add("widens_to_neighbours", window, func(e *Estimator, ops *[]vectorOp) {
		for _, r := range [][2]float64{{5, 50}, {4, 40}, {6, 60}, {3, 30}, {7, 70}, {20, 999}} {
			rec(e, ops, uint64(r[0]), r[1], ms)
		}
		est(e, ops, 5, 2*ms)
	})
	add("far_but_only_data", window, func(e *Estimator, ops *[]vectorOp) {
		rec(e, ops, 40, 7, ms)
		est(e, ops, 0, 2*ms)
	})
	add("even_count_median", window, func(e *Estimator, ops *[]vectorOp) {
		for i, v := range []float64{10, 20, 30, 40, 50, 60} {
			rec(e, ops, 1, v, int64(i)*ms)
		}
		est(e, ops, 1, 10*ms)
	})
	add("ageing_then_unknown", window, func(e *Estimator, ops *[]vectorOp) {
		rec(e, ops, 0, 500, 0)
		rec(e, ops, 0, 500, 100*ms)
		for i := range int64(3) {
			rec(e, ops, 0, 1, 900*ms+i*ms)
		}
		est(e, ops, 0, 1050*ms)
		est(e, ops, 0, 902*ms+window+1)
	})
	add("ring_bounded_keeps_newest", window, func(e *Estimator, ops *[]vectorOp) {
		for i := range int64(EstimatorRing * 3) {
			v := 1000.0
			if i >= EstimatorRing*2 {
				v = 1
			}
			rec(e, ops, 1, v, i)
		}
		est(e, ops, 1, EstimatorRing*3)
	})
	add("clear_forgets", window, func(e *Estimator, ops *[]vectorOp) {
		rec(e, ops, 0, 3, ms)
		*ops = append(*ops, vectorOp{Op: "clear"})
		e.Clear()
		est(e, ops, 0, ms)
	})
	add("geometric_buckets", window, func(e *Estimator, ops *[]vectorOp) {
		for i, r := range []uint64{63, 64, 71, 72, 79, 80, 127, 128, 1000, 5000} {
			rec(e, ops, r, float64(r)/4, int64(i+1)*ms)
		}
		for _, r := range []uint64{63, 64, 70, 72, 100, 128, 129, 700, 4096, 1 << 40} {
			est(e, ops, r, 20*ms)
		}
	})
	for seed := uint64(1); seed <= 6; seed++ {
		w := []int64{50 * ms, 200 * ms, 1000 * ms}[seed%3]
		add("random_"+string(rune('0'+seed)), w, func(e *Estimator, ops *[]vectorOp) {
			r := NewRng(seed * 7919)
			var now int64
			for range 250 {
				now += int64(r.Uint64() % uint64(3*ms))
				if r.Float64() < 0.7 {
					rif := r.Uint64() % 40
					if r.Float64() < 0.2 {
						rif = 40 + r.Uint64()%300
					}
					// Millisecond values with microsecond resolution, as the
					// backend measures them.
					lat := math.Round(Exp.Draw(20, &r)*1000) / 1000
					rec(e, ops, rif, lat, now)
				} else {
					est(e, ops, r.Uint64()%80, now+int64(r.Uint64()%uint64(w)))
				}
			}
		})
	}
	b, err := marshalVectors(vectorFile{
		About: "Shared test vectors of the backend's latency estimator (backend/src/estimator.rs) and its Go port (sim/estimator.go). " +
			"Each case starts an estimator with window_ns and applies ops in order: record(rif, latency_ms, finish_ns), clear, " +
			"or estimate(rif, now_ns), which must answer want_median_ms (null = unknown) over want_samples samples. " +
			"Regenerate with: go test ./sim -run TestEstimatorVectors -update-vectors; then cargo test in backend/.",
		Cases: cases,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vectorsFile, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// marshalVectors writes one op per line: small, and diffs stay readable.
func marshalVectors(f vectorFile) ([]byte, error) {
	var b []byte
	about, err := json.Marshal(f.About)
	if err != nil {
		return nil, err
	}
	b = append(b, "{\"about\": "...)
	b = append(b, about...)
	b = append(b, ",\n\"cases\": [\n"...)
	for i, c := range f.Cases {
		name, _ := json.Marshal(c.Name)
		b = fmt.Appendf(b, "{\"name\": %s, \"window_ns\": %d, \"ops\": [\n", name, c.WindowNS)
		for j, op := range c.Ops {
			line, err := json.Marshal(op)
			if err != nil {
				return nil, err
			}
			b = append(b, line...)
			if j < len(c.Ops)-1 {
				b = append(b, ',')
			}
			b = append(b, '\n')
		}
		b = append(b, "]}"...)
		if i < len(f.Cases)-1 {
			b = append(b, ',')
		}
		b = append(b, '\n')
	}
	return append(b, "]}"...), nil
}
