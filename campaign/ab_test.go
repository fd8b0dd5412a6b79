package campaign

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/scenario"
)

// abEnv is a fakeEnv that can switch builds, and records each switch
// beside the algorithm set after it.
type abEnv struct {
	*fakeEnv
	mu    sync.Mutex
	steps []string
}

func (a *abEnv) SetBuild(_ context.Context, b artifacts.Build) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.steps = append(a.steps, "build "+b.Name+" "+b.IngressBin)
	return nil
}

func abBuilds() []artifacts.Build {
	return []artifacts.Build{
		{Name: "99f0770", Role: artifacts.BuildBaseline, IngressBin: "/bin/base"},
		{Name: "073ab5d", Role: artifacts.BuildCandidate, IngressBin: "/bin/head"},
	}
}

func oneAlgorithm(t *testing.T) Options {
	s := tinyScenario(t)
	s.Protocol.Algorithms, s.Protocol.Reference = []string{"prequal"}, "prequal"
	return Options{Scenario: s, OutDir: t.TempDir(), Builds: abBuilds()}
}

// An A/B campaign plans the one policy on both builds as two arms, the
// baseline's the reference, and puts each run's build in place before
// it sets the policy (plain, without the build) and resets.
func TestRun_ABSwitchesTheBuildBeforeEveryRun(t *testing.T) {
	fe := &abEnv{fakeEnv: newFakeEnv(t)}
	fe.onSet = func(a string) { fe.mu.Lock(); fe.steps = append(fe.steps, "algo "+a); fe.mu.Unlock() }
	opts := oneAlgorithm(t)
	opts.Env = nil
	res, err := Run(context.Background(), withEnv(opts, fe))
	if err != nil {
		t.Fatal(err)
	}
	c := res.Campaign
	if want := []string{"prequal@99f0770", "prequal@073ab5d"}; strings.Join(c.Algorithms, ",") != strings.Join(want, ",") {
		t.Fatalf("arms %v, want %v", c.Algorithms, want)
	}
	if c.Reference != "prequal@99f0770" || len(c.Builds) != 2 {
		t.Fatalf("reference %q, builds %v: want the baseline's arm and both builds recorded", c.Reference, c.Builds)
	}
	if len(res.Runs) != 4 {
		t.Fatalf("%d runs, want 2 reps x 2 builds", len(res.Runs))
	}
	bins := map[string]string{"99f0770": "/bin/base", "073ab5d": "/bin/head"}
	for i, r := range res.Runs {
		_, build := artifacts.SplitArm(r.Algorithm)
		want := []string{"build " + build + " " + bins[build], "algo prequal"}
		if got := fe.steps[2*i : 2*i+2]; strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("run %d (%s): steps %v, want %v", r.Index, r.Algorithm, got, want)
		}
		if r.Status != artifacts.StatusOK {
			t.Errorf("run %d: %s %s", r.Index, r.Status, r.Error)
		}
	}
}

// An environment that cannot switch builds fails each A/B run with an
// error that says so, rather than running one build twice.
func TestRun_ABRefusedByAnEnvironmentWithoutBuilds(t *testing.T) {
	fe := newFakeEnv(t)
	res, err := runWith(t, context.Background(), fe, oneAlgorithm(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Runs {
		if r.Status != artifacts.StatusFailed || !strings.Contains(r.Error, "cannot run two builds") {
			t.Errorf("run %d: %s %q, want failed: cannot run two builds", r.Index, r.Status, r.Error)
		}
	}
	if len(fe.algorithms) != 0 {
		t.Errorf("algorithms set %v: a run must not go on without its build", fe.algorithms)
	}
}

func TestRun_ABNeedsOneAlgorithmAndTwoNamedBuilds(t *testing.T) {
	for name, mutate := range map[string]func(*Options){
		"two algorithms": func(o *Options) { o.Scenario = tinyScenario(t) },
		"same names":     func(o *Options) { o.Builds[1].Name = o.Builds[0].Name },
		"one build":      func(o *Options) { o.Builds = o.Builds[:1] },
		"no binary":      func(o *Options) { o.Builds[0].IngressBin = "" },
	} {
		opts := oneAlgorithm(t)
		mutate(&opts)
		if _, err := runWith(t, context.Background(), newFakeEnv(t), opts); err == nil {
			t.Errorf("%s: campaign started, want an error", name)
		}
	}
}

func withEnv(opts Options, e *abEnv) Options {
	opts.Env = func(string, *scenario.Scenario, uint64) (env.Environment, error) { return e, nil }
	opts.Now = fixedNow
	return opts
}
