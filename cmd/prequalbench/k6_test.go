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

// k6Fixture is a file of k6/testdata.
func k6Fixture(name string) string { return filepath.Join("..", "..", "k6", "testdata", name) }

func TestK6ExportAndImport(t *testing.T) {
	code, js := runCLI(t, "k6", "export", "quickstart", "--base-url", "http://127.0.0.1:9")
	if code != 0 {
		t.Fatal(js)
	}
	if !strings.Contains(js, "import http from 'k6/http'") || !strings.Contains(js, `"executor": "constant-arrival-rate"`) || strings.Contains(js, `\u003e`) {
		t.Errorf("export:\n%s", js)
	}
	dir := t.TempDir()
	code, out := runCLI(t, "k6", "import", k6Fixture("summary-export.json"),
		"--algorithm", "round-robin", "--scenario", k6Fixture("scenario.yaml"), "--out", dir)
	if code != 0 {
		t.Fatal(out)
	}
	if !strings.Contains(out, "1998 sent, 12 failed, goodput 198.6/s over 10s, p50 6.3 ms, p99 20.9 ms") || !strings.Contains(out, "leaves out DNS") {
		t.Errorf("import said:\n%s", out)
	}
	var r artifacts.Run
	if err := artifacts.ReadJSON(filepath.Join(dir, artifacts.RunsDir, "k6-round-robin", artifacts.RunFile), &r); err != nil {
		t.Fatal(err)
	}
	if r.Validity.Valid || r.Load.Sent != 1998 || r.Algorithm != "round-robin" || r.Index != 0 {
		t.Errorf("run.json: %+v", r)
	}
	// A second import of the same label does not overwrite the first.
	if code, out := runCLI(t, "k6", "import", k6Fixture("handlesummary.json"),
		"--algorithm", "round-robin", "--scenario", k6Fixture("scenario.yaml"), "--out", dir); code != 2 || !strings.Contains(out, "exists") {
		t.Errorf("second import: exit %d\n%s", code, out)
	}
}

// import needs --scenario, and refuses a summary that does not fit it at
// the --duration-scale given (exit 2, naming the flag); a closed-loop
// scenario of the test's length imports as a closed loop with its users.
func TestK6ImportScenarioAndScale(t *testing.T) {
	fixture, scen := k6Fixture("summary-export.json"), k6Fixture("scenario.yaml")
	if code, out := runCLI(t, "k6", "import", fixture, "--algorithm", "x"); code == 0 || !strings.Contains(out, "scenario") {
		t.Errorf("no --scenario: exit %d\n%s", code, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--scenario", scen, "--duration-scale", "0.5"}, "--duration-scale"},
		{[]string{"--scenario", scen, "--duration-scale", "1.2"}, "--duration-scale"},
		{[]string{"--scenario", "quickstart", "--duration-scale", "0.5"}, "--scenario"},
	} {
		args := append([]string{"k6", "import", fixture, "--algorithm", "x", "--out", t.TempDir()}, c.args...)
		if code, out := runCLI(t, args...); code != 2 || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, want 2 naming %s:\n%s", c.args, code, c.want, out)
		}
	}
	// c1-small-cpu: 30 users, 15 s warmup and 60 s; at 0.16, 12 s.
	dir := t.TempDir()
	if code, out := runCLI(t, "k6", "import", fixture, "--algorithm", "x", "--scenario", "c1-small-cpu", "--duration-scale", "0.16", "--out", dir); code != 0 {
		t.Fatal(out)
	}
	var r artifacts.Run
	if err := artifacts.ReadJSON(filepath.Join(dir, artifacts.RunsDir, "k6-x", artifacts.RunFile), &r); err != nil {
		t.Fatal(err)
	}
	if r.Load.Model != "closed" || r.Load.Users != 30 || r.Load.Duration != 9600*time.Millisecond {
		t.Errorf("c1-small-cpu: model %s, users %d, window %v; want closed, 30, 9.6s", r.Load.Model, r.Load.Users, r.Load.Duration)
	}
}

// Two runners' summaries write the whole test's run and one per runner.
func TestK6ImportRunners(t *testing.T) {
	dir := campaignDir(t, reportstest.Default(4))
	code, out := runCLI(t, "k6", "import", k6Fixture("runner1.json"), k6Fixture("runner2.json"),
		"--algorithm", "prequal", "--scenario", k6Fixture("scenario.yaml"), "--out", dir)
	if code != 0 {
		t.Fatal(out)
	}
	for _, w := range []struct {
		dir  string
		sent uint64
	}{{"k6-prequal", 1998}, {"k6-prequal-runner1", 1000}, {"k6-prequal-runner2", 998}} {
		var r artifacts.Run
		if err := artifacts.ReadJSON(filepath.Join(dir, artifacts.RunsDir, w.dir, artifacts.RunFile), &r); err != nil {
			t.Fatal(err)
		}
		if r.Load.Sent != w.sent {
			t.Errorf("%s: sent %d, want %d", w.dir, r.Load.Sent, w.sent)
		}
	}
	if !strings.Contains(out, "k6 import (prequal): 1998 sent, 12 failed, goodput 198.6/s over 10s, no percentiles") ||
		!strings.Contains(out, "k6 import (prequal (k6 runner 2 of 2)): 998 sent, 8 failed, goodput 99.0/s over 10s, p50 6.4 ms, p99 22.1 ms") {
		t.Errorf("import said:\n%s", out)
	}
	// The report lists the three, the whole test's without percentiles.
	if code, out := runCLI(t, "report", dir); code != 0 {
		t.Fatal(out)
	}
	b, err := os.ReadFile(filepath.Join(dir, artifacts.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Split(line, "|"); len(f) > 2 && strings.HasPrefix(strings.TrimSpace(f[1]), "prequal") && strings.Contains(line, "k6-prequal") {
			rows[strings.TrimSpace(f[1])] = line
		}
	}
	if len(rows) != 3 || !strings.Contains(rows["prequal"], " 198.6 |") || !strings.Contains(rows["prequal"], " — |") ||
		!strings.Contains(rows["prequal (k6 runner 2 of 2)"], "22.1") || !strings.Contains(string(b), "counts summed exactly over 2 runners") {
		t.Errorf("report rows %q", rows)
	}
}

// k6 refuses a constant executor under 1 s; so does the export, with the
// smallest --duration-scale that works (quickstart's 5 s warmup at 0.1;
// the nginx example's 2 s warmup at 0.3).
func TestK6ExportRefusesShortWarmup(t *testing.T) {
	for _, c := range []struct{ scen, scale, want string }{
		{"quickstart", "0.1", "--duration-scale 0.2 or more"},
		{filepath.Join("..", "..", "examples", "external", "nginx", "scenario.yaml"), "0.3", "--duration-scale 0.5 or more"},
	} {
		code, out := runCLI(t, "k6", "export", c.scen, "--duration-scale", c.scale)
		if code != 2 || !strings.Contains(out, "the warmup lasts") || !strings.Contains(out, c.want) {
			t.Errorf("%s at %s: exit %d, want 2 saying %q:\n%s", c.scen, c.scale, code, c.want, out)
		}
		if code, out := runCLI(t, "k6", "export", c.scen, "--duration-scale", strings.Fields(c.want)[1]); code != 0 {
			t.Errorf("%s at the scale suggested: exit %d\n%s", c.scen, code, out)
		}
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
	fixture, scen := k6Fixture("summary-export.json"), k6Fixture("scenario.yaml")
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
	i := strings.Index(md, "## Imported runs (k6's numbers, not measured by prequalbench)")
	if i < 0 {
		t.Fatalf("no imported-runs section:\n%s", md)
	}
	section := md[i:]
	section = section[:strings.Index(section, "## Plots")]
	if strings.Contains(section, "estimate") || strings.Contains(section, "(est.)") {
		t.Errorf("the section calls k6's percentiles, over every sample, estimates:\n%s", section)
	}
	for _, want := range []string{"p99 ms (k6)", "over every sample", "coordinated omission is not corrected", "| nginx-rr", "198.6", "2 iterations dropped", "leaves out DNS lookup and connect time"} {
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
