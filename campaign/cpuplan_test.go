package campaign

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/load"
	"github.com/prequalbench/prequalbench/scenario"
)

// A host without headroom whose ingress and backends could not be read
// (a cluster whose pods' CPU is unreadable) is not charged to outside
// processes, nor passed: the run is invalid, and says whose CPU is unknown.
func TestJudge_UnattributedBusyHostIsInvalid(t *testing.T) {
	var series []load.Second
	for i := range 10 {
		idle := 40.0
		if i%2 == 1 && i < 8 {
			idle = 5
		}
		series = append(series, load.Second{Second: i, CPU: &load.CPU{HostIdle: idle, Generator: 10, Ingress: math.NaN(), Backends: math.NaN()}})
	}
	v := judge(healthyLoad(), series, 4400, false, 2)
	if v.Valid || v.HostCheck != artifacts.HostCheckUnattributed || len(v.Reasons) != 1 ||
		!strings.Contains(v.Reasons[0], "host idle below 10% for 4 s of the window's 10") || !strings.Contains(v.Reasons[0], "could not be read") {
		t.Errorf("unattributed busy host: %+v", v)
	}
	series[1].CPU.HostIdle, series[3].CPU.HostIdle = 40, 40
	if v := judge(healthyLoad(), series, 4400, false, 2); !v.Valid || v.HostCheck != artifacts.HostCheckPassed {
		t.Errorf("2 unattributed busy seconds (within the allowance): %+v, want passed", v)
	}
}

// cpuEnv is a cluster-like environment that samples its own CPU.
type cpuEnv struct {
	*fakeEnv
	plan    func() env.CPUPlan
	samples atomic.Int32
	stops   atomic.Int32
}

func (c *cpuEnv) PlanCPU(context.Context) env.CPUPlan {
	p := c.plan()
	if p.Sample != nil {
		inner := p.Sample
		p.Sample = func() *load.CPU { c.samples.Add(1); return inner() }
	}
	p.Stop = func() { c.stops.Add(1) }
	return p
}

// An environment that samples its own CPU (env.CPUSampler) feeds the run's
// host check, and its note (what it sampled, or why nothing) is recorded
// on every run, whichever way the check went.
func TestRun_EnvironmentSamplesItsOwnCPU(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plan  env.CPUPlan
		check string
		note  string
	}{
		{"readable", env.CPUPlan{CPUs: 1, Note: func() string { return "fake nodes via the summary API" },
			Sample: func() *load.CPU { return &load.CPU{HostIdle: 60, Generator: 5, Ingress: 20, Backends: 10} }},
			artifacts.HostCheckPassed, "fake nodes via the summary API"},
		{"unreadable", env.CPUPlan{CPUs: 1, Note: func() string { return "node CPU not readable: no kubelet" }},
			artifacts.HostCheckNotMeasured, "node CPU not readable: no kubelet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ce := &cpuEnv{fakeEnv: newFakeEnv(t), plan: func() env.CPUPlan { return tc.plan }}
			res, err := Run(context.Background(), Options{Scenario: tinyScenario(t), OutDir: t.TempDir(), Now: fixedNow,
				Env: func(string, *scenario.Scenario, uint64) (env.Environment, error) { return ce, nil }})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res.Runs {
				var run artifacts.Run
				if err := artifacts.ReadJSON(filepath.Join(res.Dir, filepath.FromSlash(r.Dir), artifacts.RunFile), &run); err != nil {
					t.Fatal(err)
				}
				if run.Validity.HostCheck != tc.check || run.Validity.HostCheckNote != tc.note {
					t.Errorf("run %d: host check %q, note %q; want %q, %q", run.Index, run.Validity.HostCheck, run.Validity.HostCheckNote, tc.check, tc.note)
				}
			}
			if n := len(res.Runs); int(ce.stops.Load()) != n {
				t.Errorf("%d runs, sampling stopped %d times", n, ce.stops.Load())
			}
			if tc.plan.Sample != nil && ce.samples.Load() == 0 {
				t.Error("the environment's sampler was never called")
			}
		})
	}
}

// A check that read only some of the window's seconds (nodes that stopped
// answering) says how many in its note, so "passed" on a few readings is
// not read as a check of the whole window.
func TestRun_PartlyReadHostCheckSaysHowMuch(t *testing.T) {
	var calls atomic.Int32
	ce := &cpuEnv{fakeEnv: newFakeEnv(t), plan: func() env.CPUPlan {
		return env.CPUPlan{CPUs: 1, Note: func() string { return "fake nodes" },
			Sample: func() *load.CPU {
				if calls.Add(1) == 3 { // the window's second row
					return &load.CPU{HostIdle: math.NaN(), Generator: math.NaN(), Ingress: math.NaN(), Backends: math.NaN()}
				}
				return &load.CPU{HostIdle: 60, Generator: 5, Ingress: 20, Backends: 10}
			}}
	}}
	s := tinyScenario(t)
	s.Protocol.Algorithms, s.Protocol.Reps = s.Protocol.Algorithms[:1], 1
	s.Load.Open[0].Duration = "3s"
	res, err := Run(context.Background(), Options{Scenario: s, OutDir: t.TempDir(), Now: fixedNow,
		Env: func(string, *scenario.Scenario, uint64) (env.Environment, error) { return ce, nil }})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Runs {
		var run artifacts.Run
		if err := artifacts.ReadJSON(filepath.Join(res.Dir, filepath.FromSlash(r.Dir), artifacts.RunFile), &run); err != nil {
			t.Fatal(err)
		}
		if run.Validity.HostCheck != artifacts.HostCheckPassed || !strings.HasPrefix(run.Validity.HostCheckNote, "fake nodes; only ") ||
			!strings.Contains(run.Validity.HostCheckNote, "seconds had a reading, the rest went unchecked") {
			t.Errorf("run %d: host check %q, note %q; want passed, saying how many seconds were read", run.Index, run.Validity.HostCheck, run.Validity.HostCheckNote)
		}
	}
}
