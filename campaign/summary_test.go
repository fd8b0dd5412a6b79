package campaign

import (
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/artifacts"
)

func summaryRun(algo, status string, valid bool, goodput, p99 float64, errors uint64) artifacts.Run {
	return artifacts.Run{PlannedRun: artifacts.PlannedRun{Algorithm: algo}, Status: status,
		Validity: artifacts.Validity{Valid: valid},
		Load: artifacts.LoadResult{TargetRate: 100, Goodput: goodput, P99: p99, Sent: 1000, Errors: errors, Succeeded: 1000 - errors,
			AchievedRate: 1, SendLag: artifacts.Percentiles{P99: p99 / 100}}}
}

// The summary takes medians over valid runs only, as the report's
// headline does: an invalid run (host saturated) must not move them.
func TestSummarize_MediansOverValidRuns(t *testing.T) {
	runs := []artifacts.Run{
		summaryRun("a", "ok", true, 100, 10, 0), summaryRun("a", "ok", true, 98, 30, 20), summaryRun("a", "ok", true, 99, 20, 10),
		summaryRun("a", "ok", false, 10, 9000, 900), // invalid: left out
		summaryRun("b", "ok", true, 50, 5, 500), summaryRun("b", "ok", true, 52, 7, 480), summaryRun("b", "failed", false, 0, 0, 0),
	}
	got := Summarize([]string{"a", "b"}, runs)
	a, b := got[0], got[1]
	if a.OK != 4 || a.Valid != 3 || a.FromInvalid || a.Goodput != 99 || a.P99 != 20 || a.ErrorRate != 0.01 || a.SendLagP99 != 0.2 {
		t.Errorf("a = %+v", a)
	}
	if b.OK != 2 || b.Valid != 2 || b.Failed != 1 || b.Goodput != 51 || b.P99 != 6 || b.ErrorRate != 0.49 {
		t.Errorf("b = %+v", b)
	}
}

func TestWriteSummary_GoodputErrorsValidity(t *testing.T) {
	runs := []artifacts.Run{
		summaryRun("a", "ok", true, 99.5, 10, 5), summaryRun("a", "ok", true, 99.5, 10, 5),
		summaryRun("b", "ok", false, 40, 800, 600), summaryRun("b", "failed", false, 0, 0, 0),
		summaryRun("c", "failed", false, 0, 0, 0),
	}
	var w strings.Builder
	if err := WriteSummary(&w, Summarize([]string{"a", "b", "c"}, runs)); err != nil {
		t.Fatal(err)
	}
	out := w.String()
	for _, want := range []string{"goodput rps", "runs ok / valid", "send lag p99 ms",
		"99.5 of 100.0", "0.50%", "2 / 2",
		"1 / 0 (1 failed) *", "60.00%", "* no valid run",
		"0 / 0 (1 failed)"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	for _, gone := range []string{"throughput", "late "} {
		if strings.Contains(out, gone) {
			t.Errorf("summary still shows %q:\n%s", gone, out)
		}
	}
}

// A run that failed every request has no success latency: its empty
// histogram's 0 ms must not pull the median down or show as the best.
func TestSummarize_RunWithoutSuccessHasNoLatency(t *testing.T) {
	allFailed := summaryRun("a", "ok", true, 0, 0, 1000)
	runs := []artifacts.Run{allFailed, summaryRun("a", "ok", true, 90, 40, 100), summaryRun("a", "ok", true, 90, 60, 100),
		summaryRun("b", "ok", true, 0, 0, 1000)}
	got := Summarize([]string{"a", "b"}, runs)
	if got[0].P99 != 50 {
		t.Errorf("a: p99 %v, want 50 (the median of the runs with successes)", got[0].P99)
	}
	var w strings.Builder
	if err := WriteSummary(&w, got); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(w.String(), "\n") {
		if strings.Contains(line, " b ") && strings.Contains(line, "0.0 ") && !strings.Contains(line, "│ -") {
			t.Errorf("b failed every request but shows a latency: %s", line)
		}
	}
	if line := runLine(allFailed, 1, 14); !strings.Contains(line, "no success") || strings.Contains(line, "success p50") {
		t.Errorf("run line %q shows a latency for a run without a success", line)
	}
}
