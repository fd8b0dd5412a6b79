package kubesource

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/prequalbench/prequalbench/ingress/route"
)

func ptr[T any](v T) *T { return &v }

func testSource(t *testing.T, logs *bytes.Buffer) *Source {
	t.Helper()
	opts := Options{Client: fake.NewClientset()}
	if logs != nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	s, err := newSource(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type ingOpt func(*networkingv1.Ingress)

func ingress(ns, name string, opts ...ingOpt) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{},
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr("prequal")},
	}
	for _, o := range opts {
		o(ing)
	}
	return ing
}

func withRule(host, path string, pt networkingv1.PathType, svc string, port networkingv1.ServiceBackendPort) ingOpt {
	return func(ing *networkingv1.Ingress) {
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{
			Host: host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: path, PathType: &pt,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: port}}}},
			}},
		})
	}
}

func num(n int32) networkingv1.ServiceBackendPort    { return networkingv1.ServiceBackendPort{Number: n} }
func named(n string) networkingv1.ServiceBackendPort { return networkingv1.ServiceBackendPort{Name: n} }

func service(ns, name string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Ports: ports}}
}

func slice(ns, svc string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-x", Labels: map[string]string{LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
		Endpoints:   eps,
	}
}

func ep(addr string, ready, serving, terminating *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr},
		Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating}}
}

func sport(name string, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: &name, Port: &port}
}

func TestClassFilter(t *testing.T) {
	ours := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Spec: networkingv1.IngressClassSpec{Controller: ControllerName}}
	oursDefault := ours.DeepCopy()
	oursDefault.Annotations = map[string]string{AnnotationDefaultClass: "true"}
	nginx := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx"},
		Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}}
	squatter := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "prequal"},
		Spec: networkingv1.IngressClassSpec{Controller: "example.com/other"}}

	className := func(n string) ingOpt { return func(i *networkingv1.Ingress) { i.Spec.IngressClassName = &n } }
	noClass := func(i *networkingv1.Ingress) { i.Spec.IngressClassName = nil }
	legacy := func(n string) ingOpt {
		return func(i *networkingv1.Ingress) { i.Spec.IngressClassName = nil; i.Annotations[AnnotationLegacyClass] = n }
	}
	for _, tc := range []struct {
		name    string
		classes []*networkingv1.IngressClass
		opt     ingOpt
		want    bool
	}{
		{"our class object", []*networkingv1.IngressClass{ours}, className("mine"), true},
		{"other controller's class", []*networkingv1.IngressClass{ours, nginx}, className("nginx"), false},
		{"flag name without object", nil, className("prequal"), true},
		{"flag name taken by another controller", []*networkingv1.IngressClass{squatter}, className("prequal"), false},
		{"unknown name", nil, className("nginx"), false},
		{"legacy annotation flag name", nil, legacy("prequal"), true},
		{"legacy annotation our object", []*networkingv1.IngressClass{ours}, legacy("mine"), true},
		{"legacy annotation other", []*networkingv1.IngressClass{ours}, legacy("nginx"), false},
		{"no class, no default", []*networkingv1.IngressClass{ours}, noClass, false},
		{"no class, our default", []*networkingv1.IngressClass{oursDefault}, noClass, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newClassFilter("prequal", tc.classes)
			if got := f.handles(ingress("ns", "i", tc.opt)); got != tc.want {
				t.Errorf("handles = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestComputeRoutesPortsAndReadiness(t *testing.T) {
	s := testSource(t, nil)
	tr, fa := ptr(true), ptr(false)
	pt := networkingv1.PathTypeExact
	snap := snapshot{
		ingresses: []*networkingv1.Ingress{ingress("ns", "web",
			withRule("a.example", "/exact", pt, "bynum", num(80)),
			withRule("a.example", "/named", networkingv1.PathTypePrefix, "byname", named("web")),
			withRule("", "/same", networkingv1.PathTypePrefix, "bynum", num(80)),
			withRule("", "/gone", networkingv1.PathTypePrefix, "missing", num(80)),
			withRule("", "/noport", networkingv1.PathTypePrefix, "bynum", num(81)),
		)},
		services: []*corev1.Service{
			service("ns", "bynum", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}),
			service("ns", "byname", corev1.ServicePort{Name: "web", Port: 443, TargetPort: intstr.FromString("http-alt")}),
		},
		slices: []*discoveryv1.EndpointSlice{
			slice("ns", "bynum", []discoveryv1.EndpointPort{sport("http", 8080), sport("metrics", 9090)},
				ep("192.0.2.2", nil, nil, nil), // nil conditions: ready
				ep("192.0.2.1", tr, tr, fa),
				ep("192.0.2.3", fa, fa, nil),  // not ready
				ep("192.0.2.4", tr, fa, nil),  // not serving
				ep("192.0.2.5", tr, tr, tr),   // terminating
				ep("192.0.2.1", tr, nil, nil), // duplicate
			),
			slice("ns", "byname", []discoveryv1.EndpointPort{sport("web", 9443)}, ep("192.0.2.9", tr, tr, fa)),
			// A slice of another namespace with the same service name is ignored.
			slice("other", "bynum", []discoveryv1.EndpointPort{sport("http", 8080)}, ep("192.0.2.7", tr, tr, fa)),
		},
	}
	got := s.compute(snap)
	num80 := []string{"192.0.2.1:8080", "192.0.2.2:8080"}
	want := []route.Spec{
		{Key: "ns/bynum:80", Host: "a.example", Path: "/exact", PathType: "Exact", Endpoints: num80, Origin: "ns/web"},
		{Key: "ns/byname:web", Host: "a.example", Path: "/named", PathType: "Prefix", Endpoints: []string{"192.0.2.9:9443"}, Origin: "ns/web"},
		{Key: "ns/bynum:80", Host: "", Path: "/same", PathType: "Prefix", Endpoints: num80, Origin: "ns/web"},
		{Key: "ns/bynum:81", Host: "", Path: "/noport", PathType: "Prefix", Origin: "ns/web"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("routes (-want +got):\n%s", d)
	}
}

func TestSlicePortMatching(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sp     corev1.ServicePort
		ports  []discoveryv1.EndpointPort
		want   int32
		wantOK bool
	}{
		{"target defaults to port", corev1.ServicePort{Port: 80}, []discoveryv1.EndpointPort{sport("", 80)}, 80, true},
		{"service port number is not the target", corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(8080)},
			[]discoveryv1.EndpointPort{sport("", 80)}, 0, false},
		{"numeric target", corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(8080)},
			[]discoveryv1.EndpointPort{sport("", 8080)}, 8080, true},
		{"named target by service port name", corev1.ServicePort{Name: "web", Port: 80, TargetPort: intstr.FromString("http")},
			[]discoveryv1.EndpointPort{sport("other", 1), sport("web", 8081)}, 8081, true},
		{"named target absent", corev1.ServicePort{Name: "web", Port: 80, TargetPort: intstr.FromString("http")},
			[]discoveryv1.EndpointPort{sport("other", 8081)}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := slicePort(tc.sp, tc.ports)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("slicePort = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestComputeDefaultBackendConflictsAndAlgorithm(t *testing.T) {
	var logs bytes.Buffer
	s := testSource(t, &logs)
	older := ingress("ns", "zz-old",
		withRule("h", "/p", networkingv1.PathTypePrefix, "a", num(80)),
		func(i *networkingv1.Ingress) {
			i.Annotations[AnnotationSeedAlgo] = "RR"
			i.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "a", Port: num(80)}}
		})
	newer := ingress("ns", "aa-new",
		withRule("h", "/p", networkingv1.PathTypePrefix, "b", num(80)), // conflicts: older wins
		withRule("h", "/p", networkingv1.PathTypeExact, "b", num(80)),  // different path type: no conflict
		func(i *networkingv1.Ingress) {
			i.CreationTimestamp = metav1.NewTime(i.CreationTimestamp.Add(time.Second))
			i.Annotations[AnnotationLoadBalance] = "bogus"
			i.Annotations[AnnotationSeedAlgo] = "round-robin" // ignored: the new annotation wins
			i.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "b", Port: num(80)}}
		})
	snap := snapshot{
		ingresses: []*networkingv1.Ingress{newer, older},
		services: []*corev1.Service{
			service("ns", "a", corev1.ServicePort{Port: 80}),
			service("ns", "b", corev1.ServicePort{Port: 80}),
		},
	}
	want := []route.Spec{
		{Key: "ns/a:80", Host: "h", Path: "/p", PathType: "Prefix", Algorithm: "round-robin", Origin: "ns/zz-old"},
		{Key: "ns/b:80", Host: "h", Path: "/p", PathType: "Exact", Origin: "ns/aa-new"},
		{Key: "ns/a:80", Host: "", Path: "/", PathType: "Prefix", Algorithm: "round-robin", Origin: "ns/zz-old"},
	}
	for range 2 { // the second pass must not log the same warnings again
		if d := cmp.Diff(want, s.compute(snap)); d != "" {
			t.Errorf("routes (-want +got):\n%s", d)
		}
	}
	out := logs.String()
	for _, w := range []string{"path=/p pathType=Prefix winner=ns/zz-old loser=ns/aa-new", `path=/ pathType=Prefix winner=ns/zz-old loser=ns/aa-new`, `value=bogus`} {
		if strings.Count(out, w) != 1 {
			t.Errorf("want exactly one log line with %q, got:\n%s", w, out)
		}
	}
}

// TestRunWithFakeClient checks the loop around compute: not synced before
// the first delivery, synced after it, changes re-delivered, Run refuses a
// second call and returns nil when its context ends.
func TestRunWithFakeClient(t *testing.T) {
	cs := fake.NewClientset(
		service("ns", "web", corev1.ServicePort{Port: 80}),
		ingress("ns", "site", withRule("", "/", networkingv1.PathTypePrefix, "web", num(80))),
	)
	var results []string
	s, err := newSource(Options{Client: cs, OnReconcile: func(r string, _ time.Duration) { results = append(results, r) }})
	if err != nil {
		t.Fatal(err)
	}
	if s.Synced() {
		t.Fatal("Synced before Run")
	}
	sink := make(chan []route.Spec, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, sinkFunc(func(specs []route.Spec) { sink <- slices.Clone(specs) })) }()
	next := func() []route.Spec {
		t.Helper()
		select {
		case specs := <-sink:
			return specs
		case <-time.After(20 * time.Second):
			t.Fatal("no route set delivered within 20s")
			return nil
		}
	}
	if got := next(); len(got) != 1 || got[0].Key != "ns/web:80" {
		t.Fatalf("first route set = %+v, want ns/web:80", got)
	}
	if !s.Synced() {
		t.Error("not Synced after the first delivery")
	}
	if err := s.Run(ctx, sinkFunc(func([]route.Spec) {})); err == nil {
		t.Error("second Run succeeded, want an error")
	}
	if err := cs.NetworkingV1().Ingresses("ns").Delete(ctx, "site", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for got := next(); len(got) != 0; got = next() {
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	for _, r := range results {
		if r != "success" {
			t.Errorf("reconcile results %v, want only success", results)
			break
		}
	}
}

type sinkFunc func([]route.Spec)

func (f sinkFunc) Update(specs []route.Spec) { f(specs) }
