package scenario

import (
	"strconv"
	"strings"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

// Args renders the group as prequal-backend flags (the backend CLI
// contract), without --listen, --addr-file and --seed, which belong to the
// environment. Every flag is explicit, so a deployment never depends on the
// backend's own defaults.
func (g BackendGroup) Args() []string {
	args := []string{
		"--mode", g.Mode,
		"--service-time", string(g.ServiceTime),
		"--distribution", g.Distribution,
		"--slow", fmtFloat(g.Slow),
	}
	if g.Concurrency != nil {
		args = append(args, "--concurrency", strconv.Itoa(*g.Concurrency))
	}
	if g.QueueLimit != nil {
		args = append(args, "--queue-limit", strconv.Itoa(*g.QueueLimit))
	}
	if g.Mode == "cpu" {
		args = append(args, "--cpu-rounds", strconv.Itoa(g.CPURounds))
	}
	if c := g.CPUShare; c != nil {
		args = append(args, "--share", fmtFloat(c.Share), "--cpu-limit", c.Limit, "--cores", strconv.Itoa(c.Cores))
		if c.Antagonist != nil {
			args = append(args, "--machine-load", c.Antagonist.Spec())
		}
	}
	for _, a := range g.Antagonists {
		args = append(args, "--antagonist", a.Spec())
	}
	if g.ProbeFault != "" && g.ProbeFault != "none" {
		args = append(args, "--probe-fault", g.ProbeFault)
	}
	if g.WorkFault != "" && g.WorkFault != "none" {
		args = append(args, "--work-fault", g.WorkFault)
	}
	if g.LatencyWindow != "" {
		args = append(args, "--latency-window", string(g.LatencyWindow))
	}
	if g.LatencyIdleMaxAge != "" {
		args = append(args, "--latency-idle-max-age", string(g.LatencyIdleMaxAge))
	}
	return args
}

// Spec renders the antagonist as the backend's --antagonist value.
func (a Antagonist) Spec() string {
	s := "at=" + string(a.At) + ",for=" + string(a.For) + ",capacity=" + strconv.Itoa(a.Capacity)
	if a.Every != "" {
		s += ",every=" + string(a.Every)
	}
	return s
}

// Spec renders the antagonist as the backend's --machine-load value,
// e.g. levels=0.1/0.6,hold=4s/1s,random.
func (l MachineLoad) Spec() string {
	levels := make([]string, len(l.Levels))
	for i, v := range l.Levels {
		levels[i] = fmtFloat(v)
	}
	holds := make([]string, len(l.Hold))
	for i, h := range l.Hold {
		holds[i] = string(h)
	}
	s := "levels=" + strings.Join(levels, "/") + ",hold=" + strings.Join(holds, "/")
	if l.Random {
		s += ",random"
	}
	return s
}

// Apply writes the parameters the scenario sets over c, as the ingress's
// --prequal-* flags (Ingress.Args) do; unset ones keep c's. It does not
// validate.
func (p Policy) Apply(c *loadbalancer.Config) {
	q := &c.Prequal
	if p.ProbesPerQuery != nil {
		q.ProbesPerQuery = *p.ProbesPerQuery
	}
	if p.PoolSize != 0 {
		q.PoolSize = p.PoolSize
	}
	if p.MaxAge != "" {
		q.MaxAge = p.MaxAge.Std()
	}
	if p.QRIF != nil {
		q.QRIF = *p.QRIF
	}
	if p.RemovePerQuery != nil {
		q.RemovePerQuery = *p.RemovePerQuery
	}
	if p.Delta != nil {
		q.Delta = *p.Delta
	}
	if p.IdleProbeInterval != "" {
		q.IdleProbeInterval = p.IdleProbeInterval.Std()
	}
	if p.MinProbes != nil {
		q.MinProbes = *p.MinProbes
	}
	if p.LatencyMemory != "" {
		q.LatencyMemory = p.LatencyMemory.Std()
	}
	if q.RIFWindow <= q.PoolSize {
		q.RIFWindow = 4 * q.PoolSize // as the ingress does
	}
}

// Args renders the ingress's policy and prober settings as
// `prequalbench ingress` flags; unset ones are left to the ingress. With
// more than one replica it also gives c3 their number as its n.
func (in Ingress) Args() []string {
	var args []string
	p := in.Policy
	if p.ProbesPerQuery != nil {
		args = append(args, "--prequal-probes-per-query", fmtFloat(*p.ProbesPerQuery))
	}
	if p.PoolSize > 0 {
		args = append(args, "--prequal-pool-size", strconv.Itoa(p.PoolSize))
	}
	if p.MaxAge != "" {
		args = append(args, "--prequal-max-age", string(p.MaxAge))
	}
	if p.QRIF != nil {
		args = append(args, "--prequal-qrif", fmtFloat(*p.QRIF))
	}
	if p.RemovePerQuery != nil {
		args = append(args, "--prequal-remove-per-query", fmtFloat(*p.RemovePerQuery))
	}
	if p.Delta != nil {
		args = append(args, "--prequal-delta", fmtFloat(*p.Delta))
	}
	if p.IdleProbeInterval != "" {
		args = append(args, "--prequal-idle-probe-interval", string(p.IdleProbeInterval))
	}
	if p.MinProbes != nil {
		args = append(args, "--prequal-min-probes", strconv.Itoa(*p.MinProbes))
	}
	if p.LatencyMemory != "" {
		args = append(args, "--prequal-latency-memory", string(p.LatencyMemory))
	}
	if in.Replicas > 1 {
		// c3's n is the ingress replicas sharing the backends, as the
		// simulator makes it; plain c3 would otherwise count one.
		args = append(args, "--c3-clients", strconv.Itoa(in.Replicas))
	}
	if in.ProbeTimeout != "" {
		args = append(args, "--probe-timeout", string(in.ProbeTimeout))
	}
	if in.ProbeWorkers > 0 {
		args = append(args, "--probe-workers", strconv.Itoa(in.ProbeWorkers))
	}
	if in.ProbeQueueSize > 0 {
		args = append(args, "--probe-queue-size", strconv.Itoa(in.ProbeQueueSize))
	}
	if in.Retry {
		args = append(args, "--retry")
	}
	return args
}

// normalMeanFactor is E[max(0, X)] / mu for X ~ N(mu, sigma = mu):
// Phi(1) + phi(1). Clamping the negative draws at 0 raises the mean service
// time by 8.3%, and lowers the capacity accordingly.
const normalMeanFactor = 1.0833155

// Capacity is the group's nominal throughput in requests per second for
// requests of the given iterations: replicas × concurrency / (service time
// × slow × iterations/1000); for cpu-share, replicas / that service time
// (the allocations). It is 0 (unknown) for cpu mode and for groups
// without a capacity limit (sleep mode, concurrency 0).
func (g BackendGroup) Capacity(iterations int) float64 {
	return g.capacity(iterations, 1)
}

// EffectiveCapacity is Capacity with the mean of the service-time
// distribution as drawn: for normal, N(mu, sigma = mu) clamped at 0 has
// mean 1.083 mu.
func (g BackendGroup) EffectiveCapacity(iterations int) float64 {
	f := 1.0
	if g.Distribution == "normal" {
		f = normalMeanFactor
	}
	return g.capacity(iterations, f)
}

func (g BackendGroup) capacity(iterations int, meanFactor float64) float64 {
	if g.Mode == "cpu-share" {
		// A replica held to its allocation serves one request's mean work
		// per service time: load fractions are of the allocations.
		st := g.ServiceTime.Std().Seconds() * g.Slow * float64(iterations) / 1000 * meanFactor
		if st <= 0 {
			return 0
		}
		return float64(g.Replicas) / st
	}
	if g.Mode != "io" || g.Concurrency == nil || *g.Concurrency == 0 {
		return 0
	}
	st := g.ServiceTime.Std().Seconds() * g.Slow * float64(iterations) / 1000 * meanFactor
	if st <= 0 {
		return 0
	}
	return float64(g.Replicas) * float64(*g.Concurrency) / st
}

// Capacity is the route's nominal capacity (the sum of its groups'); 0 when
// any group's capacity is unknown.
func (r Route) Capacity() float64 { return r.capacity(BackendGroup.Capacity) }

// EffectiveCapacity is the sum of the groups' effective capacities; 0 when
// any group's capacity is unknown.
func (r Route) EffectiveCapacity() float64 { return r.capacity(BackendGroup.EffectiveCapacity) }

func (r Route) capacity(of func(BackendGroup, int) float64) float64 {
	total := 0.0
	for _, g := range r.Backends {
		c := of(g, r.Iterations)
		if c == 0 {
			return 0
		}
		total += c
	}
	return total
}

// MeasuredDuration is the length of the measured window: the sum of the open-loop
// phases, or the closed-loop duration.
func (l Load) MeasuredDuration() time.Duration {
	if len(l.Open) == 0 {
		return l.Duration.Std()
	}
	var d time.Duration
	for _, p := range l.Open {
		d += p.Duration.Std()
	}
	return d
}

// StartRate is the open-loop rate at the start of the first phase (the
// warmup's rate); 0 for closed loop.
func (l Load) StartRate() float64 {
	if len(l.Open) == 0 {
		return 0
	}
	p := l.Open[0]
	switch p.Kind {
	case PhaseConstant:
		return p.Rate
	case PhaseRamp, PhaseSteps:
		if p.From > 0 {
			return p.From
		}
		return p.To
	case PhaseBurst:
		return p.High
	}
	return 0
}

// Scale multiplies every duration of the load and the protocol (phases,
// burst periods, warmup, cooldown, antagonist schedules, churn period) by f, for a quick
// look. Request timeouts, service times and policy ages are not scaled:
// they are properties of the system, not of the experiment's length.
func (s *Scenario) Scale(f float64) {
	sc := func(d *Duration) {
		if *d == "" {
			return
		}
		x := time.Duration(float64(d.Std()) * f).Round(time.Millisecond)
		if x <= 0 && d.Std() > 0 {
			x = time.Millisecond
		}
		*d = Dur(x)
	}
	for i := range s.Load.Open {
		p := &s.Load.Open[i]
		sc(&p.Duration)
		sc(&p.HighFor)
		sc(&p.LowFor)
	}
	sc(&s.Load.Duration)
	if s.Protocol.Warmup != nil {
		sc(s.Protocol.Warmup)
	}
	if s.Protocol.Cooldown != nil {
		sc(s.Protocol.Cooldown)
	}
	for i := range s.Workload.Routes {
		for j := range s.Workload.Routes[i].Backends {
			g := &s.Workload.Routes[i].Backends[j]
			for k := range g.Antagonists {
				sc(&g.Antagonists[k].At)
				sc(&g.Antagonists[k].For)
				sc(&g.Antagonists[k].Every)
			}
		}
	}
	if s.Churn != nil {
		sc(&s.Churn.Every)
	}
}
