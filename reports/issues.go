package reports

import (
	"fmt"
	"math"
	"path"
	"strings"

	"github.com/prequalbench/prequalbench/artifacts"
)

// runIssue is one thing a careful reader must know about one run. The
// report groups issues by kind, so a problem that hit every run is one line.
type runIssue struct {
	kind, run, detail string
}

// Issue kinds, in the order the report lists them.
const (
	issueFailed        = "failed runs, left out of every statistic"
	issueInvalid       = "invalid runs (their own validity check failed; reasons under Validity), left out of the headline and comparisons"
	issueUnverified    = "the reset before the run was not verified"
	issueUnderTarget   = "goodput under 99% of the target rate"
	issueUnderTargetV1 = "achieved rate under 99% of the target rate"
	issueSendLag       = "the load generator fell behind (send-lag p99 above max(5 ms, 1% of the run's p50))"
	issueLateV1        = "sends more than 1 ms late (at least 0.1% of sends)"
	issueConnCap       = "the connection cap bound (more than 0.1% of requests waited for a connection)"
	issueClamped       = "latencies clamped at the histogram's 60 s ceiling (their true value is higher)"
	issueOutstanding   = "requests still unanswered when the run stopped waiting (in no latency figure)"
	issueDropped       = "scheduled sends dropped (every load worker stuck for a whole timeout; in no latency or error figure)"
	issueErrors        = "requests failed"
	issueNoSuccess     = "no successful request: no success latency (left out of the latency figures; the error rate and the pessimistic view show the run)"
	issueNoSeries      = "no " + artifacts.TimeseriesFile + " (missing from the p99-over-time plot)"
	issueNoSnapshots   = "no ingress state snapshots (selection shares and probe counters missing)"
	issueCounterReset  = "an ingress counter went backwards inside the window (reset or restart): counts partial"
	issueNoPicks       = "no picks recorded between the snapshots"

	// Issues of an algorithm or of a pair of algorithms, not of a run.
	issueFewForCI    = "too few valid runs for a finite confidence interval of the median: cells show the min–max range (†)"
	issueCannotReach = "run counts that cannot reach p < α whatever the data: no difference between the pair can be significant"
	issueNoValidRun  = "no valid successful run: no statistics"
)

// nouns name what an issue kind counts, singular and plural.
var nouns = map[string][2]string{
	issueFewForCI:    {"algorithm", "algorithms"},
	issueCannotReach: {"pair", "pairs"},
	issueNoValidRun:  {"algorithm", "algorithms"},
}

var issueOrder = []string{issueFailed, issueInvalid, issueUnverified, issueUnderTarget, issueUnderTargetV1, issueSendLag,
	issueLateV1, issueConnCap, issueClamped, issueOutstanding, issueDropped, issueErrors, issueNoSuccess, issueNoSeries, issueNoSnapshots,
	issueCounterReset, issueNoPicks, issueNoValidRun, issueFewForCI, issueCannotReach}

// connCapTrace is the share of requests held back by the connection cap
// that counts as more than a trace.
const connCapTrace = 0.001

// runIssues lists one run's issues.
func runIssues(ds *dataset, r *runData) []runIssue {
	var out []runIssue
	add := func(kind, format string, args ...any) {
		out = append(out, runIssue{kind, r.Dir, fmt.Sprintf(format, args...)})
	}
	if !r.ok() {
		msg := r.Run.Error
		if msg == "" {
			msg = "no error recorded"
		}
		add(issueFailed, "%s", msg)
		return out
	}
	if ds.v2() && !r.Run.Validity.Valid {
		// The reasons are in the Validity section; the warning only counts.
		out = append(out, runIssue{issueInvalid, r.Dir, ""})
	}
	if !r.Run.ResetVerified {
		add(issueUnverified, "%s", r.Run.ResetDetail)
	}
	l := r.Run.Load
	pct := func(n, of uint64) float64 { return 100 * float64(n) / math.Max(1, float64(of)) }
	if ds.v2() {
		if l.TargetRate > 0 && l.Goodput < 0.99*l.TargetRate {
			add(issueUnderTarget, "%.1f of %.1f req/s, %.1f%%", l.Goodput, l.TargetRate, 100*l.Goodput/l.TargetRate)
		}
		if limit := math.Max(5, 0.01*l.Success.P50); l.SendLag.Count > 0 && l.SendLag.P99 > limit {
			add(issueSendLag, "send-lag p99 %s ms > %s ms", fmtMs(l.SendLag.P99), fmtMs(limit))
		}
		if l.Sent > 0 && float64(l.ConnCapBound) > connCapTrace*float64(l.Sent) {
			add(issueConnCap, "%d of %d requests, %.1f%%; connection-wait p99 %s ms; cap %d", l.ConnCapBound, l.Sent,
				pct(l.ConnCapBound, l.Sent), fmtMs(l.ConnWait.P99), l.ConnCap)
		}
		if l.Clamped > 0 {
			add(issueClamped, "%d", l.Clamped)
		}
		if l.Outstanding > 0 {
			add(issueOutstanding, "%d", l.Outstanding)
		}
	} else {
		if l.TargetRate > 0 && l.AchievedRate < 0.99*l.TargetRate {
			add(issueUnderTargetV1, "%.1f of %.1f req/s, %.1f%%", l.AchievedRate, l.TargetRate, 100*l.AchievedRate/l.TargetRate)
		}
		if l.LateSends > 0 && l.Sent > 0 && float64(l.LateSends) >= 0.001*float64(l.Sent) {
			add(issueLateV1, "%d of %d, %.2f%%", l.LateSends, l.Sent, pct(l.LateSends, l.Sent))
		}
	}
	if l.Dropped > 0 {
		add(issueDropped, "%d", l.Dropped)
	}
	if l.Errors > 0 {
		add(issueErrors, "%d of %d, %.2f%%%s", l.Errors, l.Sent, pct(l.Errors, l.Sent), statusSummary(l.StatusCodes))
	}
	if l.Sent > 0 && r.Hist != nil && r.Hist.TotalCount() == 0 {
		add(issueNoSuccess, "%d sent", l.Sent)
	}
	if r.Series == nil {
		out = append(out, runIssue{issueNoSeries, r.Dir, ""})
	}
	return out
}

// groupIssues prints one line per kind: the count of runs and each run
// with its detail, in plan order.
func groupIssues(issues []runIssue) []string {
	byKind := map[string][]runIssue{}
	for _, is := range issues {
		byKind[is.kind] = append(byKind[is.kind], is)
	}
	var out []string
	for _, kind := range issueOrder {
		list := byKind[kind]
		if len(list) == 0 {
			continue
		}
		var parts []string
		for _, is := range list {
			p := path.Base(is.run)
			if is.detail != "" {
				p += " (" + is.detail + ")"
			}
			parts = append(parts, p)
		}
		noun, ok := nouns[kind]
		if !ok {
			noun = [2]string{"run", "runs"}
		}
		n := noun[1]
		if len(list) == 1 {
			n = noun[0]
		}
		out = append(out, fmt.Sprintf("**%s** — %d %s: %s", capitalize(kind), len(list), n, strings.Join(parts, ", ")))
	}
	return out
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
