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
// comparison is on the report's primary metric, the difference is
// significant after the Holm correction over the primary comparisons and
// its bootstrap interval lies wholly outside the minimum effect (relative
// for latencies, an absolute floor for rates). Every other metric's
// comparison is OutcomeDescriptive: an interval, no verdict.
const (
	OutcomeBetter         = "better"
	OutcomeNoMeaningful   = "no meaningful difference"
	OutcomeNotSignificant = "not significant"
	OutcomeSame           = "identical"
	OutcomeNoData         = "no data"
	OutcomeDescriptive    = "descriptive"
	// OutcomeFailsMore: the faster side on a latency fails more requests
	// (beyond the error-rate floor), so it is not named the winner.
	OutcomeFailsMore = "no verdict: the faster side fails more"
)

// Absolute floors of the rates: a difference of rates must exceed them,
// however large its ratio (one failure in 48,888 against none is an
// infinite ratio and no difference at all).
const (
	// errorRateFloor is 0.1 percentage point of requests.
	errorRateFloor = 0.001
	// goodputShareFloor is 1 percentage point of the target rate.
	goodputShareFloor = 0.01
)

// compare measures ref against alg on one metric. floor > 0 makes it a
// rate compared by its difference against that absolute floor; otherwise
// the ratio of medians is held against the relative minimum effect.
// decide completes it once every comparison of the report is known.
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
	nan := Num(math.NaN())
	c := Comparison{Identical: identical, Algorithm: alg, Reference: ref, Metric: m.Key, Ratio: Num(b.Ratio), Lo: Num(b.Lo), Hi: Num(b.Hi),
		P: Num(u.P), Exact: u.Exact, MinP: Num(stats.MinP(len(rv), len(av))), Small: b.Small,
		NR: len(rv), NA: len(av), RefMedian: Num(rm), OtherMedian: Num(am), AdjustedP: nan,
		Diff: nan, DiffLo: nan, DiffHi: nan, RefErrorRate: nan, OtherErrorRate: nan}
	if f := m.floor; f > 0 {
		d := stats.BootstrapDiff(rv, av, o.Resamples, o.Confidence, rng)
		c.Floor, c.Diff, c.DiffLo, c.DiffHi = f, Num(d.Diff), Num(d.Lo), Num(d.Hi)
	}
	return c
}

// decide applies the Holm correction over the primary comparisons (the
// report's family of tests), then gives each comparison its outcome,
// winner and sentence; the others are descriptive. It returns the pairs
// whose run counts can never reach alpha, and a warning when the family
// is too large for any test to pass the correction.
func decide(cs []Comparison, o Options) (pairs []runIssue, family string) {
	ps := make([]float64, len(cs))
	tests := 0
	smallestMinP := math.Inf(1)
	for i, c := range cs {
		ps[i] = float64(c.P)
		if c.Identical || !c.Primary {
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
		if !c.Primary {
			c.Outcome, c.Verdict = describe(c, m)
			continue
		}
		c.Outcome, c.Winner, c.Verdict = judge(c, m, tests, familyBlocked, o)
		pair := c.Reference + " vs " + c.Algorithm
		if float64(c.MinP) >= o.Alpha && !seen[pair] && c.NR > 0 && c.NA > 0 {
			seen[pair] = true
			pairs = append(pairs, runIssue{issueCannotReach, pair,
				fmt.Sprintf("%d and %d valid runs, smallest possible p %s", c.NR, c.NA, fmtP(float64(c.MinP)))})
		}
	}
	if familyBlocked {
		family = fmt.Sprintf("**The Holm correction over this report's %d primary comparisons** needs a p below %s for the first significant difference; the smallest p these run counts can give is %s, so no verdict in this report can be reached (%s)",
			tests, fmtP(o.Alpha/float64(tests)), fmtP(smallestMinP), runsNeeded(tests, o.Alpha))
	}
	return pairs, family
}

// head is a comparison's numbers: the ratio of medians with its interval,
// or for a rate the two medians and their difference with its interval.
func head(c *Comparison, m metric) string {
	rm, am := float64(c.RefMedian), float64(c.OtherMedian)
	if c.Floor > 0 {
		label := m.Label
		if m.Key == "goodput_rps" {
			label += " (share of the target)"
		}
		s := fmt.Sprintf("%s %s %s against %s's %s, difference %s", c.Reference, label, fmtRate01(rm), c.Algorithm, fmtRate01(am), fmtPP(float64(c.Diff)))
		if !math.IsNaN(float64(c.DiffLo)) {
			s += fmt.Sprintf(" [%s, %s]", fmtPP(float64(c.DiffLo)), fmtPP(float64(c.DiffHi)))
			if c.Small {
				s += "†"
			}
		}
		return s
	}
	if m.Key == "error_rate" && (rm == 0 || am == 0) {
		// A ratio against zero says little; show the two rates.
		return fmt.Sprintf("%s error rate is %s against %s's %s", c.Reference, fmtPct(rm), c.Algorithm, fmtPct(am))
	}
	s := fmt.Sprintf("%s %s is %s %s's", c.Reference, m.Label, fmtRatio(float64(c.Ratio)), c.Algorithm)
	if !math.IsNaN(float64(c.Lo)) {
		s += fmt.Sprintf(" [%s–%s]", fmtRatio(float64(c.Lo)), fmtRatio(float64(c.Hi)))
		if c.Small {
			s += "†"
		}
	}
	return s
}

// describe gives a descriptive comparison its sentence: the numbers and
// interval, no p-value and no verdict word.
func describe(c *Comparison, m metric) (outcome, sentence string) {
	switch {
	case c.NR == 0 || c.NA == 0:
		return OutcomeNoData, fmt.Sprintf("%s %s vs %s: no data (%d vs %d valid runs)", c.Reference, m.Label, c.Algorithm, c.NR, c.NA)
	case c.Identical:
		return OutcomeSame, fmt.Sprintf("%s and %s had the same %s in every run", c.Reference, c.Algorithm, m.Label)
	}
	return OutcomeDescriptive, head(c, m)
}

// fmtRate01 prints a fraction (error rate, share of target) as a percentage.
func fmtRate01(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.3g%%", 100*v)
}

// fmtPP prints a difference of fractions in percentage points, signed.
func fmtPP(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%+.3g pp", 100*v)
}

// judge returns the outcome, the winner and the sentence of a primary
// comparison.
func judge(c *Comparison, m metric, family int, familyBlocked bool, o Options) (outcome, winner, sentence string) {
	if c.NR == 0 || c.NA == 0 {
		return OutcomeNoData, "", fmt.Sprintf("%s %s vs %s: no data (%d vs %d valid runs)", c.Reference, m.Label, c.Algorithm, c.NR, c.NA)
	}
	rm, am := float64(c.RefMedian), float64(c.OtherMedian)
	if c.Identical {
		return OutcomeSame, "", fmt.Sprintf("%s and %s had the same %s in every run: no difference to test (a primary metric that saturates, such as a pessimistic percentile at the timeout under overload, cannot rank; declare protocol.primaryMetric goodput_rps for such a scenario)", c.Reference, c.Algorithm, m.Label)
	}
	hd := head(c, m) + fmt.Sprintf(", p = %s", fmtP(float64(c.P)))
	if family > 1 {
		hd += fmt.Sprintf(" (Holm-adjusted over %d primary comparisons: %s)", family, fmtP(float64(c.AdjustedP)))
	}
	effect := "±" + fmtEffect(o.MinEffect)
	outside := stats.OutsideMinEffect(float64(c.Lo), float64(c.Hi), o.MinEffect)
	if c.Floor > 0 {
		effect = "±" + fmtPP(float64(c.Floor))[1:]
		outside = stats.OutsideFloor(float64(c.DiffLo), float64(c.DiffHi), float64(c.Floor))
	}
	switch {
	case !c.Significant && float64(c.MinP) >= o.Alpha:
		return OutcomeNotSignificant, "", fmt.Sprintf("%s: not significant (%d vs %d runs cannot reach p < %.2g)", hd, c.NR, c.NA, o.Alpha)
	case !c.Significant && familyBlocked:
		return OutcomeNotSignificant, "", fmt.Sprintf("%s: not significant (%d vs %d runs cannot pass the Holm correction over %d tests)", hd, c.NR, c.NA, family)
	case !c.Significant:
		return OutcomeNotSignificant, "", fmt.Sprintf("%s: not significant", hd)
	case rm == am:
		return OutcomeNoMeaningful, "", fmt.Sprintf("%s: no meaningful difference (equal medians)", hd)
	case !outside:
		return OutcomeNoMeaningful, "", fmt.Sprintf("%s: no meaningful difference (significant, but the interval reaches inside %s)", hd, effect)
	}
	// The winner follows the medians, never the ratio, which is infinite
	// or undefined when a side's median is 0.
	winner, loser := c.Reference, c.Algorithm
	we, le := c.RefErrorRate, c.OtherErrorRate
	if (am < rm) == m.LowerBetter {
		winner, loser = c.Algorithm, c.Reference
		we, le = le, we
	}
	if m.Key != "error_rate" && float64(we)-float64(le) >= errorRateFloor {
		// A latency cannot be won by failing: whatever the metric's own
		// count of failures, the faster side that fails more is no winner.
		// Nor can goodput: in a closed loop an instant failure frees the
		// connection sooner, so shedding raises successes per second.
		better := "is faster"
		if m.Key == "goodput_rps" {
			better = "has more goodput"
		}
		return OutcomeFailsMore, "", fmt.Sprintf("%s: no verdict: %s %s but fails more requests (error rate %s against %s's %s, pooled over the valid runs)",
			hd, winner, better, fmtRate01(float64(we)), loser, fmtRate01(float64(le)))
	}
	return OutcomeBetter, winner, fmt.Sprintf("%s: **%s better** (beyond %s)", hd, winner, effect)
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
