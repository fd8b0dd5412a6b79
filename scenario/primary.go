package scenario

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prequalbench/prequalbench/stats"
)

// Primary metrics a scenario can declare (protocol.primaryMetric): the one
// metric whose comparisons get verdicts. Each counts failures, so a policy
// cannot win by failing fast: the pessimistic percentiles put every failed
// request at the request timeout, goodput counts successes only, and the
// error rate is the failures themselves.
const (
	MetricPessimisticP99  = "pessimistic_p99_ms"
	MetricPessimisticP999 = "pessimistic_p999_ms"
	MetricGoodput         = "goodput_rps"
	MetricErrorRate       = "error_rate"
	// PrimaryNone declares a descriptive scenario (a soak): no verdicts,
	// every comparison is shown with its interval only.
	PrimaryNone = "none"
)

// DefaultPrimaryMetric is the primary metric of a scenario that names none.
const DefaultPrimaryMetric = MetricPessimisticP99

// PrimaryMetrics lists the values protocol.primaryMetric accepts.
var PrimaryMetrics = []string{MetricPessimisticP99, MetricPessimisticP999, MetricGoodput, MetricErrorRate, PrimaryNone}

// successLatency are metric names a user may reach for that leave failures
// out: a policy shedding half its requests at once would win on them.
var successLatency = []string{"p50_ms", "p99_ms", "p999_ms"}

// VerdictAlpha is the significance level the reps are chosen against.
const VerdictAlpha = 0.05

// RepsForVerdict is the fewest reps per algorithm with which a campaign of
// the given number of algorithms can reach a verdict: the primary
// comparisons (each algorithm against the reference) form the Holm family,
// whose first test must be able to go below alpha/family. 0 when no
// comparison is made (one algorithm).
func RepsForVerdict(algorithms int) int {
	if algorithms < 2 {
		return 0
	}
	return stats.RunsPerSide(algorithms-1, VerdictAlpha)
}

// defaultReps is the reps of a scenario that names none: enough for a
// verdict, and never fewer than 3.
func defaultReps(algorithms int) int {
	return max(3, RepsForVerdict(algorithms))
}

func (v *validator) primaryMetric(p *Protocol) {
	switch {
	case slices.Contains(PrimaryMetrics, p.PrimaryMetric):
	case slices.Contains(successLatency, p.PrimaryMetric):
		v.add("protocol.primaryMetric", "got %q, a latency of successes only: a policy that fails fast would win on it; want one that counts failures: %s",
			p.PrimaryMetric, strings.Join(PrimaryMetrics, ", "))
	default:
		v.add("protocol.primaryMetric", "got %q, want one of %s", p.PrimaryMetric, strings.Join(PrimaryMetrics, ", "))
	}
}

// closedLoopGoodput refuses goodput as the primary metric of a closed
// loop: with no target rate, an instant failure frees its user at once,
// so a policy that sheds half its requests raises its successes per
// second.
func (v *validator) closedLoopGoodput(s *Scenario) {
	if s.Protocol.PrimaryMetric == MetricGoodput && len(s.Load.Open) == 0 && (s.Load.Users > 0 || s.Load.Duration != "") {
		v.add("protocol.primaryMetric", "got %q with a closed-loop load (load.users): a policy that fails fast frees its users sooner and raises its goodput; want an open-loop load (load.open) or %s",
			MetricGoodput, MetricPessimisticP99)
	}
}

// RepsShortfall says why a protocol's reps cannot reach a verdict on its
// primary metric, or "" when they can (or it makes no verdicts).
func RepsShortfall(p Protocol) string {
	need := RepsForVerdict(len(p.Algorithms))
	if p.PrimaryMetric == PrimaryNone || need == 0 || p.Reps >= need {
		return ""
	}
	return fmt.Sprintf("%d reps per algorithm cannot reach a verdict: %d algorithms make %d primary comparisons against %s, and the Holm correction over them needs %d valid runs per algorithm (%d vs %d runs give p ≥ %.3g)",
		p.Reps, len(p.Algorithms), len(p.Algorithms)-1, p.Reference, need, p.Reps, p.Reps, stats.MinP(p.Reps, p.Reps))
}
