// Package kube is the campaign environment on a Kubernetes cluster: it
// deploys the scenario (cluster/deploy), reaches the ingress through an
// Access (the NodePorts kind publishes on 127.0.0.1; on any other cluster
// the ingress's LoadBalancer or NodePort address, or --proxy-url, with
// client-go port-forwarding only for the admin API and the backends'
// resets) and drives it through the admin API, like the local
// environment does with processes. campaign/env/kind builds one for a kind
// cluster.
package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/cluster/deploy"
	"github.com/prequalbench/prequalbench/cluster/kubeapply"
	"github.com/prequalbench/prequalbench/ingress/adminapi"
	"github.com/prequalbench/prequalbench/manifests"
	"github.com/prequalbench/prequalbench/scenario"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Access reaches the ingress and the backends from this machine.
type Access interface {
	// Ingress returns the proxy base URLs (where load goes) and one admin
	// base URL per ingress pod, for the given ready pods.
	Ingress(ctx context.Context, pods []corev1.Pod) (proxy, admin []string, err error)
	// Backend returns a base URL for one backend pod (for /reset, /stats).
	Backend(ctx context.Context, pod corev1.Pod) (string, error)
	Close() error
}

// Options configure an Env.
type Options struct {
	Scenario *scenario.Scenario
	Client   *kubeapply.Client
	Deploy   deploy.Options
	Access   Access
	// Name is the environment's name in campaign.json: kind or kube.
	Name string
	// RepoDir for host facts.
	RepoDir string
	// Timeout bounds rollouts and readiness waits; default 5 min.
	Timeout time.Duration
}

// Env implements env.Environment on a cluster.
type Env struct {
	opts        Options
	ns          string
	admins      []*adminapi.Client
	proxies     []string
	via         string
	backends    []artifacts.Backend
	backendPods []corev1.Pod
	algorithm   string
}

var _ env.Environment = (*Env)(nil)

// New checks the options; Setup does the work.
func New(o Options) (*Env, error) {
	if o.Scenario == nil || o.Client == nil || o.Access == nil {
		return nil, errors.New("kube: Scenario, Client and Access are required")
	}
	if o.Deploy.Namespace == "" {
		o.Deploy.Namespace = manifests.WorkloadNamespace
	}
	if o.Deploy.Algorithm == "" {
		o.Deploy.Algorithm = o.Scenario.Protocol.Reference
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Name == "" {
		o.Name = "kube"
	}
	return &Env{opts: o, ns: o.Deploy.Namespace, algorithm: o.Deploy.Algorithm}, nil
}

// RouteKey is the ingress's key of a scenario route on Kubernetes: the
// Kubernetes source names pools "namespace/service:port".
func RouteKey(namespace, route string) string {
	return fmt.Sprintf("%s/%s:%d", namespace, route, manifests.BackendPort)
}

// Setup deploys the scenario, waits for the rollouts, connects to every
// ingress pod and waits until each has the routes with their endpoints.
func (e *Env) Setup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	if _, err := deploy.Scenario(ctx, e.opts.Client, e.opts.Scenario, e.opts.Deploy); err != nil {
		return err
	}
	return e.connect(ctx)
}

// connect (re)reads the pods and opens the admin clients.
func (e *Env) connect(ctx context.Context) error {
	k := e.opts.Client.Kube
	ing, err := readyPods(ctx, k.CoreV1().Pods(manifests.SystemNamespace), manifests.LabelName+"="+manifests.IngressName)
	if err != nil {
		return err
	}
	proxy, admin, err := e.opts.Access.Ingress(ctx, ing)
	if err != nil {
		return err
	}
	if p := e.opts.Client.Progress; p != nil && strings.Join(proxy, " ") != strings.Join(e.proxies, " ") {
		p(fmt.Sprintf("load goes to %s; admin calls to %d ingress replicas", strings.Join(proxy, ", "), len(admin)))
	}
	e.proxies = proxy
	if v, ok := e.opts.Access.(interface{ Via() string }); ok {
		e.via = v.Via()
	}
	e.admins = e.admins[:0]
	for _, a := range admin {
		e.admins = append(e.admins, adminapi.NewClient(a, e.opts.Deploy.AdminToken))
	}
	bp, err := readyPods(ctx, k.CoreV1().Pods(e.ns), manifests.LabelName+"=prequal-backend")
	if err != nil {
		return err
	}
	e.backendPods = bp
	e.backends = e.backends[:0]
	for _, p := range bp {
		e.backends = append(e.backends, artifacts.Backend{
			Address: fmt.Sprintf("%s:%d", p.Status.PodIP, manifests.BackendPort),
			Group:   p.Labels[manifests.LabelGroup],
			Route:   RouteKey(e.ns, p.Labels[manifests.LabelRoute]),
		})
	}
	sort.Slice(e.backends, func(i, j int) bool { return e.backends[i].Address < e.backends[j].Address })
	return e.waitRoutes(ctx, e.algorithm)
}

type podLister interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
}

func readyPods(ctx context.Context, pods podLister, selector string) ([]corev1.Pod, error) {
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("kube: list pods %s: %w", selector, err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				out = append(out, p)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("kube: no ready pod for %s", selector)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// waitRoutes polls every ingress replica until it has each scenario route
// with the algorithm and with every ready backend of that route.
func (e *Env) waitRoutes(ctx context.Context, algorithm string) error {
	want := map[string]int{}
	for _, b := range e.backends {
		want[b.Route]++
	}
	var last error
	for {
		last = nil
		for i, a := range e.admins {
			routes, err := a.Routes(ctx)
			if err != nil {
				last = fmt.Errorf("ingress-%d: %w", i, err)
				break
			}
			have := map[string]adminapi.Route{}
			for _, r := range routes {
				have[r.Key] = r
			}
			for key, n := range want {
				r, ok := have[key]
				switch {
				case !ok:
					last = fmt.Errorf("ingress-%d has no route %s yet", i, key)
				case r.Algorithm != algorithm:
					last = fmt.Errorf("ingress-%d route %s runs %s, want %s", i, key, r.Algorithm, algorithm)
				case len(r.Endpoints) != n:
					last = fmt.Errorf("ingress-%d route %s has %d endpoints, want %d", i, key, len(r.Endpoints), n)
				}
			}
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube: waiting for the ingress's routes: %w (%v)", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Namespace is the workload namespace the environment deploys to.
func (e *Env) Namespace() string { return e.ns }

// Backends lists every backend pod (pod IP, group, route key).
func (e *Env) Backends() []artifacts.Backend { return append([]artifacts.Backend(nil), e.backends...) }

// LoadTargets: one target per proxy URL and route, weights split evenly.
func (e *Env) LoadTargets() []env.Target {
	var ts []env.Target
	n := float64(len(e.proxies))
	for _, p := range e.proxies {
		for _, r := range e.opts.Scenario.Workload.Routes {
			path := r.Path
			if path == "" {
				path = "/work"
			}
			ts = append(ts, env.Target{
				URL:    fmt.Sprintf("%s%s?iterations=%d", strings.TrimRight(p, "/"), path, r.Iterations),
				Host:   r.Host,
				Weight: r.Weight / n,
				Route:  RouteKey(e.ns, r.Name),
			})
		}
	}
	return ts
}

// SetAlgorithm writes the algorithm annotation on every Ingress (so it
// survives a restart) and waits until every replica runs it.
func (e *Env) SetAlgorithm(ctx context.Context, algorithm string) error {
	if err := deploy.SetAlgorithm(ctx, e.opts.Client, e.opts.Scenario, e.opts.Deploy, algorithm); err != nil {
		return err
	}
	e.algorithm = algorithm
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	return e.waitRoutes(ctx, algorithm)
}

// Reset resets the backends (through Access) and the ingress (admin API, or
// a rollout restart), and verifies it like the local environment does.
func (e *Env) Reset(ctx context.Context, mode string) (env.Verification, error) {
	var problems []string
	for _, p := range e.backendPods {
		base, err := e.opts.Access.Backend(ctx, p)
		if err != nil {
			return env.Verification{}, fmt.Errorf("kube: backend %s: %w", p.Name, err)
		}
		if err := resetBackend(ctx, base); err != nil {
			problems = append(problems, fmt.Sprintf("backend %s: %v", p.Name, err))
		}
	}
	switch mode {
	case scenario.ResetAdmin:
		for i, a := range e.admins {
			st, err := a.Reset(ctx, "")
			if err != nil {
				return env.Verification{}, fmt.Errorf("kube: ingress-%d: reset: %w", i, err)
			}
			if err := st.VerifyReset(); err != nil {
				problems = append(problems, fmt.Sprintf("ingress-%d: %v", i, err))
			}
		}
	case scenario.ResetRestart:
		rctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
		defer cancel()
		if err := e.opts.Client.Restart(rctx, manifests.SystemNamespace, manifests.IngressName, time.Now()); err != nil {
			return env.Verification{}, err
		}
		if err := e.connect(rctx); err != nil {
			return env.Verification{}, err
		}
		for i, a := range e.admins {
			st, err := a.State(ctx)
			if err != nil {
				return env.Verification{}, fmt.Errorf("kube: ingress-%d: state: %w", i, err)
			}
			for _, r := range st.Routes {
				if r.Requests != 0 || r.Policy.Picks != 0 {
					problems = append(problems, fmt.Sprintf("ingress-%d after restart: route %s has %d requests", i, r.Key, r.Requests))
				}
			}
		}
	default:
		return env.Verification{}, fmt.Errorf("kube: reset mode %q, allowed: %s, %s", mode, scenario.ResetAdmin, scenario.ResetRestart)
	}
	if len(problems) > 0 {
		return env.Verification{Detail: strings.Join(problems, "; ")}, nil
	}
	what := "clean (empty pools, zero counters)"
	if mode == scenario.ResetRestart {
		what = "restarted with zero requests and picks"
	}
	return env.Verification{Verified: true, Detail: fmt.Sprintf("%s reset: %d backends clean, %d ingress replicas %s", mode, len(e.backendPods), len(e.admins), what)}, nil
}

// resetBackend posts /reset and checks the answer (the backend's /stats
// after the reset) shows nothing in flight or queued and zero counters.
func resetBackend(ctx context.Context, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/reset", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /reset: %s", resp.Status)
	}
	var st struct {
		InFlight int    `json:"in_flight"`
		Queued   int    `json:"queued"`
		Served   uint64 `json:"served"`
		Rejected uint64 `json:"rejected"`
		MaxQueue int    `json:"max_queue"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return fmt.Errorf("POST /reset: bad answer: %w", err)
	}
	if st.InFlight != 0 || st.Queued != 0 || st.Served != 0 || st.Rejected != 0 || st.MaxQueue != 0 {
		return fmt.Errorf("after reset: %+v", st)
	}
	return nil
}

// Snapshot returns /admin/state of every ingress replica.
func (e *Env) Snapshot(ctx context.Context) ([]adminapi.State, error) {
	out := make([]adminapi.State, len(e.admins))
	for i, a := range e.admins {
		st, err := a.State(ctx)
		if err != nil {
			return nil, fmt.Errorf("kube: ingress-%d: %w", i, err)
		}
		out[i] = st
	}
	return out, nil
}

// Facts describes the environment.
func (e *Env) Facts() artifacts.Environment {
	f := env.HostFacts(e.opts.RepoDir)
	f.Name = e.opts.Name
	f.Topology = string(e.opts.Deploy.Topology)
	f.IngressReplicas = len(e.admins)
	f.Load = &artifacts.LoadPath{Path: artifacts.LoadFromCLI, URLs: append([]string(nil), e.proxies...), Via: e.via}
	return f
}

// Close closes the access (port-forwards); the deployment stays for the
// next campaign (the next Setup prunes what it does not need).
func (e *Env) Close() error { return e.opts.Access.Close() }
