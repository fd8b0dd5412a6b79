package kubesource_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/prequalbench/prequalbench/ingress"
	"github.com/prequalbench/prequalbench/ingress/ingresstest"
	"github.com/prequalbench/prequalbench/ingress/kubesource"
	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/internal/kubetest"
	"github.com/prequalbench/prequalbench/internal/testbackend"
	"github.com/prequalbench/prequalbench/manifests/gatewayapi"
)

// tee hands each route set to the recorder and the dataplane.
type tee struct {
	*recorder
	dp *ingress.Ingress
}

func (t tee) Update(specs []route.Spec) { t.recorder.Update(specs); t.dp.Update(specs) }

// gwObj decodes a YAML object with fmt arguments.
func gwObj(t *testing.T, format string, args ...any) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(fmt.Sprintf(format, args...)), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func gwCreate(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	if u.GetNamespace() == "" {
		t.Cleanup(func() { _ = dyn.Resource(gvr).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	}
}

// condition returns status, reason of the condition typ in conds.
func condition(conds []any, typ string) (string, string) {
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return fmt.Sprint(m["status"]), fmt.Sprint(m["reason"])
		}
	}
	return "", ""
}

// waitStatus polls the object until check passes on its status.
func waitStatus(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name, what string, check func(status map[string]any) bool) *unstructured.Unstructured {
	t.Helper()
	var last *unstructured.Unstructured
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		u, err := dyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			last = u
			st, _ := u.Object["status"].(map[string]any)
			if st != nil && check(st) {
				return u
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: status of %s %s/%s not as expected within %v; last: %v", what, gvr.Resource, ns, name, wait, last)
	return nil
}

// routeParent returns the conditions of the route's parents entry written
// by controller, or nil.
func routeParent(st map[string]any, controller string) []any {
	parents, _ := st["parents"].([]any)
	for _, p := range parents {
		m, _ := p.(map[string]any)
		if m["controllerName"] == controller {
			conds, _ := m["conditions"].([]any)
			return conds
		}
	}
	return nil
}

// TestGatewayHTTPRoute: against a real kube-apiserver with the Gateway
// API's CRDs, the source serves HTTPRoutes attached to a Gateway of a
// GatewayClass of ours (path and header matches, a weighted split, the
// policy from the route's annotation), writes the GatewayClass, Gateway
// and HTTPRoute status conditions the spec asks for, leaves objects of
// other controllers alone, and stops writing once the status is right.
func TestGatewayHTTPRoute(t *testing.T) {
	env := kubetest.Start(t)
	dyn := env.GatewayAPI(t)
	f := &fixture{t: t, cs: env.Client, ns: env.Namespace(t)}
	ns := f.ns
	ours, other := ns+"-ours", ns+"-other"
	gwCreate(t, dyn, gatewayapi.GatewayClasses, gwObj(t, `
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: %s}
spec: {controllerName: %s}`, ours, kubesource.ControllerName))
	gwCreate(t, dyn, gatewayapi.GatewayClasses, gwObj(t, `
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: %s}
spec: {controllerName: example.com/other}`, other))
	for _, g := range [][2]string{{"gw", ours}, {"foreign", other}} {
		gwCreate(t, dyn, gatewayapi.Gateways, gwObj(t, `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: %s, namespace: %s}
spec:
  gatewayClassName: %s
  listeners:
  - {name: http, port: 80, protocol: HTTP}`, g[0], ns, g[1]))
	}
	gwCreate(t, dyn, gatewayapi.Gateways, gwObj(t, `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: tcp-only, namespace: %s}
spec:
  gatewayClassName: %s
  listeners:
  - {name: raw, port: 9000, protocol: TCP}`, ns, ours))

	f.create(svc("a", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}))
	f.create(svc("b", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}))
	f.create(epSlice("a-1", "a", []discoveryv1.EndpointPort{eport("http", 8080)}, epSpec{"192.0.2.21", true}))
	f.create(epSlice("b-1", "b", []discoveryv1.EndpointPort{eport("http", 8080)}, epSpec{"192.0.2.22", true}))

	gwCreate(t, dyn, gatewayapi.HTTPRoutes, gwObj(t, `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: split
  namespace: %s
  annotations: {%s: round-robin}
spec:
  parentRefs: [{name: gw, sectionName: http}]
  hostnames: [bench.local]
  rules:
  - matches: [{path: {type: PathPrefix, value: /work}}]
    backendRefs:
    - {name: a, port: 80, weight: 3}
    - {name: b, port: 80, weight: 1}
  - matches: [{path: {type: PathPrefix, value: /work}, headers: [{name: X-Canary, value: "on"}]}]
    backendRefs: [{name: b, port: 80}]`, ns, kubesource.AnnotationLoadBalance))
	gwCreate(t, dyn, gatewayapi.HTTPRoutes, gwObj(t, `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: missing, namespace: %s}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /gone}}]
    backendRefs: [{name: nope, port: 80}]
  - matches: [{path: {type: Exact, value: /drained}}]
    backendRefs: [{name: a, port: 80, weight: 0}]`, ns))
	gwCreate(t, dyn, gatewayapi.HTTPRoutes, gwObj(t, `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: filtered, namespace: %s}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /filtered}}]
    filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: X-A, value: b}]}}]
    backendRefs: [{name: a, port: 80}, {name: nope, port: 80}]`, ns))
	gwCreate(t, dyn, gatewayapi.HTTPRoutes, gwObj(t, `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: elsewhere, namespace: %s}
spec:
  parentRefs: [{name: foreign}]
  rules:
  - matches: [{path: {value: /foreign}}]
    backendRefs: [{name: a, port: 80}]`, ns))

	ba, bb := testbackend.Start(t), testbackend.Start(t)
	dp, err := ingress.New(ingress.Options{
		DialContext: kubetest.LoopbackDialer(t, map[string]string{"192.0.2.21:8080": ba.Addr, "192.0.2.22:8080": bb.Addr}),
		Seed:        1,
	})
	if err != nil {
		t.Fatal(err)
	}
	dpCtx, stopDP := context.WithCancel(context.Background())
	dpDone := make(chan struct{})
	go func() { defer close(dpDone); _ = dp.Run(dpCtx) }()
	t.Cleanup(func() { stopDP(); <-dpDone })
	rec := &recorder{}
	src, err := kubesource.New(kubesource.Options{Kubeconfig: env.Kubeconfig, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, tee{rec, dp}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	origin := "HTTPRoute " + ns + "/split"
	canary := []route.HeaderMatch{{Name: "X-Canary", Type: route.HeaderExact, Value: "on"}}
	rec.waitRoutes(t, "HTTPRoutes served", []route.Spec{
		{Key: ns + "/a:80", Host: "bench.local", Path: "/work", PathType: route.PathPrefix, Algorithm: "round-robin",
			Endpoints: []string{"192.0.2.21:8080"}, Origin: origin, Weight: 3},
		{Key: ns + "/b:80", Host: "bench.local", Path: "/work", PathType: route.PathPrefix, Algorithm: "round-robin",
			Endpoints: []string{"192.0.2.22:8080"}, Origin: origin, Weight: 1},
		{Key: ns + "/b:80", Host: "bench.local", Path: "/work", PathType: route.PathPrefix, Algorithm: "round-robin",
			Endpoints: []string{"192.0.2.22:8080"}, Origin: origin, Weight: 1, Headers: canary, Precedence: 1},
		// The missing Service keeps its share on a pool that answers 500;
		// so does a rule whose every backend has weight 0.
		{Key: "unresolved/" + ns + "/missing/0/0", Path: "/gone", PathType: route.PathExact,
			Origin: "HTTPRoute " + ns + "/missing", Weight: 1, Status: 500},
		{Key: "nobackend/" + ns + "/missing/1", Path: "/drained", PathType: route.PathExact,
			Origin: "HTTPRoute " + ns + "/missing", Weight: 1, Status: 500},
	})

	// Status, as the spec asks.
	waitStatus(t, dyn, gatewayapi.GatewayClasses, "", ours, "our class", func(st map[string]any) bool {
		s, r := condition(st["conditions"].([]any), "Accepted")
		return s == "True" && r == "Accepted"
	})
	gw := waitStatus(t, dyn, gatewayapi.Gateways, ns, "gw", "our gateway", func(st map[string]any) bool {
		conds, _ := st["conditions"].([]any)
		a, _ := condition(conds, "Accepted")
		p, _ := condition(conds, "Programmed")
		ls, _ := st["listeners"].([]any)
		if a != "True" || p != "True" || len(ls) != 1 {
			return false
		}
		l := ls[0].(map[string]any)
		lconds, _ := l["conditions"].([]any)
		la, _ := condition(lconds, "Accepted")
		lp, _ := condition(lconds, "Programmed")
		// split and missing attach; filtered is not accepted.
		return la == "True" && lp == "True" && fmt.Sprint(l["attachedRoutes"]) == "2"
	})
	waitStatus(t, dyn, gatewayapi.Gateways, ns, "tcp-only", "a gateway with no HTTP listener", func(st map[string]any) bool {
		conds, _ := st["conditions"].([]any)
		a, ar := condition(conds, "Accepted")
		p, _ := condition(conds, "Programmed")
		ls, _ := st["listeners"].([]any)
		if len(ls) != 1 {
			return false
		}
		la, lr := condition(ls[0].(map[string]any)["conditions"].([]any), "Accepted")
		return a == "False" && ar == "ListenersNotValid" && p == "False" && la == "False" && lr == "UnsupportedProtocol"
	})
	split := waitStatus(t, dyn, gatewayapi.HTTPRoutes, ns, "split", "split route", func(st map[string]any) bool {
		conds := routeParent(st, kubesource.ControllerName)
		a, _ := condition(conds, "Accepted")
		r, _ := condition(conds, "ResolvedRefs")
		return a == "True" && r == "True"
	})
	waitStatus(t, dyn, gatewayapi.HTTPRoutes, ns, "missing", "route to a missing Service", func(st map[string]any) bool {
		conds := routeParent(st, kubesource.ControllerName)
		a, _ := condition(conds, "Accepted")
		r, rr := condition(conds, "ResolvedRefs")
		return a == "True" && r == "False" && rr == "BackendNotFound"
	})
	waitStatus(t, dyn, gatewayapi.HTTPRoutes, ns, "filtered", "route with a filter", func(st map[string]any) bool {
		a, ar := condition(routeParent(st, kubesource.ControllerName), "Accepted")
		// Its references are judged though it is not accepted.
		r, rr := condition(routeParent(st, kubesource.ControllerName), "ResolvedRefs")
		return a == "False" && ar == "UnsupportedValue" && r == "False" && rr == "BackendNotFound"
	})
	for _, o := range []struct {
		gvr        schema.GroupVersionResource
		ns, name   string
		statusPath string
	}{{gatewayapi.GatewayClasses, "", other, "conditions"}, {gatewayapi.Gateways, ns, "foreign", "conditions"}, {gatewayapi.HTTPRoutes, ns, "elsewhere", "parents"}} {
		u, err := dyn.Resource(o.gvr).Namespace(o.ns).Get(context.Background(), o.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, _, _ := unstructured.NestedSlice(u.Object, "status", o.statusPath); strings.Contains(fmt.Sprint(v), kubesource.ControllerName) || (o.statusPath == "parents" && len(v) > 0) {
			t.Errorf("%s %s of another controller got our status: %v", o.gvr.Resource, o.name, v)
		}
	}

	// Traffic: the split sends 3:1, the header picks b.
	url := ingresstest.Serve(t, dp)
	client := &http.Client{Timeout: 10 * time.Second}
	do := func(hdr string) int {
		req, _ := http.NewRequest(http.MethodGet, url+"/work?iterations=1", nil)
		req.Host = "bench.local"
		if hdr != "" {
			req.Header.Set("X-Canary", hdr)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	a0, b0 := servedBy(t, client, ba), servedBy(t, client, bb)
	// The Gateway API's 500 for a backendRef that does not resolve and
	// for a rule with no backend to send to, not a 404 or a 503.
	for _, p := range []string{"/gone", "/drained"} {
		resp, err := client.Get(url + p)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusInternalServerError {
			t.Errorf("GET %s: status %d, want 500", p, resp.StatusCode)
		}
	}
	for range 40 {
		if code := do(""); code != 200 {
			t.Fatalf("split request: status %d", code)
		}
	}
	if a, b := servedBy(t, client, ba)-a0, servedBy(t, client, bb)-b0; a != 30 || b != 10 {
		t.Fatalf("split 3:1 over 40 requests: a served %d, b %d; want 30 and 10", a, b)
	}
	a0, b0 = servedBy(t, client, ba), servedBy(t, client, bb)
	for range 5 {
		do("on")
	}
	if a, b := servedBy(t, client, ba)-a0, servedBy(t, client, bb)-b0; a != 0 || b != 5 {
		t.Fatalf("header match: a served %d, b %d; want 0 and 5", a, b)
	}

	// Settled: another change reconciles, and no status is rewritten.
	// Condition times have one-second resolution: let the clock pass a
	// second boundary first, so a rewrite with a fresh lastTransitionTime
	// would show as a new resourceVersion.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
	f.create(epSlice("b-2", "b", []discoveryv1.EndpointPort{eport("http", 8080)}, epSpec{"192.0.2.23", true}))
	deadline := time.Now().Add(wait)
	for {
		n := 0
		for _, s := range rec.routes() {
			if s.Key == ns+"/b:80" && len(s.Endpoints) == 2 {
				n++
			}
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second endpoint of b did not arrive: %v", rec.routes())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, o := range []*unstructured.Unstructured{gw, split} {
		gvr := gatewayapi.Gateways
		if o.GetKind() == "HTTPRoute" {
			gvr = gatewayapi.HTTPRoutes
		}
		u, err := dyn.Resource(gvr).Namespace(ns).Get(context.Background(), o.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if u.GetResourceVersion() != o.GetResourceVersion() {
			t.Errorf("%s %s rewritten after its status settled (resourceVersion %s -> %s)", o.GetKind(), o.GetName(), o.GetResourceVersion(), u.GetResourceVersion())
		}
	}
}

// TestGatewayAPIWithoutPermission: where the Gateway API is served but the
// ingress's RBAC predates it, the source serves Ingresses and turns ready
// (an informer it may not list would never sync).
func TestGatewayAPIWithoutPermission(t *testing.T) {
	env := kubetest.Start(t)
	env.GatewayAPI(t)
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	user := "ingress-only-" + ns
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	}
	subject := []rbacv1.Subject{{Kind: "User", Name: user}}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(env.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "ingress"}, Rules: rules}, metav1.CreateOptions{}))
	must(env.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ingress"},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "ingress"}, Subjects: subject}, metav1.CreateOptions{}))
	must(env.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingressclasses"}, Verbs: []string{"list", "watch"}}}}, metav1.CreateOptions{}))
	must(env.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: user}, Subjects: subject}, metav1.CreateOptions{}))
	t.Cleanup(func() {
		_ = env.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), user, metav1.DeleteOptions{})
		_ = env.Client.RbacV1().ClusterRoles().Delete(context.Background(), user, metav1.DeleteOptions{})
	})
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, cs: env.Client, ns: ns}
	f.create(svc("work", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}))
	f.create(ing("work", ptr(kubesource.DefaultIngressClass), nil, "", path("/work", networkingv1.PathTypePrefix, "work", networkingv1.ServiceBackendPort{Number: 80})))

	rec := &recorder{}
	src, err := kubesource.New(kubesource.Options{Client: cs, Dynamic: dyn, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(runCtx, rec) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	rec.waitRoutes(t, "the Ingress served without Gateway API permissions", []route.Spec{
		{Key: ns + "/work:80", Path: "/work", PathType: route.PathPrefix, Origin: ns + "/work"},
	})
	if !src.Synced() {
		t.Fatal("source delivered routes but is not synced")
	}
}
