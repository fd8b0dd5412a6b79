package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/reports/reportstest"
)

// runCLI runs the root command with args and returns the exit code main
// would use and the output.
func runCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		return exitCode(err), out.String() + err.Error()
	}
	return 0, out.String()
}

func campaignDir(t *testing.T, s reportstest.Spec) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "c")
	if err := reportstest.Write(dir, s); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReportCommand_BuildCheckAndTamper(t *testing.T) {
	dir := campaignDir(t, reportstest.Default(4))
	if code, out := runCLI(t, "report", dir); code != 0 {
		t.Fatalf("report: exit %d: %s", code, out)
	}
	if code, out := runCLI(t, "report", dir, "--check"); code != 0 {
		t.Fatalf("check after build: exit %d: %s", code, out)
	}
	run := filepath.Join(dir, "runs", "01-rep1-"+firstPlanned(t, dir), "run.json")
	b, err := os.ReadFile(run)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte(`"goodput": 1`)) + len(`"goodput": `)
	b[i] = '2' // 150 -> 250 req/s
	if err := os.WriteFile(run, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := runCLI(t, "report", dir, "--check")
	if code != 1 || !strings.Contains(out, "REPORT.md") {
		t.Errorf("check after one changed byte: exit %d, output %q; want 1 naming REPORT.md", code, out)
	}
}

func firstPlanned(t *testing.T, dir string) string {
	t.Helper()
	var c struct {
		Plan []struct{ Algorithm string } `json:"plan"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "campaign.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c.Plan[0].Algorithm
}

func TestReportCommand_CompareExitCodes(t *testing.T) {
	old := campaignDir(t, reportstest.Default(4))
	s := reportstest.Default(4)
	s.Seed = 7
	p := s.Profiles["prequal"]
	p.TailMs *= 2
	s.Profiles = map[string]reportstest.Profile{"prequal": p, "round-robin": s.Profiles["round-robin"]}
	cur := campaignDir(t, s)
	if code, out := runCLI(t, "report", cur, "--compare", old); code != 1 {
		t.Errorf("planted p99 regression: exit %d, want 1: %s", code, out)
	}
	if code, out := runCLI(t, "report", old, "--compare", old); code != 0 {
		t.Errorf("identical campaigns: exit %d, want 0: %s", code, out)
	}
	other := reportstest.Default(4)
	other.Scenario = "different"
	if code, out := runCLI(t, "report", campaignDir(t, other), "--compare", old); code != 2 || !strings.Contains(out, "scenario") {
		t.Errorf("different scenarios: exit %d, want 2: %s", code, out)
	}
}

func TestReportCommand_JSONAndBadInput(t *testing.T) {
	dir := campaignDir(t, reportstest.Default(2))
	code, out := runCLI(t, "report", dir, "-o", "json")
	if code != 0 {
		t.Fatalf("json: exit %d: %s", code, out)
	}
	var v struct {
		Campaign struct{ Scenario string } `json:"campaign"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Campaign.Scenario != "fixture-hetero" {
		t.Errorf("json output: err %v, scenario %q", err, v.Campaign.Scenario)
	}
	if _, err := os.Stat(filepath.Join(dir, "REPORT.md")); !os.IsNotExist(err) {
		t.Errorf("-o json wrote REPORT.md (stat err %v)", err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	if code, out := runCLI(t, "report", missing); code != 2 || !strings.Contains(out, missing) {
		t.Errorf("missing dir: exit %d, want 2 naming it: %s", code, out)
	}
	if code, _ := runCLI(t, "report", dir, "-o", "yaml"); code != 2 {
		t.Errorf("-o yaml: exit %d, want 2", code)
	}
	if code, _ := runCLI(t, "report"); code != 2 {
		t.Errorf("no dir: exit %d, want 2", code)
	}
}
