package reports

import (
	"fmt"
	"io"
	"strings"

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
			fmt.Fprintf(w, "- **No verdict** for %s vs %s: %s.\n", ref, nc.Algorithm, nc.Reason)
		}
		fmt.Fprintln(w)
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

// validityConclusion says in a sentence or two how many runs the
// conclusion rests on and what the validity checks left out.
func validityConclusion(ds *dataset, a *Analysis) []string {
	finished, valid := 0, 0
	for _, r := range a.Runs {
		if r.Status == "ok" {
			finished++
			if r.Valid {
				valid++
			}
		}
	}
	s := fmt.Sprintf("Runs: %d of %d planned finished, %d of them valid and used.", finished, len(ds.Campaign.Plan), valid)
	if finished > valid {
		s += " Invalid runs are listed under Validity with their reasons."
	}
	return []string{s}
}
