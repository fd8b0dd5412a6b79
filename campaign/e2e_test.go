package campaign_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign"
	"github.com/prequalbench/prequalbench/campaign/env/local"
	"github.com/prequalbench/prequalbench/ingress/adminapi"
	"github.com/prequalbench/prequalbench/internal/testbackend"
)

// The end-to-end tests run the real binary (`go build` once per test
// process) with the real backend on loopback.

var prequalbench struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

func binary(t *testing.T) string {
	t.Helper()
	prequalbench.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		repo := filepath.Join(filepath.Dir(file), "..")
		dir, err := os.MkdirTemp("", "prequalbench-e2e-")
		if err != nil {
			prequalbench.err = err
			return
		}
		prequalbench.path = filepath.Join(dir, "prequalbench")
		cmd := exec.Command("go", "build", "-o", prequalbench.path, "./cmd/prequalbench")
		cmd.Dir = repo
		prequalbench.out, prequalbench.err = cmd.CombinedOutput()
	})
	if prequalbench.err != nil {
		t.Fatalf("go build ./cmd/prequalbench: %v\n%s", prequalbench.err, prequalbench.out)
	}
	return prequalbench.path
}

func testdata(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// campaignDir returns the one campaign directory under out.
func campaignDir(t *testing.T, out string) string {
	t.Helper()
	entries, err := os.ReadDir(out)
	if err != nil || len(entries) != 1 {
		t.Fatalf("want one campaign directory in %s, got %v (%v)", out, entries, err)
	}
	return filepath.Join(out, entries[0].Name())
}

// assertNoProcessLeft checks that no process the local environment started
// is still running. A pid may have been reused by an unrelated process, so
// a live pid only counts when its command line is ours.
func assertNoProcessLeft(t *testing.T, dir string) {
	t.Helper()
	var procs []local.Process
	if err := artifacts.ReadJSON(filepath.Join(dir, "logs", local.ProcessesFile), &procs); err != nil {
		t.Fatal(err)
	}
	if len(procs) == 0 {
		t.Fatal("processes.json lists no process")
	}
	for _, p := range procs {
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/cmdline")
		if err != nil {
			continue // gone
		}
		if strings.HasPrefix(string(cmdline), p.Command[0]) {
			stat, _ := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/stat")
			t.Errorf("%s (pid %d) is still running: %s", p.Name, p.PID, stat)
		}
	}
}

func TestE2E_TinyCampaign(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs real processes")
	}
	bin, backend := binary(t), testbackend.Binary(t)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "campaign", "run", "--scenario", testdata(t, "tiny.yaml"),
		"--out", out, "--backend-bin", backend)
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
	if !strings.HasSuffix(c.ID, "-tiny") || filepath.Base(dir) != c.ID {
		t.Errorf("campaign id %q, dir %s", c.ID, dir)
	}
	if c.Finished.IsZero() || c.Environment.Name != "local" || c.Environment.IngressReplicas != 2 || c.Environment.GoVersion == "" || c.Environment.CPUs == 0 {
		t.Errorf("campaign.json incomplete: finished %v, environment %+v", c.Finished, c.Environment)
	}
	groups := map[string]int{}
	for _, b := range c.Backends {
		if b.Route != "work" || !strings.HasPrefix(b.Address, "127.0.0.1:") {
			t.Errorf("backend %+v", b)
		}
		groups[b.Group]++
	}
	if groups["fast"] != 2 || groups["slow"] != 1 {
		t.Errorf("backends by group %v, want fast 2, slow 1", groups)
	}
	// The interleaved order is the seeded shuffle of the scenario's seed.
	want, _, _ := campaign.Plan([]string{"prequal", "round-robin"}, 2, "shuffle", 5)
	if diff := cmp.Diff(want, c.Plan); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	for _, p := range c.Plan {
		rd := filepath.Join(dir, p.Dir)
		var r artifacts.Run
		if err := artifacts.ReadJSON(filepath.Join(rd, artifacts.RunFile), &r); err != nil {
			t.Fatal(err)
		}
		if r.Status != artifacts.StatusOK {
			t.Errorf("run %d failed: %s", p.Index, r.Error)
			continue
		}
		if !r.ResetVerified {
			t.Errorf("run %d: reset not verified: %s", p.Index, r.ResetDetail)
		}
		if r.Load.Completed == 0 || r.Load.Errors != 0 || r.Load.P99 <= 0 {
			t.Errorf("run %d: load %+v", p.Index, r.Load)
		}
		for _, f := range []string{artifacts.HistogramFile, artifacts.PessimisticHistogramFile, artifacts.SendLagHistogramFile, artifacts.ConnWaitHistogramFile, artifacts.TimeseriesFile} {
			if st, err := os.Stat(filepath.Join(rd, f)); err != nil || st.Size() == 0 {
				t.Errorf("run %d: %s missing or empty (%v)", p.Index, f, err)
			}
		}
		var before, after []adminapi.State
		if err := artifacts.ReadJSON(filepath.Join(rd, artifacts.StateBefore), &before); err != nil {
			t.Fatal(err)
		}
		if err := artifacts.ReadJSON(filepath.Join(rd, artifacts.StateAfter), &after); err != nil {
			t.Fatal(err)
		}
		if len(before) != 2 || len(after) != 2 {
			t.Fatalf("run %d: %d/%d states, want one per ingress replica (2)", p.Index, len(before), len(after))
		}
		var routed uint64
		for i := range after {
			if got := after[i].Routes[0].Algorithm; got != p.Algorithm {
				t.Errorf("run %d: ingress %d ran %s, want %s", p.Index, i, got, p.Algorithm)
			}
			routed += after[i].Routes[0].Requests - before[i].Routes[0].Requests
		}
		// Both replicas carry the load, and they carried the window's requests.
		if after[0].Routes[0].Requests == before[0].Routes[0].Requests || after[1].Routes[0].Requests == before[1].Routes[0].Requests {
			t.Errorf("run %d: an ingress replica got no load", p.Index)
		}
		// The snapshots are taken while the load goes on, so requests due
		// near a boundary may land on either side of it, more of them on
		// a loaded host. What this catches is the window's snapshots not
		// bracketing the window: counting the warmup adds 30 (500 ms at
		// 60/s), so allow up to 10 either way, a third of that.
		if diff := int64(routed) - int64(r.Load.Completed); diff < -10 || diff > 10 {
			t.Errorf("run %d: ingress routed %d in the window, the load completed %d", p.Index, routed, r.Load.Completed)
		}
		logs, err := os.ReadDir(filepath.Join(rd, artifacts.LogsDir))
		if err != nil || len(logs) < 5 {
			t.Errorf("run %d: %d process logs (%v), want one per process (5)", p.Index, len(logs), err)
		}
	}
	if !strings.Contains(stdout.String(), "p99.9") || !strings.Contains(stdout.String(), "round-robin") {
		t.Errorf("no summary table in the output:\n%s", stdout.String())
	}
	if _, err := os.Stat(filepath.Join(dir, artifacts.ReportFile)); err != nil {
		t.Errorf("no report: %v", err)
	}
}

// Ctrl-C during a run: the campaign stops, every process goes, finished
// runs stay, and --resume completes the campaign. This one resets by
// restarting the ingress, so both reset modes are covered.
func TestE2E_InterruptAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs real processes")
	}
	bin, backend := binary(t), testbackend.Binary(t)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "campaign", "run", "--scenario", testdata(t, "tiny.yaml"),
		"--out", out, "--backend-bin", backend, "--ingress-replicas", "1", "--reps", "3", "--reset", "restart", "--no-report")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once the first run is finished.
	deadline := time.Now().Add(2 * time.Minute)
	var dir string
	for {
		if entries, _ := os.ReadDir(out); len(entries) == 1 {
			dir = filepath.Join(out, entries[0].Name())
			if m, _ := filepath.Glob(filepath.Join(dir, "runs", "01-*", artifacts.RunFile)); len(m) == 1 {
				break
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("first run never finished\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if err == nil {
		t.Errorf("interrupted campaign exited 0\nstdout:\n%s", stdout.String())
	}
	assertNoProcessLeft(t, dir)
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(dir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	if !c.Finished.IsZero() {
		t.Error("interrupted campaign marked finished")
	}
	if !strings.Contains(stderr.String(), "--resume") {
		t.Errorf("no resume hint on stderr:\n%s", stderr.String())
	}
	first, err := os.ReadFile(filepath.Join(dir, c.Plan[0].Dir, artifacts.RunFile))
	if err != nil {
		t.Fatalf("finished run lost: %v", err)
	}

	resume := exec.CommandContext(ctx, bin, "campaign", "run", "--resume", dir, "--backend-bin", backend, "--no-report")
	if b, err := resume.CombinedOutput(); err != nil {
		t.Fatalf("resume: %v\n%s", err, b)
	}
	if err := artifacts.ReadJSON(filepath.Join(dir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	if c.Finished.IsZero() {
		t.Error("resumed campaign not finished")
	}
	for _, p := range c.Plan {
		var r artifacts.Run
		if err := artifacts.ReadJSON(filepath.Join(dir, p.Dir, artifacts.RunFile), &r); err != nil {
			t.Errorf("run %d after resume: %v", p.Index, err)
		} else if r.Status != artifacts.StatusOK || !r.ResetVerified {
			t.Errorf("run %d after resume: status %s %s, reset verified %v: %s", p.Index, r.Status, r.Error, r.ResetVerified, r.ResetDetail)
		}
	}
	if again, _ := os.ReadFile(filepath.Join(dir, c.Plan[0].Dir, artifacts.RunFile)); !bytes.Equal(first, again) {
		t.Error("resume repeated the finished first run")
	}
	assertNoProcessLeft(t, dir)
}

// TestE2E_GatewayRouting: a scenario whose routes are HTTPRoutes runs end
// to end on the local environment: the routes file holds the HTTPRoute
// (and its Service's endpoints), the ingress serves it, and the load gets
// through with no error.
func TestE2E_GatewayRouting(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs real processes")
	}
	bin, backend := binary(t), testbackend.Binary(t)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "campaign", "run", "--scenario", testdata(t, "tiny-gateway.yaml"),
		"--out", out, "--backend-bin", backend)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("campaign run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	dir := campaignDir(t, out)
	assertNoProcessLeft(t, dir)
	routes, err := os.ReadFile(filepath.Join(dir, "logs", "routes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"httpRoutes:", "kind: HTTPRoute", "bench.local", "services:"} {
		if !strings.Contains(string(routes), want) {
			t.Errorf("routes file lacks %q:\n%s", want, routes)
		}
	}
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(dir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Plan) != 1 {
		t.Fatalf("plan %+v, want one run", c.Plan)
	}
	rd := filepath.Join(dir, c.Plan[0].Dir)
	var r artifacts.Run
	if err := artifacts.ReadJSON(filepath.Join(rd, artifacts.RunFile), &r); err != nil {
		t.Fatal(err)
	}
	if r.Status != artifacts.StatusOK || r.Load.Completed == 0 || r.Load.Errors != 0 {
		t.Fatalf("run: status %s (%s), load %+v", r.Status, r.Error, r.Load)
	}
	var after []adminapi.State
	if err := artifacts.ReadJSON(filepath.Join(rd, artifacts.StateAfter), &after); err != nil {
		t.Fatal(err)
	}
	if len(after) != 1 || len(after[0].Routes) != 1 || after[0].Routes[0].Key != "work" || after[0].Routes[0].Algorithm != "prequal" ||
		len(after[0].Routes[0].Policy.Endpoints) != 3 {
		t.Fatalf("ingress state %+v, want the route work on prequal with 3 endpoints", after)
	}
}
