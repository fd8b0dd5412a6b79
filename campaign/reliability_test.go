package campaign

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/scenario"
)

// Two campaigns of one scenario started in the same second (the clock is
// fixed) get two directories, also when they race.
func TestRun_SameSecondCampaignsGetDistinctDirectories(t *testing.T) {
	out := t.TempDir()
	s := tinyScenario(t)
	s.Protocol.Reps = 1
	s.Protocol.Algorithms = []string{"prequal"}
	var wg sync.WaitGroup
	dirs := make([]string, 4)
	errs := make([]error, 4)
	for i := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := runWith(t, context.Background(), newFakeEnv(t), Options{Scenario: s, OutDir: out})
			errs[i] = err
			if res != nil {
				dirs[i] = res.Dir
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, d := range dirs {
		if errs[i] != nil {
			t.Errorf("campaign %d: %v", i, errs[i])
			continue
		}
		if seen[d] {
			t.Errorf("two campaigns share %s", d)
		}
		seen[d] = true
		var c artifacts.Campaign
		if err := artifacts.ReadJSON(filepath.Join(d, artifacts.CampaignFile), &c); err != nil {
			t.Fatal(err)
		}
		if c.ID != filepath.Base(d) || !strings.HasPrefix(c.ID, "20260501-120000-tiny") {
			t.Errorf("campaign %d: id %q in %s", i, c.ID, d)
		}
	}
	if !seen[filepath.Join(out, "20260501-120000-tiny")] || !seen[filepath.Join(out, "20260501-120000-tiny-4")] {
		t.Errorf("directories %v, want the id then -2, -3, -4", dirs)
	}
}

// A resume of a campaign that is running is refused at once, naming the
// lock's holder, and leaves the running campaign's runs alone.
func TestRun_ResumeOfARunningCampaignIsRefused(t *testing.T) {
	fe := newFakeEnv(t)
	inRun := make(chan string, 1)
	release := make(chan struct{})
	calls := 0
	fe.onSet = func(string) {
		calls++
		if calls == 2 {
			inRun <- ""
			<-release
		}
	}
	out := t.TempDir()
	type result struct {
		res *Result
		err error
	}
	first := make(chan result, 1)
	go func() {
		res, err := runWith(t, context.Background(), fe, Options{Scenario: tinyScenario(t), OutDir: out})
		first <- result{res, err}
	}()
	<-inRun
	dir := filepath.Join(out, "20260501-120000-tiny")
	fe2 := newFakeEnv(t)
	_, err := runWith(t, context.Background(), fe2, Options{ResumeDir: dir})
	close(release)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid") {
		t.Errorf("second resume: %v, want ErrLocked naming the holder's pid", err)
	}
	if fe2.setups != 0 || len(fe2.algorithms) != 0 {
		t.Errorf("the refused resume started an environment (%d setups) or runs %v", fe2.setups, fe2.algorithms)
	}
	r := <-first
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.res.Runs) != 4 {
		t.Errorf("the running campaign finished %d runs, want 4", len(r.res.Runs))
	}
	// Once it is done, the lock is free again.
	if _, err := runWith(t, context.Background(), newFakeEnv(t), Options{ResumeDir: dir}); err != nil {
		t.Errorf("resume after the campaign ended: %v", err)
	}
}

// --resume runs failed runs again (keeping the failed attempt), runs
// again a run whose run.json is empty or corrupt, and keeps ok runs.
func TestRun_ResumeRerunsFailedAndUnreadableRuns(t *testing.T) {
	fe := newFakeEnv(t)
	fe.failAlgo = "round-robin"
	res, err := runWith(t, context.Background(), fe, Options{Scenario: tinyScenario(t), OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Campaign
	var okDirs, failedDirs []string
	for _, r := range res.Runs {
		if r.Status == artifacts.StatusOK {
			okDirs = append(okDirs, r.Dir)
		} else {
			failedDirs = append(failedDirs, r.Dir)
		}
	}
	if len(okDirs) != 2 || len(failedDirs) != 2 {
		t.Fatalf("ok %v, failed %v", okDirs, failedDirs)
	}
	// One ok run.json cut to nothing, as a crash without fsync could.
	corrupt := okDirs[0]
	if err := os.WriteFile(filepath.Join(res.Dir, corrupt, artifacts.RunFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	kept, _ := os.ReadFile(filepath.Join(res.Dir, okDirs[1], artifacts.RunFile))

	fe2 := newFakeEnv(t)
	var warn strings.Builder
	res2, err := runWith(t, context.Background(), fe2, Options{ResumeDir: res.Dir, Warn: &warn})
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	var want []string
	for _, p := range c.Plan {
		if p.Dir != okDirs[1] {
			want = append(want, p.Algorithm)
		}
	}
	if diff := cmp.Diff(want, fe2.algorithms); diff != "" {
		t.Errorf("resume ran (-want +got):\n%s", diff)
	}
	for _, r := range res2.Runs {
		if r.Status != artifacts.StatusOK {
			t.Errorf("run %d after resume: %s %s", r.Index, r.Status, r.Error)
		}
	}
	if again, _ := os.ReadFile(filepath.Join(res.Dir, okDirs[1], artifacts.RunFile)); string(again) != string(kept) {
		t.Error("resume rewrote a finished ok run")
	}
	for _, d := range failedDirs {
		var r artifacts.Run
		if err := artifacts.ReadJSON(filepath.Join(res.Dir, FailedDir, filepath.Base(d)+".1", artifacts.RunFile), &r); err != nil || r.Status != artifacts.StatusFailed {
			t.Errorf("failed attempt of %s not kept: %v %+v", d, err, r.Status)
		}
	}
	if !strings.Contains(warn.String(), "unreadable") || !strings.Contains(warn.String(), "cannot set round-robin") {
		t.Errorf("warnings do not say what is run again and why:\n%s", warn.String())
	}
}

// factsEnv is a fakeEnv whose facts a test sets.
type factsEnv struct {
	*fakeEnv
	facts artifacts.Environment
}

func (f *factsEnv) Facts() artifacts.Environment { return f.facts }

func runEnv(t *testing.T, ctx context.Context, e env.Environment, opts Options) (*Result, error) {
	t.Helper()
	opts.Env = func(string, *scenario.Scenario, uint64) (env.Environment, error) { return e, nil }
	opts.Now = fixedNow
	return Run(ctx, opts)
}

// A resume on another binary or revision is refused unless forced; forced,
// campaign.json keeps both sessions' facts and the runs say which ran them.
func TestRun_ResumeRefusesOtherEnvironmentUnlessForced(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fe := newFakeEnv(t)
	fe.onSet = func(string) {
		if len(fe.algorithms) == 3 {
			cancel()
		}
	}
	v1 := artifacts.Environment{Name: "fake", CPUs: 2, GitRevision: "aaa", IngressSHA256: "11"}
	opts := Options{Scenario: tinyScenario(t), OutDir: t.TempDir(), Now: fixedNow}
	opts.Env = func(string, *scenario.Scenario, uint64) (env.Environment, error) { return &factsEnv{fe, v1}, nil }
	res, err := Run(ctx, opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first session: %v", err)
	}

	v2 := v1
	v2.GitRevision, v2.IngressSHA256 = "bbb", "22"
	other := &factsEnv{newFakeEnv(t), v2}
	_, err = runEnv(t, context.Background(), other, Options{ResumeDir: res.Dir})
	if err == nil || !strings.Contains(err.Error(), "git_revision: aaa -> bbb") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("resume on another revision: %v, want a refusal naming the difference and --force", err)
	}
	if len(other.algorithms) != 0 || !other.closed {
		t.Errorf("refused resume ran %v, closed %v", other.algorithms, other.closed)
	}
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(res.Dir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Sessions) != 1 || c.Environment.GitRevision != "aaa" {
		t.Errorf("a refused resume changed campaign.json: sessions %+v, environment %+v", c.Sessions, c.Environment)
	}

	forced := &factsEnv{newFakeEnv(t), v2}
	res2, err := runEnv(t, context.Background(), forced, Options{ResumeDir: res.Dir, Force: true})
	if err != nil {
		t.Fatalf("forced resume: %v", err)
	}
	c = res2.Campaign
	if len(c.Sessions) != 2 || c.Sessions[0].Environment.GitRevision != "aaa" || c.Sessions[1].Environment.GitRevision != "bbb" {
		t.Fatalf("sessions %+v, want both facts", c.Sessions)
	}
	if diff := cmp.Diff([]string{"git_revision: aaa -> bbb", "ingress_sha256: 11 -> 22"}, c.Sessions[1].Differences); diff != "" {
		t.Errorf("recorded differences (-want +got):\n%s", diff)
	}
	if c.Environment.GitRevision != "aaa" {
		t.Errorf("campaign environment %+v, want the first session's", c.Environment)
	}
	for _, r := range res2.Runs {
		if want := map[bool]int{true: 1, false: 2}[r.Index <= 2]; r.Session != want {
			t.Errorf("run %d: session %d, want %d", r.Index, r.Session, want)
		}
	}
}

// dyingEnv is a fakeEnv with processes that can die.
type dyingEnv struct {
	*fakeEnv
	died chan struct{}
	once sync.Once
}

func (d *dyingEnv) Died() <-chan struct{} { return d.died }
func (d *dyingEnv) Exited() error {
	select {
	case <-d.died:
		return errors.New("backend-fast-0 (pid 42) exited unexpectedly (signal: killed)")
	default:
		return nil
	}
}
func (d *dyingEnv) kill() { d.once.Do(func() { close(d.died) }) }

var _ ProcessWatcher = (*dyingEnv)(nil)

// A process that dies during a run fails that run at once with the
// reason and stops the campaign; a resume runs the failed run and the
// rest. The measured window is ten minutes: only the death's cancelling
// the run lets the test end before its two-minute deadline.
func TestRun_DeadProcessFailsTheRunAndStopsTheCampaign(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := tinyScenario(t)
	s.Load.Open[0].Duration = "10m"
	de := &dyingEnv{fakeEnv: newFakeEnv(t), died: make(chan struct{})}
	// Kill at the first load request: the protocol is past the reset.
	next := de.srv.Config.Handler
	de.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		de.kill()
		next.ServeHTTP(w, r)
	})
	res, err := runEnv(t, ctx, de, Options{Scenario: s, OutDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "backend-fast-0 (pid 42) exited") || !strings.Contains(err.Error(), "--resume "+res.Dir) {
		t.Fatalf("Run = %v, want the death and how to resume", err)
	}
	if len(res.Runs) != 1 || len(de.algorithms) != 1 {
		t.Fatalf("%d runs recorded, %d started; want 1 and 1 (stop after the death)", len(res.Runs), len(de.algorithms))
	}
	failed := res.Runs[0]
	if failed.Status != artifacts.StatusFailed || !strings.Contains(failed.Error, "exited unexpectedly") {
		t.Errorf("run 1: %s %q, want failed with the death as the reason", failed.Status, failed.Error)
	}
	if !res.Campaign.Finished.IsZero() {
		t.Error("a stopped campaign is marked finished")
	}
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(res.Dir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	// The resume (shortened to the tiny load) runs all four.
	c.ScenarioYAML = strings.Replace(c.ScenarioYAML, "duration: 10m", "duration: 300ms", 1)
	if err := artifacts.WriteJSON(filepath.Join(res.Dir, artifacts.CampaignFile), c); err != nil {
		t.Fatal(err)
	}
	fe := newFakeEnv(t)
	res2, err := runWith(t, ctx, fe, Options{ResumeDir: res.Dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(fe.algorithms) != 4 {
		t.Errorf("resume ran %v, want all four runs", fe.algorithms)
	}
	for _, r := range res2.Runs {
		if r.Status != artifacts.StatusOK {
			t.Errorf("run %d after resume: %s %s", r.Index, r.Status, r.Error)
		}
	}
}

// A process dead before a run fails that run at once, without a load.
func TestRun_ProcessDeadBeforeTheRunFailsIt(t *testing.T) {
	de := &dyingEnv{fakeEnv: newFakeEnv(t), died: make(chan struct{})}
	de.kill()
	res, err := runEnv(t, context.Background(), de, Options{Scenario: tinyScenario(t), OutDir: t.TempDir()})
	if err == nil || len(res.Runs) != 1 || res.Runs[0].Status != artifacts.StatusFailed || !strings.Contains(res.Runs[0].Error, "exited unexpectedly") {
		t.Fatalf("Run = %v, runs %+v; want run 1 failed by the death and a stop", err, res.Runs)
	}
	if res.Runs[0].Load.Sent != 0 {
		t.Errorf("run 1 sent %d requests to a fleet with a dead process", res.Runs[0].Load.Sent)
	}
}

// A resume removes the .tmp-* files a killed session left.
func TestRun_ResumeRemovesStaleTempFiles(t *testing.T) {
	res, err := runWith(t, context.Background(), newFakeEnv(t), Options{Scenario: tinyScenario(t), OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(res.Dir, "."+artifacts.CampaignFile+artifacts.TempMarker+"123")
	if err := os.WriteFile(stale, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runWith(t, context.Background(), newFakeEnv(t), Options{ResumeDir: res.Dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temp file still there (%v)", err)
	}
}

// A refused resume leaves the runs as they were: a failed run stays
// failed in runs/, not moved aside for a rerun that never happens.
func TestRun_RefusedResumeTouchesNoRun(t *testing.T) {
	fe := newFakeEnv(t)
	fe.failAlgo = "round-robin"
	v1 := artifacts.Environment{Name: "fake", CPUs: 2, GitRevision: "aaa"}
	res, err := runEnv(t, context.Background(), &factsEnv{fe, v1}, Options{Scenario: tinyScenario(t), OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	v2 := v1
	v2.GitRevision = "bbb"
	if _, err := runEnv(t, context.Background(), &factsEnv{newFakeEnv(t), v2}, Options{ResumeDir: res.Dir}); err == nil {
		t.Fatal("resume on another revision accepted")
	}
	for _, r := range res.Runs {
		var now artifacts.Run
		if err := artifacts.ReadJSON(filepath.Join(res.Dir, r.Dir, artifacts.RunFile), &now); err != nil || now.Status != r.Status {
			t.Errorf("run %d after a refused resume: %v, status %q, was %q", r.Index, err, now.Status, r.Status)
		}
	}
	if exists, _ := os.Stat(filepath.Join(res.Dir, FailedDir)); exists != nil {
		t.Errorf("a refused resume created %s", FailedDir)
	}
}

// A finished campaign with failed runs is unfinished again once a resume
// has set them aside, also when that resume is interrupted.
func TestRun_InterruptedResumeOfFailedRunsIsUnfinished(t *testing.T) {
	fe := newFakeEnv(t)
	fe.failAlgo = "round-robin"
	res, err := runWith(t, context.Background(), fe, Options{Scenario: tinyScenario(t), OutDir: t.TempDir()})
	if err != nil || res.Campaign.Finished.IsZero() {
		t.Fatalf("first session: %v, finished %v", err, res.Campaign.Finished)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fe2 := newFakeEnv(t)
	fe2.onSet = func(string) { cancel() }
	if _, err := runWith(t, ctx, fe2, Options{ResumeDir: res.Dir}); !errors.Is(err, context.Canceled) {
		t.Fatalf("resume: %v, want context.Canceled", err)
	}
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(res.Dir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	if !c.Finished.IsZero() {
		t.Errorf("campaign.json says finished at %v with failed runs set aside and not run again", c.Finished)
	}
}
