package reports_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/reports"
	"github.com/prequalbench/prequalbench/reports/reportstest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fixture writes a campaign from spec into a fresh directory.
func fixture(t *testing.T, spec reportstest.Spec) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "campaign")
	if err := reportstest.Write(dir, spec); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestBuild_GoldenReport(t *testing.T) {
	t.Parallel()
	spec := reportstest.Default(6)
	spec.UnverifiedRuns = []int{3}
	spec.FailRuns = []int{12}
	spec.InvalidRuns = map[int][]string{5: {"host idle below 10% for 7 s of the window"}}
	spec.SendLagP99Ms = map[int]float64{7: 38}
	spec.ConnCapBound = map[int]uint64{2: 412, 4: 1}
	p := spec.Profiles["round-robin"]
	p.ErrorRate, p.RateFactor = 0.01, 0.95
	spec.Profiles["round-robin"] = p
	dir := fixture(t, spec)
	if err := reports.Build(dir, reports.Options{}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, artifacts.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "fixture-REPORT.md")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./reports/ -run Golden -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		gotPath := filepath.Join("testdata", "fixture-REPORT.got.md")
		_ = os.WriteFile(gotPath, got, 0o644)
		t.Fatalf("REPORT.md differs from %s; wrote %s (rerun with -update if the change is intended)", golden, gotPath)
	}
	for _, want := range []string{
		"## Headline", "## Comparisons against prequal", "p = ", "significant", "### prequal (6 runs)",
		"![", "(plots/latency-percentiles.svg)", "(plots/p99-over-time.svg)", "(plots/selection-shares.svg)",
		"Failed runs", "not verified", "Goodput under 99%", "Requests failed", "## Per-run appendix",
		"## Validity", "host idle below 10%", "send-lag p99 38.0 ms", "1 run: 02-rep1-round-robin (412 of 3000 requests",
	} {
		if !bytes.Contains(got, []byte(want)) {
			t.Errorf("REPORT.md lacks %q", want)
		}
	}
	for _, name := range []string{"latency-percentiles.svg", "p99-over-time.svg", "selection-shares.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, artifacts.PlotsDir, name))
		if err != nil || !bytes.Contains(b, []byte("<svg")) {
			t.Errorf("plot %s: err %v, svg %v", name, err, bytes.Contains(b, []byte("<svg")))
		}
	}
}

func TestRender_SameArtifactsSameBytes(t *testing.T) {
	t.Parallel()
	spec := reportstest.Default(4)
	a, err := reports.Render(fixture(t, spec), reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A second, independently written copy of the same campaign.
	b, err := reports.Render(fixture(t, spec), reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) || len(a) != 4 {
		t.Fatalf("rendered %d and %d files, want 4", len(a), len(b))
	}
	for name, x := range a {
		if !bytes.Equal(x, b[name]) {
			t.Errorf("%s differs between two renders", name)
		}
	}
}

func TestCheck_PassesAfterBuildFailsAfterOneByte(t *testing.T) {
	t.Parallel()
	spec := reportstest.Default(2)
	spec.Requests = 600 // small artifacts: the check, not the statistics, is tested
	// Every artifact file, whether the report reads it or not.
	for _, target := range []string{artifacts.HistogramFile, artifacts.RunFile, artifacts.PessimisticHistogramFile,
		artifacts.SendLagHistogramFile, artifacts.ConnWaitHistogramFile, artifacts.TimeseriesFile, artifacts.StateBefore} {
		t.Run(target, func(t *testing.T) {
			dir := fixture(t, spec)
			if err := reports.Build(dir, reports.Options{}); err != nil {
				t.Fatal(err)
			}
			if err := reports.Check(dir, reports.Options{}); err != nil {
				t.Fatalf("check right after build: %v", err)
			}
			path := filepath.Join(dir, "runs", artifacts.RunDirName(1, 1, firstAlg(t, dir)), target)
			flipOneByte(t, path, target)
			err := reports.Check(dir, reports.Options{})
			if err == nil {
				t.Fatalf("check passed after changing one byte of %s", path)
			}
			var ce *reports.CheckError
			if errors.As(err, &ce) && !strings.Contains(err.Error(), "REPORT.md") {
				t.Errorf("error %q does not name REPORT.md", err)
			}
			// A file the report decodes may fail to decode, naming its
			// path; otherwise the digests name it.
			rel := "runs/" + artifacts.RunDirName(1, 1, firstAlg(t, dir)) + "/" + target
			if !strings.Contains(err.Error(), "artifacts changed since the report was built: "+rel) && !strings.Contains(filepath.ToSlash(err.Error()), rel+":") {
				t.Errorf("error %q does not name the changed artifact", err)
			}
		})
	}
}

func TestCheck_NamesStrayAndMissingPlots(t *testing.T) {
	t.Parallel()
	dir := fixture(t, reportstest.Default(4))
	if err := reports.Build(dir, reports.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "plots", "p99-over-time.svg")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plots", "old.svg"), []byte("<svg/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := reports.Check(dir, reports.Options{})
	var ce *reports.CheckError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *CheckError", err)
	}
	if len(ce.Missing) != 1 || ce.Missing[0] != "plots/p99-over-time.svg" || len(ce.Stray) != 1 || ce.Stray[0] != "plots/old.svg" {
		t.Errorf("got %+v", ce)
	}
	// Build repairs both.
	if err := reports.Build(dir, reports.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := reports.Check(dir, reports.Options{}); err != nil {
		t.Errorf("check after rebuild: %v", err)
	}
}

func firstAlg(t *testing.T, dir string) string {
	t.Helper()
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(dir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	return c.Plan[0].Algorithm
}

// flipOneByte changes one byte that the report depends on: a digit of the
// goodput in run.json, or a character in the middle of the base64
// histogram.
func flipOneByte(t *testing.T, path, kind string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := len(b) / 2
	if kind == artifacts.RunFile {
		i = bytes.Index(b, []byte(`"goodput": `)) + len(`"goodput": `)
	}
	switch {
	case b[i] >= '0' && b[i] < '9':
		b[i]++
	case b[i] == '9':
		b[i] = '8'
	case b[i] == 'A':
		b[i] = 'B'
	default:
		b[i] = 'A'
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestBuild_BadDirectoryGivesClearError(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "nope")
	err := reports.Build(missing, reports.Options{})
	if err == nil || !reports.IsBadInput(err) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing dir: err = %v", err)
	}
	empty := t.TempDir()
	err = reports.Build(empty, reports.Options{})
	if err == nil || !reports.IsBadInput(err) || !strings.Contains(err.Error(), artifacts.CampaignFile) {
		t.Errorf("empty dir: err = %v", err)
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, artifacts.CampaignFile), []byte(`{"scenario": ""}`), 0o644); err != nil {
		t.Fatal(err)
	}
	err = reports.Build(bad, reports.Options{})
	if err == nil || !strings.Contains(err.Error(), "scenario") {
		t.Errorf("empty scenario: err = %v", err)
	}
	if err := reports.Build(fixture(t, reportstest.Default(2)), reports.Options{Confidence: 2}); err == nil || !strings.Contains(err.Error(), "confidence") {
		t.Errorf("bad confidence: err = %v", err)
	}
}

func TestAnalyze_NumbersAndSignificance(t *testing.T) {
	t.Parallel()
	a, err := reports.Analyze(fixture(t, reportstest.Default(6)), reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Algorithms) != 2 || a.Algorithms[0].Runs != 6 {
		t.Fatalf("algorithms = %+v", a.Algorithms)
	}
	var p99 *reports.Comparison
	for i := range a.Comparisons {
		if a.Comparisons[i].Metric == "pessimistic_p99_ms" {
			p99 = &a.Comparisons[i]
		}
	}
	if p99 == nil || !p99.Primary || p99.Winner != "prequal" || !p99.Significant || float64(p99.Ratio) > 0.3 || float64(p99.Hi) > 0.3 {
		t.Fatalf("p99 comparison = %+v, want prequal significantly lower (tail 60 vs 400 ms)", p99)
	}
	// 6 vs 6 with complete separation: exact p = 2/C(12,6).
	if want := 2.0 / 924; float64(p99.P) < want-1e-12 || float64(p99.P) > want+1e-12 {
		t.Errorf("p = %v, want %v", p99.P, want)
	}
	// Selection shares: prequal sends 20% to the slow group.
	sh := a.Shares[0]
	if sh.Algorithm != "prequal" || sh.Groups[0].Group != "fast" || sh.Groups[1].Group != "slow" {
		t.Fatalf("shares = %+v", sh)
	}
	if s := float64(sh.Groups[1].Share); s < 0.19 || s > 0.21 {
		t.Errorf("prequal slow share = %v, want ≈ 0.2", s)
	}
	if mm := float64(sh.Groups[0].MaxMin); mm < 2 {
		t.Errorf("prequal fast max/min = %v, want herding (> 2)", mm)
	}
	if float64(a.Shares[1].Groups[0].MaxMin) > 1.2 {
		t.Errorf("round-robin fast max/min = %v, want ≈ 1", a.Shares[1].Groups[0].MaxMin)
	}
	if a.Health[0].ProbesPlanned == 0 || a.Health[0].Fallbacks == 0 || a.Health[1].ProbesPlanned != 0 {
		t.Errorf("health = %+v", a.Health)
	}
	// The fixture's two ingress replicas run with reuse budgets 1 and 1.5.
	if h := a.Health[0]; h.ReuseBudgetMin != 1 || h.ReuseBudgetMax != 1.5 || h.StaleAnswers == 0 {
		t.Errorf("prequal reuse budget %v–%v, superseded answers %d; want 1–1.5 and some", h.ReuseBudgetMin, h.ReuseBudgetMax, h.StaleAnswers)
	}
	if h := a.Health[0]; h.SlowHeld == 0 {
		t.Errorf("prequal slow held = 0, want the window's delta")
	}
	if h := a.Health[1]; h.ReuseBudgetMax != 0 || h.StaleAnswers != 0 || h.SlowHeld != 0 {
		t.Errorf("round-robin reuse budget %v, superseded answers %d, slow held %d; want none", h.ReuseBudgetMax, h.StaleAnswers, h.SlowHeld)
	}
}

func TestAnalyze_FewRepsWarnAndAreNeverSignificant(t *testing.T) {
	t.Parallel()
	a, err := reports.Analyze(fixture(t, reportstest.Default(3)), reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range a.Comparisons {
		if c.Significant {
			t.Errorf("%s significant with 3 reps", c.Metric)
		}
	}
	joined := strings.Join(a.Warnings, "\n")
	if !strings.Contains(joined, "smallest possible p 0.100") {
		t.Errorf("warnings lack the few-reps warning:\n%s", joined)
	}
}

func TestWriteJSON_StableAndNullForUndefined(t *testing.T) {
	t.Parallel()
	dir := fixture(t, reportstest.Default(2))
	var a, b bytes.Buffer
	if err := reports.WriteJSON(&a, dir, reports.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := reports.WriteJSON(&b, dir, reports.Options{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two JSON exports differ")
	}
	var v map[string]any
	if err := json.Unmarshal(a.Bytes(), &v); err != nil {
		t.Fatalf("invalid JSON: %v", err)
	}
	if !bytes.HasPrefix(a.Bytes(), []byte("{\n  \"campaign\": {")) {
		t.Errorf("JSON does not start with the campaign block: %.60s", a.String())
	}
}

func BenchmarkRender_SixRepsTwoAlgorithms(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "c")
	if err := reportstest.Write(dir, reportstest.Default(6)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reports.Render(dir, reports.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// The scenario's warnings recorded in campaign.json are in the report.
func TestRender_ScenarioWarnings(t *testing.T) {
	t.Parallel()
	spec := reportstest.Default(3)
	spec.Warnings = []string{"wrr: its weights come into force up to 11s after each reset"}
	files, err := reports.Render(fixture(t, spec), reports.Options{Resamples: 300})
	if err != nil {
		t.Fatal(err)
	}
	md := string(files[artifacts.ReportFile])
	if !strings.Contains(md, "scenario: wrr: its weights come into force up to 11s after each reset") {
		t.Errorf("REPORT.md lacks the scenario's warning:\n%s", md[strings.Index(md, "## Warnings"):][:400])
	}
}
