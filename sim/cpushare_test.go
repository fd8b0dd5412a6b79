package sim

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

// TestCPUShare_MG1PSMeanResponse drives one cpu-share replica holding its
// whole machine with Poisson arrivals. Processor sharing makes the mean
// response 1/(μ − λ) whatever the work distribution (M/G/1-PS is
// insensitive), while FIFO with fixed work would give the
// Pollaczek-Khinchine 60 ms here instead of 100 ms; so the fixed case
// fails unless requests really share the rate. Tolerance 4%.
func TestCPUShare_MG1PSMeanResponse(t *testing.T) {
	const (
		work = 20 * time.Millisecond
		rho  = 0.8
		n    = 200_000
	)
	for _, dist := range []string{"exp", "fixed"} {
		t.Run(dist, func(t *testing.T) {
			w, err := New(Config{
				Seed: 5, Clients: 1, Algorithm: loadbalancer.NameRoundRobin, Policy: loadbalancer.DefaultConfig(),
				Routes: []Route{{Name: "r", Groups: []Group{{
					Name: "s", Replicas: 1, Mode: "cpu-share", ServiceTime: work, Distribution: dist, QueueLimit: 1 << 30,
					CPUShare: &CPUShare{Share: 1, PerMachine: 1},
				}}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			mu := 1 / work.Seconds()
			res := poissonRun(t, w, rho*mu, n)
			want := 1 / (mu - rho*mu)
			got := res.Success.Mean() / 1e6
			t.Logf("%s: mean response %.2f ms, M/G/1-PS %.2f ms", dist, got*1e3, want*1e3)
			if math.Abs(got-want)/want > 0.04 {
				t.Errorf("mean response %.2f ms, want %.2f ms ± 4%%", got*1e3, want*1e3)
			}
		})
	}
}

// shareLatencies puts one round-robin client in front of a cpu-share group with
// fixed work, no network delay; sends requests leave at t = 0 and the
// latencies come back sorted.
func shareLatencies(t *testing.T, g Group, sends int) []time.Duration {
	t.Helper()
	g.Name, g.Mode, g.Distribution, g.QueueLimit = "s", "cpu-share", "fixed", 16
	w, err := New(Config{
		Seed: 1, Clients: 1, Algorithm: loadbalancer.NameRoundRobin, Policy: loadbalancer.DefaultConfig(),
		Routes: []Route{{Name: "r", Groups: []Group{g}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &watch{Policy: w.clients[0].policy}
	w.clients[0].policy = p
	lr := &loadRun{l: Load{Timeout: time.Hour}, timeout: int64(time.Hour), start: 0, winFrom: 0, winTo: maxTime}
	w.rec = newRecorder(lr, 0)
	for range sends {
		w.send(0, 0, -1, true)
	}
	runUntil(w, 10*time.Second)
	var out []time.Duration
	for _, d := range p.done {
		if d.status != 200 {
			t.Fatalf("status %d, want 200", d.status)
		}
		out = append(out, d.latency.Round(time.Microsecond))
	}
	slices.Sort(out)
	return out
}

// TestCPUShare_AntagonistStepClosedForm works the fluid model by hand.
// Machine = 2 allocations (share 0.5); the antagonist wants half the
// machine (1 allocation) from 50 ms on; every request is 100 ms of work
// at the allocation.
func TestCPUShare_AntagonistStepClosedForm(t *testing.T) {
	ms := time.Millisecond
	step := MachineLoad{Levels: []float64{0, 0.5}, Hold: []time.Duration{50 * ms, time.Hour}}
	cases := []struct {
		name  string
		g     Group
		sends int
		want  []time.Duration
	}{{
		// Two replicas; round robin puts 2 requests on one (A) and 1 on
		// the other (B). Until 50 ms each replica runs at 1: A's requests
		// do 25 each, B's 50. Then the 1 allocation left splits 0.5/0.5:
		// B needs 50 more at 0.5 (done at 150); A's do 25 more by then,
		// and then A alone runs at 1, 0.5 each, for the last 50 (250).
		name: "two replicas", sends: 3,
		g:    Group{Replicas: 2, ServiceTime: 100 * ms, CPUShare: &CPUShare{Share: 0.5, PerMachine: 2, Antagonist: step}},
		want: []time.Duration{150 * ms, 250 * ms, 250 * ms},
	}, {
		// One replica alone on the machine with 300 ms of work: soft, it
		// borrows the idle allocation and runs at 2 until 50 ms (100
		// done), then at 1 for the other 200: 250 ms.
		name: "soft borrows", sends: 1,
		g:    Group{Replicas: 1, ServiceTime: 300 * ms, CPUShare: &CPUShare{Share: 0.5, PerMachine: 2, Antagonist: step}},
		want: []time.Duration{250 * ms},
	}, {
		// Hard, it stays at 1 throughout: 300 ms.
		name: "hard does not", sends: 1,
		g:    Group{Replicas: 1, ServiceTime: 300 * ms, CPUShare: &CPUShare{Share: 0.5, PerMachine: 2, Hard: true, Antagonist: step}},
		want: []time.Duration{300 * ms},
	}, {
		// One core per allocation: a lone request cannot borrow.
		name: "a request uses one core", sends: 1,
		g:    Group{Replicas: 1, ServiceTime: 300 * ms, CPUShare: &CPUShare{Share: 0.5, PerMachine: 2, Cores: 2, Antagonist: step}},
		want: []time.Duration{300 * ms},
	}, {
		// A thread cap of 1 serves FIFO: 100 and 200 ms, where sharing
		// gives both 200 ms.
		name: "thread cap", sends: 2,
		g:    Group{Replicas: 1, ServiceTime: 100 * ms, CPUShare: &CPUShare{Share: 1, PerMachine: 1, Threads: 1}},
		want: []time.Duration{100 * ms, 200 * ms},
	}, {
		name: "no thread cap", sends: 2,
		g:    Group{Replicas: 1, ServiceTime: 100 * ms, CPUShare: &CPUShare{Share: 1, PerMachine: 1}},
		want: []time.Duration{200 * ms, 200 * ms},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := shareLatencies(t, c.g, c.sends)
			if !slices.Equal(got, c.want) {
				t.Errorf("latencies %v, want %v", got, c.want)
			}
		})
	}
}

func TestShareRates_MaxMinFair(t *testing.T) {
	inf := math.Inf(1)
	cases := []struct {
		avail      float64
		caps, want []float64
	}{
		{10, []float64{inf, inf, 0, inf}, []float64{10.0 / 3, 10.0 / 3, 0, 10.0 / 3}},
		{10, []float64{1, inf, 1}, []float64{1, 8, 1}},
		{1, []float64{1, 1, 1, 1}, []float64{0.25, 0.25, 0.25, 0.25}},
		{-3, []float64{1, inf}, []float64{0, 0}},
	}
	for _, c := range cases {
		got := shareRates(c.avail, c.caps, nil)
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-12 {
				t.Errorf("shareRates(%v, %v) = %v, want %v", c.avail, c.caps, got, c.want)
				break
			}
		}
	}
}

func TestCPUShare_BadSettingsNameTheField(t *testing.T) {
	for _, c := range []struct {
		cs   CPUShare
		want string
	}{
		{CPUShare{Share: 0, PerMachine: 1}, "share"},
		{CPUShare{Share: 0.5, PerMachine: 3}, "share × perMachine"},
		{CPUShare{Share: 0.1, PerMachine: 0}, "perMachine"},
		{CPUShare{Share: 0.1, PerMachine: 1, Antagonist: MachineLoad{Levels: []float64{1.5}, Hold: []time.Duration{time.Second}}}, "level[0]"},
		{CPUShare{Share: 0.1, PerMachine: 1, Antagonist: MachineLoad{Levels: []float64{0.5}}}, "holds"},
	} {
		err := c.cs.validate("g")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one naming %q", c.cs, err, c.want)
		}
	}
}
