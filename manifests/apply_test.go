package manifests_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/cluster/kubeapply"
	"github.com/prequalbench/prequalbench/internal/kubetest"
	"github.com/prequalbench/prequalbench/manifests"
	"github.com/prequalbench/prequalbench/scenario"
	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

var nsCounter int

// workloadNS returns a namespace name not used before in this apiserver
// (Ingress creates it: deleted namespaces stay Terminating here).
func workloadNS(t *testing.T) string {
	nsCounter++
	return fmt.Sprintf("wl-%d-%d", time.Now().UnixNano()%1_000_000, nsCounter)
}

func client(t *testing.T) (*kubeapply.Client, *kubetest.Env) {
	t.Helper()
	env := kubetest.Start(t)
	c, err := kubeapply.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c, env
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// resourceVersions reads back every object, by kind/namespace/name.
func resourceVersions(t *testing.T, env *kubetest.Env, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	c, err := kubeapply.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range objs {
		got, err := c.Get(ctx(t), o)
		if err != nil {
			t.Fatal(err)
		}
		out[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = got.GetResourceVersion()
	}
	return out
}

func TestIngressAppliedOnEB(t *testing.T) {
	c, env := client(t)
	ns := workloadNS(t)
	objs, err := manifests.Ingress(manifests.IngressOptions{
		Topology: manifests.TopologyEB, Image: "prequalbench/ingress:test", ImageID: "sha256:abc",
		Replicas: 2, WorkloadNamespace: ns, AdminToken: "s3cret", Args: []string{"--prequal-pool-size", "16"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx(t), objs); err != nil {
		t.Fatal(err)
	}
	before := resourceVersions(t, env, objs)
	// Idempotent: the same apply again changes nothing.
	if err := c.Apply(ctx(t), objs); err != nil {
		t.Fatal(err)
	}
	if after := resourceVersions(t, env, objs); !mapsEqual(before, after) {
		t.Errorf("second apply changed objects:\nbefore %v\nafter  %v", before, after)
	}

	k := env.Client
	d, err := k.AppsV1().Deployments(manifests.SystemNamespace).Get(ctx(t), manifests.IngressName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	if *d.Spec.Replicas != 2 || pod.Containers[0].Image != "prequalbench/ingress:test" {
		t.Errorf("replicas %d image %q", *d.Spec.Replicas, pod.Containers[0].Image)
	}
	if v, ok := pod.NodeSelector[manifests.ControlPlaneLabel]; !ok || v != "" {
		t.Errorf("E-B ingress nodeSelector = %v, want the control-plane label", pod.NodeSelector)
	}
	if !hasControlPlaneToleration(pod.Tolerations) {
		t.Errorf("E-B ingress tolerations = %v", pod.Tolerations)
	}
	args := strings.Join(pod.Containers[0].Args, " ")
	for _, want := range []string{"ingress", "--source=kube", "--listen=0.0.0.0:8080", "--admin-listen=0.0.0.0:8081",
		"--admin-token-file=/var/run/prequalbench/admin-token", "--namespace=" + ns, "--ingress-class=prequal", "--prequal-pool-size 16"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if d.Spec.Template.Annotations[manifests.ImageIDAnnotation] != "sha256:abc" {
		t.Errorf("pod annotations %v lack the image ID", d.Spec.Template.Annotations)
	}
	sc := pod.Containers[0].SecurityContext
	if pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("ingress pod is not non-root with a read-only root filesystem")
	}
	if p := pod.Containers[0].ReadinessProbe; p == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.StrVal != "admin" {
		t.Errorf("readiness probe %+v, want /readyz on admin", p)
	}

	svc, err := k.CoreV1().Services(manifests.SystemNamespace).Get(ctx(t), manifests.IngressName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]int32{}
	for _, p := range svc.Spec.Ports {
		ports[p.Name] = p.NodePort
	}
	if svc.Spec.Type != corev1.ServiceTypeNodePort || ports["proxy"] != manifests.ProxyNodePort || ports["admin"] != manifests.AdminNodePort {
		t.Errorf("service type %s node ports %v", svc.Spec.Type, ports)
	}

	cls, err := k.NetworkingV1().IngressClasses().Get(ctx(t), manifests.IngressClassName, metav1.GetOptions{})
	if err != nil || cls.Spec.Controller != manifests.ControllerName {
		t.Errorf("ingress class: %v %+v", err, cls)
	}
	sec, err := k.CoreV1().Secrets(manifests.SystemNamespace).Get(ctx(t), manifests.AdminTokenSecret, metav1.GetOptions{})
	if err != nil || string(sec.Data[manifests.AdminTokenKey]) != "s3cret" {
		t.Errorf("token secret: %v %q", err, sec.Data)
	}

	// Least privilege: the service account reads routes in the workload
	// namespace and nothing else.
	sa := "system:serviceaccount:" + manifests.SystemNamespace + ":" + manifests.IngressName
	for _, tc := range []struct {
		ns, group, resource, verb string
		allowed                   bool
	}{
		{ns, "networking.k8s.io", "ingresses", "watch", true},
		{ns, "", "services", "list", true},
		{ns, "discovery.k8s.io", "endpointslices", "watch", true},
		{"", "networking.k8s.io", "ingressclasses", "list", true},
		{ns, "networking.k8s.io", "ingresses", "update", false},
		{ns, "", "secrets", "list", false},
		{manifests.SystemNamespace, "", "secrets", "get", false},
		{"default", "networking.k8s.io", "ingresses", "list", false},
		{ns, "", "pods", "list", false},
		{"", "gateway.networking.k8s.io", "gatewayclasses", "watch", true},
		{"", "gateway.networking.k8s.io", "gatewayclasses/status", "update", true},
		{"", "gateway.networking.k8s.io", "gatewayclasses", "update", false},
		{ns, "gateway.networking.k8s.io", "gateways", "watch", true},
		{ns, "gateway.networking.k8s.io", "httproutes", "list", true},
		{ns, "gateway.networking.k8s.io", "httproutes/status", "update", true},
		{ns, "gateway.networking.k8s.io", "gateways/status", "update", true},
		{ns, "gateway.networking.k8s.io", "httproutes", "update", false},
		{"default", "gateway.networking.k8s.io", "httproutes/status", "update", false},
	} {
		if got := can(t, k, sa, tc.ns, tc.group, tc.resource, tc.verb); got != tc.allowed {
			t.Errorf("%s %s.%s in %q: allowed=%v, want %v", tc.verb, tc.resource, tc.group, tc.ns, got, tc.allowed)
		}
	}
}

func TestIngressAppliedOnEA(t *testing.T) {
	c, env := client(t)
	objs, err := manifests.Ingress(manifests.IngressOptions{
		Topology: manifests.TopologyEA, Image: "prequalbench/ingress:ea", WorkloadNamespace: workloadNS(t), AdminToken: "t",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx(t), objs); err != nil {
		t.Fatal(err)
	}
	d, err := env.Client.AppsV1().Deployments(manifests.SystemNamespace).Get(ctx(t), manifests.IngressName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Applying E-A after E-B drops the E-B pinning (server-side apply
	// removes fields the manager no longer sets).
	if len(d.Spec.Template.Spec.NodeSelector) != 0 || *d.Spec.Replicas != 1 {
		t.Errorf("E-A ingress: nodeSelector %v replicas %d, want none and 1", d.Spec.Template.Spec.NodeSelector, *d.Spec.Replicas)
	}
}

func TestObservabilityApplied(t *testing.T) {
	c, env := client(t)
	ing, err := manifests.Ingress(manifests.IngressOptions{Image: "i:1", WorkloadNamespace: workloadNS(t), AdminToken: "t"})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := manifests.Observability()
	if err != nil {
		t.Fatal(err)
	}
	all := append(ing, obs...)
	all = append(all, manifests.ClusterInfoObject(manifests.ClusterInfo{Topology: manifests.TopologyEA, IngressImage: "i:1", BackendImage: "b:1", Observability: true}))
	if err := c.Apply(ctx(t), all); err != nil {
		t.Fatal(err)
	}
	k := env.Client
	for name, port := range map[string]int32{"grafana": manifests.GrafanaNodePort, "prometheus": manifests.PrometheusNodePort} {
		svc, err := k.CoreV1().Services(manifests.SystemNamespace).Get(ctx(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if svc.Spec.Ports[0].NodePort != port {
			t.Errorf("%s node port %d, want %d", name, svc.Spec.Ports[0].NodePort, port)
		}
	}
	cm, err := k.CoreV1().ConfigMaps(manifests.SystemNamespace).Get(ctx(t), manifests.GrafanaDashboardsMap, metav1.GetOptions{})
	if err != nil || !strings.Contains(cm.Data["request-overview.json"], `"uid": "request-overview"`) {
		t.Errorf("dashboards ConfigMap: %v", err)
	}
	cm, err = k.CoreV1().ConfigMaps(manifests.SystemNamespace).Get(ctx(t), manifests.ClusterInfoName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := manifests.ParseClusterInfo(cm.Data); got.Topology != manifests.TopologyEA || !got.Observability || got.BackendImage != "b:1" {
		t.Errorf("cluster info read back as %+v", got)
	}
	sa := "system:serviceaccount:" + manifests.SystemNamespace + ":prometheus"
	if !can(t, k, sa, manifests.SystemNamespace, "", "pods", "list") || can(t, k, sa, "default", "", "pods", "list") {
		t.Error("prometheus should list pods in the system namespace only")
	}
}

// TestEveryScenarioWorkload renders every catalogue scenario for E-B,
// applies it to the real apiserver and reads it back.
func TestEveryScenarioWorkload(t *testing.T) {
	c, env := client(t)
	names := scenario.Names()
	if len(names) == 0 {
		t.Fatal("empty scenario catalogue")
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			s, err := scenario.Catalogue(name)
			if err != nil {
				t.Fatal(err)
			}
			ns := env.Namespace(t)
			objs, err := manifests.Workload(s, manifests.WorkloadOptions{
				Topology: manifests.TopologyEB, Namespace: ns, Image: "prequalbench/backend:test", Algorithm: "round-robin",
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Apply(ctx(t), objs); err != nil {
				t.Fatal(err)
			}
			checkWorkload(t, env.Client, s, ns)
		})
	}
}

func checkWorkload(t *testing.T, k kubernetes.Interface, s *scenario.Scenario, ns string) {
	t.Helper()
	for _, r := range s.Workload.Routes {
		for _, g := range r.Backends {
			d, err := k.AppsV1().Deployments(ns).Get(ctx(t), g.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if int(*d.Spec.Replicas) != g.Replicas {
				t.Errorf("%s replicas %d, want %d", g.Name, *d.Spec.Replicas, g.Replicas)
			}
			args := d.Spec.Template.Spec.Containers[0].Args
			head := []string{"--listen", "0.0.0.0:8080", "--shutdown-grace", "3s", "--drain-timeout", "30s"}
			if !slices.Equal(args[:len(head)], head) || !slices.Equal(args[len(head):], g.Args()) {
				t.Errorf("%s args %q, want %q then %q", g.Name, args, head, g.Args())
			}
			if d.Spec.Template.Labels[manifests.LabelRoute] != r.Name {
				t.Errorf("%s pod labels %v lack route %s", g.Name, d.Spec.Template.Labels, r.Name)
			}
			spread := d.Spec.Template.Spec.TopologySpreadConstraints
			if len(spread) != 1 || spread[0].TopologyKey != "kubernetes.io/hostname" || spread[0].MaxSkew != 1 ||
				spread[0].LabelSelector.MatchLabels[manifests.LabelGroup] != g.Name {
				t.Errorf("%s spread %+v, want max skew 1 over hostnames of the group", g.Name, spread)
			}
			aff := d.Spec.Template.Spec.Affinity
			if aff == nil || aff.NodeAffinity == nil ||
				aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key != manifests.ControlPlaneLabel {
				t.Errorf("%s affinity %+v, want off the control plane", g.Name, aff)
			}
		}
		svc, err := k.CoreV1().Services(ns).Get(ctx(t), r.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if svc.Spec.Selector[manifests.LabelRoute] != r.Name || svc.Spec.Ports[0].Port != manifests.BackendPort {
			t.Errorf("service %s: selector %v ports %v", r.Name, svc.Spec.Selector, svc.Spec.Ports)
		}
		ing, err := k.NetworkingV1().Ingresses(ns).Get(ctx(t), r.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != manifests.IngressClassName {
			t.Errorf("ingress %s class %v", r.Name, ing.Spec.IngressClassName)
		}
		if ing.Annotations[manifests.AlgorithmAnnotation] != "round-robin" {
			t.Errorf("ingress %s annotations %v", r.Name, ing.Annotations)
		}
		rule := ing.Spec.Rules[0]
		p := rule.HTTP.Paths[0]
		wantPath := r.Path
		if wantPath == "" {
			wantPath = "/work"
		}
		if rule.Host != r.Host || p.Path != wantPath || p.Backend.Service.Name != r.Name || p.Backend.Service.Port.Number != manifests.BackendPort {
			t.Errorf("ingress %s rule %+v path %+v", r.Name, rule, p)
		}
	}
}

// TestPruneRemovesPreviousScenario deploys one scenario, then another, and
// checks that what only the first had is gone and that re-applying is a
// no-op.
func TestPruneRemovesPreviousScenario(t *testing.T) {
	c, env := client(t)
	ns := env.Namespace(t)
	deploy := func(name string) []*unstructured.Unstructured {
		s, err := scenario.Catalogue(name)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := manifests.Workload(s, manifests.WorkloadOptions{Namespace: ns, Image: "b:1", Algorithm: "prequal"})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Apply(ctx(t), objs); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Prune(ctx(t), ns, manifests.WorkloadSelector, manifests.WorkloadKinds, objs); err != nil {
			t.Fatal(err)
		}
		return objs
	}
	first := deploy("c4-multi-route-8")
	second := deploy("quickstart")
	keep := map[string]bool{}
	for _, o := range second {
		keep[o.GetKind()+"/"+o.GetName()] = true
	}
	for _, o := range first {
		_, err := c.Get(ctx(t), o)
		gone := err != nil
		if keep[o.GetKind()+"/"+o.GetName()] == gone {
			t.Errorf("%s %s: gone=%v (err %v), want gone=%v", o.GetKind(), o.GetName(), gone, err, !keep[o.GetKind()+"/"+o.GetName()])
		}
	}
	deleted, err := c.Prune(ctx(t), ns, manifests.WorkloadSelector, manifests.WorkloadKinds, second)
	if err != nil || len(deleted) != 0 {
		t.Errorf("second prune deleted %v (err %v), want nothing", deleted, err)
	}
}

func can(t *testing.T, k kubernetes.Interface, user, ns, group, resource, verb string) bool {
	t.Helper()
	resource, sub, _ := strings.Cut(resource, "/")
	r, err := k.AuthorizationV1().SubjectAccessReviews().Create(ctx(t), &authv1.SubjectAccessReview{Spec: authv1.SubjectAccessReviewSpec{
		User:               user,
		Groups:             []string{"system:serviceaccounts", "system:authenticated"},
		ResourceAttributes: &authv1.ResourceAttributes{Namespace: ns, Group: group, Resource: resource, Subresource: sub, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}

func hasControlPlaneToleration(ts []corev1.Toleration) bool {
	for _, tol := range ts {
		if tol.Key == manifests.ControlPlaneLabel && tol.Operator == corev1.TolerationOpExists && tol.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
