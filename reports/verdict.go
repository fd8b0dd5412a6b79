package reports

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/prequalbench/prequalbench/stats"
)

// Outcomes of a comparison. Only OutcomeBetter names a winner: the
// difference is significant after the Holm correction over the report's
// family of tests and its bootstrap interval lies wholly outside the
// minimum effect.
const (
	OutcomeBetter         = "better"
	OutcomeNoMeaningful   = "no meaningful difference"
	OutcomeNotSignificant = "not significant"
	OutcomeSame           = "identical"
	OutcomeNoData         = "no data"
)

// compare tests ref against alg on one metric; decide completes it once
// every comparison of the report is known.
func compare(ref, alg string, m metric, rv, av []float64, seed uint64, o Options) Comparison {
	h := fnv.New64a()
	h.Write([]byte(ref + "\x00" + alg + "\x00" + m.Key))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	b := stats.BootstrapRatio(rv, av, o.Resamples, o.Confidence, rng)
	rm, am := stats.Median(rv), stats.Median(av)
	if len(rv) > 0 && len(av) > 0 && am == 0 && rm != 0 {
		// The ratio against a zero median is infinite, not undefined:
		// bootstrap the inverse, whose denominator is not zero, and invert
		// its interval (1/0 = +Inf keeps the order).
		inv := stats.BootstrapRatio(av, rv, o.Resamples, o.Confidence, rng)
		b.Ratio, b.Lo, b.Hi = math.Inf(1), 1/inv.Hi, 1/inv.Lo
	}
	u := stats.MannWhitneyU(rv, av, o.Alpha)
	// Every run of both sides gave the same value: the permutation
	// distribution is a single point (p = 1 whatever the labels), so the
	// test can never reject and stays out of the Holm family.
	identical := len(rv) > 0 && len(av) > 0
	for _, x := range append(slices.Clone(rv), av...) {
		identical = identical && x == rv[0]
	}
	return Comparison{Identical: identical, Algorithm: alg, Reference: ref, Metric: m.Key, Ratio: Num(b.Ratio), Lo: Num(b.Lo), Hi: Num(b.Hi),
		P: Num(u.P), Exact: u.Exact, MinP: Num(stats.MinP(len(rv), len(av))), Small: b.Small,
		NR: len(rv), NA: len(av), RefMedian: Num(rm), OtherMedian: Num(am), AdjustedP: Num(math.NaN())}
}

// decide applies the Holm correction over cs (the report's family of
// tests), then gives each comparison its outcome, winner and sentence. It
// returns the pairs whose run counts can never reach alpha, and a warning
// when the family is too large for any test to pass the correction.
func decide(cs []Comparison, o Options) (pairs []runIssue, family string) {
	ps := make([]float64, len(cs))
	tests := 0
	smallestMinP := math.Inf(1)
	for i, c := range cs {
		ps[i] = float64(c.P)
		if c.Identical {
			ps[i] = math.NaN()
		}
		if !math.IsNaN(ps[i]) {
			tests++
			smallestMinP = math.Min(smallestMinP, float64(c.MinP))
		}
	}
	adj := stats.Holm(ps)
	// Holm rejects nothing unless the smallest p of the family is below
	// alpha/family; when no test's run counts allow that, none can be
	// significant, whatever the data.
	familyBlocked := tests > 0 && smallestMinP*float64(tests) >= o.Alpha
	seen := map[string]bool{}
	for i := range cs {
		c := &cs[i]
		c.AdjustedP = Num(adj[i])
		c.Significant = !math.IsNaN(adj[i]) && adj[i] < o.Alpha
		m := metricByKey(c.Metric)
		c.Outcome, c.Winner, c.Verdict = judge(c, m, tests, familyBlocked, o)
		pair := c.Reference + " vs " + c.Algorithm
		if float64(c.MinP) >= o.Alpha && !seen[pair] {
			seen[pair] = true
			pairs = append(pairs, runIssue{issueCannotReach, pair,
				fmt.Sprintf("%d and %d valid runs, smallest possible p %s", c.NR, c.NA, fmtP(float64(c.MinP)))})
		}
	}
	if familyBlocked {
		family = fmt.Sprintf("**The Holm correction over this report's %d tests** needs a p below %s for the first significant difference; the smallest p these run counts can give is %s, so no difference in this report can be significant (%s)",
			tests, fmtP(o.Alpha/float64(tests)), fmtP(smallestMinP), runsNeeded(tests, o.Alpha))
	}
	return pairs, family
}

// judge returns the outcome, the winner and the sentence of one comparison.
func judge(c *Comparison, m metric, family int, familyBlocked bool, o Options) (outcome, winner, sentence string) {
	if c.NR == 0 || c.NA == 0 {
		return OutcomeNoData, "", fmt.Sprintf("%s %s vs %s: no data (%d vs %d valid runs)", c.Reference, m.Label, c.Algorithm, c.NR, c.NA)
	}
	ratio, lo, hi := float64(c.Ratio), float64(c.Lo), float64(c.Hi)
	rm, am := float64(c.RefMedian), float64(c.OtherMedian)
	if c.Identical {
		return OutcomeSame, "", fmt.Sprintf("%s and %s had the same %s in every run", c.Reference, c.Algorithm, m.Label)
	}
	var head string
	if m.Key == "error_rate" && (rm == 0 || am == 0) {
		// A ratio against zero says little; show the two rates.
		head = fmt.Sprintf("%s error rate is %s against %s's %s", c.Reference, fmtPct(rm), c.Algorithm, fmtPct(am))
	} else {
		head = fmt.Sprintf("%s %s is %s %s's", c.Reference, m.Label, fmtRatio(ratio), c.Algorithm)
		if !math.IsNaN(lo) {
			head += fmt.Sprintf(" [%s–%s]", fmtRatio(lo), fmtRatio(hi))
			if c.Small {
				head += "†"
			}
		}
	}
	head += fmt.Sprintf(", p = %s", fmtP(float64(c.P)))
	if family > 1 {
		head += fmt.Sprintf(" (Holm-adjusted %s)", fmtP(float64(c.AdjustedP)))
	}
	effect := fmtEffect(o.MinEffect)
	switch {
	case !c.Significant && float64(c.MinP) >= o.Alpha:
		return OutcomeNotSignificant, "", fmt.Sprintf("%s: not significant (%d vs %d runs cannot reach p < %.2g)", head, c.NR, c.NA, o.Alpha)
	case !c.Significant && familyBlocked:
		return OutcomeNotSignificant, "", fmt.Sprintf("%s: not significant (%d vs %d runs cannot pass the Holm correction over %d tests)", head, c.NR, c.NA, family)
	case !c.Significant:
		return OutcomeNotSignificant, "", fmt.Sprintf("%s: not significant", head)
	case rm == am:
		return OutcomeNoMeaningful, "", fmt.Sprintf("%s: no meaningful difference (equal medians)", head)
	case !stats.OutsideMinEffect(lo, hi, o.MinEffect):
		return OutcomeNoMeaningful, "", fmt.Sprintf("%s: no meaningful difference (significant, but the interval reaches inside ±%s)", head, effect)
	}
	// The winner follows the medians, never the ratio, which is infinite
	// or undefined when a side's median is 0.
	winner = c.Reference
	if (am < rm) == m.LowerBetter {
		winner = c.Algorithm
	}
	return OutcomeBetter, winner, fmt.Sprintf("%s: **%s better** (beyond ±%s)", head, winner, effect)
}

// fmtEffect prints a minimum effect such as 0.05 as "5%".
func fmtEffect(e float64) string {
	s := fmt.Sprintf("%.2f", 100*e)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + "%"
}

// runsNeeded says how many valid runs per algorithm a family of tests
// needs before its first test can pass the Holm correction.
func runsNeeded(tests int, alpha float64) string {
	n := stats.RunsPerSide(tests, alpha)
	if n == 0 {
		return fmt.Sprintf("more than %d valid runs per algorithm would be needed", stats.MaxRunsPerSide)
	}
	return fmt.Sprintf("%d valid runs per algorithm can", n)
}

// testedMetrics counts the metrics that get a verdict in a schema v2
// report, and alwaysTested those among them that vary in every real run
// (the latencies); goodput and error rate leave the family when they are
// the same in every run of both sides (all at the target, no errors).
func testedMetrics() (all, alwaysTested int) {
	for _, m := range metricsV2 {
		if !m.Tested {
			continue
		}
		all++
		if m.Key != "goodput_rps" && m.Key != "error_rate" {
			alwaysTested++
		}
	}
	return all, alwaysTested
}

// RepsWarning is said before a campaign runs when its reps per algorithm
// cannot give the report a verdict: every other algorithm is compared
// with the reference on each tested metric, and the Holm correction over
// that family needs more runs than reps for even the first test to pass.
// Empty when reps can (or with a single algorithm, which is not compared).
func RepsWarning(algorithms int, reference string, reps int, alpha float64) string {
	pairs := algorithms - 1
	if pairs <= 0 || reps <= 0 {
		return ""
	}
	all, latency := testedMetrics()
	most, least := pairs*all, pairs*latency
	needMost, needLeast := stats.RunsPerSide(most, alpha), stats.RunsPerSide(least, alpha)
	family := fmt.Sprintf("the report tests %d to %d differences (p50, p99 and p99.9, plus goodput and error rate unless they are the same in every run, for each of %d algorithm(s) against %s) and the Holm correction over them",
		least, most, pairs, reference)
	switch {
	case reps < needLeast:
		vary := ""
		if needMost != needLeast {
			vary = fmt.Sprintf(" (%d when goodput or error rate vary)", needMost)
		}
		return fmt.Sprintf("%d reps per algorithm cannot give any verdict: %s needs at least %d valid runs per algorithm%s; %d vs %d runs give p ≥ %s",
			reps, family, needLeast, vary, reps, reps, fmtP(stats.MinP(reps, reps)))
	case reps < needMost:
		return fmt.Sprintf("%d reps per algorithm give a verdict only if goodput and error rate are the same in every run: %s needs %d valid runs per algorithm when they vary",
			reps, family, needMost)
	}
	return ""
}
