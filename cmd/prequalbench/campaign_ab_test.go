package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env/local"
	"github.com/prequalbench/prequalbench/reports/reportstest"
	"github.com/prequalbench/prequalbench/scenario"
)

// abCampaign is an A/B fixture whose candidate's tail is tail times the
// baseline's.
func abCampaign(t *testing.T, tail float64) string {
	s := reportstest.Default(8)
	base := s.Profiles["prequal"]
	cand := base
	cand.TailMs *= tail
	s.Algorithms = []string{"prequal@aaaaaaa", "prequal@bbbbbbb"}
	s.Profiles = map[string]reportstest.Profile{"prequal@aaaaaaa": base, "prequal@bbbbbbb": cand}
	s.Builds = []artifacts.Build{
		{Name: "aaaaaaa", Role: artifacts.BuildBaseline, IngressBin: "/a"},
		{Name: "bbbbbbb", Role: artifacts.BuildCandidate, IngressBin: "/b"},
	}
	return campaignDir(t, s)
}

// --gate fails the job (exit 1) on a candidate named slower, passes a
// faster or equal one, and refuses a campaign that is no A/B (exit 2).
func TestReportGate_ExitCodes(t *testing.T) {
	if code, out := runCLI(t, "report", abCampaign(t, 1.5), "--gate"); code != 1 || !strings.Contains(out, "The candidate build prequal@bbbbbbb is slower") {
		t.Errorf("slower candidate: exit %d\n%s", code, out)
	}
	if code, out := runCLI(t, "report", abCampaign(t, 0.6), "--gate"); code != 0 || !strings.Contains(out, "gate passed: The baseline build prequal@aaaaaaa is slower") {
		t.Errorf("faster candidate: exit %d\n%s", code, out)
	}
	if code, out := runCLI(t, "report", abCampaign(t, 1), "--gate"); code != 0 || !strings.Contains(out, "gate passed: The builds are equal within what these runs can detect") {
		t.Errorf("equal builds: exit %d\n%s", code, out)
	}
	if code, out := runCLI(t, "report", campaignDir(t, reportstest.Default(4)), "--gate"); code != 2 || !strings.Contains(out, "not an A/B campaign") {
		t.Errorf("no A/B: exit %d\n%s", code, out)
	}
	// Too few valid runs: nothing measured, so the gate does not pass.
	s := reportstest.Default(2)
	s.Algorithms = []string{"prequal@aaaaaaa", "prequal@bbbbbbb"}
	s.Profiles = map[string]reportstest.Profile{"prequal@aaaaaaa": s.Profiles["prequal"], "prequal@bbbbbbb": s.Profiles["prequal"]}
	s.Builds = []artifacts.Build{{Name: "aaaaaaa", Role: artifacts.BuildBaseline, IngressBin: "/a"}, {Name: "bbbbbbb", Role: artifacts.BuildCandidate, IngressBin: "/b"}}
	s.InvalidRuns = map[int][]string{1: {"host idle below 10%"}, 2: {"host idle below 10%"}, 3: {"host idle below 10%"}}
	if code, out := runCLI(t, "report", campaignDir(t, s), "--gate"); code != 1 || !strings.Contains(out, "could not be compared") {
		t.Errorf("no valid comparison: exit %d\n%s", code, out)
	}
}

// 3 valid runs per build cannot reach p < 0.05 whatever the data (the
// smallest p is 0.1): a gate that passed them would pass any regression,
// so it fails as "could not be compared", like no data at all.
func TestReportGate_FailsWhenTheRunsCannotReachSignificance(t *testing.T) {
	s := reportstest.Default(3)
	base := s.Profiles["prequal"]
	cand := base
	cand.TailMs *= 3 // a tripled tail, and still no verdict possible
	s.Algorithms = []string{"prequal@aaaaaaa", "prequal@bbbbbbb"}
	s.Profiles = map[string]reportstest.Profile{"prequal@aaaaaaa": base, "prequal@bbbbbbb": cand}
	s.Builds = []artifacts.Build{{Name: "aaaaaaa", Role: artifacts.BuildBaseline, IngressBin: "/a"}, {Name: "bbbbbbb", Role: artifacts.BuildCandidate, IngressBin: "/b"}}
	code, out := runCLI(t, "report", campaignDir(t, s), "--gate")
	if code != 1 || !strings.Contains(out, "could not be compared") || !strings.Contains(out, "smallest possible p 0.1") {
		t.Errorf("3 vs 3 runs: exit %d, want 1 naming the unreachable p\n%s", code, out)
	}
}

// An A/B runs where the ingress is a binary this command starts: the
// flags are refused, naming why, everywhere else.
func TestCampaignRun_ABFlagsRefusedWhereTheyCannotRun(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--env", "sim", "--baseline-ref", "main"}, "the simulator runs no binaries"},
		{[]string{"--env", "kind", "--baseline-bin", "/bin/true"}, "--env local only"},
		{[]string{"--baseline-bin", "/bin/true", "--baseline-ref", "main"}, "give one baseline"},
		{[]string{"--resume", "somewhere", "--baseline-ref", "main"}, "runs the builds the campaign recorded"},
		{[]string{"--baseline-ref", "main", "--sweep", "prequal:qrif=0.5,0.6"}, "drop --sweep"},
		{[]string{"--baseline-bin", "/no/such/prequalbench"}, "--baseline-bin /no/such/prequalbench: no such file"},
		{[]string{"--baseline-ref", "main", "--algorithms", "prequal,round-robin"}, "an A/B runs one algorithm on two builds, got 2"},
	} {
		_, err := campaignCLI(t, append([]string{"campaign", "run"}, tc.args...)...)
		var ee *exitError
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &ee) || ee.code != 2 {
			t.Errorf("%v: %v, want exit 2 naming %q", tc.args, err, tc.want)
		}
	}
}

func TestBuildName_ShortCommitElseBinary(t *testing.T) {
	for _, tc := range []struct{ rev, bin, want string }{
		{"073ab5d5c0ffee", "/x/prequalbench", "073ab5d"},
		{"073ab5d5c0ffee-dirty", "/x/prequalbench", "073ab5d-dirty"},
		{"unknown", "/x/prequalbench-old", "prequalbench-old"},
		{"", "/x/pb@v2", "pb_v2"},
	} {
		if got := buildName(tc.rev, tc.bin); got != tc.want {
			t.Errorf("buildName(%q, %q) = %q, want %q", tc.rev, tc.bin, got, tc.want)
		}
	}
}

// A test build whose link-time delay is not a duration refuses to start,
// naming the knob, rather than running undelayed.
func TestIngress_TestAddedDelayMustParse(t *testing.T) {
	old := testAddedDelay
	t.Cleanup(func() { testAddedDelay = old })
	testAddedDelay = "3 ms"
	err := runIngressCmd(context.Background(), "--source", "file", "--routes", "x")
	if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "main.testAddedDelay") {
		t.Errorf("err %v (exit %d), want exit 2 naming main.testAddedDelay", err, exitCode(err))
	}
}

// fakeBuild writes an executable that answers `ingress --help` with help
// and anything else with nothing: a stand-in for a prequalbench build.
func fakeBuild(t *testing.T, name, help string) string {
	t.Helper()
	dir := t.TempDir()
	helpFile := filepath.Join(dir, name+".help")
	if err := os.WriteFile(helpFile, []byte(help), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	script := "#!/bin/sh\nif [ \"$1\" = ingress ] && [ \"$2\" = --help ]; then cat '" + helpFile + "'; fi\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// A baseline older than a flag the local env passes its ingress (the
// nightly's last passing commit can be) is refused before any run,
// naming the flag, instead of failing its first run after the other
// build's; this build's own ingress takes every flag.
func TestCampaignRun_ABRefusesABuildLackingAnIngressFlag(t *testing.T) {
	code, help := runCLI(t, "ingress", "--help")
	if code != 0 || !strings.Contains(help, "--addr-file") {
		t.Fatalf("ingress --help: exit %d\n%s", code, help)
	}
	y, err := os.ReadFile("../../examples/ab/ingress-ab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := scenario.Parse(y)
	if err != nil {
		t.Fatal(err)
	}
	current := fakeBuild(t, "current", help)
	if err := local.CheckIngressBuild(context.Background(), current, s); err != nil {
		t.Errorf("this build's own ingress: %v", err)
	}
	old := fakeBuild(t, "old", strings.ReplaceAll(help, "--addr-file", "--pid-file"))
	_, err = campaignCLI(t, "campaign", "run", "--env", "local", "--scenario", "../../examples/ab/ingress-ab.yaml",
		"--baseline-bin", old, "--ingress-bin", current, "--backend-bin", "/no/such/backend", "--out", t.TempDir())
	var ee *exitError
	if err == nil || !errors.As(err, &ee) || ee.code != 2 ||
		!strings.Contains(err.Error(), "the baseline build old ("+old+")") || !strings.Contains(err.Error(), "does not take --addr-file") {
		t.Errorf("old baseline: %v, want exit 2 naming the build and --addr-file", err)
	}
}

// --baseline-ref outside the source tree says to run it from a clone or
// to pass --baseline-bin, not the backend's hint.
func TestCampaignRun_BaselineRefOutsideTheSourceTree(t *testing.T) {
	t.Chdir(t.TempDir())
	_, err := campaignCLI(t, "campaign", "run", "--env", "local", "--scenario", "quickstart", "--baseline-ref", "v1.2.3")
	var ee *exitError
	if err == nil || !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "run it from a clone of the repository, or give a built binary with --baseline-bin") ||
		strings.Contains(err.Error(), "--backend-bin") {
		t.Errorf("outside the tree: %v, want exit 2 pointing at a clone or --baseline-bin", err)
	}
}
