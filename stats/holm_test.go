package stats

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestHolm_HandChecked(t *testing.T) {
	// Sorted: 0.005 ×4 = 0.02, 0.015 ×3 = 0.045, 0.03 ×2 = 0.06, 0.5 ×1 = 0.5.
	// At 0.05 Holm rejects the first two; Bonferroni (×4) only the first.
	got := Holm([]float64{0.03, 0.005, 0.5, 0.015})
	want := []float64{0.06, 0.02, 0.5, 0.045}
	for i := range want {
		near(t, "adjusted p", got[i], want[i], 1e-15)
	}
}

func TestHolm_MonotoneCappedAndNaNOutsideTheFamily(t *testing.T) {
	// Sorted 0.01 ×3 = 0.03, 0.04 ×2 = 0.08, 0.045 ×1 = 0.045 → raised to
	// 0.08 so a larger p never gets a smaller adjusted p; NaN is no test.
	got := Holm([]float64{0.045, math.NaN(), 0.04, 0.01})
	near(t, "0.045", got[0], 0.08, 1e-15)
	near(t, "0.04", got[2], 0.08, 1e-15)
	near(t, "0.01", got[3], 0.03, 1e-15)
	if !math.IsNaN(got[1]) {
		t.Errorf("NaN p adjusted to %v, want NaN", got[1])
	}
	capped := Holm([]float64{0.6, 0.7})
	near(t, "cap", capped[0], 1, 0)
	near(t, "cap", capped[1], 1, 0)
	if len(Holm(nil)) != 0 {
		t.Error("Holm(nil) not empty")
	}
}

func TestOutsideMinEffect(t *testing.T) {
	cases := []struct {
		lo, hi float64
		want   bool
	}{
		{0.80, 0.94, true},  // wholly below 0.95
		{0.80, 0.96, false}, // reaches into the band
		{1.06, 1.20, true},  // wholly above 1.05
		{1.04, 1.20, false},
		{0.996, 0.998, false}, // 801.8 vs 804.0 ms: significant, but 0.3%
		{math.NaN(), 0.5, false},
		{0, math.Inf(1), false},
		{math.Inf(1), math.Inf(1), true},
	}
	for _, c := range cases {
		if got := OutsideMinEffect(c.lo, c.hi, 0.05); got != c.want {
			t.Errorf("[%v, %v]: got %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}

func TestMinP_ExactForUnequalSamples(t *testing.T) {
	cases := []struct {
		n1, n2 int
		want   float64
	}{
		{3, 3, 2.0 / 20},
		{4, 4, 2.0 / 70},
		{3, 5, 2.0 / 56}, // below 0.05 although a side has only 3
		{5, 3, 2.0 / 56},
		{2, 6, 2.0 / 28}, // above 0.05 although 8 runs in all
		{1, 1, 1},
	}
	for _, c := range cases {
		near(t, "MinP", MinP(c.n1, c.n2), c.want, 1e-15)
	}
	if !math.IsNaN(MinP(0, 4)) {
		t.Error("MinP(0, 4) is not NaN")
	}
}

func TestMannWhitneyU_UnequalSizesWarnOnlyWhenAlphaIsUnreachable(t *testing.T) {
	// 3 vs 5 fully separated: p = 2/C(8,3) = 0.0357 < 0.05, no warning.
	u := MannWhitneyU([]float64{1, 2, 3}, []float64{4, 5, 6, 7, 8}, 0.05)
	near(t, "p", u.P, 2.0/56, 1e-12)
	if len(u.Warnings) != 0 {
		t.Errorf("3 vs 5 warned %v", u.Warnings)
	}
	// 2 vs 6: the smallest p is 2/28 = 0.071, so the warning fires.
	u = MannWhitneyU([]float64{1, 2}, []float64{3, 4, 5, 6, 7, 8}, 0.05)
	near(t, "p", u.P, 2.0/28, 1e-12)
	if len(u.Warnings) != 1 || !errors.Is(u.Warnings[0], ErrTooFewForSignificance) {
		t.Errorf("2 vs 6 warnings = %v, want too-few", u.Warnings)
	}
	// The same 3 vs 5 at alpha 0.01 cannot reach it.
	u = MannWhitneyU([]float64{1, 2, 3}, []float64{4, 5, 6, 7, 8}, 0.01)
	if len(u.Warnings) != 1 {
		t.Errorf("3 vs 5 at alpha 0.01: warnings = %v, want too-few", u.Warnings)
	}
}

func TestBootstrapRatio_SmallBelowFiveRunsPerSide(t *testing.T) {
	rng := func() *rand.Rand { return rand.New(rand.NewPCG(1, 1)) }
	four := []float64{1, 2, 3, 4}
	five := []float64{1, 2, 3, 4, 5}
	if r := BootstrapRatio(four, five, 100, 0.95, rng()); !r.Small {
		t.Error("4 vs 5 runs not marked small")
	}
	if r := BootstrapRatio(five, four, 100, 0.95, rng()); !r.Small {
		t.Error("5 vs 4 runs not marked small")
	}
	if r := BootstrapRatio(five, five, 100, 0.95, rng()); r.Small {
		t.Error("5 vs 5 runs marked small")
	}
}

func TestRunsPerSide_HolmThresholdOfTheFamily(t *testing.T) {
	// MinP(n, n) = 2/C(2n, n): 0.1 (3), 0.0286 (4), 0.00794 (5), 0.00216 (6).
	cases := []struct {
		tests int
		want  int
	}{
		{1, 4},  // 0.0286 < 0.05
		{2, 5},  // 0.0286 ≥ 0.025; 0.00794 < 0.025
		{6, 5},  // 0.00794 < 0.00833
		{7, 6},  // 0.00794 ≥ 0.00714
		{10, 6}, // 0.00216 < 0.005
		{0, 0},
	}
	for _, c := range cases {
		if got := RunsPerSide(c.tests, 0.05); got != c.want {
			t.Errorf("RunsPerSide(%d, 0.05) = %d, want %d", c.tests, got, c.want)
		}
		if n := c.want; n > 0 && !(MinP(n, n)*float64(c.tests) < 0.05 && MinP(n-1, n-1)*float64(c.tests) >= 0.05) {
			t.Errorf("%d tests: %d per side is not the smallest that can pass Holm", c.tests, n)
		}
	}
}
