package scenario

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prequalbench/prequalbench/load"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

// Allowed values, in the order error messages list them.
var (
	Modes         = []string{"cpu", "cpu-share", "io", "sleep"}
	ShareLimits   = []string{"soft", "hard"}
	Distributions = []string{"fixed", "exp", "normal"}
	ProbeFaults   = []string{"none", "timeout", "500", "malformed", "stale_timestamp"}
	WorkFaults    = []string{"none", "fail_fast", "hang"}
	PathTypes     = []string{"Prefix", "Exact"}
	PhaseKinds    = []string{PhaseConstant, PhaseRamp, PhaseSteps, PhaseBurst}
	ResetModes    = []string{ResetAdmin, ResetRestart}
	Orders        = []string{OrderShuffle, OrderRotate, OrderSequential}
)

// DefaultAlgorithms are compared when a scenario names none.
var DefaultAlgorithms = []string{"prequal", "round-robin", "least-request"}

// applyDefaults fills every unset field that has a default. It is the one
// place defaults live.
func (s *Scenario) applyDefaults() {
	for i := range s.Workload.Routes {
		r := &s.Workload.Routes[i]
		if r.Path == "" {
			r.Path = "/work"
		}
		if r.PathType == "" {
			r.PathType = "Prefix"
		}
		if r.Weight == 0 {
			r.Weight = 1
		}
		if r.Iterations == 0 {
			r.Iterations = 1000
		}
		for j := range r.Backends {
			g := &r.Backends[j]
			if g.Mode == "" {
				g.Mode = "io"
			}
			if g.ServiceTime == "" {
				g.ServiceTime = "20ms"
			}
			if g.Distribution == "" {
				g.Distribution = "fixed"
			}
			if g.Slow == 0 {
				g.Slow = 1
			}
			if g.Concurrency == nil {
				g.Concurrency = ptr(4)
				if g.Mode == "cpu-share" {
					g.Concurrency = ptr(0) // processor sharing, no thread cap
				}
			}
			if g.CPUShare != nil && g.CPUShare.Limit == "" {
				g.CPUShare.Limit = "soft"
			}
			if g.QueueLimit == nil {
				g.QueueLimit = ptr(1024)
			}
			if g.CPURounds == 0 {
				g.CPURounds = 1
			}
			if g.ProbeFault == "" {
				g.ProbeFault = "none"
			}
			if g.WorkFault == "" {
				g.WorkFault = "none"
			}
		}
	}
	if s.Load.Timeout == "" {
		s.Load.Timeout = "10s"
	}
	p := &s.Protocol
	if len(p.Algorithms) == 0 {
		p.Algorithms = slices.Clone(DefaultAlgorithms)
	}
	// Aliases ("rr", "least-connections") become canonical names; unknown
	// names stay as written for Validate to report.
	for i, a := range p.Algorithms {
		if c, err := loadbalancer.Canonical(a); err == nil {
			p.Algorithms[i] = c
		}
	}
	p.expandSweeps()
	if c, err := loadbalancer.Canonical(p.Reference); err == nil {
		p.Reference = c
	}
	if p.Reference == "" {
		p.Reference = p.Algorithms[0]
		if slices.Contains(p.Algorithms, "prequal") {
			p.Reference = "prequal"
		}
	}
	if p.Reps == 0 {
		p.Reps = defaultReps(len(p.Algorithms))
	}
	if p.PrimaryMetric == "" {
		p.PrimaryMetric = DefaultPrimaryMetric
	}
	if p.Warmup == nil {
		p.Warmup = ptr(Duration("10s"))
	}
	if p.Cooldown == nil {
		p.Cooldown = ptr(Duration("2s"))
	}
	if p.Reset == "" {
		p.Reset = ResetAdmin
	}
	if p.Order == "" {
		p.Order = OrderShuffle
	}
	if p.Seed == 0 {
		p.Seed = 1
	}
	if s.Ingress.Replicas == 0 {
		s.Ingress.Replicas = 1
	}
	if s.Simulation != nil {
		s.Simulation.applyDefaults()
	}
	if s.Churn != nil {
		s.Churn.applyDefaults()
	}
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// Validate returns every problem of the scenario, each naming its field
// path and what is allowed. It expects defaults applied (Parse does that).
func (s *Scenario) Validate() Errors {
	var v validator
	if !nameRE.MatchString(s.Name) {
		v.add("name", "got %q, want lower-case letters, digits and '-' (e.g. quickstart)", s.Name)
	}
	v.workload(&s.Workload)
	v.load(&s.Load)
	v.protocol(&s.Protocol)
	v.closedLoopGoodput(s)
	v.ingress(&s.Ingress)
	v.simulation(s.Simulation)
	v.churn(s.Churn, &s.Workload)
	return v.errs
}

type validator struct{ errs Errors }

func (v *validator) add(field, format string, args ...any) {
	v.errs = append(v.errs, FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) oneOf(field, got string, allowed []string) {
	if !slices.Contains(allowed, got) {
		v.add(field, "got %q, allowed: %s", got, strings.Join(allowed, ", "))
	}
}

// duration checks a duration string; min is the smallest allowed value
// (exclusive when positive is true).
func (v *validator) duration(field string, d Duration, positive, optional bool) {
	if d == "" {
		if !optional {
			v.add(field, "missing, want a duration such as 30s or 500ms")
		}
		return
	}
	x, err := time.ParseDuration(string(d))
	if err != nil {
		v.add(field, "got %q, want a duration such as 30s or 500ms", string(d))
		return
	}
	if positive && x <= 0 {
		v.add(field, "got %s, want a duration > 0", d)
	}
	if !positive && x < 0 {
		v.add(field, "got %s, want a duration >= 0", d)
	}
}

func (v *validator) workload(w *Workload) {
	if len(w.Routes) == 0 {
		v.add("workload.routes", "missing, want at least one route")
	}
	routes := map[string]bool{}
	groups := map[string]string{}
	for i := range w.Routes {
		r := &w.Routes[i]
		f := fmt.Sprintf("workload.routes[%d]", i)
		if !nameRE.MatchString(r.Name) {
			v.add(f+".name", "got %q, want lower-case letters, digits and '-'", r.Name)
		} else if routes[r.Name] {
			v.add(f+".name", "duplicate route name %q", r.Name)
		}
		routes[r.Name] = true
		if !strings.HasPrefix(r.Path, "/") {
			v.add(f+".path", "got %q, want a path starting with /", r.Path)
		}
		v.oneOf(f+".pathType", r.PathType, PathTypes)
		if r.Weight <= 0 {
			v.add(f+".weight", "got %v, want a number > 0", r.Weight)
		}
		if r.Iterations <= 0 {
			v.add(f+".iterations", "got %d, want a whole number > 0", r.Iterations)
		}
		if len(r.Backends) == 0 {
			v.add(f+".backends", "missing, want at least one backend group")
		}
		for j := range r.Backends {
			g := &r.Backends[j]
			gf := fmt.Sprintf("%s.backends[%d]", f, j)
			if !nameRE.MatchString(g.Name) {
				v.add(gf+".name", "got %q, want lower-case letters, digits and '-'", g.Name)
			} else if prev, dup := groups[g.Name]; dup {
				v.add(gf+".name", "duplicate backend group name %q (also in %s)", g.Name, prev)
			}
			groups[g.Name] = gf
			v.group(gf, g)
		}
	}
}

func (v *validator) group(f string, g *BackendGroup) {
	if g.Replicas < 1 {
		v.add(f+".replicas", "got %d, want a whole number >= 1", g.Replicas)
	}
	v.oneOf(f+".mode", g.Mode, Modes)
	v.duration(f+".serviceTime", g.ServiceTime, true, false)
	v.oneOf(f+".distribution", g.Distribution, Distributions)
	if g.Slow <= 0 {
		v.add(f+".slow", "got %v, want a multiplier > 0", g.Slow)
	}
	if g.Concurrency != nil && *g.Concurrency < 0 {
		v.add(f+".concurrency", "got %d, want >= 0 (0 = unlimited)", *g.Concurrency)
	}
	if g.QueueLimit != nil && *g.QueueLimit < 0 {
		v.add(f+".queueLimit", "got %d, want >= 0", *g.QueueLimit)
	}
	if g.CPURounds < 1 {
		v.add(f+".cpuRounds", "got %d, want a whole number >= 1", g.CPURounds)
	}
	v.oneOf(f+".probeFault", g.ProbeFault, ProbeFaults)
	v.oneOf(f+".workFault", g.WorkFault, WorkFaults)
	v.duration(f+".latencyWindow", g.LatencyWindow, true, true)
	v.duration(f+".latencyIdleMaxAge", g.LatencyIdleMaxAge, false, true)
	v.cpuShare(f, g)
	for i, a := range g.Antagonists {
		af := fmt.Sprintf("%s.antagonists[%d]", f, i)
		v.duration(af+".at", a.At, false, false)
		v.duration(af+".for", a.For, true, false)
		v.duration(af+".every", a.Every, true, true)
		if a.Capacity < 0 {
			v.add(af+".capacity", "got %d, want >= 0", a.Capacity)
		}
		if a.Every != "" && a.Every.Std() > 0 && a.Every.Std() < a.For.Std() {
			v.add(af+".every", "got %s, want at least for (%s)", a.Every, a.For)
		}
	}
}

func (v *validator) cpuShare(f string, g *BackendGroup) {
	c := g.CPUShare
	switch {
	case g.Mode != "cpu-share" && c != nil:
		v.add(f+".cpuShare", "set only with mode cpu-share (mode is %s)", g.Mode)
		return
	case g.Mode != "cpu-share":
		return
	case c == nil:
		v.add(f+".cpuShare", "mode cpu-share needs cpuShare (share, perMachine)")
		return
	case len(g.Antagonists) > 0:
		v.add(f+".antagonists", "mode cpu-share takes its antagonist in cpuShare.antagonist, not antagonists")
	}
	f += ".cpuShare"
	if !(c.Share > 0 && c.Share <= 1) {
		v.add(f+".share", "got %v, want a fraction of the machine in (0, 1]", c.Share)
	}
	if c.PerMachine < 1 {
		v.add(f+".perMachine", "got %d, want a whole number >= 1", c.PerMachine)
	} else if c.Share*float64(c.PerMachine) > 1+1e-9 {
		v.add(f+".perMachine", "share × perMachine = %v, want <= 1 (a machine cannot allocate more than itself)", c.Share*float64(c.PerMachine))
	}
	v.oneOf(f+".limit", c.Limit, ShareLimits)
	if c.Cores < 0 {
		v.add(f+".cores", "got %d, want >= 0 (0 = no per-request cap)", c.Cores)
	}
	if a := c.Antagonist; a != nil {
		if len(a.Levels) == 0 || len(a.Levels) != len(a.Hold) {
			v.add(f+".antagonist", "got %d levels and %d holds, want one hold per level, at least one", len(a.Levels), len(a.Hold))
		}
		for k, l := range a.Levels {
			if !(l >= 0 && l <= 1) {
				v.add(fmt.Sprintf("%s.antagonist.levels[%d]", f, k), "got %v, want a fraction of the machine in [0, 1]", l)
			}
		}
		for k, h := range a.Hold {
			v.duration(fmt.Sprintf("%s.antagonist.hold[%d]", f, k), h, true, false)
		}
	}
}

func (v *validator) load(l *Load) {
	open, closed := len(l.Open) > 0, l.Users > 0 || l.Duration != ""
	switch {
	case open && closed:
		v.add("load", "set either open (phases) or users and duration, not both")
	case !open && !closed:
		v.add("load", "missing, want open (a list of phases) or users and duration")
	case closed:
		if l.Users < 1 {
			v.add("load.users", "got %d, want a whole number >= 1", l.Users)
		}
		v.duration("load.duration", l.Duration, true, false)
	}
	if l.Users < 0 {
		v.add("load.users", "got %d, want >= 0", l.Users)
	}
	for i := range l.Open {
		v.phase(fmt.Sprintf("load.open[%d]", i), &l.Open[i])
	}
	v.duration("load.timeout", l.Timeout, true, false)
	if t, err := time.ParseDuration(string(l.Timeout)); err == nil && t > load.MaxTimeout {
		// Said here, not at the first run's load: longer latencies would
		// be clamped at the histogram's ceiling.
		v.add("load.timeout", "got %s, want at most %s (half the latency histogram's %s ceiling)", l.Timeout, load.MaxTimeout, 2*load.MaxTimeout)
	}
	if l.MaxWorkers < 0 {
		v.add("load.maxWorkers", "got %d, want >= 0 (0 = automatic)", l.MaxWorkers)
	}
	if l.MaxConnections < 0 {
		v.add("load.maxConnections", "got %d, want >= 0 (0 = sized from the peak rate × timeout)", l.MaxConnections)
	}
	if l.Connections < 0 {
		v.add("load.connections", "got %d, want >= 0 (0 = automatic)", l.Connections)
	}
	if g := l.Generators; g != nil && (*g < 0 || *g > MaxGenerators) {
		v.add("load.generators", "got %d, want 0 (load from the campaign's machine) to %d in-cluster generator Jobs (kind and kube)", *g, MaxGenerators)
	} else if g != nil {
		if err := l.CheckGenerators(*g); err != nil {
			v.add("load.generators", "%v", err)
		}
	}
}

func (v *validator) phase(f string, p *Phase) {
	v.oneOf(f+".kind", p.Kind, PhaseKinds)
	v.duration(f+".duration", p.Duration, true, false)
	unused := func(field string, set bool) {
		if set {
			v.add(f+"."+field, "not used by a %s phase", p.Kind)
		}
	}
	positive := func(field string, x float64) {
		if x <= 0 {
			v.add(f+"."+field, "got %v, want a rate > 0 (requests per second)", x)
		}
	}
	switch p.Kind {
	case PhaseConstant:
		positive("rate", p.Rate)
		unused("from", p.From != 0)
		unused("to", p.To != 0)
		unused("steps", p.Steps != 0)
		unused("high", p.High != 0)
		unused("low", p.Low != 0)
	case PhaseRamp, PhaseSteps:
		if p.From < 0 {
			v.add(f+".from", "got %v, want a rate >= 0", p.From)
		}
		positive("to", p.To)
		unused("rate", p.Rate != 0)
		unused("high", p.High != 0)
		unused("low", p.Low != 0)
		if p.Kind == PhaseSteps && p.Steps < 1 {
			v.add(f+".steps", "got %d, want a whole number >= 1", p.Steps)
		}
		if p.Kind == PhaseRamp {
			unused("steps", p.Steps != 0)
		}
	case PhaseBurst:
		positive("high", p.High)
		if p.Low < 0 {
			v.add(f+".low", "got %v, want a rate >= 0", p.Low)
		}
		v.duration(f+".highFor", p.HighFor, true, false)
		v.duration(f+".lowFor", p.LowFor, true, false)
		unused("rate", p.Rate != 0)
		unused("from", p.From != 0)
		unused("to", p.To != 0)
		unused("steps", p.Steps != 0)
	}
	if p.Kind != PhaseBurst {
		unused("highFor", p.HighFor != "")
		unused("lowFor", p.LowFor != "")
	}
}

func (v *validator) protocol(p *Protocol) {
	seen := map[string]bool{}
	for i, a := range p.Algorithms {
		f := fmt.Sprintf("protocol.algorithms[%d]", i)
		c, err := loadbalancer.Canonical(a)
		switch {
		case err != nil && strings.Contains(a, "{"):
			// A variant: the error names the parameter and what it takes.
			v.add(f, "%s", strings.TrimPrefix(err.Error(), "loadbalancer: "))
		case err != nil || c != a:
			v.add(f, "unknown algorithm %q, allowed: %s", a, strings.Join(loadbalancer.Names(), ", "))
		case seen[a]:
			v.add(f, "duplicate algorithm %q", a)
		}
		seen[a] = true
	}
	v.sweeps(p)
	if !seen[p.Reference] {
		v.add("protocol.reference", "got %q, want one of the algorithms: %s", p.Reference, strings.Join(p.Algorithms, ", "))
	}
	v.primaryMetric(p)
	if p.Reps < 1 {
		v.add("protocol.reps", "got %d, want a whole number >= 1", p.Reps)
	}
	if p.Warmup != nil {
		v.duration("protocol.warmup", *p.Warmup, false, false)
	}
	if p.Cooldown != nil {
		v.duration("protocol.cooldown", *p.Cooldown, false, false)
	}
	v.oneOf("protocol.reset", p.Reset, ResetModes)
	v.oneOf("protocol.order", p.Order, Orders)
}

func (v *validator) ingress(in *Ingress) {
	if in.Replicas < 1 {
		v.add("ingress.replicas", "got %d, want a whole number >= 1", in.Replicas)
	}
	if in.Routing != "" {
		v.oneOf("ingress.routing", in.Routing, []string{RoutingIngress, RoutingGateway})
	}
	v.duration("ingress.probeTimeout", in.ProbeTimeout, true, true)
	if in.ProbeWorkers < 0 {
		v.add("ingress.probeWorkers", "got %d, want >= 0 (0 = ingress default)", in.ProbeWorkers)
	}
	if in.ProbeQueueSize < 0 {
		v.add("ingress.probeQueueSize", "got %d, want >= 0 (0 = ingress default)", in.ProbeQueueSize)
	}
	p := &in.Policy
	nonNeg := func(field string, x *float64) {
		if x != nil && *x < 0 {
			v.add("ingress.policy."+field, "got %v, want a number >= 0", *x)
		}
	}
	nonNeg("probesPerQuery", p.ProbesPerQuery)
	nonNeg("removePerQuery", p.RemovePerQuery)
	nonNeg("delta", p.Delta)
	if p.QRIF != nil && (*p.QRIF < 0 || *p.QRIF > 1) {
		v.add("ingress.policy.qrif", "got %v, want a quantile between 0 and 1", *p.QRIF)
	}
	if p.PoolSize < 0 {
		v.add("ingress.policy.poolSize", "got %d, want >= 1 (0 = ingress default)", p.PoolSize)
	}
	if p.MinProbes != nil && *p.MinProbes < 0 {
		v.add("ingress.policy.minProbes", "got %d, want >= 0", *p.MinProbes)
	}
	v.duration("ingress.policy.maxAge", p.MaxAge, true, true)
	v.duration("ingress.policy.idleProbeInterval", p.IdleProbeInterval, true, true)
	v.duration("ingress.policy.latencyMemory", p.LatencyMemory, true, true)
}
