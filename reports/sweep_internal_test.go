package reports

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSweepX_NumbersDurationsOrPositions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		values []string
		xs     []float64
		kind   int
		unit   time.Duration
		order  []int
		label  string
	}{
		{"numbers", []string{"0.9", "0.5", "1"}, []float64{0.9, 0.5, 1}, axisNumber, 0, []int{1, 0, 2}, "qrif of prequal"},
		// Durations sit at their length in one unit and sort by it, not
		// by their spelling or position.
		// The unit is the largest at most the longest value.
		{"durations", []string{"1s", "500ms", "2s"}, []float64{1, 0.5, 2}, axisDuration, time.Second, []int{1, 0, 2}, "qrif (s) of prequal"},
		{"milli", []string{"3ms", "500µs", "750us", "1ms"}, []float64{3, 0.5, 0.75, 1}, axisDuration, time.Millisecond, []int{1, 2, 3, 0}, "qrif (ms) of prequal"},
		{"micro", []string{"250us", "500μs", "100ns"}, []float64{250, 500, 0.1}, axisDuration, time.Microsecond, []int{2, 0, 1}, "qrif (us) of prequal"},
		{"seconds", []string{"1m30s", "10s"}, []float64{90, 10}, axisDuration, time.Second, []int{1, 0}, "qrif (s) of prequal"},
		// Anything else goes at its position, in the order given.
		{"mixed", []string{"1s", "500ms", "2"}, []float64{0, 1, 2}, axisPosition, 0, []int{0, 1, 2}, "qrif of prequal"},
	}
	for _, tc := range tests {
		xs, ax := sweepX(tc.values)
		if !cmp.Equal(xs, tc.xs) || ax.kind != tc.kind || ax.unit != tc.unit {
			t.Errorf("%s: sweepX = %v, %+v; want %v, kind %d unit %v", tc.name, xs, ax, tc.xs, tc.kind, tc.unit)
		}
		if got := ax.order(xs); !cmp.Equal(got, tc.order) {
			t.Errorf("%s: order = %v, want %v", tc.name, got, tc.order)
		}
		if got := ax.label(SweepResult{Algorithm: "prequal", Parameter: "qrif"}); got != tc.label {
			t.Errorf("%s: label = %q, want %q", tc.name, got, tc.label)
		}
	}
}

func TestSweepAxis_PlacesThePlainValue(t *testing.T) {
	t.Parallel()
	_, num := sweepX([]string{"0.5", "1"})
	if x, ok := num.place("0.8408964152537146"); !ok || x != 0.8408964152537146 {
		t.Errorf("number axis: place = %v, %v", x, ok)
	}
	_, dur := sweepX([]string{"1ms", "5ms"})
	if x, ok := dur.place("3ms"); !ok || x != 3 {
		t.Errorf("duration axis: place(3ms) = %v, %v; want 3", x, ok)
	}
	if _, ok := dur.place("0.5"); ok {
		t.Error("duration axis placed a number")
	}
	_, pos := sweepX([]string{"a", "b"})
	if _, ok := pos.place("0"); ok {
		t.Error("a positional axis placed a value")
	}
}

func TestSameValue_NumbersAndDurations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"0.5", "0.50", true}, {"0.5", "0.6", false},
		{"500us", "500µs", true}, {"500μs", "0.5ms", true}, {"1s", "1000ms", true}, {"1s", "2s", false},
		{"", "", false}, {"x", "x", true}, {"0.5", "500ms", false},
	} {
		if got := sameValue(tc.a, tc.b); got != tc.want {
			t.Errorf("sameValue(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestIsVariant_BySyntax(t *testing.T) {
	t.Parallel()
	base := map[string]string{"probes": "2"}
	for _, tc := range []struct {
		alg  string
		want bool
	}{
		{"prequal{probes=2,qrif=0.5}", true},
		{"prequal{probes=2,qrif=0.50}", true}, // another spelling of the number
		{"prequal{probes=3,qrif=0.5}", false},
		{"prequal{qrif=0.5}", false},
		{"prequal{pool=4,probes=2,qrif=0.5}", false},
		{"p2c{probes=2,qrif=0.5}", false},
		{"prequal", false},
	} {
		if got := isVariant(tc.alg, "prequal", base, "qrif", "0.5"); got != tc.want {
			t.Errorf("isVariant(%s) = %v, want %v", tc.alg, got, tc.want)
		}
	}
}
