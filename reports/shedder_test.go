package reports_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/reports"
	"github.com/prequalbench/prequalbench/reports/reportstest"
)

// The crafted shedders: a policy that answers part of its load
// with instant 503s and serves the rest faster than the reference must
// never win a verdict; the reference wins the primary metric, and no
// other metric names a winner.
func TestVerdict_CraftedShedderNeverWins(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		shed float64
	}{
		{"half instant 503s, successes twice as fast", 0.5},
		{"2% shed, faster successes", 0.02},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := reportstest.Default(6)
			// prequal sheds; round-robin (same body, same tail) serves all.
			spec.Profiles["round-robin"] = reportstest.Profile{MedianMs: 40, TailMs: 120, TailFrac: 0.03, SlowShare: 1.0 / 3}
			spec.Profiles["prequal"] = reportstest.Profile{MedianMs: 20, TailMs: 60, TailFrac: 0.03, SlowShare: 0.2, Probes: true,
				ErrorRate: tc.shed, FastFail: true}
			dir := fixture(t, spec)
			a, err := reports.Analyze(dir, reports.Options{})
			if err != nil {
				t.Fatal(err)
			}
			primaries := 0
			for _, c := range a.Comparisons {
				if c.Winner == "prequal" {
					t.Errorf("the shedder wins %s: %s", c.Metric, c.Verdict)
				}
				if c.Primary {
					primaries++
					if c.Outcome != reports.OutcomeBetter || c.Winner != "round-robin" {
						t.Errorf("primary %s: %q winner %q, want round-robin better: %s", c.Metric, c.Outcome, c.Winner, c.Verdict)
					}
				}
			}
			if primaries != 1 {
				t.Errorf("%d primary comparisons, want 1", primaries)
			}
			files, err := reports.Render(dir, reports.Options{})
			if err != nil {
				t.Fatal(err)
			}
			top := strings.Join(firstLines(string(files[artifacts.ReportFile]), 40), "\n")
			if !strings.Contains(top, "**round-robin is better than prequal.**") {
				t.Errorf("the first 40 lines do not conclude round-robin is better:\n%s", top)
			}
		})
	}
}

// A difference of a few failures in ten thousand requests against none is
// no difference (the case: one failure in 48,888): with the error
// rate as the primary metric there is no winner, and by default the error
// rate is descriptive and names none.
func TestVerdict_ZeroAgainstOneFailureIsNoWin(t *testing.T) {
	t.Parallel()
	spec := reportstest.Default(6)
	spec.Requests = 10000
	// About 3 failures per run on round-robin's side (0.03%), none on
	// prequal's: significant across 6 runs, inside the 0.1 pp floor.
	spec.Profiles["round-robin"] = reportstest.Profile{MedianMs: 20, TailMs: 60, TailFrac: 0.03, SlowShare: 0.2, ErrorRate: 3.0 / 10000}
	dir := fixture(t, spec)
	for _, primary := range []string{"", "error_rate"} {
		if primary != "" {
			// The same runs, with the error rate declared primary.
			var c artifacts.Campaign
			path := filepath.Join(dir, artifacts.CampaignFile)
			if err := artifacts.ReadJSON(path, &c); err != nil {
				t.Fatal(err)
			}
			c.PrimaryMetric = primary
			if err := artifacts.WriteJSON(path, c); err != nil {
				t.Fatal(err)
			}
		}
		a, err := reports.Analyze(dir, reports.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range a.Comparisons {
			if c.Metric != "error_rate" {
				continue
			}
			if c.Winner != "" || c.Outcome == reports.OutcomeBetter {
				t.Errorf("primary %q: error rate names a winner: %s", primary, c.Verdict)
			}
			if c.Primary != (primary == "error_rate") {
				t.Errorf("primary %q: error rate comparison primary = %v", primary, c.Primary)
			}
			if !strings.Contains(c.Verdict, " pp") {
				t.Errorf("error rate not compared in percentage points: %s", c.Verdict)
			}
		}
	}
}

func firstLines(s string, n int) []string {
	lines := strings.Split(s, "\n")
	return lines[:min(n, len(lines))]
}

// The report reads top-down: its conclusion, with a sentence per primary
// comparison, is within the first 40 lines, before the setup and tables.
func TestRender_ConclusionWithinFirst40Lines(t *testing.T) {
	t.Parallel()
	spec := reportstest.Default(6)
	spec.Algorithms = append(spec.Algorithms, "least-request")
	spec.Profiles["least-request"] = reportstest.Profile{MedianMs: 21, TailMs: 90, TailFrac: 0.03, SlowShare: 0.25}
	spec.Scenario = "fixture-three"
	files, err := reports.Render(fixture(t, spec), reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	md := string(files[artifacts.ReportFile])
	top := strings.Join(firstLines(md, 40), "\n")
	for _, want := range []string{"## Conclusion", "on the primary metric, **pessimistic p99**",
		"**prequal is better than round-robin.**", "**prequal is better than least-request.**", "Runs: 18 of 18 planned finished"} {
		if !strings.Contains(top, want) {
			t.Errorf("the first 40 lines lack %q:\n%s", want, top)
		}
	}
	if strings.Index(md, "## Conclusion") > strings.Index(md, "## Setup") {
		t.Error("the conclusion comes after the setup")
	}
}

func TestVerdicts_AreTheConclusionLines(t *testing.T) {
	t.Parallel()
	a, err := reports.Analyze(fixture(t, reportstest.Default(6)), reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v := reports.Verdicts(a)
	if len(v) != 2 || !strings.HasPrefix(v[0], "prequal is better than round-robin. prequal pessimistic p99 is") || strings.Contains(v[0], "**") ||
		!strings.HasPrefix(v[1], "What these runs can detect: with 6 valid runs per side") {
		t.Errorf("verdicts %q", v)
	}
}

// A policy that sheds 0.9% of its requests instantly in 2 of its 6 runs
// has a median per-run error rate of 0, but fails 0.3% of all it was sent:
// the fails-more guard pools the failures, so it does not win the
// pessimistic p99 (0.9% is below the 1% that p99 would see).
func TestVerdict_ShedderInAMinorityOfRunsDoesNotWin(t *testing.T) {
	t.Parallel()
	spec := reportstest.Default(6)
	p := spec.Profiles["prequal"]
	p.ErrorRate, p.FastFail, p.ErrorReps = 0.009, true, []int{1, 2}
	spec.Profiles["prequal"] = p
	a, err := reports.Analyze(fixture(t, spec), reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range a.Comparisons {
		if !c.Primary {
			continue
		}
		if c.Outcome != reports.OutcomeFailsMore || c.Winner != "" {
			t.Errorf("primary %s: %q winner %q, want %q: %s", c.Metric, c.Outcome, c.Winner, reports.OutcomeFailsMore, c.Verdict)
		}
		if r := float64(c.RefErrorRate); r < 0.002 || r > 0.004 {
			t.Errorf("prequal's error rate %v, want about 0.003 pooled over its runs", r)
		}
	}
}

// In a closed loop an instant 503 frees the connection at once, so a
// policy that sheds half its requests doubles its successes per second:
// on goodput it must not win either.
func TestVerdict_ClosedLoopShedderDoesNotWinGoodput(t *testing.T) {
	t.Parallel()
	spec := reportstest.Default(6)
	spec.TargetRate, spec.PrimaryMetric = 0, "goodput_rps"
	p := spec.Profiles["prequal"]
	p.ErrorRate, p.FastFail, p.RateFactor = 0.5, true, 4
	spec.Profiles["prequal"] = p
	a, err := reports.Analyze(fixture(t, spec), reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	primaries := 0
	for _, c := range a.Comparisons {
		if !c.Primary {
			continue
		}
		primaries++
		if c.Metric != "goodput_rps" || c.Outcome != reports.OutcomeFailsMore || c.Winner != "" ||
			!strings.Contains(c.Verdict, "prequal has more goodput but fails more requests") {
			t.Errorf("primary %s: %q winner %q, want %q: %s", c.Metric, c.Outcome, c.Winner, reports.OutcomeFailsMore, c.Verdict)
		}
	}
	if primaries != 1 {
		t.Errorf("%d primary comparisons, want 1", primaries)
	}
}
