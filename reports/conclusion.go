package reports

import (
	"fmt"
	"io"
	"strings"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/scenario"
)

// writeConclusion is the report's first section: what was compared, on
// which metric, and per pair the verdict or why there is none, then what
// the validity checks found. Everything below it is the evidence.
func writeConclusion(w io.Writer, ds *dataset, a *Analysis) {
	fmt.Fprintf(w, "## Conclusion\n\n")
	ref := a.Campaign.Reference
	var others []string
	for _, alg := range a.Campaign.Algorithms {
		if alg != ref {
			others = append(others, alg)
		}
	}
	primary := a.Campaign.PrimaryMetric
	if len(a.Campaign.Builds) == 2 {
		policy, _ := artifacts.SplitArm(ref)
		fmt.Fprintf(w, "%s\n\n", abSetup(a.Campaign.Builds, policy))
	}
	switch {
	case len(others) == 0:
		fmt.Fprintf(w, "Only %s ran: nothing was compared.\n\n", ref)
	case primary == scenario.PrimaryNone:
		fmt.Fprintf(w, "%s against %s, descriptive only: this scenario declares no primary metric, so no verdict is made.\n\n",
			ref, strings.Join(others, ", "))
	default:
		fmt.Fprintf(w, "%s against %s on the primary metric, **%s** (%s); every other metric is descriptive.\n\n",
			ref, strings.Join(others, ", "), metricByKey(primary).Label, primaryMeaning(ds, primary))
		for _, c := range a.Comparisons {
			if c.Primary {
				fmt.Fprintf(w, "- %s\n", conclusionLine(c))
			}
		}
		for _, nc := range a.NotCompared {
			fmt.Fprintf(w, "- **No verdict**: %s.\n", nc.Reason)
		}
		fmt.Fprintln(w)
		if s := abVerdict(a); s != "" {
			fmt.Fprintf(w, "%s\n\n", s)
		}
		if a.Power != nil {
			fmt.Fprintf(w, "%s\n\n", a.Power.sentence())
		}
	}
	for _, s := range validityConclusion(ds, a) {
		fmt.Fprintf(w, "%s\n\n", s)
	}
}

// conclusionLine is one primary comparison in a sentence that starts with
// its outcome.
func conclusionLine(c Comparison) string {
	pair := c.Reference + " vs " + c.Algorithm
	switch c.Outcome {
	case OutcomeBetter:
		loser := c.Algorithm
		if c.Winner == c.Algorithm {
			loser = c.Reference
		}
		return fmt.Sprintf("**%s is better than %s.** %s", c.Winner, loser, c.Verdict)
	case OutcomeNoMeaningful:
		return fmt.Sprintf("**No meaningful difference** between %s and %s. %s", c.Reference, c.Algorithm, c.Verdict)
	default:
		return fmt.Sprintf("**No verdict** for %s. %s", pair, c.Verdict)
	}
}

// primaryMeaning says in words what the primary metric counts.
func primaryMeaning(ds *dataset, key string) string {
	timeout := "the request timeout"
	switch key {
	case scenario.MetricPessimisticP99, scenario.MetricPessimisticP999:
		return "every request, each failure counted at " + timeout + ", so failing fast cannot win"
	case scenario.MetricGoodput:
		return "successes per second; failures do not count"
	case scenario.MetricErrorRate:
		return "failed requests over all sent"
	case "p99_ms":
		if !ds.v2() {
			return "schema v1: every answer, failures at their own latency"
		}
	}
	return "median across valid runs"
}

// validityConclusion says in a few sentences how many runs the
// conclusion rests on, whose processes exhausted the host, whether the
// invalid runs cluster in one policy, and where the host went unchecked.
func validityConclusion(ds *dataset, a *Analysis) []string {
	finished, valid := 0, 0
	invalid := map[string]int{}
	saturated, runs := map[string]int{}, map[string]int{}
	checks := map[string]int{}
	for _, r := range a.Runs {
		if r.Status != "ok" {
			continue
		}
		finished++
		runs[r.Algorithm]++
		checks[r.HostCheck]++
		if r.Valid {
			valid++
		} else {
			invalid[r.Algorithm]++
		}
		if r.Saturation != "" {
			saturated[r.Algorithm]++
		}
	}
	s := fmt.Sprintf("Runs: %d of %d planned finished, %d of them valid and used.", finished, len(ds.Campaign.Plan), valid)
	if finished > valid {
		s += " Invalid runs are listed under Validity with their reasons."
	}
	out := []string{s}
	for _, alg := range a.Campaign.Algorithms {
		if n := saturated[alg]; n > 0 {
			first := firstSaturation(a, alg)
			// The policy is blamed only when its ingress alone took the
			// host; otherwise the generator and backends share the cost.
			if strings.Contains(first, "with this policy") {
				out = append(out, fmt.Sprintf("**%s's ingress exhausted the host** in %d of its %d runs (%s): this load cannot be served with %s on this host. Those runs are kept: what the policy costs is part of what it is.",
					alg, n, runs[alg], first, alg))
				continue
			}
			out = append(out, fmt.Sprintf("**This campaign's own processes (generator, ingress, backends) exhausted the host** in %d of %s's %d runs (%s): this load cannot be served by this setup on this host while %s routes it. Those runs are kept: what the campaign costs is part of the result.",
				n, alg, runs[alg], first, alg))
		}
	}
	if w := invalidCluster(invalid, runs, a.Campaign.Algorithms); w != "" {
		out = append(out, "**Warning:** "+w)
	}
	if ds.v2() {
		out = append(out, "Host headroom: "+hostChecks(checks)+".")
	}
	return out
}

// firstSaturation is the saturation sentence of alg's first saturated run.
func firstSaturation(a *Analysis, alg string) string {
	for _, r := range a.Runs {
		if r.Algorithm == alg && r.Saturation != "" {
			return "run " + fmt.Sprint(r.Index) + ": " + r.Saturation
		}
	}
	return ""
}

// invalidCluster warns when the invalid runs fall mostly on one policy:
// dropping them then leaves that policy's luckiest runs (survivorship).
// It names the algorithm with the highest invalid share when that share
// is at least clusterFactor times the other algorithms' pooled share and
// it has at least two invalid runs. A share of all the invalid runs would
// miss it among many algorithms: 3 of 6 for one and 1 of 6 for four
// others is not more than half of the invalid runs, but three times the
// others' rate.
func invalidCluster(invalid, runs map[string]int, algs []string) string {
	totalInvalid, totalRuns := 0, 0
	for _, alg := range algs {
		totalInvalid += invalid[alg]
		totalRuns += runs[alg]
	}
	worst, worstShare := "", 0.0
	for _, alg := range algs {
		n := invalid[alg]
		if n < 2 || runs[alg] == 0 {
			continue
		}
		share := float64(n) / float64(runs[alg])
		restInvalid, restRuns := totalInvalid-n, totalRuns-runs[alg]
		rest := 0.0
		if restRuns > 0 {
			rest = float64(restInvalid) / float64(restRuns)
		}
		if share >= clusterFactor*rest && share > worstShare {
			worst, worstShare = alg, share
		}
	}
	if worst == "" {
		return ""
	}
	n := invalid[worst]
	return fmt.Sprintf("the invalid runs cluster in %s (%d of its %d runs, against %d of the other algorithms' %d runs): its remaining runs may be its luckiest, so its numbers may look better than it is.",
		worst, n, runs[worst], totalInvalid-n, totalRuns-runs[worst])
}

// clusterFactor is how many times the other algorithms' invalid share an
// algorithm's must reach for the invalid runs to cluster in it.
const clusterFactor = 2

// hostChecks summarises the runs' host-headroom checks, saying "not
// checked" wherever no check ran.
func hostChecks(checks map[string]int) string {
	var parts []string
	for _, k := range []struct{ key, say string }{
		{artifacts.HostCheckPassed, "passed"},
		{artifacts.HostCheckSaturated, "exhausted by the campaign's own processes"},
		{artifacts.HostCheckOutside, "taken by outside processes (run invalid)"},
		{artifacts.HostCheckUnattributed, "exhausted, by whom unknown (run invalid)"},
		{artifacts.HostCheckSkipped, "skipped (host-bound scenario)"},
		{artifacts.HostCheckNotMeasured, "not checked (no host CPU reading; why under Validity)"},
		{"", "not recorded (artifacts older than the attributed check)"},
	} {
		if n := checks[k.key]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s in %d run(s)", k.say, n))
		}
	}
	if len(parts) == 0 {
		return "no finished run"
	}
	return strings.Join(parts, ", ")
}

// Verdicts are the conclusion's lines, one per pair compared with the
// reference on the primary metric (verdict or why there is none), for a
// terminal after a campaign: the same sentences REPORT.md opens with.
func Verdicts(a *Analysis) []string {
	var out []string
	if a.Campaign.PrimaryMetric == scenario.PrimaryNone {
		return []string{"no verdicts: the scenario declares no primary metric (descriptive campaign)"}
	}
	for _, c := range a.Comparisons {
		if c.Primary {
			out = append(out, strings.ReplaceAll(conclusionLine(c), "**", ""))
		}
	}
	for _, nc := range a.NotCompared {
		out = append(out, "No verdict: "+nc.Reason+".")
	}
	for _, s := range []string{abVerdict(a), powerSentence(a)} {
		if s != "" {
			out = append(out, strings.ReplaceAll(s, "**", ""))
		}
	}
	return out
}
