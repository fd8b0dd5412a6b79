package kube

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/cluster/deploy"
	"github.com/prequalbench/prequalbench/cluster/kubeapply"
	"github.com/prequalbench/prequalbench/ingress"
	"github.com/prequalbench/prequalbench/ingress/ingresstest"
	"github.com/prequalbench/prequalbench/ingress/kubesource"
	"github.com/prequalbench/prequalbench/internal/kubetest"
	"github.com/prequalbench/prequalbench/manifests"
	"github.com/prequalbench/prequalbench/scenario"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// fakeAccess points at in-process servers.
type fakeAccess struct{ proxy, admin, backend string }

func (f *fakeAccess) Ingress(context.Context, []corev1.Pod) ([]string, []string, error) {
	return []string{f.proxy}, []string{f.admin}, nil
}
func (f *fakeAccess) Backend(context.Context, corev1.Pod) (string, error) { return f.backend, nil }
func (f *fakeAccess) Close() error                                        { return nil }

func readyPod(ns, name string, labels map[string]string, ip string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}},
	}
}

func createReadyPod(t *testing.T, ctx context.Context, k kubernetes.Interface, ns, name string, labels map[string]string, ip string) {
	t.Helper()
	p, err := k.CoreV1().Pods(ns).Create(ctx, readyPod(ns, name, labels, ip), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if _, err := k.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestEnvOnRealAPIServer drives the kube environment against the real
// apiserver, with the real Kubernetes route source feeding a real ingress
// in process: the test plays the controller-manager (pods, EndpointSlices,
// Deployment status) and maps the pods' documentation addresses to a fake
// backend on loopback.
func TestEnvOnRealAPIServer(t *testing.T) {
	kenv := kubetest.Start(t)
	k := kenv.Client
	ns := kenv.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := scenario.Catalogue("quickstart")
	if err != nil {
		t.Fatal(err)
	}

	var resets atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/reset":
			resets.Add(1)
			fmt.Fprint(w, `{"in_flight":0,"queued":0,"served":0,"rejected":0,"max_queue":0,"capacity":4}`)
		case "/prequal/probe":
			fmt.Fprintf(w, `{"rif":0,"latency_median_ms":null,"timestamp_ms":%d,"samples":0}`, time.Now().UnixMilli())
		default:
			fmt.Fprint(w, `{"duration_ms":1,"queue_ms":0,"rif_at_arrival":0}`)
		}
	}))
	defer backend.Close()
	loop := strings.TrimPrefix(backend.URL, "http://")

	// Pods and EndpointSlices the controllers would make.
	dialMap := map[string]string{}
	n := 0
	for _, r := range s.Workload.Routes {
		var eps []discoveryv1.Endpoint
		for _, g := range r.Backends {
			for i := range g.Replicas {
				n++
				ip := fmt.Sprintf("192.0.2.%d", n)
				dialMap[ip+":8080"] = loop
				createReadyPod(t, ctx, k, ns, fmt.Sprintf("%s-%d", g.Name, i), map[string]string{
					manifests.LabelName: "prequal-backend", manifests.LabelGroup: g.Name, manifests.LabelRoute: r.Name}, ip)
				ready := true
				eps = append(eps, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
			}
		}
		name, port := "http", int32(8080)
		if _, err := k.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: r.Name + "-1", Labels: map[string]string{kubesource.LabelServiceName: r.Name}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
			Ports: []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: manifests.SystemNamespace}}, metav1.CreateOptions{})
	createReadyPod(t, ctx, k, manifests.SystemNamespace, fmt.Sprintf("ingress-%d", time.Now().UnixNano()),
		map[string]string{manifests.LabelName: manifests.IngressName}, "192.0.2.200")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			for _, n := range []string{manifests.SystemNamespace, ns} {
				list, err := k.AppsV1().Deployments(n).List(ctx, metav1.ListOptions{})
				if err != nil {
					continue
				}
				for _, d := range list.Items {
					r := *d.Spec.Replicas
					if d.Status.ObservedGeneration != d.Generation {
						d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: r, UpdatedReplicas: r, ReadyReplicas: r, AvailableReplicas: r}
						_, _ = k.AppsV1().Deployments(n).UpdateStatus(ctx, &d, metav1.UpdateOptions{})
					}
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stop); <-done }()

	// The real ingress, fed by the real Kubernetes source.
	ing, err := ingress.New(ingress.Options{Seed: 1, DialContext: kubetest.LoopbackDialer(t, dialMap)})
	if err != nil {
		t.Fatal(err)
	}
	src, err := kubesource.New(kubesource.Options{Client: k, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan struct{}, 2)
	go func() { _ = ing.Run(runCtx); ran <- struct{}{} }()
	go func() { _ = src.Run(runCtx, ing); ran <- struct{}{} }()
	defer func() { stopRun(); <-ran; <-ran }()
	proxyURL := ingresstest.Serve(t, ing)
	admin := httptest.NewServer(ing.Admin(ingress.AdminConfig{Token: "tok"}))
	defer admin.Close()

	c, err := kubeapply.New(kenv.Config)
	if err != nil {
		t.Fatal(err)
	}
	c.Poll = 20 * time.Millisecond
	e, err := New(Options{Scenario: s, Client: c, Name: "kube", Timeout: 60 * time.Second,
		Access: &fakeAccess{proxy: proxyURL, admin: admin.URL, backend: backend.URL},
		Deploy: deploy.Options{Topology: manifests.TopologyEA, Namespace: ns, IngressImage: "i:1", BackendImage: "b:1", AdminToken: "tok"}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(e.Backends()); got != n {
		t.Errorf("%d backends, want %d", got, n)
	}
	key := RouteKey(ns, s.Workload.Routes[0].Name)
	if b := e.Backends()[0]; b.Route != key || !strings.HasPrefix(b.Address, "192.0.2.") {
		t.Errorf("backend %+v, want route %s", b, key)
	}
	ts := e.LoadTargets()
	if len(ts) != 1 || !strings.HasPrefix(ts[0].URL, proxyURL+"/work?iterations=") || ts[0].Route != key {
		t.Errorf("targets %+v", ts)
	}
	// Traffic through the proxy reaches the fake backend.
	req, _ := http.NewRequest(http.MethodGet, ts[0].URL, nil)
	req.Host = ts[0].Host
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("request through the ingress: %v %v", err, resp)
	}
	resp.Body.Close()

	if err := e.SetAlgorithm(ctx, "round-robin"); err != nil {
		t.Fatal(err)
	}
	v, err := e.Reset(ctx, scenario.ResetAdmin)
	if err != nil || !v.Verified {
		t.Fatalf("admin reset: %+v %v", v, err)
	}
	if resets.Load() != int64(n) {
		t.Errorf("%d backend resets, want %d", resets.Load(), n)
	}
	v, err = e.Reset(ctx, scenario.ResetRestart)
	if err != nil || !v.Verified {
		t.Fatalf("restart reset: %+v %v", v, err)
	}
	d, _ := k.AppsV1().Deployments(manifests.SystemNamespace).Get(ctx, manifests.IngressName, metav1.GetOptions{})
	if d.Spec.Template.Annotations[kubeapply.RestartAnnotation] == "" {
		t.Error("restart reset did not restart the ingress Deployment")
	}
	snap, err := e.Snapshot(ctx)
	if err != nil || len(snap) != 1 || len(snap[0].Routes) != 1 || snap[0].Routes[0].Algorithm != "round-robin" {
		t.Errorf("snapshot %+v %v", snap, err)
	}
	if f := e.Facts(); f.Name != "kube" || f.Topology != "e-a" {
		t.Errorf("facts %+v", f)
	}
	if _, err := e.Reset(ctx, "reboot"); err == nil || !strings.Contains(err.Error(), "allowed") {
		t.Errorf("bad reset mode: %v", err)
	}
	// Churn: the group's Deployment gets the new replica count.
	group := s.Workload.Routes[0].Backends[0]
	for _, want := range []int{group.Replicas + 3, 1} {
		if err := e.ScaleGroup(ctx, group.Name, want); err != nil {
			t.Fatalf("scale %s to %d: %v", group.Name, want, err)
		}
		d, err := k.AppsV1().Deployments(ns).Get(ctx, group.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := int(*d.Spec.Replicas); got != want {
			t.Errorf("deployment %s has %d replicas, want %d", group.Name, got, want)
		}
	}
	if err := e.ScaleGroup(ctx, "nope", 2); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("scaling a missing group: %v", err)
	}
}

func TestForwardURL(t *testing.T) {
	u, err := ForwardURL("https://127.0.0.1:6443/prefix", "ns", "pod-1")
	if err != nil || u.String() != "https://127.0.0.1:6443/prefix/api/v1/namespaces/ns/pods/pod-1/portforward" {
		t.Errorf("ForwardURL = %v, %v", u, err)
	}
}
