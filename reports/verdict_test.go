package reports

import (
	"math"
	"strings"
	"testing"
)

func opts(t *testing.T) Options {
	t.Helper()
	o, err := Options{Resamples: 2000}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// judged runs one comparison through the whole verdict path, alone in its
// family unless others are given.
func judged(t *testing.T, metricKey string, rv, av []float64, others ...Comparison) Comparison {
	t.Helper()
	o := opts(t)
	c := compare("prequal", "round-robin", metricByKey(metricKey), rv, av, 1, o)
	c.Primary = true
	cs := append([]Comparison{c}, others...)
	decide(cs, o)
	return cs[0]
}

// primary puts a comparison in the verdict family, as analyze does for
// the report's primary metric.
func primary(c Comparison) Comparison {
	c.Primary = true
	return c
}

func TestVerdict_ErrorRateWinnerWhenTheOtherSideIsAllZeros(t *testing.T) {
	t.Parallel()
	// prequal fails 1% of requests, round-robin none: the ratio
	// prequal/round-robin is infinite, and round-robin must win.
	errs := []float64{0.010, 0.012, 0.011, 0.013, 0.009, 0.0105}
	zeros := make([]float64, 6)
	c := judged(t, "error_rate", errs, zeros)
	if c.Outcome != OutcomeBetter || c.Winner != "round-robin" {
		t.Fatalf("outcome %q winner %q, want round-robin better: %s", c.Outcome, c.Winner, c.Verdict)
	}
	if !math.IsInf(float64(c.Ratio), 1) || !(float64(c.Lo) > 1) {
		t.Errorf("ratio %v [%v, %v], want +Inf with an interval above 1", c.Ratio, c.Lo, c.Hi)
	}
	if !strings.Contains(c.Verdict, "**round-robin better**") {
		t.Errorf("verdict %q", c.Verdict)
	}
	// And the mirror image: prequal all zeros wins.
	c = judged(t, "error_rate", zeros, errs)
	if c.Outcome != OutcomeBetter || c.Winner != "prequal" {
		t.Fatalf("mirror: outcome %q winner %q: %s", c.Outcome, c.Winner, c.Verdict)
	}
}

func TestVerdict_SignificantButInsideMinEffectIsNoMeaningfulDifference(t *testing.T) {
	t.Parallel()
	// The case: p99.9 801.8 vs 804.0 ms, fully separated.
	ref := []float64{801.8, 801.9, 801.7, 801.8, 801.85, 801.75}
	alt := []float64{804.0, 804.1, 803.9, 804.05, 804.0, 803.95}
	c := judged(t, "p999_ms", ref, alt)
	if !c.Significant || c.Outcome != OutcomeNoMeaningful || c.Winner != "" {
		t.Fatalf("significant %v outcome %q winner %q, want significant, no meaningful difference: %s", c.Significant, c.Outcome, c.Winner, c.Verdict)
	}
	if !strings.Contains(c.Verdict, "inside ±5%") {
		t.Errorf("verdict %q does not give the reason", c.Verdict)
	}
	// 20% lower is a winner.
	for i := range alt {
		alt[i] = ref[i] * 1.25
	}
	c = judged(t, "p999_ms", ref, alt)
	if c.Outcome != OutcomeBetter || c.Winner != "prequal" {
		t.Fatalf("25%% slower: outcome %q winner %q: %s", c.Outcome, c.Winner, c.Verdict)
	}
	// A wider minimum effect (30%) swallows it again.
	o := opts(t)
	o.MinEffect = 0.3
	cs := []Comparison{primary(compare("prequal", "round-robin", metricByKey("p999_ms"), ref, alt, 1, o))}
	decide(cs, o)
	if cs[0].Outcome != OutcomeNoMeaningful || !strings.Contains(cs[0].Verdict, "±30%") {
		t.Errorf("min effect 30%%: %q: %s", cs[0].Outcome, cs[0].Verdict)
	}
}

func TestVerdict_HolmOverTheReportDecides(t *testing.T) {
	t.Parallel()
	// 6 vs 6 fully separated: raw p = 2/924 = 0.00216. Alone it is
	// significant; in a family of 24 tests Holm multiplies it by 24 (0.052).
	ref := []float64{10, 11, 12, 13, 14, 15}
	alt := []float64{20, 21, 22, 23, 24, 25}
	if c := judged(t, "p99_ms", ref, alt); c.Outcome != OutcomeBetter {
		t.Fatalf("alone: %s", c.Verdict)
	}
	o := opts(t)
	var noise []Comparison
	for range 23 {
		noise = append(noise, primary(compare("prequal", "p2c", metricByKey("p99_ms"), ref, ref, 1, o)))
	}
	c := judged(t, "p99_ms", ref, alt, noise...)
	if want := 24 * 2.0 / 924; math.Abs(float64(c.AdjustedP)-want) > 1e-12 {
		t.Errorf("adjusted p = %v, want %v", c.AdjustedP, want)
	}
	if c.Significant || c.Outcome != OutcomeNotSignificant {
		t.Fatalf("in a family of 24: %s", c.Verdict)
	}
}

func TestVerdict_DaggerBelowFiveRunsPerSideAndUnreachableAlpha(t *testing.T) {
	t.Parallel()
	c := judged(t, "p99_ms", []float64{10, 11, 12, 13}, []float64{20, 21, 22, 23, 24})
	if !c.Small || !strings.Contains(c.Verdict, "]†") {
		t.Errorf("4 vs 5 runs: small %v, verdict %q, want †", c.Small, c.Verdict)
	}
	c = judged(t, "p99_ms", []float64{10, 11, 12, 13, 14}, []float64{20, 21, 22, 23, 24})
	if c.Small || strings.Contains(c.Verdict, "†") {
		t.Errorf("5 vs 5 runs: small %v, verdict %q, want no †", c.Small, c.Verdict)
	}
	// 2 vs 6 cannot reach 0.05 (smallest p 2/28); 3 vs 5 can (2/56).
	c = judged(t, "p99_ms", []float64{10, 11}, []float64{20, 21, 22, 23, 24, 25})
	if !strings.Contains(c.Verdict, "cannot reach") {
		t.Errorf("2 vs 6: %q", c.Verdict)
	}
	c = judged(t, "p99_ms", []float64{10, 11, 12}, []float64{20, 21, 22, 23, 24})
	if c.Outcome != OutcomeBetter {
		t.Errorf("3 vs 5 fully separated: %q", c.Verdict)
	}
}

func TestVerdict_IdenticalRunsStayOutOfTheHolmFamily(t *testing.T) {
	t.Parallel()
	// Goodput exactly at target in every run of both sides says nothing and
	// can never reject: it must not dilute the real test.
	o := opts(t)
	same := []float64{440, 440, 440, 440, 440, 440}
	var flat []Comparison
	for range 20 {
		flat = append(flat, primary(compare("prequal", "p2c", metricByKey("goodput_rps"), same, same, 1, o)))
	}
	c := judged(t, "p99_ms", []float64{10, 11, 12, 13, 14, 15}, []float64{20, 21, 22, 23, 24, 25}, flat...)
	if math.Abs(float64(c.AdjustedP)-2.0/924) > 1e-12 || c.Outcome != OutcomeBetter {
		t.Errorf("adjusted p %v outcome %q, want the raw 2/924 and a winner", c.AdjustedP, c.Outcome)
	}
	cs := []Comparison{flat[0]}
	decide(cs, o)
	if cs[0].Outcome != OutcomeSame || !strings.Contains(cs[0].Verdict, "same goodput in every run") {
		t.Errorf("identical: %q %s", cs[0].Outcome, cs[0].Verdict)
	}
}

func TestVerdict_FamilyWarningSaysTheRunsNeeded(t *testing.T) {
	t.Parallel()
	// Six latency tests at 4 vs 4: the smallest p (2/70 = 0.029) is above
	// 0.05/6, and 5 runs per side (2/252 = 0.0079) would pass.
	o := opts(t)
	var cs []Comparison
	for _, alg := range []string{"round-robin", "least-request"} {
		for _, m := range []string{"p50_ms", "p99_ms", "p999_ms"} {
			cs = append(cs, primary(compare("prequal", alg, metricByKey(m), []float64{1, 2, 3, 4}, []float64{5, 6, 7, 8}, 1, o)))
		}
	}
	_, family := decide(cs, o)
	for _, want := range []string{"6 primary comparisons", "0.029", "5 valid runs per algorithm can"} {
		if !strings.Contains(family, want) {
			t.Errorf("family warning lacks %q: %s", want, family)
		}
	}
	if !strings.Contains(cs[0].Verdict, "cannot pass the Holm correction over 6 tests") {
		t.Errorf("verdict %q", cs[0].Verdict)
	}
}

func TestVerdict_FasterSideThatFailsMoreIsNoWinner(t *testing.T) {
	t.Parallel()
	// round-robin's pessimistic p99 is far lower, but it fails 0.5% of its
	// requests against prequal's none: below p99, so the pessimistic p99
	// does not see them; the verdict must not name round-robin.
	o := opts(t)
	c := primary(compare("prequal", "round-robin", metricByKey("pessimistic_p99_ms"),
		[]float64{100, 101, 102, 103, 104, 105}, []float64{50, 51, 52, 53, 54, 55}, 1, o))
	c.RefErrorRate, c.OtherErrorRate = 0, 0.005
	cs := []Comparison{c}
	decide(cs, o)
	if cs[0].Outcome != OutcomeFailsMore || cs[0].Winner != "" || !strings.Contains(cs[0].Verdict, "fails more requests") {
		t.Fatalf("outcome %q winner %q: %s", cs[0].Outcome, cs[0].Winner, cs[0].Verdict)
	}
	// Equal error rates: the faster side wins.
	c.OtherErrorRate = 0
	cs = []Comparison{c}
	decide(cs, o)
	if cs[0].Outcome != OutcomeBetter || cs[0].Winner != "round-robin" {
		t.Fatalf("equal error rates: outcome %q winner %q: %s", cs[0].Outcome, cs[0].Winner, cs[0].Verdict)
	}
}

func TestVerdict_OnlyPrimaryComparisonsAreTested(t *testing.T) {
	t.Parallel()
	o := opts(t)
	sep := func(m string) Comparison {
		return compare("prequal", "round-robin", metricByKey(m), []float64{10, 11, 12, 13, 14, 15}, []float64{20, 21, 22, 23, 24, 25}, 1, o)
	}
	cs := []Comparison{primary(sep("pessimistic_p99_ms")), sep("p50_ms"), sep("p99_ms"), sep("p999_ms")}
	decide(cs, o)
	// Alone in its family: the raw p, not multiplied by 4.
	if math.Abs(float64(cs[0].AdjustedP)-2.0/924) > 1e-12 || cs[0].Outcome != OutcomeBetter {
		t.Fatalf("primary: adjusted p %v outcome %q", cs[0].AdjustedP, cs[0].Outcome)
	}
	for _, c := range cs[1:] {
		if c.Outcome != OutcomeDescriptive || c.Winner != "" || strings.Contains(c.Verdict, "better") || strings.Contains(c.Verdict, "p =") {
			t.Errorf("%s: outcome %q winner %q verdict %q, want descriptive with no verdict words", c.Metric, c.Outcome, c.Winner, c.Verdict)
		}
	}
}
