package reports

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSweepX_NumbersOrPositions(t *testing.T) {
	xs, numeric := sweepX([]string{"0.5", "1", "0.84"})
	if !numeric || !cmp.Equal(xs, []float64{0.5, 1, 0.84}) {
		t.Errorf("numbers: %v %v", xs, numeric)
	}
	// Durations (or any value that is not a number) go at their position,
	// labelled with the value.
	xs, numeric = sweepX([]string{"1s", "500ms", "2"})
	if numeric || !cmp.Equal(xs, []float64{0, 1, 2}) {
		t.Errorf("durations: %v %v", xs, numeric)
	}
}

func TestIsVariant_BySyntax(t *testing.T) {
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
