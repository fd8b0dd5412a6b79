package deploy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/internal/kubetest"
	"github.com/prequalbench/prequalbench/load"
	"github.com/prequalbench/prequalbench/load/remote"
	"github.com/prequalbench/prequalbench/manifests"
	"github.com/prequalbench/prequalbench/scenario"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Each shard's Job runs `loadgen` with its own spec, never retries (a
// retry would send the shard twice), is bounded by its deadline and
// carries the run and shard labels the campaign finds its pods by.
func TestLoadgenJobs(t *testing.T) {
	cfg := load.Config{Targets: []load.Target{{URL: "http://prequal-ingress.prequalbench-system.svc:8080/work"}},
		Open: []load.Phase{{Kind: load.KindConstant, Rate: 100, Duration: time.Second}}}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	specs := []remote.Spec{remote.NewSpec(cfg, 0, 3, start), remote.NewSpec(cfg, 1, 3, start), remote.NewSpec(cfg, 2, 3, start)}
	jobs, err := LoadgenJobs(LoadgenOptions{Namespace: "ns", Image: "img:latest", Run: "r1", Specs: specs, Deadline: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 3 {
		t.Fatalf("%d jobs", len(jobs))
	}
	for i, j := range jobs {
		if *j.Spec.BackoffLimit != 0 || *j.Spec.ActiveDeadlineSeconds != 91 || j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("job %d: backoff %d, deadline %d, restart %s", i, *j.Spec.BackoffLimit, *j.Spec.ActiveDeadlineSeconds, j.Spec.Template.Spec.RestartPolicy)
		}
		if j.Spec.Template.Labels[LoadgenRunLabel] != "r1" || j.Spec.Template.Labels[LoadgenShard] != []string{"0", "1", "2"}[i] {
			t.Errorf("job %d: labels %v", i, j.Spec.Template.Labels)
		}
		c := j.Spec.Template.Spec.Containers[0]
		var s remote.Spec
		if err := json.Unmarshal([]byte(c.Env[0].Value), &s); err != nil {
			t.Fatal(err)
		}
		// An image loaded into kind is used as loaded, even tagged latest
		// (whose default policy is Always), and the pod passes the
		// restricted Pod Security level.
		ps := j.Spec.Template.Spec
		if c.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("job %d: image pull policy %q", i, c.ImagePullPolicy)
		}
		if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken || ps.SecurityContext == nil ||
			ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot || ps.SecurityContext.SeccompProfile == nil ||
			c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation ||
			c.SecurityContext.Capabilities == nil || len(c.SecurityContext.Capabilities.Drop) != 1 {
			t.Errorf("job %d: pod security %+v, container %+v", i, ps.SecurityContext, c.SecurityContext)
		}
		if c.Image != "img:latest" || strings.Join(c.Args, " ") != "loadgen" || s.Shard != i || s.Shards != 3 || !s.StartAt.Equal(start) {
			t.Errorf("job %d: image %s, args %v, spec shard %d/%d from %v", i, c.Image, c.Args, s.Shard, s.Shards, s.StartAt)
		}
	}
	if _, err := LoadgenJobs(LoadgenOptions{Namespace: "ns", Image: "i", Run: "r", Specs: specs[1:], Deadline: time.Minute}); err == nil {
		t.Error("specs out of shard order accepted")
	}
}

// placementSpecs are two shards of a small run.
func placementSpecs() []remote.Spec {
	cfg := load.Config{Targets: []load.Target{{URL: "http://prequal-ingress.prequalbench-system.svc:8080/work"}},
		Open: []load.Phase{{Kind: load.KindConstant, Rate: 100, Duration: time.Second}}}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return []remote.Spec{remote.NewSpec(cfg, 0, 2, start), remote.NewSpec(cfg, 1, 2, start)}
}

// The placement reaches the pod spec: the node selector and tolerations
// as given, and one-per-node as a required (not preferred) anti-affinity
// between one run's generators on the hostname.
func TestLoadgenPlacement(t *testing.T) {
	tol, err := ParseToleration("dedicated=loadgen:NoSchedule")
	if err != nil {
		t.Fatal(err)
	}
	p := LoadgenPlacement{NodeSelector: map[string]string{"pool": "loadgen"}, Tolerations: []corev1.Toleration{tol}, OnePerNode: true}
	jobs, err := LoadgenJobs(LoadgenOptions{Namespace: "ns", Image: "i", Run: "r", Specs: placementSpecs(), Deadline: time.Minute, Placement: p})
	if err != nil {
		t.Fatal(err)
	}
	ps := jobs[1].Spec.Template.Spec
	if ps.NodeSelector["pool"] != "loadgen" || len(ps.Tolerations) != 1 || ps.Tolerations[0] != (corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "loadgen", Effect: corev1.TaintEffectNoSchedule}) {
		t.Errorf("node selector %v, tolerations %+v", ps.NodeSelector, ps.Tolerations)
	}
	aa := ps.Affinity.PodAntiAffinity
	if len(aa.RequiredDuringSchedulingIgnoredDuringExecution) != 1 || len(aa.PreferredDuringSchedulingIgnoredDuringExecution) != 0 ||
		aa.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != corev1.LabelHostname ||
		aa.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchLabels[LoadgenRunLabel] != "r" {
		t.Errorf("one per node: anti-affinity %+v", aa)
	}
	// Off the backends' nodes: a required term against the backend pods.
	jobs, _ = LoadgenJobs(LoadgenOptions{Namespace: "ns", Image: "i", Run: "r", Specs: placementSpecs(), Deadline: time.Minute,
		Placement: LoadgenPlacement{AvoidBackends: true}})
	aa = jobs[0].Spec.Template.Spec.Affinity.PodAntiAffinity
	if len(aa.RequiredDuringSchedulingIgnoredDuringExecution) != 1 || len(aa.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
		aa.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchLabels[manifests.LabelName] != BackendApp {
		t.Errorf("avoid backends: anti-affinity %+v", aa)
	}
	jobs, _ = LoadgenJobs(LoadgenOptions{Namespace: "ns", Image: "i", Run: "r", Specs: placementSpecs(), Deadline: time.Minute})
	if aa := jobs[0].Spec.Template.Spec.Affinity.PodAntiAffinity; len(aa.RequiredDuringSchedulingIgnoredDuringExecution) != 0 || len(aa.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("default: anti-affinity %+v, want preferred only", aa)
	}
	if tol, err := ParseToleration("*"); err != nil || tol.Operator != corev1.TolerationOpExists || tol.Key != "" {
		t.Errorf("*: %+v, %v", tol, err)
	}
	if tol, err := ParseToleration("gpu"); err != nil || tol.Operator != corev1.TolerationOpExists || tol.Key != "gpu" || tol.Effect != "" {
		t.Errorf("gpu: %+v, %v", tol, err)
	}
}

// Bad placement is refused before any Job is made, naming the flag and
// what was expected.
func TestLoadgenPlacementErrors(t *testing.T) {
	for in, want := range map[string]string{
		"key=v:NoScheduel":    "want NoSchedule, PreferNoSchedule or NoExecute",
		"=v":                  "want KEY[=VALUE][:EFFECT] or *",
		"bad key!:NoSchedule": "--generator-toleration: key",
	} {
		if _, err := ParseToleration(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("toleration %q: %v, want %q", in, err, want)
		}
	}
	_, err := LoadgenJobs(LoadgenOptions{Namespace: "ns", Image: "i", Run: "r", Specs: placementSpecs(), Deadline: time.Minute,
		Placement: LoadgenPlacement{NodeSelector: map[string]string{"pool": "not a value"}}})
	if err == nil || !strings.Contains(err.Error(), "--generator-node-selector: value") {
		t.Errorf("bad selector value: %v", err)
	}
}

// The real kube-apiserver accepts the Jobs with every placement option
// set and keeps them as rendered.
func TestLoadgenPlacementOnRealAPIServer(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	p := LoadgenPlacement{NodeSelector: map[string]string{"kubernetes.io/os": "linux"}, OnePerNode: true, AvoidBackends: true,
		Tolerations: []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}
	jobs, err := LoadgenJobs(LoadgenOptions{Namespace: ns, Image: "prequalbench/ingress:dev", Run: "p1", Specs: placementSpecs(), Deadline: time.Minute, Placement: p})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		got, err := env.Client.BatchV1().Jobs(ns).Create(context.Background(), j, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("the API server refused Job %s: %v", j.Name, err)
		}
		ps := got.Spec.Template.Spec
		if ps.NodeSelector["kubernetes.io/os"] != "linux" || len(ps.Tolerations) != 1 || len(ps.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 2 {
			t.Errorf("Job %s stored as %+v", j.Name, ps)
		}
	}
}

// BackendApp is the label the workload's backend pods really carry, so
// AvoidBackends's anti-affinity matches them.
func TestBackendAppMatchesTheWorkload(t *testing.T) {
	s, err := scenario.Catalogue("quickstart")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Workload(s, manifests.WorkloadOptions{Image: "b:1", Algorithm: "round-robin"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		labels, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
		if labels[manifests.LabelName] != BackendApp {
			t.Errorf("Deployment %s: pod label %s=%q, want %q", o.GetName(), manifests.LabelName, labels[manifests.LabelName], BackendApp)
		}
		found = true
	}
	if !found {
		t.Fatal("the workload has no Deployment")
	}
}
