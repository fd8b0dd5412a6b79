package campaign

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/ingress/adminapi"
	"github.com/prequalbench/prequalbench/scenario"
)

// scalingEnv is a fakeEnv that can scale, and logs scalings and snapshots
// in the order they happen.
type scalingEnv struct {
	*fakeEnv
	mu      sync.Mutex
	log     []string
	targets []int
	failAt  int // ScaleGroup fails at this call (1-based); 0 never
}

var _ env.Scaler = (*scalingEnv)(nil)

func (s *scalingEnv) ScaleGroup(_ context.Context, group string, n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, "scale")
	s.targets = append(s.targets, n)
	if group != "fast" {
		return errors.New("unknown group " + group)
	}
	if len(s.targets) == s.failAt {
		return errors.New("fake: cannot scale")
	}
	return nil
}

func (s *scalingEnv) Snapshot(ctx context.Context) ([]adminapi.State, error) {
	s.mu.Lock()
	s.log = append(s.log, "snapshot")
	s.mu.Unlock()
	return s.fakeEnv.Snapshot(ctx)
}

func churnScenario(t *testing.T) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Parse([]byte(`
name: churny
workload:
  routes:
    - name: work
      backends: [{name: fast, replicas: 2}]
load:
  open: [{kind: constant, duration: 1s, rate: 40}]
protocol:
  algorithms: [round-robin]
  reps: 1
  warmup: 100ms
  cooldown: 0s
churn: {group: fast, min: 1, max: 3, every: 150ms}
`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func runScaling(t *testing.T, se *scalingEnv, s *scenario.Scenario) (*Result, error) {
	t.Helper()
	return Run(context.Background(), Options{Scenario: s, OutDir: t.TempDir(), Now: fixedNow,
		Env: func(string, *scenario.Scenario, uint64) (env.Environment, error) { return se, nil }})
}

// The group is scaled on the pattern only between the window's two
// snapshots, then back to the scenario's count, and churn.csv lists it all.
func TestChurn_ScalesDuringTheWindowAndRestores(t *testing.T) {
	se := &scalingEnv{fakeEnv: newFakeEnv(t)}
	res, err := runScaling(t, se, churnScenario(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 1 || res.Runs[0].Status != artifacts.StatusOK {
		t.Fatalf("runs %+v", res.Runs)
	}
	n := len(se.targets)
	if n < 2 {
		t.Fatalf("scalings %v: want at least one step and the restore", se.targets)
	}
	steps := se.targets[:n-1]
	if want := churnScenario(t).Churn.Steps(2, len(steps)); !slices.Equal(steps, want) {
		t.Errorf("steps %v, want the pattern's %v", steps, want)
	}
	if se.targets[n-1] != 2 {
		t.Errorf("last scaling to %d, want back to the scenario's 2", se.targets[n-1])
	}
	// snapshot (window start), the steps, snapshot (window end), restore.
	log := strings.Join(se.log, " ")
	if want := "snapshot " + strings.Repeat("scale ", len(steps)) + "snapshot scale"; log != want {
		t.Errorf("order %q, want %q", log, want)
	}
	b, err := os.ReadFile(filepath.Join(res.Dir, res.Runs[0].Dir, ChurnFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 1+1+len(steps)+1 || lines[0] != "phase,at_s,group,replicas,took_ms,error" ||
		!strings.HasPrefix(lines[1], "start,0.000,fast,2,") || !strings.HasPrefix(lines[len(lines)-1], "restore,") {
		t.Errorf("churn.csv:\n%s", b)
	}
}

// A failed scaling fails the run with the reason, and the group is still
// scaled back.
func TestChurn_AFailedStepFailsTheRun(t *testing.T) {
	se := &scalingEnv{fakeEnv: newFakeEnv(t), failAt: 1}
	res, err := runScaling(t, se, churnScenario(t))
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	if r.Status != artifacts.StatusFailed || !strings.Contains(r.Error, "churn step 1") || !strings.Contains(r.Error, "cannot scale") {
		t.Errorf("run %s: %q, want failed naming the churn step", r.Status, r.Error)
	}
	if got := se.targets; len(got) != 2 || got[1] != 2 {
		t.Errorf("scalings %v, want the failed step then back to 2", got)
	}
}

// An environment that cannot scale refuses a churn scenario before its
// setup, naming the group.
func TestChurn_EnvironmentThatCannotScale(t *testing.T) {
	fe := newFakeEnv(t)
	_, err := runWith(t, context.Background(), fe, Options{Scenario: churnScenario(t), OutDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "cannot scale") || !strings.Contains(err.Error(), "fast") {
		t.Errorf("err = %v, want a refusal naming the group", err)
	}
	if fe.setups != 0 {
		t.Error("the environment was set up before the refusal")
	}
}
