package reports

import (
	"fmt"
	"math"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/stats"
)

// An A/B campaign (artifacts.Campaign.Builds) runs one policy on two
// builds of the ingress as two arms, "policy@build". Its comparison is the
// usual one, baseline arm as the reference; these lines say it in terms of
// builds: which one is faster, or that they are equal within what the
// runs can detect.

// abSetup says which builds ran, for the conclusion.
func abSetup(builds []artifacts.Build, policy string) string {
	if len(builds) != 2 {
		return ""
	}
	return fmt.Sprintf("**A/B of two builds of the ingress**, both running %s, interleaved run by run on one host: baseline **%s** (%s) against candidate **%s** (%s).",
		policy, artifacts.ArmLabel(policy, builds[0].Name), buildOrigin(builds[0]),
		artifacts.ArmLabel(policy, builds[1].Name), buildOrigin(builds[1]))
}

// buildOrigin is where a build came from: its ref and commit, else its
// binary.
func buildOrigin(b artifacts.Build) string {
	s := ""
	switch {
	case b.Ref != "":
		s = "git ref " + b.Ref + ", commit " + b.Revision
	case b.Revision != "" && b.Revision != "unknown":
		s = "commit " + b.Revision
	default:
		s = "revision unknown"
	}
	return s + ", binary " + b.IngressBin
}

// abVerdict is the A/B's outcome in a sentence: the slower build named,
// or the builds equal within what the runs detect. "" when the campaign
// is no A/B or made no primary comparison.
func abVerdict(a *Analysis) string {
	if len(a.Campaign.Builds) != 2 {
		return ""
	}
	for _, c := range a.Comparisons {
		if !c.Primary {
			continue
		}
		m := metricByKey(c.Metric)
		worse := "worse"
		if m.Unit == "ms" {
			worse = "slower"
		}
		switch c.Outcome {
		case OutcomeBetter:
			loser := c.Algorithm
			if c.Winner == c.Algorithm {
				loser = c.Reference
			}
			role := "candidate"
			if loser == c.Reference {
				role = "baseline"
			}
			return fmt.Sprintf("**The %s build %s is %s** on the %s, beyond the minimum effect (%s).", role, loser, worse, m.Label, regressionWord(role))
		case OutcomeNoData:
			return "**The builds could not be compared**: a side has no valid run."
		}
		if unreachable(c, a.Campaign.Alpha) {
			return fmt.Sprintf("**The builds could not be compared**: %d and %d valid runs, smallest possible p %s, so no difference can be significant whatever its size; add reps (see docs/ab.md).",
				c.NR, c.NA, fmtP(float64(c.MinP)))
		}
		if a.Power != nil && math.IsInf(float64(a.Power.Detectable), 1) {
			// "Equal within more than +200%" would read as a finding.
			return fmt.Sprintf("**No difference was named, and these runs could not have named one**: at their spread even a change of %s goes unnamed in most campaigns, so the builds are not shown equal; add reps (see below).",
				fmtEffect(stats.MaxDetectable))
		}
		within := ""
		if a.Power != nil {
			within = " (about " + fmtChange(float64(a.Power.Detectable)) + ", see below)"
		}
		return fmt.Sprintf("**The builds are equal within what these runs can detect**%s: no difference of the %s beyond the minimum effect was named.", within, m.Label)
	}
	return ""
}

func regressionWord(slowerRole string) string {
	if slowerRole == "candidate" {
		return "a regression"
	}
	return "an improvement"
}

// Gate is what an A/B campaign says about its candidate build.
type Gate struct {
	// AB is false for a campaign of one build.
	AB bool
	// Judged is false when the primary comparison could not be made (too
	// few valid runs, no data): nothing was measured, so nothing passed.
	Judged bool
	// Worse: the candidate was named worse than the baseline on the
	// primary metric, significant after Holm and beyond the minimum
	// effect, the same verdict as any other.
	Worse    bool
	Sentence string
}

// GateOf judges an A/B campaign's candidate build.
func GateOf(a *Analysis) Gate {
	if len(a.Campaign.Builds) != 2 {
		return Gate{}
	}
	g := Gate{AB: true, Sentence: abVerdict(a)}
	cannotReach := false
	for _, c := range a.Comparisons {
		if !c.Primary || c.Outcome == OutcomeNoData {
			continue
		}
		// Run counts that cannot reach alpha measure nothing either.
		if unreachable(c, a.Campaign.Alpha) {
			cannotReach = true
			continue
		}
		g.Judged = true
		g.Worse = g.Worse || (c.Outcome == OutcomeBetter && c.Winner == c.Reference)
	}
	if !g.Judged && !cannotReach {
		g.Sentence = "no primary comparison could be made"
		for _, nc := range a.NotCompared {
			g.Sentence = nc.Reason
		}
	}
	return g
}

// unreachable says a comparison's run counts cannot give a p below alpha
// whatever the data (3 vs 3 runs: 0.1): it measured nothing.
func unreachable(c Comparison, alpha float64) bool {
	return c.NR > 0 && c.NA > 0 && !(float64(c.MinP) < alpha)
}
