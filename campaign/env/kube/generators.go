package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/cluster/deploy"
	"github.com/prequalbench/prequalbench/load"
	"github.com/prequalbench/prequalbench/load/remote"
	"github.com/prequalbench/prequalbench/manifests"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Generators runs a run's load as N generator Jobs inside the cluster,
// each sending its shard of the schedule to the ingress Service from a
// common start time, and merges their reports, read from the pods' logs
// through the API server, exactly (load.Merge).
type Generators struct {
	Kube      kubernetes.Interface
	Namespace string
	Image     string
	Count     int
	// ProxyURL is the ingress Service's in-cluster base URL, e.g.
	// http://prequal-ingress.prequalbench-system.svc:8080; the targets
	// keep their paths, queries and Host headers.
	ProxyURL string
	// Lead is the time from creating the Jobs to the common start, for
	// scheduling and image pulls; default DefaultLead (--generator-lead).
	// A pod that starts later than a second after it fails its shard
	// rather than skew the seconds.
	Lead time.Duration
	// Logs opens a pod's log; default the API server's pods/log.
	Logs func(ctx context.Context, namespace, pod string) (io.ReadCloser, error)
	// Poll is the interval of the pod status checks; default 1s.
	Poll time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// ConnectionCap is the run's total connection cap (the scenario's
	// load.ConnectionCap) when known; 0 multiplies the runner's
	// per-address cap back by its addresses, which its rounding up per
	// address may leave above the total.
	ConnectionCap int
	// StartGrace is how long after the common start a generator pod may
	// still not be running before its shard counts as lost (default
	// DefaultStartGrace): the generator refuses to start more than a
	// second late, so waiting on for the whole window only delays the
	// error.
	StartGrace time.Duration
	// Placement chooses the generators' nodes (node selector,
	// tolerations, one per node).
	Placement deploy.LoadgenPlacement
	// Clock reads a running generator pod's wall clock; default its
	// clock endpoint through the API server's pod proxy.
	Clock func(ctx context.Context, namespace, pod string) (time.Time, error)
	// MaxSkew is the largest clock offset a run accepts: one certainly
	// above it (offset less half the measuring round trip) is refused;
	// default remote.MaxClockSkew.
	MaxSkew time.Duration

	runs int
	// clocks are the last run's measured offsets, by shard.
	clocks []artifacts.GeneratorClock
}

func (g *Generators) defaults() {
	if g.Lead <= 0 {
		g.Lead = DefaultLead
	}
	if g.Poll <= 0 {
		g.Poll = time.Second
	}
	if g.Now == nil {
		g.Now = time.Now
	}
	if g.StartGrace <= 0 {
		g.StartGrace = DefaultStartGrace
	}
	if g.MaxSkew <= 0 {
		g.MaxSkew = remote.MaxClockSkew
	}
	if g.Clock == nil {
		g.Clock = func(ctx context.Context, ns, pod string) (time.Time, error) {
			b, err := g.Kube.CoreV1().Pods(ns).ProxyGet("http", pod, strconv.Itoa(remote.ClockPort), remote.ClockPath, nil).DoRaw(ctx)
			if err != nil {
				return time.Time{}, err
			}
			return remote.ParseClock(b)
		}
	}
	if g.Logs == nil {
		g.Logs = func(ctx context.Context, ns, pod string) (io.ReadCloser, error) {
			return g.Kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: deploy.LoadgenContainer}).Stream(ctx)
		}
	}
}

// inCluster points every target at base, keeping path, query and Host.
func inCluster(ts []load.Target, base string) ([]load.Target, error) {
	b, err := url.Parse(base)
	if err != nil || b.Host == "" {
		return nil, fmt.Errorf("kube: generators: bad in-cluster proxy URL %q", base)
	}
	out := make([]load.Target, len(ts))
	for i, t := range ts {
		u, err := url.Parse(t.URL)
		if err != nil {
			return nil, err
		}
		u.Scheme, u.Host = b.Scheme, b.Host
		t.URL = u.String()
		out[i] = t
	}
	return out, nil
}

// shards is cfg as the cluster sees it (every target the Service, the
// run's total connection cap) and its split into one Spec per generator,
// all starting at start; an error when the bounds do not split.
func (g *Generators) shards(cfg load.Config, start time.Time) (load.Config, []remote.Spec, error) {
	if cfg.MaxConnections > 0 {
		// The cap is per address, and in the cluster every target is the
		// one Service address: keep the total the runner meant, exactly
		// when known (the runner rounded it up per address).
		if g.ConnectionCap > 0 {
			cfg.MaxConnections = g.ConnectionCap
		} else {
			cfg.MaxConnections *= max(load.DistinctAddrs(cfg.Targets), 1)
		}
	}
	if err := remote.CheckSplit(cfg, g.Count); err != nil {
		return cfg, nil, fmt.Errorf("kube: generators: %w", err)
	}
	targets, err := inCluster(cfg.Targets, g.ProxyURL)
	if err != nil {
		return cfg, nil, err
	}
	cfg.Targets = targets
	var specs []remote.Spec
	for i := range g.Count {
		specs = append(specs, remote.NewSpec(cfg, i, g.Count, start))
	}
	return cfg, specs, nil
}

// Run creates the Jobs, calls the window's boundary callbacks on this
// machine's clock at the common start's warmup and window ends, waits
// for every generator pod, reads and merges their reports and deletes
// the Jobs.
func (g *Generators) Run(ctx context.Context, cfg load.Config) (*load.Result, error) {
	g.defaults()
	if g.Count < 1 {
		return nil, errors.New("kube: generators: count must be >= 1")
	}
	g.runs++
	g.clocks = nil
	run := fmt.Sprintf("%d-%d", g.Now().Unix()%100000, g.runs)
	start := g.Now().Add(g.Lead)
	cfg, specs, err := g.shards(cfg, start)
	if err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = load.DefaultTimeout
	}
	jobs, err := deploy.LoadgenJobs(deploy.LoadgenOptions{
		Namespace: g.Namespace, Image: g.Image, Run: run, Specs: specs,
		Deadline:  g.Lead + cfg.Warmup + cfg.Window() + 2*timeout + time.Minute,
		Placement: g.Placement,
	})
	if err != nil {
		return nil, err
	}
	api := g.Kube.BatchV1().Jobs(g.Namespace)
	defer func() {
		// A finished run's Jobs are of no more use; a failed one's pods
		// keep their logs until the TTL unless deleted, so delete both.
		bg := metav1.DeletePropagationBackground
		for _, j := range jobs {
			_ = api.Delete(context.WithoutCancel(ctx), j.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
		}
	}()
	for _, j := range jobs {
		if _, err := api.Create(ctx, j, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("kube: create generator Job %s: %w", j.Name, err)
		}
	}

	// The boundaries on this machine's clock, which the measured clock
	// offsets (checkClocks) bound against the generators'. The CPU
	// readings (cfg.SampleCPU, the environment's node sampling) are taken
	// here too, one per second of the window, as the engine would.
	bctx, stopBoundaries := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var cpu []*load.CPU
	wg.Add(1)
	go func() {
		defer wg.Done()
		cpu = g.boundaries(bctx, cfg, start)
	}()
	defer func() { stopBoundaries(); wg.Wait() }()

	deadline := start.Add(cfg.Warmup + cfg.Window() + 2*timeout + time.Minute)
	pods, err := g.waitPods(ctx, run, start, deadline)
	if err != nil {
		return nil, err
	}
	parts := make([]*load.Result, g.Count)
	for shard, pod := range pods {
		rc, err := g.Logs(ctx, g.Namespace, pod)
		if err != nil {
			return nil, fmt.Errorf("kube: generator %d log: %w", shard, err)
		}
		rep, res, err := remote.ReadReport(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("kube: generator %d (pod %s): %w", shard, pod, err)
		}
		if rep.Shard != shard || rep.Shards != g.Count {
			return nil, fmt.Errorf("kube: pod %s reported shard %d of %d, want %d of %d", pod, rep.Shard, rep.Shards, shard, g.Count)
		}
		parts[shard] = res
	}
	// Wait for the window's end boundary before returning (the pods end
	// after it, so it has fired unless the clocks disagree).
	stopAt := time.NewTimer(time.Until(start.Add(cfg.Warmup + cfg.Window())))
	select {
	case <-ctx.Done():
	case <-stopAt.C:
	}
	stopAt.Stop()
	wg.Wait()
	res, err := load.Merge(parts)
	if err != nil {
		return nil, err
	}
	for i := range res.Series {
		if k := res.Series[i].Second; k >= 0 && k < len(cpu) {
			res.Series[i].CPU = cpu[k]
		}
	}
	return res, nil
}

// boundaries calls the window's start and end callbacks at start's
// warmup and window ends on this machine's clock and, with
// cfg.SampleCPU, returns one CPU reading per second of the window (the
// first call at the window's start is the baseline).
func (g *Generators) boundaries(ctx context.Context, cfg load.Config, start time.Time) []*load.CPU {
	var cpu []*load.CPU
	at := func(t time.Time) bool {
		timer := time.NewTimer(time.Until(t))
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		}
	}
	winStart := start.Add(cfg.Warmup)
	winEnd := winStart.Add(cfg.Window())
	if !at(winStart) {
		return cpu
	}
	if cfg.SampleCPU != nil {
		cfg.SampleCPU()
	}
	if cfg.OnWindowStart != nil {
		cfg.OnWindowStart()
	}
	for k := time.Duration(1); winStart.Add(k * time.Second).Before(winEnd); k++ {
		if !at(winStart.Add(k * time.Second)) {
			return cpu
		}
		if cfg.SampleCPU != nil {
			cpu = append(cpu, cfg.SampleCPU())
		}
	}
	if !at(winEnd) {
		return cpu
	}
	if cfg.SampleCPU != nil {
		cpu = append(cpu, cfg.SampleCPU())
	}
	if cfg.OnWindowEnd != nil {
		cfg.OnWindowEnd()
	}
	return cpu
}

// clockTries is how many polls measure a running generator's clock
// before its failure is recorded (its endpoint may start a moment after
// the pod is Running).
const clockTries = 3

// measureClock measures a running generator's clock offset.
func (g *Generators) measureClock(ctx context.Context, shard int, p corev1.Pod) (artifacts.GeneratorClock, remote.ClockReading) {
	c := artifacts.GeneratorClock{Shard: shard, Pod: p.Name, Node: p.Spec.NodeName}
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := remote.MeasureClock(mctx, remote.ClockSamples, g.Now, func(ctx context.Context) (time.Time, error) {
		return g.Clock(ctx, g.Namespace, p.Name)
	})
	if err != nil {
		c.Error = "not measured: " + err.Error()
		return c, r
	}
	c.OffsetMS, c.RoundTripMS = float64(r.Offset)/1e6, float64(r.RoundTrip)/1e6
	return c, r
}

// DefaultLead is Generators.Lead's default.
const DefaultLead = 30 * time.Second

// DefaultStartGrace is Generators.StartGrace's default.
const DefaultStartGrace = 15 * time.Second

// cannotStart are the container waiting reasons that do not go away by
// waiting (the image is not there or not runnable).
var cannotStart = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// waitPods waits until every shard's pod has finished and returns the
// pod name per shard; a failed pod is returned too (its log says why).
// A pod whose image cannot be pulled fails the run at once, and a shard
// with no running pod g.StartGrace after the common start fails it then.
func (g *Generators) waitPods(ctx context.Context, run string, start, deadline time.Time) (map[int]string, error) {
	sel := deploy.LoadgenRunLabel + "=" + run
	tick := time.NewTicker(g.Poll)
	defer tick.Stop()
	clocks := map[int]*artifacts.GeneratorClock{}
	tries := map[int]int{}
	defer func() {
		g.clocks = nil
		for shard := range g.Count {
			if c, ok := clocks[shard]; ok {
				g.clocks = append(g.clocks, *c)
			}
		}
	}()
	for {
		list, err := g.Kube.CoreV1().Pods(g.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("kube: list generator pods: %w", err)
		}
		done := map[int]string{}
		running := map[int]bool{}
		var waiting []string
		for _, p := range list.Items {
			var shard int
			if _, err := fmt.Sscan(p.Labels[deploy.LoadgenShard], &shard); err != nil {
				continue
			}
			switch p.Status.Phase {
			case corev1.PodSucceeded, corev1.PodFailed:
				done[shard] = p.Name
				if _, ok := clocks[shard]; !ok {
					clocks[shard] = &artifacts.GeneratorClock{Shard: shard, Pod: p.Name, Node: p.Spec.NodeName,
						Error: "not measured: the pod was never seen running"}
				}
			case corev1.PodRunning:
				running[shard] = true
				if c, ok := clocks[shard]; !ok || (c.Error != "" && tries[shard] < clockTries) {
					tries[shard]++
					c, r := g.measureClock(ctx, shard, p)
					clocks[shard] = &c
					switch {
					case c.Error != "":
					case r.Least() > g.MaxSkew:
						// Refused only when the clock is certainly off: a slow
						// proxy widens the interval, it does not move it.
						return nil, fmt.Errorf("kube: generator %d (pod %s on node %s): its clock is %+.1f ms off this machine's (± %.1f ms, half the round trip), at least %v, beyond the %v the common start and the window's edges allow; synchronise the clocks (NTP) and run again",
							shard, p.Name, p.Spec.NodeName, c.OffsetMS, c.RoundTripMS/2, r.Least(), g.MaxSkew)
					case r.Bound() > g.MaxSkew:
						c.Unresolved = fmt.Sprintf("measured %+.1f ms ± %.1f ms (half the shortest of %d round trips through the API server's pod proxy): too coarse to show the clock within %v, not shown to be beyond it",
							c.OffsetMS, c.RoundTripMS/2, remote.ClockSamples, g.MaxSkew)
					}
				}
			default:
				why := string(p.Status.Phase)
				for _, c := range p.Status.ContainerStatuses {
					if w := c.State.Waiting; w != nil && w.Reason != "" {
						if cannotStart[w.Reason] {
							return nil, fmt.Errorf("kube: generator pod %s cannot start: %s: %s (image %s; on kind, `prequalbench cluster up` loads it on the nodes)", p.Name, w.Reason, w.Message, c.Image)
						}
						why = w.Reason
					}
				}
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" {
						why = c.Reason + ": " + c.Message
					}
				}
				waiting = append(waiting, fmt.Sprintf("%s %s", p.Name, why))
			}
		}
		if len(done) == g.Count {
			return done, nil
		}
		now := g.Now()
		if now.After(start.Add(g.StartGrace)) {
			var lost []string
			for shard := range g.Count {
				if _, ok := done[shard]; !ok && !running[shard] {
					lost = append(lost, fmt.Sprint(shard))
				}
			}
			if len(lost) > 0 {
				pods := strings.Join(waiting, ", ")
				if pods == "" {
					pods = "none created (see the Jobs' events: quota, admission, deadline)"
				}
				return nil, fmt.Errorf("kube: generators: shard(s) %s not running %v after the common start (a generator may start at most 1s late); pending pods: %s",
					strings.Join(lost, ", "), g.StartGrace, pods)
			}
		}
		if now.After(deadline) {
			return nil, fmt.Errorf("kube: generators: %d of %d finished by the deadline; waiting: %s", len(done), g.Count, strings.Join(waiting, ", "))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// WithGenerators is a kube Env whose load comes from in-cluster
// generator Jobs instead of this machine (env.LoadDriver). Setup checks
// that this client may run them (SelfSubjectAccessReview: create and
// delete Jobs, list pods, read pod logs in the workload namespace); where
// it may not, the load falls back to this machine, through the Env's
// proxy address, and the facts and the report say so.
type WithGenerators struct {
	*Env
	Gen *Generators

	// fallback is why the generators are not used ("" when they are).
	fallback string
}

var (
	_ env.LoadDriver  = (*WithGenerators)(nil)
	_ env.LoadChooser = (*WithGenerators)(nil)
)

// Setup sets the Env up, then checks the generators are allowed.
func (w *WithGenerators) Setup(ctx context.Context) error {
	if err := w.Env.Setup(ctx); err != nil {
		return err
	}
	return w.chooseLoad(ctx)
}

// chooseLoad keeps the generators if this client may run them, else
// falls back to the Env's path from this machine and says why. Only a
// denial falls back (the review says no, or the review API itself is
// forbidden); any other error (the API server unavailable, a timeout)
// fails Setup rather than quietly changing where the load comes from.
func (w *WithGenerators) chooseLoad(ctx context.Context) error {
	denied, err := w.Gen.CheckAccess(ctx)
	switch {
	case err != nil && !apierrors.IsForbidden(err):
		return fmt.Errorf("kube: in-cluster generators: checking their access: %w", err)
	case err != nil:
		w.fallback = fmt.Sprintf("in-cluster generators (%d) not used: this client may not ask the API server what it may do (%v)", w.Gen.Count, err)
	case len(denied) > 0:
		w.fallback = fmt.Sprintf("in-cluster generators (%d) not allowed in namespace %s (RBAC denies %s)", w.Gen.Count, w.Gen.Namespace, strings.Join(denied, ", "))
	default:
		w.fallback = ""
		return nil
	}
	w.fallback += "; the load came from the machine running the campaign instead"
	if w.opts.Client != nil && w.opts.Client.Progress != nil {
		w.opts.Client.Progress("warning: " + w.fallback + ": " + strings.Join(w.proxies, ", "))
	}
	return nil
}

// GeneratorClocks are the clock offsets measured in the last RunLoad.
func (w *WithGenerators) GeneratorClocks() []artifacts.GeneratorClock {
	return append([]artifacts.GeneratorClock(nil), w.Gen.clocks...)
}

// DrivesLoad reports whether the generators carry the load; false after
// a Setup that found them forbidden (the runner's engine then sends it
// from this machine).
func (w *WithGenerators) DrivesLoad() bool { return w.fallback == "" }

// RunLoad runs cfg through the generators.
func (w *WithGenerators) RunLoad(ctx context.Context, cfg load.Config) (*load.Result, error) {
	return w.Gen.Run(ctx, cfg)
}

// Facts say the load came from N generator pods to the ingress Service,
// or, after a fallback, from this machine, with the reason.
func (w *WithGenerators) Facts() artifacts.Environment {
	f := w.Env.Facts()
	if w.fallback != "" {
		f.Load.Warnings = append(f.Load.Warnings, w.fallback)
		return f
	}
	f.Load = &artifacts.LoadPath{
		Path: artifacts.LoadFromGenerators, Generators: w.Gen.Count, URLs: []string{w.Gen.ProxyURL},
		MaxClockSkewMS: float64(cmp.Or(w.Gen.MaxSkew, remote.MaxClockSkew)) / 1e6,
		Via:            fmt.Sprintf("the ingress Service from Jobs in namespace %s, %s", w.Gen.Namespace, w.Gen.Placement.Describe()),
	}
	return f
}

// generatorAccess is what the generator path does with the API, all in
// the workload namespace.
var generatorAccess = []authorizationv1.ResourceAttributes{
	{Group: "batch", Resource: "jobs", Verb: "create"},
	{Group: "batch", Resource: "jobs", Verb: "delete"},
	{Resource: "pods", Verb: "list"},
	{Resource: "pods", Subresource: "log", Verb: "get"},
}

// CheckAccess asks the API server, one SelfSubjectAccessReview each,
// whether this client may do what the generators need, and returns what
// is denied ("create jobs", "get pods/log", ...).
func (g *Generators) CheckAccess(ctx context.Context) ([]string, error) {
	var denied []string
	for _, a := range generatorAccess {
		a.Namespace = g.Namespace
		r, err := g.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("kube: generators: access review: %w", err)
		}
		if !r.Status.Allowed {
			what := a.Resource
			if a.Subresource != "" {
				what += "/" + a.Subresource
			}
			denied = append(denied, a.Verb+" "+what)
		}
	}
	return denied, nil
}

// InClusterLoad returns e with its load sent by n generator Jobs in the
// workload namespace, running the ingress image (the project's binary),
// to the ingress Service's proxy port, starting lead after their
// creation (0: the default, 30s), on the nodes placement allows.
func (e *Env) InClusterLoad(n int, lead time.Duration, placement deploy.LoadgenPlacement) *WithGenerators {
	return &WithGenerators{Env: e, Gen: &Generators{
		Kube: e.opts.Client.Kube, Namespace: e.ns, Image: e.opts.Deploy.IngressImage, Count: n, Lead: lead, Placement: placement,
		ConnectionCap: e.opts.Scenario.Load.ConnectionCap(),
		ProxyURL:      fmt.Sprintf("http://%s.%s.svc:%d", manifests.IngressName, manifests.SystemNamespace, manifests.ProxyPort),
	}}
}
