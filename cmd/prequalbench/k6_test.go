package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/reports/reportstest"
)

func TestK6ExportAndImport(t *testing.T) {
	code, js := runCLI(t, "k6", "export", "quickstart", "--base-url", "http://127.0.0.1:9")
	if code != 0 {
		t.Fatal(js)
	}
	if !strings.Contains(js, "import http from 'k6/http'") || !strings.Contains(js, `"executor": "constant-arrival-rate"`) {
		t.Errorf("export:\n%s", js)
	}
	dir := t.TempDir()
	code, out := runCLI(t, "k6", "import", filepath.Join("..", "..", "k6", "testdata", "summary.json"),
		"--algorithm", "round-robin", "--out", dir)
	if code != 0 {
		t.Fatal(out)
	}
	if !strings.Contains(out, "2000 sent, 12 failed") || !strings.Contains(out, "k6 estimates") {
		t.Errorf("import said:\n%s", out)
	}
	var r artifacts.Run
	if err := artifacts.ReadJSON(filepath.Join(dir, artifacts.RunsDir, "k6-round-robin", artifacts.RunFile), &r); err != nil {
		t.Fatal(err)
	}
	if r.Validity.Valid || r.Load.Sent != 2000 || r.Algorithm != "round-robin" || r.Index != 0 {
		t.Errorf("run.json: %+v", r)
	}
	// A second import of the same label does not overwrite the first.
	if code, out := runCLI(t, "k6", "import", filepath.Join("..", "..", "k6", "testdata", "summary.json"),
		"--algorithm", "round-robin", "--out", dir); code != 2 || !strings.Contains(out, "exists") {
		t.Errorf("second import: exit %d\n%s", code, out)
	}
}

// import --scenario takes the --duration-scale the script was exported
// with (the window was 10x off without it) and refuses a summary whose
// test does not fit the scenario's warmup and window; a closed-loop
// scenario imports as a closed loop with its users.
func TestK6ImportScenarioAndScale(t *testing.T) {
	fixture := filepath.Join("..", "..", "k6", "testdata", "summary.json")
	read := func(dir string) artifacts.Run {
		t.Helper()
		var r artifacts.Run
		if err := artifacts.ReadJSON(filepath.Join(dir, artifacts.RunsDir, "k6-x", artifacts.RunFile), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	// quickstart: 5 s warmup and 20 s at 440 rps; at 0.5, 12.5 s in all,
	// as the fixture's 12 s test.
	dir := t.TempDir()
	if code, out := runCLI(t, "k6", "import", fixture, "--algorithm", "x", "--scenario", "quickstart", "--duration-scale", "0.5", "--out", dir); code != 0 {
		t.Fatal(out)
	}
	if r := read(dir); r.Load.Duration != 10*time.Second || r.Load.Goodput != 198.8 || r.Load.Model != "open" {
		t.Errorf("quickstart at 0.5: window %v, goodput %v, model %s; want 10s, 198.8, open", r.Load.Duration, r.Load.Goodput, r.Load.Model)
	}
	if code, out := runCLI(t, "k6", "import", fixture, "--algorithm", "x", "--scenario", "quickstart", "--out", t.TempDir()); code != 2 || !strings.Contains(out, "--duration-scale") {
		t.Errorf("quickstart unscaled: exit %d, want 2 naming --duration-scale:\n%s", code, out)
	}
	if code, out := runCLI(t, "k6", "import", fixture, "--algorithm", "x", "--duration-scale", "0.5"); code != 2 || !strings.Contains(out, "--scenario") {
		t.Errorf("--duration-scale without --scenario: exit %d\n%s", code, out)
	}
	// c1-small-cpu: 30 users, 15 s warmup and 60 s; at 0.16, 12 s.
	dir = t.TempDir()
	if code, out := runCLI(t, "k6", "import", fixture, "--algorithm", "x", "--scenario", "c1-small-cpu", "--duration-scale", "0.16", "--out", dir); code != 0 {
		t.Fatal(out)
	}
	if r := read(dir); r.Load.Model != "closed" || r.Load.Users != 30 || r.Load.Duration != 9600*time.Millisecond {
		t.Errorf("c1-small-cpu: model %s, users %d, window %v; want closed, 30, 9.6s", r.Load.Model, r.Load.Users, r.Load.Duration)
	}
}

// End to end: the committed k6 fixture imported into a campaign
// directory shows in `prequalbench report` as its own clearly labelled
// section (estimates, coordinated omission), the headline is the
// measured runs' alone, and `report --check` holds.
func TestK6ImportIntoReport(t *testing.T) {
	dir := campaignDir(t, reportstest.Default(4))
	if code, out := runCLI(t, "report", dir); code != 0 {
		t.Fatal(out)
	}
	before, err := os.ReadFile(filepath.Join(dir, artifacts.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	fixture := filepath.Join("..", "..", "k6", "testdata", "summary.json")
	scen := filepath.Join("..", "..", "k6", "testdata", "scenario.yaml")
	if code, out := runCLI(t, "k6", "import", fixture, "--algorithm", "nginx-rr", "--scenario", scen, "--out", dir); code != 0 {
		t.Fatal(out)
	}
	if code, out := runCLI(t, "report", dir, "--check"); code != 1 {
		t.Errorf("check after the import, before a rebuild: exit %d, want 1 (the report lacks the import)\n%s", code, out)
	}
	if code, out := runCLI(t, "report", dir); code != 0 {
		t.Fatal(out)
	}
	b, err := os.ReadFile(filepath.Join(dir, artifacts.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	i := strings.Index(md, "## Imported runs (k6 estimates")
	if i < 0 {
		t.Fatalf("no imported-runs section:\n%s", md)
	}
	section := md[i:]
	section = section[:strings.Index(section, "## Plots")]
	for _, want := range []string{"estimates", "coordinated omission is not corrected", "| nginx-rr", "198.8", "3 iterations dropped"} {
		if !strings.Contains(section, want) {
			t.Errorf("section lacks %q:\n%s", want, section)
		}
	}
	if head := md[:i]; strings.Contains(head, "nginx-rr") || head != string(before[:i]) {
		t.Errorf("the import reached the report before its section")
	}
	if code, out := runCLI(t, "report", dir, "--check"); code != 0 {
		t.Errorf("report --check: exit %d\n%s", code, out)
	}
}

// `campaign export --k6 SCENARIO` (the spelling) writes the same
// script as `k6 export SCENARIO`, flags included; without --k6 it says
// what it needs.
func TestCampaignExportK6(t *testing.T) {
	code, a := runCLI(t, "campaign", "export", "--k6", "quickstart", "--duration-scale", "0.5", "--base-url", "http://127.0.0.1:9")
	if code != 0 {
		t.Fatal(a)
	}
	code, b := runCLI(t, "k6", "export", "quickstart", "--duration-scale", "0.5", "--base-url", "http://127.0.0.1:9")
	if code != 0 {
		t.Fatal(b)
	}
	if a != b || !strings.Contains(a, `"duration": "10000ms"`) {
		t.Errorf("campaign export --k6 and k6 export differ, or the scale is lost:\n%s", a)
	}
	if code, out := runCLI(t, "campaign", "export"); code != 2 || !strings.Contains(out, "--k6 SCENARIO is required") {
		t.Errorf("campaign export without --k6: exit %d\n%s", code, out)
	}
}
