package stats

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func near(t *testing.T, name string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.12g, want %.12g (±%g)", name, got, want, tol)
	}
}

func TestMedian_OddEvenEmpty(t *testing.T) {
	near(t, "odd", Median([]float64{3, 1, 2}), 2, 0)
	near(t, "even", Median([]float64{4, 1, 3, 2}), 2.5, 0)
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
	xs := []float64{3, 1, 2}
	Median(xs)
	if xs[0] != 3 {
		t.Error("Median sorted the caller's slice")
	}
}

func TestCV_HandValues(t *testing.T) {
	near(t, "equal", CV([]float64{5, 5, 5}), 0, 0)
	// mean 2, population sd sqrt(((1)^2+0+1)/3)=sqrt(2/3)
	near(t, "1,2,3", CV([]float64{1, 2, 3}), math.Sqrt(2.0/3)/2, 1e-15)
	if !math.IsNaN(CV([]float64{0, 0})) {
		t.Error("CV of zeros is not NaN")
	}
}

func TestSummarize_TooFewGivesRange(t *testing.T) {
	s := Summarize([]float64{5, 1, 4, 2, 3}, 0.95)
	if !s.Range || s.Lo != 1 || s.Hi != 5 || s.Median != 3 {
		t.Fatalf("got %+v, want range 1–5 around 3", s)
	}
	if len(s.Warnings) != 1 {
		t.Fatalf("warnings = %v, want one", s.Warnings)
	}
	// 5 samples: [min,max] covers 1 - 2/32.
	near(t, "coverage", s.Coverage, 0.9375, 1e-15)
}

func TestSummarize_SixSamplesFiniteCI(t *testing.T) {
	s := Summarize([]float64{6, 1, 5, 2, 4, 3}, 0.95)
	if s.Range || s.Lo != 1 || s.Hi != 6 || s.Median != 3.5 || len(s.Warnings) != 0 {
		t.Fatalf("got %+v, want CI 1–6 around 3.5 without warnings", s)
	}
	near(t, "coverage", s.Coverage, 1-2.0/64, 1e-15)
	if MinSamplesForCI(0.95) != 6 {
		t.Errorf("MinSamplesForCI(0.95) = %d, want 6", MinSamplesForCI(0.95))
	}
}

func TestSummarize_TenSamplesUsesSecondOrderStatistic(t *testing.T) {
	// P(B(10,.5) <= 1) = 11/1024 -> [x(2), x(9)] covers 1-22/1024 = 0.9785;
	// P(B <= 2) = 56/1024 -> [x(3), x(8)] would cover only 0.8906.
	xs := []float64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	s := Summarize(xs, 0.95)
	if s.Lo != 20 || s.Hi != 90 || s.Median != 55 {
		t.Fatalf("got [%v, %v] median %v, want [20, 90] median 55", s.Lo, s.Hi, s.Median)
	}
	near(t, "coverage", s.Coverage, 1-22.0/1024, 1e-15)
}

func TestSummarize_Empty(t *testing.T) {
	s := Summarize(nil, 0.95)
	if !math.IsNaN(s.Median) || len(s.Warnings) == 0 || !errors.Is(s.Warnings[0], ErrEmpty) {
		t.Fatalf("got %+v", s)
	}
}

func TestMannWhitneyU_MinimumPAtThreePerSide(t *testing.T) {
	u := MannWhitneyU([]float64{1, 2, 3}, []float64{4, 5, 6}, 0.05)
	if !u.Exact || u.U != 0 {
		t.Fatalf("got %+v", u)
	}
	near(t, "p", u.P, 0.1, 1e-12) // 2 * 1/C(6,3)
	near(t, "minP", u.MinP, 0.1, 1e-12)
	if len(u.Warnings) != 1 || !errors.Is(u.Warnings[0], ErrTooFewForSignificance) {
		t.Errorf("warnings = %v, want too-few", u.Warnings)
	}
}

func TestMannWhitneyU_MinimumPAtFourPerSide(t *testing.T) {
	u := MannWhitneyU([]float64{5, 6, 7, 8}, []float64{1, 2, 3, 4}, 0.05)
	if u.U != 16 {
		t.Fatalf("U = %v, want 16", u.U)
	}
	near(t, "p", u.P, 2.0/70, 1e-12) // 0.0286
	if len(u.Warnings) != 0 {
		t.Errorf("warnings = %v, want none", u.Warnings)
	}
}

func TestMannWhitneyU_SmallSampleTableFivePerSide(t *testing.T) {
	// Counts of U for m=n=5 (C(10,5)=252 arrangements): U=0:1, 1:1, 2:2, 3:3.
	// The tabled two-sided critical value at alpha 0.05 is U <= 2.
	cases := []struct {
		x, y  []float64
		u, p  float64
		label string
	}{
		{[]float64{1, 2, 3, 4, 6}, []float64{5, 7, 8, 9, 10}, 1, 2 * 2.0 / 252, "U=1"},
		{[]float64{1, 2, 3, 5, 6}, []float64{4, 7, 8, 9, 10}, 2, 2 * 4.0 / 252, "U=2 (critical)"},
		{[]float64{1, 2, 3, 5, 7}, []float64{4, 6, 8, 9, 10}, 3, 2 * 7.0 / 252, "U=3 (not significant)"},
	}
	for _, c := range cases {
		u := MannWhitneyU(c.x, c.y, 0.05)
		if u.U != c.u {
			t.Errorf("%s: U = %v, want %v", c.label, u.U, c.u)
		}
		near(t, c.label+" p", u.P, c.p, 1e-12)
	}
}

func TestMannWhitneyU_SymmetricAndIdentical(t *testing.T) {
	x := []float64{1.5, 2.5, 9, 4}
	y := []float64{3, 7, 8, 0.5}
	a, b := MannWhitneyU(x, y, 0.05), MannWhitneyU(y, x, 0.05)
	near(t, "swap p", a.P, b.P, 1e-15)
	near(t, "U+U'", a.U+b.U, 16, 0)
	same := MannWhitneyU([]float64{2, 2, 2, 2}, []float64{2, 2, 2, 2}, 0.05)
	near(t, "all tied p", same.P, 1, 0)
}

func TestMannWhitneyU_ExactWithTies(t *testing.T) {
	// Pooled ranks 1, 3, 3, 3, 5, 6 (the three 2s share rank 3); x holds
	// 1, 3, 3 (sum 7, U = 1). Of the 20 three-subsets, 3 have sum 7 (the
	// minimum), so p = 2 * 3/20.
	u := MannWhitneyU([]float64{1, 2, 2}, []float64{2, 3, 4}, 0.05)
	if !u.Exact || u.U != 1 {
		t.Fatalf("got %+v", u)
	}
	near(t, "p", u.P, 0.3, 1e-12)
	near(t, "minP", u.MinP, 0.1, 1e-12) // sample sizes, untied
}

func TestMannWhitneyU_NormalApproximation(t *testing.T) {
	x, y := make([]float64, 30), make([]float64, 30)
	for i := range x {
		x[i], y[i] = float64(i+1), float64(i+31)
	}
	u := MannWhitneyU(x, y, 0.05)
	if u.Exact {
		t.Fatal("60 samples used the exact test")
	}
	// var = 30*30/12 * 61 = 4575, z = (450-0.5)/sqrt(4575) = 6.6456.
	near(t, "p", u.P, 3.019859359e-11, 1e-19)

	// Two tie groups of 26: var = 676/12 * (53 - 2*(26^3-26)/(52*51)) = 2240.08.
	ones, twos := make([]float64, 26), make([]float64, 26)
	for i := range ones {
		ones[i], twos[i] = 1, 2
	}
	u = MannWhitneyU(ones, twos, 0.05)
	near(t, "tied p", u.P, 9.974069975e-13, 1e-20)
}

func TestMannWhitneyU_ExactMatchesNormalRoughlyAtLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x, y := make([]float64, 25), make([]float64, 25)
	for i := range x {
		x[i], y[i] = rng.NormFloat64(), rng.NormFloat64()+0.5
	}
	exact := MannWhitneyU(x, y, 0.05)
	ties := []int{}
	for range 50 {
		ties = append(ties, 1)
	}
	approx := normalP(exact.U, 25, 25, ties)
	if !exact.Exact || math.Abs(exact.P-approx) > 0.01 {
		t.Errorf("exact p %v vs normal %v differ by more than 0.01", exact.P, approx)
	}
}

func TestBootstrapRatio_DeterministicAndBracketsPoint(t *testing.T) {
	num := []float64{10, 12, 11, 13, 9}
	den := []float64{100, 110, 90, 105, 95}
	a := BootstrapRatio(num, den, 10000, 0.95, rand.New(rand.NewPCG(7, 7)))
	b := BootstrapRatio(num, den, 10000, 0.95, rand.New(rand.NewPCG(7, 7)))
	if a.Lo != b.Lo || a.Hi != b.Hi || a.Ratio != b.Ratio {
		t.Fatalf("same seed gave %+v and %+v", a, b)
	}
	near(t, "ratio", a.Ratio, 11.0/100, 1e-15)
	if !(a.Lo <= a.Ratio && a.Ratio <= a.Hi) || a.Lo < 9.0/110 || a.Hi > 13.0/90 {
		t.Errorf("interval [%v, %v] does not bracket %v within the data's range", a.Lo, a.Hi, a.Ratio)
	}
}

func TestBootstrapRatio_ConstantSamplesGiveDegenerateInterval(t *testing.T) {
	r := BootstrapRatio([]float64{2, 2, 2}, []float64{4, 4, 4}, 1000, 0.95, rand.New(rand.NewPCG(1, 1)))
	if r.Ratio != 0.5 || r.Lo != 0.5 || r.Hi != 0.5 {
		t.Errorf("got %+v, want 0.5 [0.5, 0.5]", r)
	}
}

func TestBootstrapRatio_ZeroDenominator(t *testing.T) {
	r := BootstrapRatio([]float64{1, 2}, []float64{0, 0}, 100, 0.95, rand.New(rand.NewPCG(1, 1)))
	if !math.IsNaN(r.Ratio) || len(r.Warnings) == 0 || !errors.Is(r.Warnings[0], ErrZeroDenominator) {
		t.Errorf("got %+v", r)
	}
	r = BootstrapRatio([]float64{0, 0}, []float64{0, 0}, 100, 0.95, rand.New(rand.NewPCG(1, 1)))
	if r.Ratio != 1 || len(r.Warnings) != 0 {
		t.Errorf("0/0 got %+v, want 1 (no change)", r)
	}
}

func BenchmarkMannWhitneyU_Exact25x25(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	x, y := make([]float64, 25), make([]float64, 25)
	for i := range x {
		x[i], y[i] = rng.Float64(), rng.Float64()
	}
	b.ReportAllocs()
	for b.Loop() {
		MannWhitneyU(x, y, 0.05)
	}
}

func BenchmarkBootstrapRatio_10kResamples10Runs(b *testing.B) {
	num := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	den := []float64{2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	b.ReportAllocs()
	for b.Loop() {
		BootstrapRatio(num, den, 10000, 0.95, rand.New(rand.NewPCG(1, 1)))
	}
}

func TestBootstrapDiff_IntervalAroundMedianDifference(t *testing.T) {
	a := []float64{0.010, 0.011, 0.012, 0.013, 0.014}
	b := []float64{0, 0, 0, 0, 0.00002}
	d := BootstrapDiff(a, b, 2000, 0.95, rand.New(rand.NewPCG(1, 2)))
	if d.Diff != 0.012 {
		t.Fatalf("diff %v, want 0.012", d.Diff)
	}
	if !(d.Lo <= d.Diff && d.Diff <= d.Hi) || d.Lo < 0.0099 || d.Hi > 0.0141 {
		t.Fatalf("interval [%v, %v] does not bracket the difference within the data's range", d.Lo, d.Hi)
	}
	if !OutsideFloor(d.Lo, d.Hi, 0.001) || OutsideFloor(d.Lo, d.Hi, 0.011) {
		t.Fatalf("floor check wrong for [%v, %v]", d.Lo, d.Hi)
	}
	if OutsideFloor(-0.0005, 0.0005, 0.001) {
		t.Fatal("an interval inside the floor lies outside it")
	}
}
