package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/campaign/hostcpu"
	"github.com/prequalbench/prequalbench/cluster/deploy"
	"github.com/prequalbench/prequalbench/load"
	"github.com/prequalbench/prequalbench/manifests"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Where node CPU comes from (nodeSource.name).
const (
	// SourceSummary is the kubelet's summary API, reached through the API
	// server's node proxy: per node and per pod, the kubelet's latest
	// usageNanoCores.
	SourceSummary = "the kubelet summary API (/api/v1/nodes/NODE/proxy/stats/summary)"
	// SourceMetrics is the metrics API (metrics-server): the same, over
	// its scrape window (15 s or more).
	SourceMetrics = "the metrics API (metrics.k8s.io)"
)

// podGroup is a pod's part in a run.
type podGroup int

const (
	groupOther podGroup = iota
	groupGenerator
	groupIngress
	groupBackend
)

// podRef is one of the campaign's pods: where it runs and what it is.
type podRef struct {
	namespace, name, node string
	group                 podGroup
}

// nodeUse is one node's CPU in cores: the node's total, its capacity
// and the campaign's pods on it by group (NaN: no reading of the node).
type nodeUse struct {
	capacity, used          float64
	generator, ingress, bes float64
	// unread: the node, or one of the campaign's pods on it, had no
	// reading, so the groups above miss some of the campaign's CPU.
	unread bool
}

// nodeSource reads the CPU of one node and of the given pods on it.
type nodeSource interface {
	name() string
	read(ctx context.Context, node string, pods []podRef) (used float64, perPod map[string]float64, err error)
}

// summarySource reads the kubelet's summary through the node proxy.
type summarySource struct{ kube kubernetes.Interface }

func (summarySource) name() string { return SourceSummary }

func (s summarySource) read(ctx context.Context, node string, _ []podRef) (float64, map[string]float64, error) {
	b, err := s.kube.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "stats", "summary").DoRaw(ctx)
	if err != nil {
		return 0, nil, err
	}
	return parseSummary(b)
}

// cpuStats is the cpu block of a kubelet summary.
type cpuStats struct {
	UsageNanoCores *uint64 `json:"usageNanoCores"`
}

// parseSummary returns a node's cores in use and each pod's
// ("namespace/name"), from a kubelet stats/summary document.
func parseSummary(b []byte) (float64, map[string]float64, error) {
	var s struct {
		Node struct {
			CPU *cpuStats `json:"cpu"`
		} `json:"node"`
		Pods []struct {
			PodRef struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"podRef"`
			CPU *cpuStats `json:"cpu"`
		} `json:"pods"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return 0, nil, fmt.Errorf("stats/summary: %w", err)
	}
	if s.Node.CPU == nil || s.Node.CPU.UsageNanoCores == nil {
		return 0, nil, errors.New("stats/summary: no node cpu.usageNanoCores")
	}
	pods := map[string]float64{}
	for _, p := range s.Pods {
		if p.CPU != nil && p.CPU.UsageNanoCores != nil {
			pods[p.PodRef.Namespace+"/"+p.PodRef.Name] = float64(*p.CPU.UsageNanoCores) / 1e9
		}
	}
	return float64(*s.Node.CPU.UsageNanoCores) / 1e9, pods, nil
}

// metricsSource reads metrics.k8s.io.
type metricsSource struct{ kube kubernetes.Interface }

func (metricsSource) name() string { return SourceMetrics }

func (m metricsSource) read(ctx context.Context, node string, pods []podRef) (float64, map[string]float64, error) {
	var n struct {
		Usage corev1.ResourceList `json:"usage"`
	}
	b, err := m.kube.CoreV1().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/nodes", node).DoRaw(ctx)
	if err == nil {
		err = json.Unmarshal(b, &n)
	}
	if err != nil {
		return 0, nil, err
	}
	per := map[string]float64{}
	for _, p := range pods {
		var pm struct {
			Containers []struct {
				Usage corev1.ResourceList `json:"usage"`
			} `json:"containers"`
		}
		b, err := m.kube.CoreV1().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/namespaces", p.namespace, "pods", p.name).DoRaw(ctx)
		if err != nil || json.Unmarshal(b, &pm) != nil {
			continue // not scraped yet (a new generator pod)
		}
		var sum float64
		for _, c := range pm.Containers {
			sum += cores(c.Usage)
		}
		per[p.namespace+"/"+p.name] = sum
	}
	return cores(n.Usage), per, nil
}

func cores(l corev1.ResourceList) float64 {
	q, ok := l[corev1.ResourceCPU]
	if !ok {
		return 0
	}
	return q.AsApproximateFloat64()
}

// nodeCPU finds the campaign's pods and reads their nodes.
type nodeCPU struct {
	kube      kubernetes.Interface
	workload  string // the workload namespace (backends, generators)
	src       nodeSource
	capacity  map[string]float64
	failures  map[string]string // node: the first error reading it
	readings  int
	mu        sync.Mutex
	allNodes  bool // kind: every node of the campaign's pods, not only the ingress's and generators'
	lastNodes []string
}

// pods lists the campaign's pods that are on a node.
func (n *nodeCPU) pods(ctx context.Context) ([]podRef, error) {
	var out []podRef
	for _, q := range []struct{ ns, selector string }{
		{manifests.SystemNamespace, manifests.LabelName + "=" + manifests.IngressName},
		{n.workload, ""},
	} {
		list, err := n.kube.CoreV1().Pods(q.ns).List(ctx, metav1.ListOptions{LabelSelector: q.selector})
		if err != nil {
			return nil, fmt.Errorf("list pods in %s: %w", q.ns, err)
		}
		for _, p := range list.Items {
			if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			g := groupOther
			switch {
			case q.ns == manifests.SystemNamespace:
				g = groupIngress
			case p.Labels[manifests.LabelName] == deploy.LoadgenName:
				g = groupGenerator
			case p.Labels[manifests.LabelName] == deploy.BackendApp:
				g = groupBackend
			}
			out = append(out, podRef{namespace: p.Namespace, name: p.Name, node: p.Spec.NodeName, group: g})
		}
	}
	return out, nil
}

// watched are the nodes to read: those running the ingress or a
// generator (every node of the campaign's pods with allNodes).
func (n *nodeCPU) watched(pods []podRef) []string {
	var nodes []string
	for _, p := range pods {
		if (n.allNodes || p.group == groupIngress || p.group == groupGenerator) && !slices.Contains(nodes, p.node) {
			nodes = append(nodes, p.node)
		}
	}
	slices.Sort(nodes)
	return nodes
}

// nodeCapacity is a node's CPU capacity in cores (cached).
func (n *nodeCPU) nodeCapacity(ctx context.Context, node string) float64 {
	n.mu.Lock()
	c, ok := n.capacity[node]
	n.mu.Unlock()
	if ok {
		return c
	}
	c = math.NaN()
	if nd, err := n.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil {
		if q, ok := nd.Status.Capacity[corev1.ResourceCPU]; ok && !q.IsZero() {
			c = q.AsApproximateFloat64()
		}
	}
	n.mu.Lock()
	n.capacity[node] = c
	n.mu.Unlock()
	return c
}

// read reads every watched node once; a node that fails is left out and
// its first error kept for the note.
func (n *nodeCPU) read(ctx context.Context) map[string]nodeUse {
	pods, err := n.pods(ctx)
	if err != nil {
		n.fail("(pod list)", err)
		return nil
	}
	nodes := n.watched(pods)
	out := map[string]nodeUse{}
	for _, node := range nodes {
		var on []podRef
		for _, p := range pods {
			if p.node == node {
				on = append(on, p)
			}
		}
		used, per, err := n.src.read(ctx, node, on)
		if err != nil {
			n.fail(node, err)
			// Kept as unread: a sum over the nodes must not take the
			// missing node's pods for idle ones.
			out[node] = nodeUse{capacity: math.NaN(), used: math.NaN(), unread: true}
			continue
		}
		u := nodeUse{capacity: n.nodeCapacity(ctx, node), used: used}
		var unread []string
		for _, p := range on {
			c, ok := per[p.namespace+"/"+p.name]
			if !ok && p.group != groupOther {
				// A pod not yet in the kubelet's (or metrics-server's)
				// stats: its CPU is unknown, not zero.
				unread = append(unread, p.namespace+"/"+p.name)
			}
			switch p.group {
			case groupGenerator:
				u.generator += c
			case groupIngress:
				u.ingress += c
			case groupBackend:
				u.bes += c
			}
		}
		if len(unread) > 0 {
			u.unread = true
			n.fail(node+" (pods)", fmt.Errorf("no CPU reading for %s", strings.Join(unread, ", ")))
		}
		out[node] = u
	}
	n.mu.Lock()
	n.readings++
	n.lastNodes = nodes
	n.mu.Unlock()
	return out
}

func (n *nodeCPU) fail(node string, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.failures[node]; !ok {
		n.failures[node] = err.Error()
	}
}

// problems says which nodes could not be read, if any.
func (n *nodeCPU) problems() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for node, err := range n.failures {
		out = append(out, node+": "+err)
	}
	slices.Sort(out)
	if len(out) == 0 {
		return ""
	}
	return "; could not read " + strings.Join(out, "; ")
}

// probeSource finds a source that reads the node of an ingress pod: the
// summary API, else the metrics API; the error names both failures.
func probeSource(ctx context.Context, k kubernetes.Interface, workload string) (nodeSource, string, error) {
	n := &nodeCPU{kube: k, workload: workload}
	pods, err := n.pods(ctx)
	if err != nil {
		return nil, "", err
	}
	nodes := n.watched(pods)
	if len(nodes) == 0 {
		return nil, "", errors.New("no ingress pod is on a node")
	}
	var whys []string
	for _, s := range []nodeSource{summarySource{k}, metricsSource{k}} {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, _, err := s.read(pctx, nodes[0], nil)
		cancel()
		if err == nil {
			fallback := ""
			if len(whys) > 0 {
				fallback = " (" + strings.Join(whys, "; ") + ")"
			}
			return s, fallback, nil
		}
		whys = append(whys, fmt.Sprintf("%s failed on node %s: %v", s.name(), nodes[0], err))
	}
	return nil, "", errors.New(strings.Join(whys, "; "))
}

// poller reads the nodes once a second in the background, so that
// Sample returns at once with the latest reading.
type poller struct {
	n      *nodeCPU
	mu     sync.Mutex
	latest map[string]nodeUse
	stop   context.CancelFunc
	done   chan struct{}
}

func startPoller(ctx context.Context, n *nodeCPU) *poller {
	ctx, cancel := context.WithCancel(ctx)
	p := &poller{n: n, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			r := n.read(rctx)
			rcancel()
			p.mu.Lock()
			p.latest = r
			p.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func (p *poller) get() map[string]nodeUse {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latest
}

func (p *poller) halt() { p.stop(); <-p.done }

// PlanCPU is the run's host check on a cluster. On kind the nodes are
// containers on this host: its idle share comes from /proc/stat, and the
// campaign's pods' CPU from the kubelets (summary API, else metrics API)
// tells its own use from outside load. On kube it reads the nodes that
// run the ingress and the generators: the busiest node's idle share, and
// the campaign's pods on it. What cannot be read is said in the note.
func (e *Env) PlanCPU(ctx context.Context) env.CPUPlan {
	return planCPU(ctx, e.opts.Client.Kube, e.ns, e.opts.Name == "kind", true)
}

// PlanCPU is the Env's, told whether the generators or this machine
// send the load.
func (w *WithGenerators) PlanCPU(ctx context.Context) env.CPUPlan {
	return planCPU(ctx, w.opts.Client.Kube, w.ns, w.opts.Name == "kind", w.fallback != "")
}

// planCPU plans the check; cliLoad says this machine sends the load, so
// on kube (not kind, where this machine is the nodes' host) the note
// says this machine is not sampled.
func planCPU(ctx context.Context, k kubernetes.Interface, workload string, onThisHost, cliLoad bool) env.CPUPlan {
	src, fallback, err := probeSource(ctx, k, workload)
	var n *nodeCPU
	if err == nil {
		n = &nodeCPU{kube: k, workload: workload, src: src, capacity: map[string]float64{}, failures: map[string]string{}, allNodes: onThisHost}
	}
	if onThisHost {
		return kindPlan(ctx, n, src, fallback, err)
	}
	unsampled := ""
	if cliLoad {
		unsampled = "; this machine, which sent the load, was not sampled (its schedule is checked by the send lag)"
	}
	if err != nil {
		why := "node CPU not readable: " + err.Error() + unsampled
		return env.CPUPlan{CPUs: 1, Note: func() string { return why }, Stop: func() {}}
	}
	p := startPoller(context.WithoutCancel(ctx), n)
	return env.CPUPlan{
		CPUs:   1,
		Sample: func() *load.CPU { return busiestNode(p.get()) },
		Stop:   p.halt,
		Note: func() string {
			n.mu.Lock()
			nodes := strings.Join(n.lastNodes, ", ")
			n.mu.Unlock()
			return fmt.Sprintf("the nodes running the ingress and the generators (%s), from %s%s, the busiest node each second; readings lag by the kubelet's sampling period%s%s",
				nodes, src.name(), fallback, n.problems(), unsampled)
		},
	}
}

// busiestNode is the reading of the node with the least idle share, its
// groups in percent of that node (CPUs 1).
func busiestNode(nodes map[string]nodeUse) *load.CPU {
	cpu := &load.CPU{HostIdle: math.NaN(), Generator: math.NaN(), Ingress: math.NaN(), Backends: math.NaN()}
	for _, u := range nodes {
		if math.IsNaN(u.capacity) || u.capacity <= 0 {
			continue
		}
		idle := max(0, 100*(1-u.used/u.capacity))
		if math.IsNaN(cpu.HostIdle) || idle < cpu.HostIdle {
			cpu.HostIdle = idle
			cpu.Generator, cpu.Ingress, cpu.Backends = 100*u.generator/u.capacity, 100*u.ingress/u.capacity, 100*u.bes/u.capacity
			if u.unread {
				// Some of the campaign's pods on it had no reading: whose
				// CPU a busy second was is unknown, not outside.
				cpu.Generator, cpu.Ingress, cpu.Backends = math.NaN(), math.NaN(), math.NaN()
			}
		}
	}
	return cpu
}

// kindPlan samples this host's /proc/stat (the kind nodes are containers
// on it) and this process, and adds the campaign's pods from the
// kubelets when they can be read; when they cannot, the ingress and
// backends are unattributed (NaN) and the note says why.
func kindPlan(ctx context.Context, n *nodeCPU, src nodeSource, fallback string, srcErr error) env.CPUPlan {
	host := hostcpu.NewSampler([]int{os.Getpid()}, nil, nil)
	cpus := max(hostcpu.HostCPUs(), 1)
	base := "this host's /proc/stat (the kind nodes are containers on it) and this process's CPU"
	if srcErr != nil {
		why := fmt.Sprintf("%s; the pods' CPU could not be read (%v), so the ingress's and backends' share of a busy second is unknown and the second counts against the run", base, srcErr)
		return env.CPUPlan{CPUs: cpus, Stop: func() {}, Note: func() string { return why },
			Sample: func() *load.CPU {
				u := host.Sample()
				return &load.CPU{HostIdle: u.HostIdle, Generator: u.Generator, Ingress: math.NaN(), Backends: math.NaN()}
			}}
	}
	p := startPoller(context.WithoutCancel(ctx), n)
	return env.CPUPlan{
		CPUs: cpus,
		Stop: p.halt,
		Note: func() string {
			return fmt.Sprintf("%s, with the pods' CPU from %s%s%s", base, src.name(), fallback, n.problems())
		},
		Sample: func() *load.CPU {
			u := host.Sample()
			c := &load.CPU{HostIdle: u.HostIdle, Generator: u.Generator, Ingress: math.NaN(), Backends: math.NaN()}
			nodes := p.get()
			if nodes == nil {
				return c
			}
			gen, in, be, ok := podsOnThisHost(nodes)
			if !ok {
				return c
			}
			if math.IsNaN(c.Generator) {
				c.Generator = 0
			}
			c.Generator += 100 * gen
			c.Ingress, c.Backends = 100*in, 100*be
			return c
		},
	}
}

// podsOnThisHost sums the campaign's pods' cores over kind's nodes (all
// containers on this host) by group; not ok when a node or one of the
// campaign's pods had no reading, since the sum would then pass the
// missing CPU off as load from outside the campaign.
func podsOnThisHost(nodes map[string]nodeUse) (gen, in, be float64, ok bool) {
	for _, nu := range nodes {
		if nu.unread {
			return 0, 0, 0, false
		}
		gen, in, be = gen+nu.generator, in+nu.ingress, be+nu.bes
	}
	return gen, in, be, true
}
