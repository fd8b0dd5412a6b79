package reports_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/k6"
	"github.com/prequalbench/prequalbench/reports"
	"github.com/prequalbench/prequalbench/reports/reportstest"
)

// writeImport puts an imported run (as `prequalbench k6 import` writes
// it: run.json only, index 0) under dir/runs/NAME.
func writeImport(t *testing.T, dir, name string, marked bool) {
	t.Helper()
	r := artifacts.Run{
		PlannedRun: artifacts.PlannedRun{Algorithm: "nginx-rr", Dir: "runs/" + name},
		Status:     artifacts.StatusOK, ResetDetail: k6.ResetDetail,
		Load: artifacts.LoadResult{Model: "open", Duration: 10e9, Sent: 2000, Completed: 2000, Errors: 12, Succeeded: 1988,
			Goodput: 198.8, ErrorRate: 0.006, Success: artifacts.Percentiles{P50: 6.3, P90: 15, P99: 20.9, P999: 28.8, Max: 30.4, Count: 1988},
			Pessimistic: artifacts.Percentiles{P99: 21.7, Count: 2000}},
		Validity: artifacts.Validity{Reasons: []string{"imported from k6: percentiles are k6's trend estimates"}},
	}
	if marked {
		r.Imported = artifacts.ImportedK6
	}
	if err := artifacts.WriteJSON(filepath.Join(dir, "runs", name, artifacts.RunFile), r); err != nil {
		t.Fatal(err)
	}
}

// An imported k6 run (run.json only, outside the plan) is listed in its
// own section with its numbers and its recorded reasons (an old import's
// "trend estimates" among them, as recorded; the section's own heading
// and columns say k6's numbers, not estimates), and
// changes nothing else of the report: the headline, comparisons and
// verdicts are the measured runs' alone. An import written before the
// explicit marker (reset detail only) reads the same; a stray directory
// is still warned about.
func TestImportedRuns_OwnSectionOnly(t *testing.T) {
	t.Parallel()
	dir := fixture(t, reportstest.Default(4))
	plain, err := reports.Render(dir, reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeImport(t, dir, "k6-nginx-rr", true)
	writeImport(t, dir, "k6-legacy", false)
	if err := os.MkdirAll(filepath.Join(dir, "runs", "99-stray"), 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := reports.Render(dir, reports.Options{})
	if err != nil {
		t.Fatalf("report with an imported run: %v", err)
	}
	md := string(files[artifacts.ReportFile])
	start := strings.Index(md, "## Imported runs")
	if start < 0 {
		t.Fatalf("no imported-runs section:\n%s", md)
	}
	end := start + strings.Index(md[start:], "## Plots")
	section := md[start:end]
	for _, want := range []string{"leaves out DNS lookup and connect time", "coordinated omission is not corrected", "never valid",
		"| nginx-rr", "198.8", "20.9", "`runs/k6-nginx-rr`", "`runs/k6-legacy`", "  - imported from k6: percentiles are k6's trend estimates"} {
		if !strings.Contains(section, want) {
			t.Errorf("section lacks %q:\n%s", want, section)
		}
	}
	if own, _, _ := strings.Cut(section, "Why each is not valid"); strings.Contains(own, "estimate") || strings.Contains(own, "(est.)") ||
		!strings.Contains(own, "## Imported runs (k6's numbers, not measured by prequalbench)") || !strings.Contains(own, "p99 ms (k6)") {
		t.Errorf("the section's heading and columns should say k6's numbers, not estimates:\n%s", own)
	}
	if strings.Contains(md, "k6-nginx-rr is not in the campaign plan") || !strings.Contains(md, "runs/99-stray is not in the campaign plan") {
		t.Error("the warnings should name the stray directory only")
	}
	// Without the section and the stray warning, the report is the one
	// without imports, byte for byte.
	// The digests, which list the imported files too, are compared apart.
	rest := md[:start] + md[end:]
	rest = strings.Replace(rest, "- run directory runs/99-stray is not in the campaign plan and was ignored\n", "", 1)
	rest, _, _ = strings.Cut(rest, "## Artifact digests")
	p, _, _ := strings.Cut(string(plain[artifacts.ReportFile]), "## Artifact digests")
	if rest != p {
		t.Errorf("the import changed the rest of the report")
	}
	for name, b := range plain {
		if name != artifacts.ReportFile && !bytes.Equal(b, files[name]) {
			t.Errorf("the import changed %s", name)
		}
	}
	if err := reports.Build(dir, reports.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := reports.Check(dir, reports.Options{}); err != nil {
		t.Errorf("check after build: %v", err)
	}
	var js bytes.Buffer
	if err := reports.WriteJSON(&js, dir, reports.Options{}); err != nil || !strings.Contains(js.String(), `"imported": [`) {
		t.Errorf("JSON export lacks the imported runs (%v)", err)
	}
}

// An import put into the plan by hand (index 0, as the reviewer's
// campaign had it) is still read from its run.json alone and listed with
// the imported runs, with a warning, instead of failing on the missing
// histogram.hdr.
func TestImportedRuns_InThePlan(t *testing.T) {
	t.Parallel()
	dir := fixture(t, reportstest.Default(3))
	writeImport(t, dir, "k6-nginx-rr", true)
	p := filepath.Join(dir, artifacts.CampaignFile)
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(p, &c); err != nil {
		t.Fatal(err)
	}
	c.Plan = append(c.Plan, artifacts.PlannedRun{Algorithm: "nginx-rr", Dir: "runs/k6-nginx-rr"})
	if err := artifacts.WriteJSON(p, c); err != nil {
		t.Fatal(err)
	}
	files, err := reports.Render(dir, reports.Options{})
	if err != nil {
		t.Fatalf("report with an import in the plan: %v", err)
	}
	md := string(files[artifacts.ReportFile])
	if !strings.Contains(md, "## Imported runs") || !strings.Contains(md, "planned run runs/k6-nginx-rr was imported from k6, not measured") {
		t.Errorf("no imported section or warning:\n%s", md)
	}
}
