package reports_test

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/reports"
	"github.com/prequalbench/prequalbench/reports/reportstest"
)

func metricOf(t *testing.T, a *reports.Analysis, alg, key string) reports.MetricResult {
	t.Helper()
	for _, r := range a.Algorithms {
		if r.Algorithm != alg {
			continue
		}
		for _, m := range r.Metrics {
			if m.Metric == key {
				return m
			}
		}
	}
	t.Fatalf("no %s %s", alg, key)
	return reports.MetricResult{}
}

func TestAnalyze_InvalidRunsAreLeftOutWithTheirReasons(t *testing.T) {
	t.Parallel()
	spec := reportstest.Default(6)
	// Plan indexes 1 and 2 are rep 1 of both algorithms.
	spec.InvalidRuns = map[int][]string{1: {"host idle below 10% for 7 s of the window"}, 2: {"send-lag p99 38 ms > max(5 ms, 1% of p50)"}}
	a, err := reports.Analyze(fixture(t, spec), reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, alg := range a.Algorithms {
		if alg.Runs != 5 || alg.Invalid != 1 {
			t.Errorf("%s: %d runs, %d invalid, want 5 and 1", alg.Algorithm, alg.Runs, alg.Invalid)
		}
		if n := len(metricOf(t, a, alg.Algorithm, "p99_ms").Values); n != 5 {
			t.Errorf("%s p99 over %d runs, want 5", alg.Algorithm, n)
		}
	}
	for _, c := range a.Comparisons {
		if c.NR != 5 || c.NA != 5 {
			t.Errorf("%s compared %d vs %d runs, want 5 vs 5", c.Metric, c.NR, c.NA)
		}
	}
	joined := strings.Join(a.Warnings, "\n")
	if !strings.Contains(joined, "Invalid runs") || !strings.Contains(joined, "2 runs") {
		t.Errorf("warnings do not count the invalid runs:\n%s", joined)
	}
	if r := a.Runs[0]; r.Valid || len(r.Reasons) != 1 || r.Reasons[0] != "host idle below 10% for 7 s of the window" {
		t.Errorf("run 1: valid %v reasons %q, want invalid with its reason", r.Valid, r.Reasons)
	}
}

func TestBuild_TooFewValidRunsSaysTheComparisonCouldNotBeMade(t *testing.T) {
	t.Parallel()
	spec := reportstest.Default(3)
	dir := fixture(t, spec)
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(dir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	spec.InvalidRuns = map[int][]string{}
	for _, p := range c.Plan {
		if p.Algorithm == "prequal" {
			spec.InvalidRuns[p.Index] = []string{"host idle below 10% for 12 s of the window"}
		}
	}
	dir = fixture(t, spec)
	a, err := reports.Analyze(dir, reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Comparisons) != 0 || len(a.NotCompared) != 1 || !strings.Contains(a.NotCompared[0].Reason, "0 valid run(s) (3 invalid)") {
		t.Fatalf("comparisons %d, not compared %+v", len(a.Comparisons), a.NotCompared)
	}
	files, err := reports.Render(dir, reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	md := string(files[artifacts.ReportFile])
	for _, want := range []string{"**No ranking: the comparison could not be made.**", "3 of 6 finished runs are **invalid**"} {
		if !strings.Contains(md, want) {
			t.Errorf("REPORT.md lacks %q", want)
		}
	}
	if strings.Contains(md, "better**") {
		t.Error("REPORT.md ranks policies although the comparison could not be made")
	}
}

func TestAnalyze_FastFailingPolicyLosesOnGoodputNotHelpedByLatency(t *testing.T) {
	t.Parallel()
	spec := reportstest.Default(6)
	// round-robin's body is as fast as prequal's, but half its requests get
	// an instant 503.
	spec.Profiles["round-robin"] = reportstest.Profile{MedianMs: 20, TailMs: 60, TailFrac: 0.03, SlowShare: 1.0 / 3, ErrorRate: 0.5, FastFail: true}
	a, err := reports.Analyze(fixture(t, spec), reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if g := float64(metricOf(t, a, "round-robin", "goodput_rps").Median); g < 0.45*spec.TargetRate || g > 0.55*spec.TargetRate {
		t.Errorf("round-robin goodput %v, want about half of %v", g, spec.TargetRate)
	}
	for _, c := range a.Comparisons {
		switch {
		case c.Primary:
			// The primary metric (pessimistic p99) puts the instant 503s at
			// the timeout: prequal wins it.
			if c.Metric != "pessimistic_p99_ms" || c.Winner != "prequal" {
				t.Errorf("primary %s: winner %q, want prequal: %s", c.Metric, c.Winner, c.Verdict)
			}
		case c.Winner != "" || c.Outcome != reports.OutcomeDescriptive:
			t.Errorf("%s is not primary but has outcome %q winner %q: %s", c.Metric, c.Outcome, c.Winner, c.Verdict)
		}
	}
	if p := float64(metricOf(t, a, "round-robin", "pessimistic_p99_ms").Median); p < reportstest.TimeoutMs {
		t.Errorf("round-robin pessimistic p99 %v ms, want the timeout (%d ms)", p, reportstest.TimeoutMs)
	}
}

func TestBuild_SchemaV1RendersWithANote(t *testing.T) {
	t.Parallel()
	spec := reportstest.Default(4)
	spec.SchemaV1 = true
	dir := fixture(t, spec)
	files, err := reports.Render(dir, reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	md := string(files[artifacts.ReportFile])
	for _, want := range []string{"**Schema v1 artifacts.**", "throughput (req/s)", "Not recorded (schema v1)"} {
		if !strings.Contains(md, want) {
			t.Errorf("v1 REPORT.md lacks %q", want)
		}
	}
	if strings.Contains(md, "goodput (req/s)") {
		t.Error("v1 REPORT.md shows a goodput column")
	}
}

func TestBuild_NewerSchemaRefused(t *testing.T) {
	t.Parallel()
	dir := fixture(t, reportstest.Default(2))
	path := filepath.Join(dir, artifacts.CampaignFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), `"schema_version": 2`, `"schema_version": 9`, 1))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	err = reports.Build(dir, reports.Options{})
	if err == nil || !reports.IsBadInput(err) || !strings.Contains(err.Error(), "schema_version is 9") {
		t.Errorf("err = %v, want a bad-input error naming schema_version", err)
	}
}

func TestAnalyze_AWarningThatHitsEveryRunIsOneLine(t *testing.T) {
	t.Parallel()
	spec := reportstest.Default(4)
	spec.SendLagP99Ms = map[int]float64{}
	for i := 1; i <= 8; i++ {
		spec.SendLagP99Ms[i] = 40
	}
	a, err := reports.Analyze(fixture(t, spec), reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, w := range a.Warnings {
		if strings.Contains(w, "fell behind") {
			n++
			if !strings.Contains(w, "8 runs") {
				t.Errorf("line %q does not count 8 runs", w)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d send-lag warning lines, want 1:\n%s", n, strings.Join(a.Warnings, "\n"))
	}
}

func TestAnalyze_EmptyPercentileBlockIsUnavailableNotZero(t *testing.T) {
	t.Parallel()
	dir := fixture(t, reportstest.Default(4))
	path := filepath.Join(dir, "runs", artifacts.RunDirName(1, 1, firstAlg(t, dir)), artifacts.RunFile)
	var run artifacts.Run
	if err := artifacts.ReadJSON(path, &run); err != nil {
		t.Fatal(err)
	}
	run.Load.Pessimistic = artifacts.Percentiles{}
	run.Load.SendLag = artifacts.Percentiles{}
	if err := artifacts.WriteJSON(path, run); err != nil {
		t.Fatal(err)
	}
	a, err := reports.Analyze(dir, reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	row := a.Runs[0]
	if !math.IsNaN(float64(row.PessP99)) || !math.IsNaN(float64(row.SendLagP99)) {
		t.Errorf("empty blocks read as pessimistic p99 %v, send lag %v; want unavailable", row.PessP99, row.SendLagP99)
	}
	if m := metricOf(t, a, run.Algorithm, "pessimistic_p99_ms"); m.N != 3 || float64(m.Lo) == 0 {
		t.Errorf("pessimistic p99 over %d runs, low %v; want 3 runs and no 0", m.N, m.Lo)
	}
}

// A valid run in which every request failed has no success latency: its
// empty histogram must not read as 0 ms (the best latency there is) and
// make the algorithm look fast; it is left out of the latency figures and
// said so.
func TestAnalyze_RunWithoutSuccessHasNoSuccessLatency(t *testing.T) {
	t.Parallel()
	dir := fixture(t, reportstest.Default(6))
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(dir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	p := c.Plan[0]
	empty, err := artifacts.EncodeHistogram(artifacts.NewHistogram())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, p.Dir, artifacts.HistogramFile), empty, 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := reports.Analyze(dir, reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"p50_ms", "p99_ms", "p999_ms"} {
		m := metricOf(t, a, p.Algorithm, key)
		if len(m.Values) != 5 {
			t.Errorf("%s %s over %d runs, want 5 (the run without a success left out)", p.Algorithm, key, len(m.Values))
		}
		for _, v := range m.Values {
			if v == 0 {
				t.Errorf("%s %s has a 0 ms run", p.Algorithm, key)
			}
		}
	}
	joined := strings.Join(a.Warnings, "\n")
	if !strings.Contains(joined, "No successful request") || !strings.Contains(joined, p.Dir[strings.LastIndex(p.Dir, "/")+1:]) {
		t.Errorf("warnings do not name the run without a success:\n%s", joined)
	}
	if !strings.Contains(joined, "1 of "+p.Algorithm+"'s 6 valid runs had no success: its success-latency cells rest on 5 run(s)") {
		t.Errorf("warnings do not say the latency cells rest on fewer runs:\n%s", joined)
	}
}

// A policy whose own processes exhausted the host is said to be unable to
// serve the load here, its runs kept; invalid runs clustering in one
// policy are warned about; a campaign without host readings says "not
// checked", never that the host check passed.
func TestRender_AttributedValidity(t *testing.T) {
	t.Parallel()
	small := func() reportstest.Spec {
		s := reportstest.Default(4)
		s.Requests = 600 // the validity sentences are tested, not the statistics
		return s
	}
	spec := small()
	plan := planOf(t, fixture(t, spec)) // the same seed gives the same plan below
	sat := "this campaign's own processes (generator, ingress, backends) used 95% of the host (generator 10%, ingress 70%, backends 15%; median of the 5 s of the window's 20 without headroom): this load cannot be served by this campaign's own processes on this host"
	spec.SaturatedRuns = map[int]string{}
	for _, p := range plan {
		if p.Algorithm == "prequal" {
			spec.SaturatedRuns[p.Index] = sat
		}
	}
	dir := fixture(t, spec)
	a, err := reports.Analyze(dir, reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Algorithms[0].Runs != 4 || a.Algorithms[1].Runs != 4 {
		t.Fatalf("saturated runs dropped: %+v", a.Algorithms)
	}
	md := render(t, dir)
	top := strings.Join(strings.Split(md, "\n")[:min(40, strings.Count(md, "\n"))], "\n")
	for _, want := range []string{"**This campaign's own processes (generator, ingress, backends) exhausted the host** in 4 of prequal's 4 runs", "this load cannot be served by this setup on this host while prequal routes it",
		"Host headroom: passed in 4 run(s), exhausted by the campaign's own processes in 4 run(s)"} {
		if !strings.Contains(top, want) {
			t.Errorf("the first 40 lines lack %q:\n%s", want, top)
		}
	}

	// The ingress alone took the host: the policy is named.
	spec = small()
	spec.SaturatedRuns = map[int]string{}
	for _, p := range plan {
		if p.Algorithm == "prequal" {
			spec.SaturatedRuns[p.Index] = "the ingress, where the policy runs, used 92% of the host (generator 1%, ingress 90%, backends 1%; median of the 5 s of the window's 20 without headroom): this load cannot be served with this policy on this host"
		}
	}
	md = render(t, fixture(t, spec))
	if want := "**prequal's ingress exhausted the host** in 4 of its 4 runs"; !strings.Contains(md, want) || !strings.Contains(md, "cannot be served with prequal on this host") {
		t.Errorf("the report lacks %q naming the policy", want)
	}

	// Invalid runs all on round-robin: a survivorship warning.
	spec = small()
	spec.InvalidRuns = map[int][]string{}
	for _, p := range plan {
		if p.Algorithm == "round-robin" && p.Rep <= 2 {
			spec.InvalidRuns[p.Index] = []string{"host idle below 10% for 5 s of the window's 20 (at most 3 s allowed), with processes outside the campaign using up to 60% of the host"}
		}
	}
	md = render(t, fixture(t, spec))
	if !strings.Contains(md, "**Warning:** the invalid runs cluster in round-robin (2 of its 4 runs, against 0 of the other algorithms' 4 runs)") {
		t.Errorf("no cluster warning:\n%s", md[:min(len(md), 3000)])
	}

	// The simulator's runs have no host reading.
	spec = small()
	spec.HostUnchecked = true
	md = render(t, fixture(t, spec))
	if !strings.Contains(md, "Host headroom: not checked (no host CPU reading") || strings.Contains(md, "host headroom, generator on schedule") {
		t.Errorf("unchecked host not said:\n%s", md[:min(len(md), 3000)])
	}
}

func render(t *testing.T, dir string) string {
	t.Helper()
	files, err := reports.Render(dir, reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return string(files[artifacts.ReportFile])
}

func planOf(t *testing.T, dir string) []artifacts.PlannedRun {
	t.Helper()
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(dir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	return c.Plan
}
