package campaign_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env/local"
	"github.com/prequalbench/prequalbench/internal/testbackend"
)

// An A/B campaign in the local env runs each arm's runs on its own
// build's binary: the candidate is a build whose every request is held
// 60 ms (the test-only added delay), so each of its runs has a median of
// at least 60 ms, and the ingress processes were started from both
// binaries.
func TestE2E_ABRunsEachArmOnItsBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs real processes")
	}
	base, backend := binary(t), testbackend.Binary(t)
	_, file, _, _ := runtime.Caller(0)
	slow := filepath.Join(t.TempDir(), "prequalbench-slow")
	build := exec.Command("go", "build", "-ldflags", "-X main.testAddedDelay=60ms", "-o", slow, "./cmd/prequalbench")
	build.Dir = filepath.Join(filepath.Dir(file), "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build (slow): %v\n%s", err, out)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, base, "campaign", "run", "--scenario", testdata(t, "tiny.yaml"),
		"--out", out, "--backend-bin", backend, "--algorithms", "prequal",
		"--baseline-bin", base, "--ingress-bin", slow, "--no-report")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("campaign run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	dir := campaignDir(t, out)
	assertNoProcessLeft(t, dir)
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(dir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Builds) != 2 || c.Builds[0].IngressBin != base || c.Builds[1].IngressBin != slow {
		t.Fatalf("builds %+v, want the baseline %s and the candidate %s", c.Builds, base, slow)
	}
	slowArm := artifacts.ArmLabel("prequal", c.Builds[1].Name)
	runs := 0
	for _, p := range c.Plan {
		var r artifacts.Run
		if err := artifacts.ReadJSON(filepath.Join(dir, p.Dir, artifacts.RunFile), &r); err != nil {
			t.Fatal(err)
		}
		if r.Status != artifacts.StatusOK {
			t.Fatalf("run %d: %s", r.Index, r.Error)
		}
		if r.Algorithm == slowArm && r.Load.Success.P50 < 60 {
			t.Errorf("run %d (%s): p50 %.1f ms, want >= 60 ms: it did not run on the delayed build", r.Index, r.Algorithm, r.Load.Success.P50)
		}
		runs++
	}
	var procs []local.Process
	if err := artifacts.ReadJSON(filepath.Join(dir, "logs", local.ProcessesFile), &procs); err != nil {
		t.Fatal(err)
	}
	started := map[string]int{}
	for _, p := range procs {
		if strings.HasPrefix(p.Name, "ingress-") {
			started[p.Command[0]]++
		}
	}
	// Two replicas at setup (from --ingress-bin), then both restarted
	// from their arm's build for every run; half the runs are each's.
	if started[slow] != 2+runs || started[base] != runs {
		t.Errorf("ingress starts by binary %v over %d runs, want %d of the candidate and %d of the baseline", started, runs, 2+runs, runs)
	}
}
