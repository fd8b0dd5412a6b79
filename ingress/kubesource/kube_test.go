package kubesource_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/prequalbench/prequalbench/ingress"
	"github.com/prequalbench/prequalbench/ingress/ingresstest"
	"github.com/prequalbench/prequalbench/ingress/kubesource"
	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/internal/kubetest"
	"github.com/prequalbench/prequalbench/internal/testbackend"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

const wait = 20 * time.Second

// recorder is a Sink that keeps the last route set.
type recorder struct {
	mu      sync.Mutex
	last    []route.Spec
	updates int
}

func (r *recorder) Update(specs []route.Spec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = slices.Clone(specs)
	r.updates++
}

func (r *recorder) routes() []route.Spec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.last)
}

// waitRoutes polls until the delivered routes (sorted) equal want.
func (r *recorder) waitRoutes(t *testing.T, what string, want []route.Spec) {
	t.Helper()
	sortSpecs(want)
	var got []route.Spec
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		got = r.routes()
		sortSpecs(got)
		if cmp.Equal(want, got) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: routes did not converge within %v (-want +got):\n%s", what, wait, cmp.Diff(want, got))
}

func sortSpecs(s []route.Spec) {
	for i := range s {
		if s[i].Endpoints == nil {
			s[i].Endpoints = []string{}
		}
	}
	slices.SortFunc(s, func(a, b route.Spec) int {
		return strings.Compare(a.Host+" "+a.Path+" "+a.PathType+" "+a.Key, b.Host+" "+b.Path+" "+b.PathType+" "+b.Key)
	})
}

// fixture is one test's namespace, ingress class and running source.
type fixture struct {
	t      *testing.T
	cs     kubernetes.Interface
	ns     string
	class  string
	src    route.Source
	sink   *recorder
	reconc struct {
		sync.Mutex
		results map[string]int
	}
}

// start creates a namespace and an IngressClass of our controller named
// after it, then runs a namespace-scoped source into a recorder.
func start(t *testing.T, sink route.Sink) *fixture {
	t.Helper()
	env := kubetest.Start(t)
	f := &fixture{t: t, cs: env.Client, ns: env.Namespace(t)}
	f.class = f.ns
	f.create(&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: f.class},
		Spec: networkingv1.IngressClassSpec{Controller: kubesource.ControllerName}})
	t.Cleanup(func() {
		_ = f.cs.NetworkingV1().IngressClasses().Delete(context.Background(), f.class, metav1.DeleteOptions{})
	})
	f.reconc.results = map[string]int{}
	src, err := kubesource.New(kubesource.Options{
		Kubeconfig: env.Kubeconfig, Namespace: f.ns, IngressClass: "unused-flag-name",
		OnReconcile: func(result string, d time.Duration) {
			f.reconc.Lock()
			f.reconc.results[result]++
			f.reconc.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.src = src
	if r, ok := sink.(*recorder); ok {
		f.sink = r
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, sink) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(wait):
			t.Errorf("Run did not return within %v of cancel", wait)
		}
	})
	deadline := time.Now().Add(wait)
	for !src.Synced() {
		if time.Now().After(deadline) {
			t.Fatalf("source not synced within %v", wait)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return f
}

func (f *fixture) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	f.t.Cleanup(cancel)
	return ctx
}

func (f *fixture) create(obj any) {
	f.t.Helper()
	var err error
	ctx := f.ctx()
	switch o := obj.(type) {
	case *networkingv1.IngressClass:
		_, err = f.cs.NetworkingV1().IngressClasses().Create(ctx, o, metav1.CreateOptions{})
	case *networkingv1.Ingress:
		o.Namespace = f.ns
		_, err = f.cs.NetworkingV1().Ingresses(f.ns).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Service:
		o.Namespace = f.ns
		_, err = f.cs.CoreV1().Services(f.ns).Create(ctx, o, metav1.CreateOptions{})
	case *discoveryv1.EndpointSlice:
		o.Namespace = f.ns
		_, err = f.cs.DiscoveryV1().EndpointSlices(f.ns).Create(ctx, o, metav1.CreateOptions{})
	default:
		f.t.Fatalf("create: unsupported %T", obj)
	}
	if err != nil {
		f.t.Fatalf("create %T: %v", obj, err)
	}
}

func ptr[T any](v T) *T { return &v }

func svc(name string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Ports: ports}}
}

type epSpec struct {
	addr  string
	ready bool
}

func epSlice(name, service string, ports []discoveryv1.EndpointPort, eps ...epSpec) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{kubesource.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
	}
	for _, e := range eps {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.addr},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(e.ready), Serving: ptr(e.ready), Terminating: ptr(false)}})
	}
	return sl
}

func eport(name string, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr(name), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}
}

func path(p string, pt networkingv1.PathType, service string, port networkingv1.ServiceBackendPort) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{Path: p, PathType: &pt,
		Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: service, Port: port}}}
}

func ing(name string, class *string, ann map[string]string, host string, paths ...networkingv1.HTTPIngressPath) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
		Spec: networkingv1.IngressSpec{IngressClassName: class, Rules: []networkingv1.IngressRule{{Host: host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}}},
	}
}

// TestKubeClassesPathsPortsAndDefaultBackend: class filtering (class object,
// legacy annotation, a foreign class), Exact/Prefix/default backend, and
// Service port → targetPort by number and by name.
func TestKubeClassesPathsPortsAndDefaultBackend(t *testing.T) {
	rec := &recorder{}
	f := start(t, rec)
	f.create(svc("num", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}))
	f.create(svc("named", corev1.ServicePort{Name: "web", Port: 443, TargetPort: intstr.FromString("http")}))
	// The slice holds the service port's traffic on 8080; a stray 80 must not be used.
	f.create(epSlice("num-1", "num", []discoveryv1.EndpointPort{eport("http", 8080), eport("other", 80)},
		epSpec{"192.0.2.11", true}, epSpec{"192.0.2.10", true}))
	f.create(epSlice("named-1", "named", []discoveryv1.EndpointPort{eport("web", 9000)}, epSpec{"192.0.2.20", true}))

	exact, prefix := networkingv1.PathTypeExact, networkingv1.PathTypePrefix
	main := ing("main", &f.class, nil, "a.example",
		path("/exact", exact, "num", networkingv1.ServiceBackendPort{Number: 80}),
		path("/api", prefix, "named", networkingv1.ServiceBackendPort{Name: "web"}))
	main.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
		Name: "num", Port: networkingv1.ServiceBackendPort{Number: 80}}}
	f.create(main)
	f.create(ing("legacy", nil, map[string]string{kubesource.AnnotationLegacyClass: f.class}, "b.example",
		path("/", prefix, "num", networkingv1.ServiceBackendPort{Name: "http"})))
	f.create(ing("foreign", ptr("nginx"), nil, "c.example",
		path("/", prefix, "num", networkingv1.ServiceBackendPort{Number: 80})))

	num := []string{"192.0.2.10:8080", "192.0.2.11:8080"}
	o := f.ns + "/main"
	rec.waitRoutes(t, "initial", []route.Spec{
		{Key: f.ns + "/num:80", Host: "a.example", Path: "/exact", PathType: "Exact", Endpoints: num, Origin: o},
		{Key: f.ns + "/named:web", Host: "a.example", Path: "/api", PathType: "Prefix", Endpoints: []string{"192.0.2.20:9000"}, Origin: o},
		{Key: f.ns + "/num:80", Host: "", Path: "/", PathType: "Prefix", Endpoints: num, Origin: o},
		{Key: f.ns + "/num:http", Host: "b.example", Path: "/", PathType: "Prefix", Endpoints: num, Origin: f.ns + "/legacy"},
	})
	f.reconc.Lock()
	defer f.reconc.Unlock()
	if f.reconc.results["success"] == 0 || f.reconc.results["error"] != 0 {
		t.Errorf("OnReconcile results = %v, want successes only", f.reconc.results)
	}
}

// TestKubeReadinessAnnotationsAndCleanup follows one Ingress through
// endpoint readiness changes, algorithm annotation changes, Service deletion
// and Ingress deletion.
func TestKubeReadinessAnnotationsAndCleanup(t *testing.T) {
	rec := &recorder{}
	f := start(t, rec)
	f.create(svc("web", corev1.ServicePort{Port: 80}))
	f.create(epSlice("web-1", "web", []discoveryv1.EndpointPort{eport("", 80)},
		epSpec{"192.0.2.10", true}, epSpec{"192.0.2.11", false}))
	f.create(ing("site", &f.class, map[string]string{kubesource.AnnotationSeedAlgo: "round-robin"}, "",
		path("/", networkingv1.PathTypePrefix, "web", networkingv1.ServiceBackendPort{Number: 80})))

	spec := route.Spec{Key: f.ns + "/web:80", Path: "/", PathType: "Prefix", Algorithm: "round-robin",
		Endpoints: []string{"192.0.2.10:80"}, Origin: f.ns + "/site"}
	rec.waitRoutes(t, "one ready endpoint", []route.Spec{spec})

	ctx := f.ctx()
	slices := f.cs.DiscoveryV1().EndpointSlices(f.ns)
	sl, err := slices.Get(ctx, "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sl.Endpoints[1].Conditions.Ready, sl.Endpoints[1].Conditions.Serving = ptr(true), ptr(true)
	if sl, err = slices.Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec.Endpoints = []string{"192.0.2.10:80", "192.0.2.11:80"}
	rec.waitRoutes(t, "second endpoint ready", []route.Spec{spec})

	sl.Endpoints[0].Conditions.Terminating = ptr(true)
	if _, err = slices.Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec.Endpoints = []string{"192.0.2.11:80"}
	rec.waitRoutes(t, "first endpoint terminating", []route.Spec{spec})

	ings := f.cs.NetworkingV1().Ingresses(f.ns)
	setAnn := func(ann map[string]string) {
		t.Helper()
		in, err := ings.Get(ctx, "site", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		in.Annotations = ann
		if _, err := ings.Update(ctx, in, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setAnn(map[string]string{kubesource.AnnotationLoadBalance: "least-connections", kubesource.AnnotationSeedAlgo: "round-robin"})
	spec.Algorithm = "least-request"
	rec.waitRoutes(t, "new annotation wins over the seed's", []route.Spec{spec})
	setAnn(map[string]string{kubesource.AnnotationLoadBalance: "no-such-algorithm"})
	spec.Algorithm = ""
	rec.waitRoutes(t, "invalid annotation falls back to the default", []route.Spec{spec})
	setAnn(map[string]string{kubesource.AnnotationLoadBalance: "P2C"})
	spec.Algorithm = "p2c"
	rec.waitRoutes(t, "annotation canonicalised", []route.Spec{spec})

	if err := f.cs.CoreV1().Services(f.ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.waitRoutes(t, "service deleted", nil)
	f.create(svc("web", corev1.ServicePort{Port: 80}))
	rec.waitRoutes(t, "service back", []route.Spec{spec})

	if err := ings.Delete(ctx, "site", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.waitRoutes(t, "ingress deleted", nil)
}

// TestKubeIngressClassChange: moving an Ingress to another controller's
// class drops its routes; our class object turning default picks up
// Ingresses without a class.
func TestKubeIngressClassChange(t *testing.T) {
	rec := &recorder{}
	f := start(t, rec)
	f.create(svc("web", corev1.ServicePort{Port: 80}))
	f.create(ing("classless", nil, nil, "x.example",
		path("/", networkingv1.PathTypePrefix, "web", networkingv1.ServiceBackendPort{Number: 80})))
	rec.waitRoutes(t, "no default class", nil)
	ctx := f.ctx()
	classes := f.cs.NetworkingV1().IngressClasses()
	ic, err := classes.Get(ctx, f.class, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ic.Annotations = map[string]string{kubesource.AnnotationDefaultClass: "true"}
	if _, err := classes.Update(ctx, ic, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := route.Spec{Key: f.ns + "/web:80", Host: "x.example", Path: "/", PathType: "Prefix", Origin: f.ns + "/classless"}
	rec.waitRoutes(t, "our class is the default", []route.Spec{want})
	// The default is a cluster-wide fact; take it back before other tests run.
	ic, err = classes.Get(ctx, f.class, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ic.Annotations = nil
	if _, err := classes.Update(ctx, ic, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.waitRoutes(t, "default taken back", nil)
}

func TestNewConfigErrors(t *testing.T) {
	env := kubetest.Start(t)
	if _, err := kubesource.New(kubesource.Options{Kubeconfig: "/nonexistent/kubeconfig"}); err == nil ||
		!strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("New with a missing kubeconfig: err = %v, want one naming --kubeconfig", err)
	}
	if _, err := kubesource.New(kubesource.Options{Kubeconfig: env.Kubeconfig, Context: "nope"}); err == nil ||
		!strings.Contains(err.Error(), "nope") {
		t.Errorf("New with an unknown context: err = %v, want one naming it", err)
	}
	// $KUBECONFIG is honoured when no path is given, as kubectl does.
	t.Setenv("KUBECONFIG", env.Kubeconfig)
	if _, err := kubesource.New(kubesource.Options{}); err != nil {
		t.Errorf("New from $KUBECONFIG: %v", err)
	}
}

// TestKubeTrafficEndToEnd sends real requests through the dataplane fed by
// the source to two real backends whose documentation addresses in the
// EndpointSlice are mapped to loopback by the test dialer.
func TestKubeTrafficEndToEnd(t *testing.T) {
	if _, err := os.Stat(testbackend.Binary(t)); err != nil {
		t.Fatal(err)
	}
	b1, b2 := testbackend.Start(t), testbackend.Start(t)
	dp, err := ingress.New(ingress.Options{
		DialContext: kubetest.LoopbackDialer(t, map[string]string{
			"192.0.2.10:8080": b1.Addr, "192.0.2.11:8080": b2.Addr,
		}),
		Seed: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- dp.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-runDone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("dataplane Run: %v", err)
		}
	})
	f := start(t, dp)
	f.create(svc("work", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}))
	f.create(epSlice("work-1", "work", []discoveryv1.EndpointPort{eport("http", 8080)},
		epSpec{"192.0.2.10", true}, epSpec{"192.0.2.11", true}))
	f.create(ing("work", &f.class, map[string]string{kubesource.AnnotationLoadBalance: "round-robin"}, "work.example",
		path("/work", networkingv1.PathTypePrefix, "work", networkingv1.ServiceBackendPort{Number: 80})))

	srvURL := ingresstest.Serve(t, dp)
	client := &http.Client{Timeout: 10 * time.Second}
	get := func() int {
		req, _ := http.NewRequest("GET", srvURL+"/work?iterations=1", nil)
		req.Host = "work.example"
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET through the ingress: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// Poll until the route is live, then send a bounded batch.
	deadline := time.Now().Add(wait)
	for get() != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("no 200 through the ingress within %v", wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
	const n = 20
	for i := range n {
		if code := get(); code != http.StatusOK {
			t.Fatalf("request %d: status %d", i, code)
		}
	}
	for _, b := range []*testbackend.Backend{b1, b2} {
		if served := servedBy(t, client, b); served < n/4 {
			t.Errorf("backend %s served %d of %d+ round-robin requests, want both to share them", b.Addr, served, n)
		}
	}
}

func servedBy(t *testing.T, c *http.Client, b *testbackend.Backend) int {
	t.Helper()
	resp, err := c.Get(b.URL("/stats"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct {
		Served int `json:"served"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(fmt.Errorf("decode /stats: %w", err))
	}
	return s.Served
}
