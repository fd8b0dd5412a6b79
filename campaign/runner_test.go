package campaign

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/ingress/adminapi"
	"github.com/prequalbench/prequalbench/load"
	"github.com/prequalbench/prequalbench/scenario"
)

// fakeEnv serves the load from an httptest server on loopback and records
// what the runner asked of it.
type fakeEnv struct {
	srv *httptest.Server

	mu         sync.Mutex
	algorithms []string
	resets     int
	setups     int
	closed     bool
	failAlgo   string            // SetAlgorithm fails for this algorithm
	onSet      func(algo string) // called from SetAlgorithm
}

var _ env.Environment = (*fakeEnv)(nil)

func newFakeEnv(t *testing.T) *fakeEnv {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"duration_ms":0}`))
	}))
	t.Cleanup(srv.Close)
	return &fakeEnv{srv: srv}
}

func (f *fakeEnv) Setup(context.Context) error { f.setups++; return nil }
func (f *fakeEnv) Backends() []artifacts.Backend {
	return []artifacts.Backend{{Address: f.srv.Listener.Addr().String(), Group: "fast", Route: "work"}}
}
func (f *fakeEnv) LoadTargets() []env.Target {
	return []env.Target{{URL: f.srv.URL + "/work", Host: "bench.local", Weight: 1, Route: "work"}}
}
func (f *fakeEnv) SetAlgorithm(_ context.Context, a string) error {
	f.mu.Lock()
	f.algorithms = append(f.algorithms, a)
	f.mu.Unlock()
	if f.onSet != nil {
		f.onSet(a)
	}
	if a == f.failAlgo {
		return errors.New("fake: cannot set " + a)
	}
	return nil
}
func (f *fakeEnv) Reset(context.Context, string) (env.Verification, error) {
	f.resets++
	return env.Verification{Verified: true, Detail: "fake"}, nil
}
func (f *fakeEnv) Snapshot(context.Context) ([]adminapi.State, error) {
	return []adminapi.State{{Routes: []adminapi.RouteState{{Key: "work"}}}}, nil
}
func (f *fakeEnv) Facts() artifacts.Environment { return artifacts.Environment{Name: "fake", CPUs: 1} }
func (f *fakeEnv) Close() error                 { f.closed = true; return nil }

func tinyScenario(t *testing.T) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Parse([]byte(`
name: tiny
workload:
  routes:
    - name: work
      backends: [{name: fast, replicas: 1}]
load:
  open: [{kind: constant, duration: 300ms, rate: 40}]
protocol:
  algorithms: [prequal, round-robin]
  reps: 2
  warmup: 100ms
  cooldown: 0s
  seed: 3
`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func fixedNow() time.Time { return time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC) }

func runWith(t *testing.T, ctx context.Context, fe *fakeEnv, opts Options) (*Result, error) {
	t.Helper()
	opts.Env = func(string, *scenario.Scenario, uint64) (env.Environment, error) { return fe, nil }
	if opts.Now == nil {
		opts.Now = fixedNow
	}
	return Run(ctx, opts)
}

func TestRun_WritesEveryArtifactInPlanOrder(t *testing.T) {
	fe := newFakeEnv(t)
	out := t.TempDir()
	res, err := runWith(t, context.Background(), fe, Options{Scenario: tinyScenario(t), OutDir: out})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(out, "20260501-120000-tiny"); res.Dir != want {
		t.Errorf("dir = %s, want %s", res.Dir, want)
	}
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(res.Dir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	if c.Finished.IsZero() || c.Environment.Name != "fake" || len(c.Backends) != 1 || c.Seed != 3 || c.Reference != "prequal" {
		t.Errorf("campaign.json incomplete: %+v", c)
	}
	plan, _, _ := Plan([]string{"prequal", "round-robin"}, 2, "shuffle", 3)
	if diff := cmp.Diff(plan, c.Plan); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	var set []string
	for _, p := range plan {
		set = append(set, p.Algorithm)
	}
	if diff := cmp.Diff(set, fe.algorithms); diff != "" {
		t.Errorf("algorithms set in order (-want +got):\n%s", diff)
	}
	if fe.resets != 4 || !fe.closed {
		t.Errorf("resets %d (want 4), closed %v", fe.resets, fe.closed)
	}
	for _, p := range c.Plan {
		dir := filepath.Join(res.Dir, p.Dir)
		for _, f := range []string{artifacts.RunFile, artifacts.HistogramFile, artifacts.TimeseriesFile, artifacts.StateBefore, artifacts.StateAfter} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("run %d: %v", p.Index, err)
			}
		}
		var r artifacts.Run
		if err := artifacts.ReadJSON(filepath.Join(dir, artifacts.RunFile), &r); err != nil {
			t.Fatal(err)
		}
		if r.Status != artifacts.StatusOK || !r.ResetVerified || r.Load.Sent == 0 || r.Load.Completed == 0 || r.PlannedRun != p {
			t.Errorf("run %d: %+v", p.Index, r)
		}
		b, err := os.ReadFile(filepath.Join(dir, artifacts.HistogramFile))
		if err != nil {
			t.Fatal(err)
		}
		h, err := artifacts.DecodeHistogram(b)
		if err != nil {
			t.Fatal(err)
		}
		if uint64(h.TotalCount()) != r.Load.Succeeded || r.Load.Succeeded == 0 {
			t.Errorf("run %d: histogram holds %d, run.json says %d succeeded", p.Index, h.TotalCount(), r.Load.Succeeded)
		}
	}
}

func TestRun_FailedRunIsRecordedAndCampaignGoesOn(t *testing.T) {
	fe := newFakeEnv(t)
	fe.failAlgo = "round-robin"
	res, err := runWith(t, context.Background(), fe, Options{Scenario: tinyScenario(t), OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 4 {
		t.Fatalf("%d runs, want 4", len(res.Runs))
	}
	for _, r := range res.Runs {
		wantFailed := r.Algorithm == "round-robin"
		if (r.Status == artifacts.StatusFailed) != wantFailed {
			t.Errorf("run %d %s: status %s (%s)", r.Index, r.Algorithm, r.Status, r.Error)
		}
		if wantFailed && !strings.Contains(r.Error, "cannot set round-robin") {
			t.Errorf("run %d: error %q does not say why", r.Index, r.Error)
		}
	}
	sums := Summarize([]string{"prequal", "round-robin"}, res.Runs)
	if sums[0].OK != 2 || sums[1].Failed != 2 {
		t.Errorf("summary %+v", sums)
	}
}

// An interrupted campaign keeps its finished runs and leaves nothing of
// the interrupted one; --resume runs only what is missing.
func TestRun_InterruptThenResume(t *testing.T) {
	fe := newFakeEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	fe.onSet = func(string) {
		calls++
		if calls == 3 {
			cancel()
		}
	}
	s := tinyScenario(t)
	res, err := runWith(t, ctx, fe, Options{Scenario: s, OutDir: t.TempDir()})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run error = %v, want context.Canceled", err)
	}
	if !fe.closed {
		t.Error("environment not closed after the interrupt")
	}
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(res.Dir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	if !c.Finished.IsZero() {
		t.Error("interrupted campaign marked finished")
	}
	if _, err := os.Stat(filepath.Join(res.Dir, c.Plan[2].Dir)); !os.IsNotExist(err) {
		t.Errorf("interrupted run left %s behind (%v)", c.Plan[2].Dir, err)
	}
	// Simulate a crash mid-run too: a run directory without run.json.
	partial := filepath.Join(res.Dir, c.Plan[3].Dir)
	if err := os.MkdirAll(partial, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(partial, artifacts.StateBefore), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	first := map[string][]byte{}
	for _, p := range c.Plan[:2] {
		b, err := os.ReadFile(filepath.Join(res.Dir, p.Dir, artifacts.RunFile))
		if err != nil {
			t.Fatalf("finished run %d lost: %v", p.Index, err)
		}
		first[p.Dir] = b
	}

	fe2 := newFakeEnv(t)
	res2, err := runWith(t, context.Background(), fe2, Options{ResumeDir: res.Dir})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{c.Plan[2].Algorithm, c.Plan[3].Algorithm}, fe2.algorithms); diff != "" {
		t.Errorf("resume ran (-want +got):\n%s", diff)
	}
	if len(res2.Runs) != 4 {
		t.Errorf("resume reports %d runs, want 4", len(res2.Runs))
	}
	for dir, b := range first {
		got, _ := os.ReadFile(filepath.Join(res.Dir, dir, artifacts.RunFile))
		if string(got) != string(b) {
			t.Errorf("resume rewrote finished run %s", dir)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(partial, artifacts.StateBefore)); string(b) == "junk" {
		t.Error("the partial run's leftovers were not replaced")
	}
	if err := artifacts.ReadJSON(filepath.Join(res.Dir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	if c.Finished.IsZero() {
		t.Error("resumed campaign not marked finished")
	}
}

func TestRun_SequentialOrderWarns(t *testing.T) {
	fe := newFakeEnv(t)
	s := tinyScenario(t)
	s.Protocol.Order = scenario.OrderSequential
	s.Protocol.Reps = 1
	var warn strings.Builder
	if _, err := runWith(t, context.Background(), fe, Options{Scenario: s, OutDir: t.TempDir(), Warn: &warn}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(warn.String(), "not interleaved") {
		t.Errorf("warnings = %q", warn.String())
	}
}

// choosyEnv is a LoadDriver that may hand the load back (in-cluster
// generators on a cluster that forbids them).
type choosyEnv struct {
	*fakeEnv
	drives bool
	ran    int
}

func (c *choosyEnv) DrivesLoad() bool { return c.drives }
func (c *choosyEnv) RunLoad(context.Context, load.Config) (*load.Result, error) {
	c.ran++
	return nil, errors.New("choosyEnv: RunLoad called")
}

// An env that hands the load back (DrivesLoad false) gets it from the
// runner's own engine, sent to its LoadTargets; one that keeps it gets
// RunLoad.
func TestRun_LoadChooserHandsTheLoadBack(t *testing.T) {
	ce := &choosyEnv{fakeEnv: newFakeEnv(t)}
	opts := Options{Scenario: tinyScenario(t), OutDir: t.TempDir(), Now: fixedNow,
		Env: func(string, *scenario.Scenario, uint64) (env.Environment, error) { return ce, nil }}
	res, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if ce.ran != 0 {
		t.Errorf("RunLoad called %d times after the env handed the load back", ce.ran)
	}
	for _, r := range res.Runs {
		if r.Status != artifacts.StatusOK || r.Load.Sent == 0 {
			t.Errorf("run %d: %s %s, sent %d", r.Index, r.Status, r.Error, r.Load.Sent)
		}
	}
	ce = &choosyEnv{fakeEnv: newFakeEnv(t), drives: true}
	opts.OutDir = t.TempDir()
	res, _ = Run(context.Background(), opts)
	if ce.ran == 0 || len(res.Runs) == 0 || res.Runs[0].Status != artifacts.StatusFailed {
		t.Errorf("a driving env's RunLoad was not used (%d calls)", ce.ran)
	}
}

// The scenario's own warnings (wrr's blackout longer than the warmup) are
// printed and recorded in campaign.json, where the report reads them.
func TestRun_ScenarioWarningsRecorded(t *testing.T) {
	fe := newFakeEnv(t)
	s := tinyScenario(t)
	s.Protocol.Algorithms = []string{"prequal", "wrr"}
	s.Protocol.Reps = 1
	var warn strings.Builder
	res, err := runWith(t, context.Background(), fe, Options{Scenario: s, OutDir: t.TempDir(), Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(warn.String(), "wrr: its weights come into force") {
		t.Errorf("printed warnings = %q, want wrr's", warn.String())
	}
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(res.Dir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "the whole measured window runs as round-robin") {
		t.Errorf("campaign.json warnings = %q, want wrr's", c.Warnings)
	}
}
