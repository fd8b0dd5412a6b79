// Package sim is the simulated campaign environment (--env sim): the
// scenario's ingress replicas and backend groups become a sim.World, and
// the runner's load is simulated in virtual time instead of sent over
// HTTP (RunLoad). Everything else — plan, reps, seeds, interleaving,
// snapshots, artifacts, reports — is the campaign's own.
package sim

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/ingress/adminapi"
	"github.com/prequalbench/prequalbench/load"
	"github.com/prequalbench/prequalbench/loadbalancer"
	"github.com/prequalbench/prequalbench/scenario"
	core "github.com/prequalbench/prequalbench/sim"
)

// Name is the environment's name in campaign.json and on the command line.
const Name = "sim"

// Env is a simulated testbed. Each run gets a fresh world (Reset), built
// at the run's first RunLoad from that load's seed, so a run's result
// depends only on the campaign seed and its place in the plan.
type Env struct {
	s         *scenario.Scenario
	seed      uint64
	cfg       core.Config // everything but the algorithm and the seed
	algorithm string
	world     *core.World
	targets   []env.Target
	byKey     map[string]core.Target
	backends  []artifacts.Backend
	facts     artifacts.Environment
	ignored   []string
}

var (
	_ env.Environment = (*Env)(nil)
	_ interface {
		RunLoad(context.Context, load.Config) (*load.Result, error)
	} = (*Env)(nil)
)

// New builds the environment for s; seed is the campaign's seed, repoDir
// the source tree whose git revision campaign.json records ("" for none).
func New(s *scenario.Scenario, seed uint64, repoDir string) (*Env, error) {
	cfg, ignored, err := Config(s)
	if err != nil {
		return nil, err
	}
	e := &Env{s: s, seed: seed, cfg: cfg, ignored: ignored, byKey: map[string]core.Target{}}
	probe := cfg
	probe.Algorithm = loadbalancer.NameRoundRobin
	w, err := core.New(probe)
	if err != nil {
		return nil, err
	}
	for _, ep := range w.Endpoints() {
		e.backends = append(e.backends, artifacts.Backend{Address: ep.Address, Group: ep.Group, Route: ep.Route})
	}
	n := s.Ingress.Replicas
	for i := range n {
		for ri, r := range s.Workload.Routes {
			t := env.Target{
				// A loopback address on a port nobody serves: should a
				// runner ever send real HTTP here, it is refused at once.
				URL:    fmt.Sprintf("http://127.0.0.1:1/sim/ingress-%d%s?iterations=%d", i, r.Path, r.Iterations),
				Host:   r.Host,
				Weight: r.Weight / float64(n),
				Route:  r.Name,
			}
			e.targets = append(e.targets, t)
			e.byKey[t.URL+" "+t.Host] = core.Target{Client: i, Route: ri, Weight: t.Weight}
		}
	}
	e.facts = env.HostFacts(repoDir)
	e.facts.Name = Name
	e.facts.IngressReplicas = n
	e.facts.Topology = e.topology()
	return e, nil
}

// topology describes the simulated testbed for campaign.json and the
// report: its size, its parameters and the real-only knobs it ignores.
func (e *Env) topology() string {
	c := e.cfg
	desc := fmt.Sprintf("simulated: %d ingress replicas x %d backend replicas, one-way network delay %v + U[0, %v), probe timeout %v, upstream timeout %v, cpu round %v",
		c.Clients, len(e.backends), c.Network.Delay, c.Network.Jitter, c.ProbeTimeout, c.UpstreamTimeout, c.CPURoundTime)
	if len(e.ignored) > 0 {
		desc += "; ignored (real testbeds only): " + strings.Join(e.ignored, ", ")
	}
	return desc
}

// Config maps a scenario onto a simulated testbed, and lists the knobs set
// in s that only a real testbed has (the simulator ignores them).
func Config(s *scenario.Scenario) (core.Config, []string, error) {
	sim := scenario.DefaultSimulation()
	if s.Simulation != nil {
		sim = *s.Simulation
	}
	pol, err := policyConfig(s.Ingress.Policy)
	if err != nil {
		return core.Config{}, nil, err
	}
	cfg := core.Config{
		Clients:      s.Ingress.Replicas,
		Policy:       pol,
		ProbeTimeout: s.Ingress.ProbeTimeout.Std(),
		Network:      core.Network{Delay: sim.NetworkDelay.Std(), Jitter: sim.NetworkJitter.Std()},
		CPURoundTime: sim.CPURoundTime.Std(),
	}
	if cfg.ProbeTimeout == 0 {
		cfg.ProbeTimeout = 100 * time.Millisecond
	}
	cfg.UpstreamTimeout = 5 * time.Second
	for _, r := range s.Workload.Routes {
		route := core.Route{Name: r.Name, Host: r.Host, Weight: r.Weight, Iterations: r.Iterations}
		for _, g := range r.Backends {
			grp := core.Group{
				Name: g.Name, Replicas: g.Replicas, Mode: g.Mode, ServiceTime: g.ServiceTime.Std(),
				Distribution: g.Distribution, Slow: g.Slow, CPURounds: g.CPURounds,
				ProbeFault: g.ProbeFault, WorkFault: g.WorkFault, LatencyWindow: g.LatencyWindow.Std(),
				QueueLimit: 1024,
			}
			if g.LatencyIdleMaxAge != "" {
				// The scenario's 0s is off; the simulator's 0 is its default.
				grp.LatencyIdleMaxAge = g.LatencyIdleMaxAge.Std()
				if grp.LatencyIdleMaxAge == 0 {
					grp.LatencyIdleMaxAge = -1
				}
			}
			if g.Concurrency != nil {
				grp.Concurrency = *g.Concurrency
			}
			if g.QueueLimit != nil {
				grp.QueueLimit = *g.QueueLimit
			}
			if c := g.CPUShare; c != nil {
				grp.CPUShare = &core.CPUShare{
					Share: c.Share, PerMachine: c.PerMachine, Hard: c.Limit == "hard",
					Threads: grp.Concurrency, Cores: c.Cores,
				}
				grp.Concurrency = 0
				if a := c.Antagonist; a != nil {
					grp.CPUShare.Antagonist = core.MachineLoad{Levels: a.Levels, Random: a.Random}
					for _, h := range a.Hold {
						grp.CPUShare.Antagonist.Hold = append(grp.CPUShare.Antagonist.Hold, h.Std())
					}
				}
			}
			for _, a := range g.Antagonists {
				grp.Antagonists = append(grp.Antagonists, core.Antagonist{At: a.At.Std(), For: a.For.Std(), Capacity: a.Capacity, Every: a.Every.Std()})
			}
			route.Groups = append(route.Groups, grp)
		}
		cfg.Routes = append(cfg.Routes, route)
	}
	var ignored []string
	if s.Ingress.ProbeWorkers != 0 {
		ignored = append(ignored, "ingress.probeWorkers")
	}
	if s.Ingress.ProbeQueueSize != 0 {
		ignored = append(ignored, "ingress.probeQueueSize")
	}
	if s.Load.MaxWorkers != 0 {
		ignored = append(ignored, "load.maxWorkers")
	}
	if s.Load.Connections != 0 {
		ignored = append(ignored, "load.connections")
	}
	if s.Load.MaxConnections != 0 {
		ignored = append(ignored, "load.maxConnections")
	}
	if s.Protocol.Reset == scenario.ResetRestart {
		ignored = append(ignored, "protocol.reset restart (every simulated run starts from a fresh world)")
	}
	return cfg, ignored, nil
}

// policyConfig applies the scenario's Prequal parameters to the defaults,
// as the ingress's --prequal-* flags do.
func policyConfig(p scenario.Policy) (loadbalancer.Config, error) {
	c := loadbalancer.DefaultConfig()
	p.Apply(&c)
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("sim: ingress.policy: %w", err)
	}
	return c, nil
}

// Setup has nothing to start: the world is built per run.
func (e *Env) Setup(context.Context) error { return nil }

// Backends lists every simulated replica.
func (e *Env) Backends() []artifacts.Backend { return e.backends }

// LoadTargets names one target per ingress replica and route, with the
// route's weight split evenly over the replicas; the URLs only identify
// the target to RunLoad.
func (e *Env) LoadTargets() []env.Target { return e.targets }

// SetAlgorithm selects the policy of the next world.
func (e *Env) SetAlgorithm(_ context.Context, algorithm string) error {
	c, err := loadbalancer.Canonical(algorithm)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	e.algorithm, e.world = c, nil
	return nil
}

// Reset discards the world: the next RunLoad builds a fresh one (idle
// replicas, empty pools, zero counters), which holds by construction.
func (e *Env) Reset(context.Context, string) (env.Verification, error) {
	if e.algorithm == "" {
		return env.Verification{}, fmt.Errorf("sim: Reset before SetAlgorithm")
	}
	e.world = nil
	return env.Verification{Verified: true, Detail: "simulated: a fresh world per run"}, nil
}

// Snapshot returns each ingress replica's admin state.
func (e *Env) Snapshot(context.Context) ([]adminapi.State, error) {
	w := e.world
	if w == nil { // before the run's first load: a fresh world's state
		var err error
		if w, err = e.newWorld(0); err != nil {
			return nil, err
		}
	}
	states := w.Snapshot()
	out := make([]adminapi.State, len(states))
	for i, st := range states {
		for j, rs := range st.Routes {
			r := e.s.Workload.Routes[j]
			out[i].Routes = append(out[i].Routes, adminapi.RouteState{
				Key: rs.Route, Host: r.Host, Path: r.Path, PathType: r.PathType,
				Algorithm: e.algorithm, Requests: rs.Requests, UpstreamErrors: rs.UpstreamErrors, Policy: rs.Stats,
			})
		}
	}
	return out, nil
}

func (e *Env) newWorld(seed uint64) (*core.World, error) {
	cfg := e.cfg
	cfg.Algorithm = e.algorithm
	cfg.Seed = seed
	return core.New(cfg)
}

// Facts describes the host and the simulated testbed.
func (e *Env) Facts() artifacts.Environment { return e.facts }

// Close has nothing to stop.
func (e *Env) Close() error { return nil }

// RunLoad simulates cfg's load in virtual time on the run's world and
// returns what the load engine would have measured.
func (e *Env) RunLoad(ctx context.Context, cfg load.Config) (*load.Result, error) {
	if e.algorithm == "" {
		return nil, fmt.Errorf("sim: RunLoad before SetAlgorithm")
	}
	l, err := e.simLoad(cfg)
	if err != nil {
		return nil, err
	}
	if e.world == nil {
		if e.world, err = e.newWorld(cfg.Seed ^ e.seed*0x9E3779B97F4A7C15); err != nil {
			return nil, err
		}
	}
	res, err := e.world.Run(ctx, l)
	if err != nil {
		return nil, err
	}
	return loadResult(res), nil
}

// simLoad maps a load engine configuration onto the simulator's.
func (e *Env) simLoad(cfg load.Config) (core.Load, error) {
	l := core.Load{
		Users: cfg.Users, Duration: cfg.Duration, ThinkTime: cfg.ThinkTime, Timeout: cfg.Timeout, Seed: cfg.Seed,
		Warmup: cfg.Warmup, WarmupRate: cfg.WarmupRate, OnWindowStart: cfg.OnWindowStart, OnWindowEnd: cfg.OnWindowEnd,
	}
	if l.Timeout == 0 {
		l.Timeout = load.DefaultTimeout
	}
	if f := cfg.OnSecond; f != nil {
		l.OnSecond = func(s core.Second) { f(loadSecond(s)) }
	}
	for i, t := range cfg.Targets {
		host := t.Host
		if host == "" {
			host = t.Header.Get("Host")
		}
		st, ok := e.byKey[t.URL+" "+host]
		if !ok {
			if _, err := url.Parse(t.URL); err != nil {
				return l, fmt.Errorf("sim: targets[%d].url: %w", i, err)
			}
			return l, fmt.Errorf("sim: targets[%d] (%s, host %q) is not one of this environment's LoadTargets", i, t.URL, host)
		}
		st.Weight = t.Weight
		l.Targets = append(l.Targets, st)
	}
	for _, p := range cfg.Open {
		l.Open = append(l.Open, core.Phase{
			Kind: p.Kind, Duration: p.Duration, Rate: p.Rate, From: p.From, To: p.To, Steps: p.Steps,
			High: p.High, Low: p.Low, HighFor: p.HighFor, LowFor: p.LowFor,
		})
	}
	return l, nil
}

// loadResult fills a load.Result as the load engine does. In virtual
// time every send leaves on time and needs no connection, so the send-lag
// and connection-wait histograms hold one 0 per send.
func loadResult(r *core.Result) *load.Result {
	out := &load.Result{
		Model:             r.Model,
		Users:             r.Users,
		Histogram:         r.Success,
		Pessimistic:       r.Pessimistic,
		SendLag:           artifacts.NewHistogram(),
		ConnWait:          artifacts.NewHistogram(),
		StatusCodes:       r.StatusCodes,
		Sent:              r.Sent,
		Completed:         r.Completed,
		CompletedInWindow: r.CompletedInWindow,
		Succeeded:         r.Succeeded,
		Failed4xx:         r.Failed4xx,
		Failed5xx:         r.Failed5xx,
		Timeouts:          r.Timeouts,
		Errors:            r.Errors,
		Clamped:           r.Clamped,
		Duration:          r.Duration,
		TargetRate:        r.TargetRate,
	}
	if r.Sent > 0 {
		if r.Model == load.ModelOpen {
			_ = out.SendLag.RecordValues(0, int64(r.Sent))
		}
		_ = out.ConnWait.RecordValues(0, int64(r.Sent))
	}
	for _, s := range r.Series {
		out.Series = append(out.Series, loadSecond(s))
	}
	return out
}

func loadSecond(s core.Second) load.Second {
	return load.Second{
		Second: s.Second, Sent: s.Sent, Completed: s.Completed, Succeeded: s.Succeeded, Errors: s.Errors,
		P50: s.P50, P99: s.P99, Warmup: s.Warmup,
	}
}
