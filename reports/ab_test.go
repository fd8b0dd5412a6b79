package reports_test

import (
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/reports"
	"github.com/prequalbench/prequalbench/reports/reportstest"
)

// abSpec is an A/B campaign of prequal on two builds; the candidate's
// tail is tail times the baseline's.
func abSpec(reps int, tail float64) reportstest.Spec {
	s := reportstest.Default(reps)
	base := s.Profiles["prequal"]
	cand := base
	cand.TailMs *= tail
	s.Algorithms = []string{"prequal@99f0770", "prequal@073ab5d"}
	s.Profiles = map[string]reportstest.Profile{"prequal@99f0770": base, "prequal@073ab5d": cand}
	s.Builds = []artifacts.Build{
		{Name: "99f0770", Role: artifacts.BuildBaseline, IngressBin: "/cache/99f0770/prequalbench", Ref: "main~1", Revision: "99f0770aaaa"},
		{Name: "073ab5d", Role: artifacts.BuildCandidate, IngressBin: "/usr/local/bin/prequalbench", Revision: "073ab5dbbbb"},
	}
	return s
}

func abReport(t *testing.T, s reportstest.Spec) (string, *reports.Analysis) {
	t.Helper()
	dir := fixture(t, s)
	files, err := reports.Render(dir, reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := reports.Analyze(dir, reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return string(files[artifacts.ReportFile]), a
}

// A candidate whose tail is 40% longer is named the slower build, a
// regression, in the conclusion and at the terminal; the builds and
// where they came from are in the conclusion and the setup.
func TestAB_NamesTheSlowerBuild(t *testing.T) {
	t.Parallel()
	md, a := abReport(t, abSpec(8, 1.4))
	top := strings.Join(firstLines(md, 40), "\n")
	for _, want := range []string{
		"**A/B of two builds of the ingress**, both running prequal",
		"baseline **prequal@99f0770** (git ref main~1, commit 99f0770aaaa",
		"candidate **prequal@073ab5d** (commit 073ab5dbbbb",
		"**prequal@99f0770 is better than prequal@073ab5d.**",
		"**The candidate build prequal@073ab5d is slower** on the pessimistic p99, beyond the minimum effect (a regression).",
		"**What these runs can detect:** with 8 valid runs per side",
	} {
		if !strings.Contains(top, want) {
			t.Errorf("the conclusion lacks %q:\n%s", want, top)
		}
	}
	if !strings.Contains(md, "| Build (candidate) | 073ab5d: commit 073ab5dbbbb, binary /usr/local/bin/prequalbench") {
		t.Errorf("the setup does not list the candidate build")
	}
	v := strings.Join(reports.Verdicts(a), "\n")
	if !strings.Contains(v, "The candidate build prequal@073ab5d is slower") {
		t.Errorf("terminal verdicts lack the slower build:\n%s", v)
	}
}

// Two builds that behave the same are reported equal within what the
// runs can detect, with that size stated, and no build is named.
func TestAB_EqualBuildsAreEqualWithinWhatTheRunsDetect(t *testing.T) {
	t.Parallel()
	md, a := abReport(t, abSpec(8, 1))
	if a.Power == nil || !(float64(a.Power.Detectable) > 0.05) || a.Power.N != 8 || a.Power.Tests != 1 {
		t.Fatalf("power %+v, want 8 runs per side, 1 test, a detectable change beyond the 5%% band", a.Power)
	}
	top := strings.Join(firstLines(md, 40), "\n")
	if !strings.Contains(top, "**The builds are equal within what these runs can detect** (about ") || strings.Contains(top, "is slower") {
		t.Errorf("conclusion:\n%s", top)
	}
}
