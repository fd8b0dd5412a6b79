package kube

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/cluster/deploy"
	"github.com/prequalbench/prequalbench/cluster/kubeapply"
	"github.com/prequalbench/prequalbench/ingress/adminapi"
	"github.com/prequalbench/prequalbench/internal/kubetest"
	"github.com/prequalbench/prequalbench/manifests"
	"github.com/prequalbench/prequalbench/reports"
	"github.com/prequalbench/prequalbench/scenario"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

func TestParseSummary(t *testing.T) {
	used, pods, err := parseSummary([]byte(`{"node":{"nodeName":"n1","cpu":{"time":"2026-01-01T00:00:00Z","usageNanoCores":1500000000,"usageCoreNanoSeconds":9}},
		"pods":[{"podRef":{"name":"ing","namespace":"prequalbench-system"},"cpu":{"usageNanoCores":250000000}},{"podRef":{"name":"new","namespace":"w"}}]}`))
	if err != nil || used != 1.5 || pods["prequalbench-system/ing"] != 0.25 || len(pods) != 1 {
		t.Errorf("used %v, pods %v, err %v", used, pods, err)
	}
	if _, _, err := parseSummary([]byte(`{"node":{"nodeName":"n1"}}`)); err == nil || !strings.Contains(err.Error(), "usageNanoCores") {
		t.Errorf("a summary without node cpu: %v", err)
	}
}

// fakeSource serves fixed per-node readings.
type fakeSource map[string]struct {
	used float64
	pods map[string]float64
}

func (fakeSource) name() string { return "fake" }
func (f fakeSource) read(_ context.Context, node string, _ []podRef) (float64, map[string]float64, error) {
	r, ok := f[node]
	if !ok {
		return 0, nil, fmt.Errorf("node %s unreachable", node)
	}
	return r.used, r.pods, nil
}

func scheduledPod(ns, name, node string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func cpuNode(name string, cores string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cores)}}}
}

// On kube the nodes of the ingress and the generators are read, not the
// backends' only node; the busiest one's idle share is the host's, with
// the campaign's pods on it by group, in percent of that node.
func TestNodeCPU_ReadsTheIngressAndGeneratorNodes(t *testing.T) {
	k := fake.NewClientset(
		cpuNode("a", "4"), cpuNode("b", "2"), cpuNode("c", "8"),
		scheduledPod(manifests.SystemNamespace, "ing-0", "a", map[string]string{manifests.LabelName: manifests.IngressName}),
		scheduledPod("w", "gen-0", "b", map[string]string{manifests.LabelName: deploy.LoadgenName}),
		scheduledPod("w", "be-0", "b", map[string]string{manifests.LabelName: "prequal-backend"}),
		scheduledPod("w", "be-1", "c", map[string]string{manifests.LabelName: "prequal-backend"}),
	)
	src := fakeSource{
		"a": {used: 1, pods: map[string]float64{manifests.SystemNamespace + "/ing-0": 0.8}},
		"b": {used: 1.9, pods: map[string]float64{"w/gen-0": 0.5, "w/be-0": 1.2}},
	}
	n := &nodeCPU{kube: k, workload: "w", src: src, capacity: map[string]float64{}, failures: map[string]string{}}
	nodes := n.read(context.Background())
	if _, ok := nodes["c"]; ok || len(nodes) != 2 {
		t.Errorf("read %v; want the ingress's and the generator's nodes a and b only", nodes)
	}
	cpu := busiestNode(nodes)
	// Node b: 1.9 of 2 cores used (5% idle); generator 25%, backends 60%.
	if math.Abs(cpu.HostIdle-5) > 1e-9 || math.Abs(cpu.Generator-25) > 1e-9 || math.Abs(cpu.Backends-60) > 1e-9 || cpu.Ingress != 0 {
		t.Errorf("busiest node: %+v; want node b: idle 5, generator 25, backends 60, ingress 0", cpu)
	}
	// kind: every node of the campaign's pods, summed (all on this host).
	n.allNodes = true
	src["c"] = struct {
		used float64
		pods map[string]float64
	}{used: 0.3, pods: map[string]float64{"w/be-1": 0.3}}
	if nodes := n.read(context.Background()); len(nodes) != 3 {
		t.Errorf("kind: read %d nodes, want 3", len(nodes))
	}
	delete(src, "c")
	n.read(context.Background())
	if p := n.problems(); !strings.Contains(p, "c: node c unreachable") {
		t.Errorf("a node that failed is not named: %q", p)
	}
}

// A node that could not be read, or a campaign pod missing from its
// node's stats, leaves the campaign's share unknown (NaN, unattributed),
// never zero: zero would charge the missing pods' CPU to processes
// outside the campaign and invalidate the run for the wrong reason.
func TestNodeCPU_UnreadIsUnknownNotZero(t *testing.T) {
	k := fake.NewClientset(
		cpuNode("a", "4"), cpuNode("b", "2"),
		scheduledPod(manifests.SystemNamespace, "ing-0", "a", map[string]string{manifests.LabelName: manifests.IngressName}),
		scheduledPod("w", "be-0", "b", map[string]string{manifests.LabelName: "prequal-backend"}),
	)
	// kind: node b (the backends') does not answer.
	src := fakeSource{"a": {used: 3.9, pods: map[string]float64{manifests.SystemNamespace + "/ing-0": 1}}}
	n := &nodeCPU{kube: k, workload: "w", src: src, capacity: map[string]float64{}, failures: map[string]string{}, allNodes: true}
	if _, _, _, ok := podsOnThisHost(n.read(context.Background())); ok {
		t.Error("kind: the pods were summed although node b was not read")
	}
	// kube: node a is read, but its ingress pod is not in the stats yet.
	src["a"] = struct {
		used float64
		pods map[string]float64
	}{used: 3.9, pods: map[string]float64{}}
	n.allNodes = false
	cpu := busiestNode(n.read(context.Background()))
	if math.Abs(cpu.HostIdle-2.5) > 1e-9 || !math.IsNaN(cpu.Ingress) || !math.IsNaN(cpu.Backends) || !math.IsNaN(cpu.Generator) {
		t.Errorf("busiest node with its ingress pod unread: %+v; want idle 2.5 and the groups unknown (NaN)", cpu)
	}
	if p := n.problems(); !strings.Contains(p, "no CPU reading for "+manifests.SystemNamespace+"/ing-0") {
		t.Errorf("the unread pod is not named: %q", p)
	}
	// Every node and pod read: the sums are the pods' cores.
	src["b"] = struct {
		used float64
		pods map[string]float64
	}{used: 1, pods: map[string]float64{"w/be-0": 0.5}}
	src["a"] = struct {
		used float64
		pods map[string]float64
	}{used: 3.9, pods: map[string]float64{manifests.SystemNamespace + "/ing-0": 1}}
	n.allNodes = true
	if gen, in, be, ok := podsOnThisHost(n.read(context.Background())); !ok || gen != 0 || in != 1 || be != 0.5 {
		t.Errorf("kind with every node read: %v %v %v %v; want 0, 1, 0.5, ok", gen, in, be, ok)
	}
}

// minimalEnv is an environment whose CPU sampling is a kube Env's, on
// the real API server, and whose load goes to a loopback server.
type minimalEnv struct {
	*Env
	srv *httptest.Server
}

func (m *minimalEnv) Setup(context.Context) error   { return nil }
func (m *minimalEnv) Backends() []artifacts.Backend { return nil }
func (m *minimalEnv) LoadTargets() []env.Target {
	return []env.Target{{URL: m.srv.URL + "/work", Weight: 1, Route: "work"}}
}
func (m *minimalEnv) SetAlgorithm(context.Context, string) error { return nil }
func (m *minimalEnv) Reset(context.Context, string) (env.Verification, error) {
	return env.Verification{Verified: true, Detail: "admin reset: 0 backends clean, 0 ingress replicas clean (empty pools, zero counters)"}, nil
}
func (m *minimalEnv) Snapshot(context.Context) ([]adminapi.State, error) {
	return []adminapi.State{{}}, nil
}
func (m *minimalEnv) Facts() artifacts.Environment {
	return artifacts.Environment{Name: "kind", CPUs: 1}
}
func (m *minimalEnv) Close() error { return nil }

// A kind campaign on a cluster whose kubelets cannot be reached (the real
// API server with no kubelet behind its Node: the summary API fails, and
// no metrics API is installed) still checks this host's headroom from
// /proc/stat, records that the pods' CPU could not be read and why, and
// its report says so under Validity. The same cluster as kube has no
// host reading at all: not checked, with the reason.
func TestKindCampaignWithoutNodeCPUSaysSo(t *testing.T) {
	kenv := kubetest.Start(t)
	k := kenv.Client
	ns := kenv.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := fmt.Sprintf("kind-control-plane-%d", time.Now().UnixNano()%1e6)
	ingressPod := createScheduledIngress(t, ctx, k, node)
	defer func() {
		_ = k.CoreV1().Pods(manifests.SystemNamespace).Delete(context.WithoutCancel(ctx), ingressPod, metav1.DeleteOptions{})
		_ = k.CoreV1().Nodes().Delete(context.WithoutCancel(ctx), node, metav1.DeleteOptions{})
	}()
	c, err := kubeapply.New(kenv.Config)
	if err != nil {
		t.Fatal(err)
	}

	kubePlan := (&Env{opts: Options{Name: "kube", Client: c}, ns: ns}).PlanCPU(ctx)
	kubePlan.Stop()
	if kubePlan.Sample != nil || !strings.Contains(kubePlan.Note(), "node CPU not readable") ||
		!strings.Contains(kubePlan.Note(), "kubelet summary API") || !strings.Contains(kubePlan.Note(), "metrics API") {
		t.Errorf("kube without kubelets: sample %v, note %q; want no sampler and both failures named", kubePlan.Sample != nil, kubePlan.Note())
	}
	// The CLI sent the load (no generators): the note says this machine,
	// whose CPU the load came from, was not sampled; with the generators
	// in use it does not.
	if !strings.Contains(kubePlan.Note(), "this machine, which sent the load, was not sampled") {
		t.Errorf("kube with the load from this machine: note %q does not say this machine was not sampled", kubePlan.Note())
	}
	genPlan := (&WithGenerators{Env: &Env{opts: Options{Name: "kube", Client: c}, ns: ns}}).PlanCPU(ctx)
	genPlan.Stop()
	if strings.Contains(genPlan.Note(), "this machine") {
		t.Errorf("kube with in-cluster generators: note %q speaks of this machine", genPlan.Note())
	}

	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	s, err := scenario.Parse([]byte(`
name: kindcpu
workload:
  routes:
    - name: work
      backends: [{name: fast, replicas: 1}]
load:
  open: [{kind: constant, duration: 2s, rate: 20}]
protocol:
  algorithms: [round-robin]
  reps: 1
  warmup: 0s
  cooldown: 0s
`))
	if err != nil {
		t.Fatal(err)
	}
	me := &minimalEnv{Env: &Env{opts: Options{Name: "kind", Client: c}, ns: ns}, srv: srv}
	res, err := campaign.Run(ctx, campaign.Options{Scenario: s, OutDir: t.TempDir(),
		Env: func(string, *scenario.Scenario, uint64) (env.Environment, error) { return me, nil }})
	if err != nil {
		t.Fatal(err)
	}
	var run artifacts.Run
	if err := artifacts.ReadJSON(filepath.Join(res.Dir, filepath.FromSlash(res.Runs[0].Dir), artifacts.RunFile), &run); err != nil {
		t.Fatal(err)
	}
	note := run.Validity.HostCheckNote
	if run.Validity.HostCheck == artifacts.HostCheckNotMeasured || !strings.Contains(note, "/proc/stat") ||
		!strings.Contains(note, "pods' CPU could not be read") || !strings.Contains(note, "failed on node "+node) {
		t.Errorf("kind run: host check %q, note %q; want this host checked and the kubelet failure named", run.Validity.HostCheck, note)
	}
	files, err := reports.Render(res.Dir, reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	md := string(files[artifacts.ReportFile])
	validity := md[strings.Index(md, "## Validity"):]
	if !strings.Contains(validity, "Host check of run(s) 1: this host's /proc/stat") || !strings.Contains(validity, "the pods' CPU could not be read") {
		t.Errorf("the report's Validity section does not say the node CPU was unreadable:\n%s", validity[:min(len(validity), 2000)])
	}
	if os.Getenv("PREQUALBENCH_SHOW_REPORT") != "" {
		t.Log(validity[:min(len(validity), 2000)])
	}
}

// createScheduledIngress makes a Node with no kubelet behind it and an
// ingress pod bound to it, as the scheduler would.
func createScheduledIngress(t *testing.T, ctx context.Context, k kubernetes.Interface, node string) string {
	t.Helper()
	if _, err := k.CoreV1().Nodes().Create(ctx, cpuNode(node, "2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, _ = k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: manifests.SystemNamespace}}, metav1.CreateOptions{})
	name := fmt.Sprintf("ingress-cpu-%d", time.Now().UnixNano())
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: manifests.SystemNamespace, Name: name, Labels: map[string]string{manifests.LabelName: manifests.IngressName}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if _, err := k.CoreV1().Pods(manifests.SystemNamespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}
