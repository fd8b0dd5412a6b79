package reports_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/reports"
	"github.com/prequalbench/prequalbench/reports/reportstest"
)

// sweepSpec is a campaign that swept prequal's qrif over three values
// beside prequal and round-robin; the tail grows with qrif, so the p99
// medians must rise along the sweep.
func sweepSpec(reps int) reportstest.Spec {
	s := reportstest.Default(reps)
	s.Sweep = []string{"prequal:qrif=0.5,0.9,1"}
	s.Algorithms = []string{"prequal", "round-robin", "prequal{qrif=0.5}", "prequal{qrif=0.9}", "prequal{qrif=1}"}
	for alg, tail := range map[string]float64{"prequal{qrif=0.5}": 50, "prequal{qrif=0.9}": 120, "prequal{qrif=1}": 300} {
		p := s.Profiles["prequal"]
		p.TailMs, p.TailFrac = tail, 0.05
		s.Profiles[alg] = p
	}
	return s
}

func TestRender_SweepTableAndPlot(t *testing.T) {
	t.Parallel()
	dir := fixture(t, sweepSpec(4))
	a, err := reports.Analyze(dir, reports.Options{Resamples: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Sweeps) != 1 {
		t.Fatalf("sweeps = %+v, want one", a.Sweeps)
	}
	s := a.Sweeps[0]
	if s.Algorithm != "prequal" || s.Parameter != "qrif" || len(s.Points) != 3 {
		t.Fatalf("sweep = %+v", s)
	}
	var p99 []float64
	for i, want := range []string{"prequal{qrif=0.5}", "prequal{qrif=0.9}", "prequal{qrif=1}"} {
		pt := s.Points[i]
		if pt.Variant != want || pt.Runs != 4 || len(pt.Metrics) != 4 {
			t.Fatalf("point %d = %+v, want variant %s with 4 runs and 4 metrics", i, pt, want)
		}
		if pt.Metrics[3].Metric != "p99_ms" {
			t.Fatalf("point %d metric 3 = %s, want p99_ms", i, pt.Metrics[3].Metric)
		}
		p99 = append(p99, float64(pt.Metrics[3].Median))
	}
	if !(p99[0] < p99[1] && p99[1] < p99[2]) {
		t.Errorf("p99 along the sweep = %v, want rising with the planted tail", p99)
	}
	// Comparisons name the variants like any algorithm.
	compared := map[string]bool{}
	for _, c := range a.Comparisons {
		compared[c.Algorithm] = true
	}
	if !compared["prequal{qrif=1}"] || !compared["round-robin"] {
		t.Errorf("comparisons cover %v, want every variant and round-robin", compared)
	}

	files, err := reports.Render(dir, reports.Options{Resamples: 500})
	if err != nil {
		t.Fatal(err)
	}
	md := string(files[artifacts.ReportFile])
	for _, want := range []string{
		"## Sweeps",
		"### qrif of prequal",
		"|  0.5 | prequal{qrif=0.5} |          4 |",
		"![qrif of prequal](plots/sweep-1-qrif.svg)",
		"### prequal vs prequal{qrif=1}",
		"The values are not compared with one another", // the table's statistical caveat
	} {
		if !strings.Contains(md, want) {
			t.Errorf("REPORT.md lacks %q", want)
		}
	}
	svg := string(files["plots/sweep-1-qrif.svg"])
	if svg == "" {
		t.Fatalf("no sweep plot; files: %v", keys(files))
	}
	// A panel per metric, each with its legend: the sweep and the others.
	for _, label := range []string{"goodput (req/s)", "error rate (%)", "p50 (ms)", "p99 (ms)"} {
		if !strings.Contains(svg, ">"+label+"<") {
			t.Errorf("sweep plot lacks the axis %q", label)
		}
	}
	if n := len(regexp.MustCompile(`>round-robin<`).FindAllString(svg, -1)); n != 4 {
		t.Errorf("round-robin appears in %d legends, want 4 (one per panel)", n)
	}
	again, err := reports.Render(dir, reports.Options{Resamples: 500})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again["plots/sweep-1-qrif.svg"], files["plots/sweep-1-qrif.svg"]) || !bytes.Equal(again[artifacts.ReportFile], files[artifacts.ReportFile]) {
		t.Error("the same artifacts rendered different bytes")
	}
}

func TestCheck_SweepReportRebuildsByteForByte(t *testing.T) {
	t.Parallel()
	dir := fixture(t, sweepSpec(3))
	opts := reports.Options{Resamples: 300}
	if err := reports.Build(dir, opts); err != nil {
		t.Fatal(err)
	}
	if err := reports.Check(dir, opts); err != nil {
		t.Fatalf("check after build: %v", err)
	}
	path := filepath.Join(dir, artifacts.PlotsDir, "sweep-1-qrif.svg")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := reports.Check(dir, opts); err == nil || !strings.Contains(err.Error(), "sweep-1-qrif.svg") {
		t.Errorf("check after editing the sweep plot = %v, want an error naming it", err)
	}
}

func TestRender_SweepRunDirectoriesArePathSafe(t *testing.T) {
	t.Parallel()
	dir := fixture(t, sweepSpec(2))
	entries, err := os.ReadDir(filepath.Join(dir, artifacts.RunsDir))
	if err != nil {
		t.Fatal(err)
	}
	safe := regexp.MustCompile(`^[0-9]{2}-rep[0-9]+-[A-Za-z0-9._-]+$`)
	slugs := 0
	for _, e := range entries {
		if !safe.MatchString(e.Name()) {
			t.Errorf("run directory %q is not path-safe", e.Name())
		}
		if strings.HasSuffix(e.Name(), "-prequal_qrif-0.9") {
			slugs++
		}
	}
	if slugs != 2 {
		t.Errorf("%d directories for prequal{qrif=0.9}, want 2 named …-prequal_qrif-0.9", slugs)
	}
	// run.json keeps the canonical name.
	var run artifacts.Run
	matches, _ := filepath.Glob(filepath.Join(dir, artifacts.RunsDir, "*-prequal_qrif-0.9", artifacts.RunFile))
	if len(matches) == 0 {
		t.Fatal("no run.json for the variant")
	}
	if err := artifacts.ReadJSON(matches[0], &run); err != nil {
		t.Fatal(err)
	}
	if run.Algorithm != "prequal{qrif=0.9}" {
		t.Errorf("run.json algorithm = %q, want prequal{qrif=0.9}", run.Algorithm)
	}
}

func TestAnalyze_NoSweepNoSection(t *testing.T) {
	t.Parallel()
	dir := fixture(t, reportstest.Default(3))
	files, err := reports.Render(dir, reports.Options{Resamples: 300})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(files[artifacts.ReportFile]), "## Sweeps") {
		t.Error("a campaign without a sweep got a Sweeps section")
	}
	for name := range files {
		if strings.Contains(name, "sweep-") {
			t.Errorf("a campaign without a sweep got %s", name)
		}
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Schema v1 artifacts have throughput, not goodput, and no validity: the
// sweep's table and plot follow the headline.
func TestRender_SweepOfSchemaV1(t *testing.T) {
	t.Parallel()
	spec := sweepSpec(3)
	spec.SchemaV1 = true
	files, err := reports.Render(fixture(t, spec), reports.Options{Resamples: 300})
	if err != nil {
		t.Fatal(err)
	}
	md := string(files[artifacts.ReportFile])
	if !regexp.MustCompile(`\| qrif \| algorithm +\| runs \| +throughput \(req/s\) \|`).MatchString(md) {
		t.Errorf("v1 sweep table header wrong:\n%s", md[strings.Index(md, "## Sweeps"):])
	}
	if !strings.Contains(string(files["plots/sweep-1-qrif.svg"]), ">throughput (req/s)<") {
		t.Error("v1 sweep plot lacks the throughput panel")
	}
}

// A sweep given out of order (qrif 0.9, 0.5, 1) is drawn as markers with
// error bars, not as a line joining the values in the order given (which
// zigzagged and suggested a trend between values never run), and the
// plain prequal is a marker at its own qrif, 2^-0.25, not a dashed line
// across the range; the campaign's other algorithms stay dashed lines.
func TestRender_SweepPlotMarkersNotALine(t *testing.T) {
	t.Parallel()
	spec := sweepSpec(3)
	spec.Sweep = []string{"prequal:qrif=0.9,0.5,1"}
	files, err := reports.Render(fixture(t, spec), reports.Options{Resamples: 300})
	if err != nil {
		t.Fatal(err)
	}
	svg := string(files["plots/sweep-1-qrif.svg"])
	if svg == "" {
		t.Fatal("no sweep plot")
	}
	// The swept markers' colour is the first value's variant's, the
	// plain prequal's its own.
	swept := `stroke:#CC79A7` // prequal{qrif=0.9}, the campaign's 4th algorithm
	plain := `#0072B2`        // prequal, the 1st
	paths := regexp.MustCompile(`<path d="([^"]*)" style="([^"]*)"`).FindAllStringSubmatch(svg, -1)
	var markers, plainMarks, plainDashed int
	for _, p := range paths {
		d, style := p[1], p[2]
		if strings.Contains(style, swept) && strings.Count(d, "L") > 1 {
			t.Errorf("a line joins the swept values: %s", d)
		}
		if strings.Contains(style, "fill:#CC79A7") && strings.Contains(d, "A") {
			markers++
		}
		if strings.Contains(style, plain) {
			if strings.Contains(style, "dasharray") {
				plainDashed++
			} else if strings.Count(d, "L") == 2 && strings.HasSuffix(d, "Z") { // a triangle
				plainMarks++
			}
		}
	}
	// 3 values in 4 panels, plus a legend glyph per panel.
	if markers != 4*(3+1) {
		t.Errorf("%d circle markers of the swept values, want 16", markers)
	}
	if plainMarks != 4*(1+1) || plainDashed != 0 {
		t.Errorf("plain prequal: %d triangle markers (want 8: one per panel and its legend), %d dashed lines (want 0)", plainMarks, plainDashed)
	}
	if n := strings.Count(svg, ">prequal (qrif=0.8409)<"); n != 4 {
		t.Errorf("the plain prequal's legend appears %d times, want 4 (one per panel)", n)
	}
	if n := len(regexp.MustCompile(`>round-robin<`).FindAllString(svg, -1)); n != 4 {
		t.Errorf("round-robin appears in %d legends, want 4 (dashed, one per panel)", n)
	}
	md := string(files[artifacts.ReportFile])
	if !strings.Contains(md, "not joined") {
		t.Error("the sweep plot's caption does not say the markers are not joined")
	}
}

// A scenario that sets the swept parameter for every policy
// (ingress.policy.qrif) runs the plain algorithm at that value: its
// marker goes there, not at the default.
func TestRender_SweepPlainAlgorithmAtTheScenariosValue(t *testing.T) {
	t.Parallel()
	spec := sweepSpec(3)
	spec.ScenarioPolicyQRIF = 0.7
	files, err := reports.Render(fixture(t, spec), reports.Options{Resamples: 300})
	if err != nil {
		t.Fatal(err)
	}
	if svg := string(files["plots/sweep-1-qrif.svg"]); !strings.Contains(svg, ">prequal (qrif=0.7)<") {
		t.Error("the plain prequal is not labelled at the scenario's qrif 0.7")
	}
}

// A duration sweep sits at the durations' lengths, sorted by them.
func TestRender_SweepOfDurationsByLength(t *testing.T) {
	t.Parallel()
	spec := reportstest.Default(3)
	spec.Sweep = []string{"prequal-sync:timeout=3ms,500us,1ms"}
	spec.Algorithms = []string{"prequal", "prequal-sync", "prequal-sync{timeout=3ms}", "prequal-sync{timeout=500us}", "prequal-sync{timeout=1ms}"}
	for _, alg := range spec.Algorithms[1:] {
		spec.Profiles[alg] = spec.Profiles["prequal"]
	}
	files, err := reports.Render(fixture(t, spec), reports.Options{Resamples: 300})
	if err != nil {
		t.Fatal(err)
	}
	svg := string(files["plots/sweep-1-timeout.svg"])
	for _, want := range []string{">timeout (ms) of prequal-sync<", ">prequal-sync (timeout=3ms)<", ">prequal<"} {
		if !strings.Contains(svg, want) {
			t.Errorf("duration sweep plot lacks %q", want)
		}
	}
}
