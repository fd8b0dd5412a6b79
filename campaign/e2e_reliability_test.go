package campaign_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env/local"
	"github.com/prequalbench/prequalbench/internal/testbackend"
)

// The crash-safety tests of issue 15, each against the real binary and
// backends with the tiny scenario (1 s windows) on one ingress replica.

// cli is one `prequalbench campaign run` process.
type cli struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	err            error
}

func startCLI(t *testing.T, ctx context.Context, args ...string) *cli {
	t.Helper()
	c := &cli{done: make(chan struct{})}
	c.cmd = exec.CommandContext(ctx, binary(t), append([]string{"campaign", "run", "--backend-bin", testbackend.Binary(t), "--no-report"}, args...)...)
	c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.done
	})
	return c
}

// wait waits for the process to end (at most a few minutes) and returns
// its exit error.
func (c *cli) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-c.done:
		return c.err
	case <-time.After(4 * time.Minute):
		t.Fatalf("campaign did not end within 4 minutes\nstdout:\n%s\nstderr:\n%s", c.stdout.String(), c.stderr.String())
		return nil
	}
}

func (c *cli) output() string {
	return "stdout:\n" + c.stdout.String() + "\nstderr:\n" + c.stderr.String()
}

// waitFor polls cond every 20 ms until it holds, failing the test after
// two minutes or when the process ends first.
func waitFor(t *testing.T, c *cli, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		select {
		case <-c.done:
			t.Fatalf("campaign ended before %s: %v\n%s", what, c.err, c.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 2 minutes\n%s", what, c.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// onlyDir returns the one campaign directory under out, or "".
func onlyDir(out string) string {
	entries, _ := os.ReadDir(out)
	if len(entries) != 1 {
		return ""
	}
	return filepath.Join(out, entries[0].Name())
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func readCampaign(t *testing.T, dir string) artifacts.Campaign {
	t.Helper()
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(dir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// assertAllRunsOK checks every planned run has an ok run.json and returns
// the run.json bytes by run directory.
func assertAllRunsOK(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	c := readCampaign(t, dir)
	if c.Finished.IsZero() {
		t.Error("campaign not marked finished")
	}
	out := map[string][]byte{}
	for _, p := range c.Plan {
		b, err := os.ReadFile(filepath.Join(dir, p.Dir, artifacts.RunFile))
		if err != nil {
			t.Errorf("run %d: %v", p.Index, err)
			continue
		}
		var r artifacts.Run
		if err := artifacts.ReadJSON(filepath.Join(dir, p.Dir, artifacts.RunFile), &r); err != nil || r.Status != artifacts.StatusOK {
			t.Errorf("run %d: %v %s %s", p.Index, err, r.Status, r.Error)
		}
		out[p.Dir] = b
	}
	return out
}

// waitNoProcessLeft polls until no process the campaign started runs
// (after kill -9 of the CLI the kernel's parent-death signal ends them).
func waitNoProcessLeft(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var procs []local.Process
		_ = artifacts.ReadJSON(filepath.Join(dir, "logs", local.ProcessesFile), &procs)
		alive := ""
		for _, p := range procs {
			if cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/cmdline"); err == nil && strings.HasPrefix(string(cmdline), p.Command[0]) {
				alive = p.Name
			}
		}
		if alive == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still running a minute after the CLI died", alive)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill -9 of the CLI mid-campaign: the processes go, the temp files are
// inside the campaign directory, and --resume finishes the campaign
// without losing or repeating a finished run and removes the leftovers.
func TestE2E_KillNineThenResume(t *testing.T) {
	ctx, out, c := startTiny(t, "--reps", "1")
	var dir string
	waitFor(t, c, "run 1 finished and run 2 started", func() bool {
		dir = onlyDir(out)
		if dir == "" {
			return false
		}
		one, _ := filepath.Glob(filepath.Join(dir, "runs", "01-*", artifacts.RunFile))
		two, _ := filepath.Glob(filepath.Join(dir, "runs", "02-*"))
		return len(one) == 1 && len(two) == 1
	})
	// The address files live in the campaign's own temp directory.
	if addrs, _ := filepath.Glob(filepath.Join(dir, "tmp", "*.addr")); len(addrs) == 0 {
		t.Errorf("no address files under %s/tmp: the temp files are outside the campaign directory", dir)
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.done
	waitNoProcessLeft(t, dir)
	first := readCampaign(t, dir)
	run1, err := os.ReadFile(filepath.Join(dir, first.Plan[0].Dir, artifacts.RunFile))
	if err != nil {
		t.Fatalf("finished run lost: %v", err)
	}
	// What else a kill -9 leaves: a half-written artifact's temp file.
	stale := filepath.Join(dir, "."+artifacts.CampaignFile+artifacts.TempMarker+"1")
	if err := os.WriteFile(stale, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}

	r := startCLI(t, ctx, "--resume", dir)
	if err := r.wait(t); err != nil {
		t.Fatalf("resume after kill -9: %v\n%s", err, r.output())
	}
	runs := assertAllRunsOK(t, dir)
	if !bytes.Equal(runs[first.Plan[0].Dir], run1) {
		t.Error("resume repeated the run finished before kill -9")
	}
	if exists(stale) || exists(filepath.Join(dir, "tmp")) {
		t.Errorf("leftovers after the resume: temp file %v, tmp dir %v", exists(stale), exists(filepath.Join(dir, "tmp")))
	}
	if c := readCampaign(t, dir); len(c.Sessions) != 2 {
		t.Errorf("campaign.json records %d sessions, want 2", len(c.Sessions))
	}
	assertNoProcessLeft(t, dir)
}

// Two resumes of one interrupted campaign: the second is refused at once
// with a message naming the first, which finishes the campaign.
func TestE2E_SecondResumeIsRefused(t *testing.T) {
	ctx, out, c := startTiny(t, "--reps", "1")
	var dir string
	waitFor(t, c, "run 1 finished", func() bool {
		dir = onlyDir(out)
		m, _ := filepath.Glob(filepath.Join(dir, "runs", "01-*", artifacts.RunFile))
		return dir != "" && len(m) == 1
	})
	c.cmd.Process.Signal(syscall.SIGINT)
	if err := c.wait(t); err == nil {
		t.Fatalf("interrupted campaign exited 0\n%s", c.output())
	}

	processes := func() int {
		var procs []local.Process
		_ = artifacts.ReadJSON(filepath.Join(dir, "logs", local.ProcessesFile), &procs)
		return len(procs)
	}
	before := processes()
	a := startCLI(t, ctx, "--resume", dir)
	waitFor(t, a, "the first resume's processes", func() bool { return processes() > before })
	// Stopped, the first resume cannot finish before the second tries.
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b := startCLI(t, ctx, "--resume", dir)
	err := b.wait(t)
	a.cmd.Process.Signal(syscall.SIGCONT)
	if err == nil || !strings.Contains(b.stderr.String(), "in use") || !strings.Contains(b.stderr.String(), "pid "+strconv.Itoa(a.cmd.Process.Pid)) {
		t.Errorf("second resume: %v, want a refusal naming the first's pid\n%s", err, b.output())
	}
	if err := a.wait(t); err != nil {
		t.Fatalf("first resume: %v\n%s", err, a.output())
	}
	assertAllRunsOK(t, dir)
	assertNoProcessLeft(t, dir)
}

// An empty run.json (what a crash could leave before fsync) does not stop
// a resume: that run is run again, the others are kept.
func TestE2E_CorruptRunJSONIsRunAgain(t *testing.T) {
	ctx, out, c := startTiny(t, "--reps", "1")
	if err := c.wait(t); err != nil {
		t.Fatalf("campaign: %v\n%s", err, c.output())
	}
	dir := onlyDir(out)
	before := assertAllRunsOK(t, dir)
	plan := readCampaign(t, dir).Plan
	corrupt := filepath.Join(dir, plan[0].Dir, artifacts.RunFile)
	if err := os.WriteFile(corrupt, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	r := startCLI(t, ctx, "--resume", dir)
	if err := r.wait(t); err != nil {
		t.Fatalf("resume with an empty run.json: %v\n%s", err, r.output())
	}
	if !strings.Contains(r.stderr.String(), "unreadable") {
		t.Errorf("the resume does not say it runs run 1 again:\n%s", r.output())
	}
	after := assertAllRunsOK(t, dir)
	if bytes.Equal(after[plan[0].Dir], before[plan[0].Dir]) {
		t.Error("run 1 was not run again")
	}
	if !bytes.Equal(after[plan[1].Dir], before[plan[1].Dir]) {
		t.Error("the resume repeated run 2, which was fine")
	}
	assertNoProcessLeft(t, dir)
}

// A backend killed mid-campaign fails the run it happens in, with the
// reason, and stops the campaign at once (no run after it is tried).
func TestE2E_BackendKilledMidCampaign(t *testing.T) {
	_, out, c := startTiny(t)
	var dir string
	waitFor(t, c, "run 2 started", func() bool {
		dir = onlyDir(out)
		m, _ := filepath.Glob(filepath.Join(dir, "runs", "02-*"))
		return dir != "" && len(m) == 1
	})
	var procs []local.Process
	if err := artifacts.ReadJSON(filepath.Join(dir, "logs", local.ProcessesFile), &procs); err != nil {
		t.Fatal(err)
	}
	victim := -1
	for _, p := range procs {
		if p.Name == "backend-fast-0" {
			victim = p.PID
		}
	}
	if victim < 0 {
		t.Fatalf("no backend-fast-0 in %+v", procs)
	}
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := c.wait(t)
	if err == nil || !strings.Contains(c.stderr.String(), "backend-fast-0") || !strings.Contains(c.stderr.String(), "--resume") {
		t.Fatalf("campaign with a dead backend: %v, want a stop naming it and how to resume\n%s", err, c.output())
	}
	// The run it died in (run 2, or run 3 if run 2 had just finished)
	// failed with the reason; nothing after it ran.
	plan := readCampaign(t, dir).Plan
	stoppedAt := 0
	for _, p := range plan {
		var r artifacts.Run
		rerr := artifacts.ReadJSON(filepath.Join(dir, p.Dir, artifacts.RunFile), &r)
		switch {
		case stoppedAt > 0:
			if exists(filepath.Join(dir, p.Dir)) {
				t.Errorf("run %d ran after the campaign stopped at run %d", p.Index, stoppedAt)
			}
		case rerr != nil:
			t.Fatalf("run %d: %v", p.Index, rerr)
		case r.Status == artifacts.StatusFailed:
			stoppedAt = p.Index
			if !strings.Contains(r.Error, "backend-fast-0") || !strings.Contains(r.Error, "exited unexpectedly") {
				t.Errorf("run %d failed with %q, want the backend's death", p.Index, r.Error)
			}
		}
	}
	if stoppedAt < 2 || stoppedAt > 3 {
		t.Errorf("campaign stopped at run %d, want 2 (or 3)", stoppedAt)
	}
	assertNoProcessLeft(t, dir)
}

// Two campaigns started together (nearly always in the same second) get
// two directories and both finish.
func TestE2E_TwoCampaignsInTheSameSecond(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs real processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	binary(t) // built before the two start, so they start together
	for attempt := 1; attempt <= 3; attempt++ {
		out := t.TempDir()
		args := []string{"--scenario", testdata(t, "tiny.yaml"), "--out", out, "--ingress-replicas", "1", "--reps", "1", "--algorithms", "prequal"}
		a, b := startCLI(t, ctx, args...), startCLI(t, ctx, args...)
		errA, errB := a.wait(t), b.wait(t)
		if errA != nil || errB != nil {
			t.Fatalf("campaigns: %v, %v\nfirst:\n%s\nsecond:\n%s", errA, errB, a.output(), b.output())
		}
		entries, err := os.ReadDir(out)
		if err != nil || len(entries) != 2 {
			t.Fatalf("%d campaign directories (%v), want 2", len(entries), err)
		}
		same := strings.HasPrefix(entries[1].Name(), entries[0].Name())
		for _, e := range entries {
			assertAllRunsOK(t, filepath.Join(out, e.Name()))
		}
		if same {
			return // the same second, told apart by the suffix
		}
		t.Logf("attempt %d: the two started in different seconds (%s, %s); again", attempt, entries[0].Name(), entries[1].Name())
	}
	t.Skip("the two campaigns never started in the same second")
}

// startTiny starts the CLI on the tiny scenario with one ingress replica
// (plus extra flags) in a new output directory, for an end-to-end test
// bounded by 5 minutes; it skips the test under -short.
func startTiny(t *testing.T, extra ...string) (context.Context, string, *cli) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: builds and runs real processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	out := t.TempDir()
	args := append([]string{"--scenario", testdata(t, "tiny.yaml"), "--out", out, "--ingress-replicas", "1"}, extra...)
	return ctx, out, startCLI(t, ctx, args...)
}
