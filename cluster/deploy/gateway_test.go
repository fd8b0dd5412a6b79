package deploy_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/prequalbench/prequalbench/cluster/deploy"
	"github.com/prequalbench/prequalbench/cluster/kubeapply"
	"github.com/prequalbench/prequalbench/ingress/kubesource"
	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/internal/kubetest"
	"github.com/prequalbench/prequalbench/manifests"
	"github.com/prequalbench/prequalbench/manifests/gatewayapi"
	"github.com/prequalbench/prequalbench/scenario"
)

// routeSink keeps the last route set.
type routeSink struct {
	mu   sync.Mutex
	last []route.Spec
}

func (r *routeSink) Update(specs []route.Spec) {
	r.mu.Lock()
	r.last = slices.Clone(specs)
	r.mu.Unlock()
}

func (r *routeSink) get() []route.Spec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.last)
}

// standIn plays the controller-manager: it marks every Deployment of the
// namespaces rolled out, until the test ends.
func standIn(t *testing.T, env *kubetest.Env, namespaces ...string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for _, n := range namespaces {
				list, err := env.Client.AppsV1().Deployments(n).List(ctx, metav1.ListOptions{})
				if err != nil {
					continue
				}
				for _, d := range list.Items {
					if d.Status.ObservedGeneration == d.Generation {
						continue
					}
					r := *d.Spec.Replicas
					d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: r, UpdatedReplicas: r, ReadyReplicas: r, AvailableReplicas: r}
					_, _ = env.Client.AppsV1().Deployments(n).UpdateStatus(ctx, &d, metav1.UpdateOptions{})
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestGatewayScenario deploys a scenario with ingress.routing: gateway on
// the real kube-apiserver: the Gateway API's CRDs and GatewayClass are
// installed as `cluster up` installs them, the workload is a Gateway and
// one HTTPRoute per route, and the ingress's Kubernetes source serves
// them with their status written. The algorithm switch rewrites the
// HTTPRoutes, and a later Ingress scenario prunes them.
func TestGatewayScenario(t *testing.T) {
	env := kubetest.Start(t)
	c, err := kubeapply.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	c.Poll = 20 * time.Millisecond
	ns := env.Namespace(t)
	standIn(t, env, manifests.SystemNamespace, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	s, err := scenario.Catalogue("c2-hetero-open")
	if err != nil {
		t.Fatal(err)
	}
	s.Ingress.Routing = scenario.RoutingGateway
	opts := deploy.Options{Topology: manifests.TopologyEB, Namespace: ns, IngressImage: "i:1", BackendImage: "b:1", AdminToken: "tok", Algorithm: "prequal"}
	if _, err := deploy.Scenario(ctx, c, s, opts); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	class, err := dyn.Resource(gatewayapi.GatewayClasses).Get(ctx, gatewayapi.GatewayClassName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("GatewayClass %s: %v", gatewayapi.GatewayClassName, err)
	}
	if cn, _, _ := unstructured.NestedString(class.Object, "spec", "controllerName"); cn != kubesource.ControllerName {
		t.Fatalf("GatewayClass controllerName %q, want %q", cn, kubesource.ControllerName)
	}
	if _, err := dyn.Resource(gatewayapi.Gateways).Namespace(ns).Get(ctx, manifests.GatewayName, metav1.GetOptions{}); err != nil {
		t.Fatalf("Gateway: %v", err)
	}

	// Endpoints, as the EndpointSlice controller would write them.
	want := []route.Spec{}
	for i, r := range s.Workload.Routes {
		addr := fmt.Sprintf("192.0.2.%d", 40+i)
		_, err := env.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: r.Name + "-1", Labels: map[string]string{kubesource.LabelServiceName: r.Name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(manifests.BackendPort)), Protocol: ptr(corev1.ProtocolTCP)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		path := r.Path
		if path == "" {
			path = "/work"
		}
		pt := route.PathPrefix
		if r.PathType == "Exact" {
			pt = route.PathExact
		}
		want = append(want, route.Spec{Key: fmt.Sprintf("%s/%s:%d", ns, r.Name, manifests.BackendPort), Host: r.Host, Path: path, PathType: pt,
			Algorithm: "prequal", Endpoints: []string{fmt.Sprintf("%s:%d", addr, manifests.BackendPort)}, Origin: "HTTPRoute " + ns + "/" + r.Name, Weight: 1})
	}

	src, err := kubesource.New(kubesource.Options{Kubeconfig: env.Kubeconfig, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	sink := &routeSink{}
	srcCtx, stopSrc := context.WithCancel(context.Background())
	srcDone := make(chan error, 1)
	go func() { srcDone <- src.Run(srcCtx, sink) }()
	t.Cleanup(func() {
		stopSrc()
		if err := <-srcDone; err != nil {
			t.Errorf("source Run: %v", err)
		}
	})
	sorted := func(specs []route.Spec) []route.Spec {
		slices.SortFunc(specs, func(a, b route.Spec) int { return strings.Compare(a.Key, b.Key) })
		return specs
	}
	same := func(a, b []route.Spec) bool { return fmt.Sprint(sorted(a)) == fmt.Sprint(sorted(b)) }
	poll(t, "the HTTPRoutes served", func() bool { return same(sink.get(), want) })

	for _, r := range s.Workload.Routes {
		poll(t, "HTTPRoute "+r.Name+" accepted with resolved refs", func() bool {
			u, err := dyn.Resource(gatewayapi.HTTPRoutes).Namespace(ns).Get(ctx, r.Name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			parents, _, _ := unstructured.NestedSlice(u.Object, "status", "parents")
			for _, p := range parents {
				m := p.(map[string]any)
				if m["controllerName"] != kubesource.ControllerName {
					continue
				}
				got := map[string]string{}
				for _, c := range m["conditions"].([]any) {
					cm := c.(map[string]any)
					got[fmt.Sprint(cm["type"])] = fmt.Sprint(cm["status"])
				}
				return got["Accepted"] == "True" && got["ResolvedRefs"] == "True"
			}
			return false
		})
	}

	// The algorithm switch rewrites the HTTPRoutes' annotation.
	if err := deploy.SetAlgorithm(ctx, c, s, opts, "round-robin"); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		want[i].Algorithm = "round-robin"
	}
	poll(t, "the algorithm switch reaches the routes", func() bool { return same(sink.get(), want) })

	// An Ingress scenario next: the HTTPRoutes and the Gateway go.
	s.Ingress.Routing = scenario.RoutingIngress
	res, err := deploy.Scenario(ctx, c, s, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Workload.Routes {
		if !has(res.Deleted, "HTTPRoute "+ns+"/"+r.Name) {
			t.Errorf("HTTPRoute %s not pruned; deleted %v", r.Name, res.Deleted)
		}
	}
	if !has(res.Deleted, "Gateway "+ns+"/"+manifests.GatewayName) {
		t.Errorf("Gateway not pruned; deleted %v", res.Deleted)
	}
}

func ptr[T any](v T) *T { return &v }
