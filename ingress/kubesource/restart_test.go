package kubesource_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/prequalbench/prequalbench/ingress"
	"github.com/prequalbench/prequalbench/ingress/ingresstest"
	"github.com/prequalbench/prequalbench/ingress/kubesource"
	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/internal/kubetest"
	"github.com/prequalbench/prequalbench/internal/testbackend"
)

// updateLog passes route sets to the dataplane and keeps the endpoints of
// the route on path in every one of them.
type updateLog struct {
	*ingress.Ingress
	path string

	mu      sync.Mutex
	history [][]string // endpoints of the route per update; nil when it was missing
}

func (u *updateLog) Update(specs []route.Spec) {
	var eps []string
	for _, s := range specs {
		if s.Path == u.path {
			eps = append([]string{}, s.Endpoints...)
		}
	}
	u.mu.Lock()
	u.history = append(u.history, eps)
	u.mu.Unlock()
	u.Ingress.Update(specs)
}

func (u *updateLog) updates() [][]string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.history)
}

// childProcess returns the pid of this process's child running exe with
// arg on its command line (the shared control plane of the other tests runs
// the same binary).
func childProcess(t *testing.T, exe, arg string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*")
	me := strconv.Itoa(os.Getpid())
	for _, p := range procs {
		stat, err := os.ReadFile(filepath.Join(p, "stat"))
		if err != nil {
			continue
		}
		// Fields after the ")" that ends the command name: state, ppid, ...
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 || f[0] == "Z" || f[1] != me {
			continue
		}
		got, err := os.Readlink(filepath.Join(p, "exe"))
		if err != nil || got != exe {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err == nil && slices.Contains(strings.Split(string(cmdline), "\x00"), arg) {
			pid, _ := strconv.Atoi(filepath.Base(p))
			return pid
		}
	}
	t.Fatalf("no child process runs %s %s", exe, arg)
	return 0
}

// TestKubeAPIServerRestart stops the kube-apiserver under a running source
// and dataplane, then starts it again: the routes stay and keep serving
// while it is down, and changes made after it is back reach the dataplane.
// It runs its own control plane, since stopping the shared one would break
// the other tests.
func TestKubeAPIServerRestart(t *testing.T) {
	const restartWait = 90 * time.Second // the informers' retry backoff grows to 30 s
	assets, err := kubetest.Assets()
	if err != nil {
		t.Fatal(err)
	}
	te := &envtest.Environment{BinaryAssetsDirectory: assets}
	api := te.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(assets, "kube-apiserver")
	// A certificate directory of our own survives Stop (envtest replaces a
	// directory it made, and with it the CA the client trusts).
	api.CertDir = t.TempDir()
	cfg, err := te.Start()
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := te.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*restartWait)
	defer cancel()
	const ns, class = "restart", "restart-class"
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	must(cs.NetworkingV1().IngressClasses().Create(ctx, &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: networkingv1.IngressClassSpec{Controller: kubesource.ControllerName}}, metav1.CreateOptions{}))
	must(cs.CoreV1().Services(ns).Create(ctx, svc("work", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}), metav1.CreateOptions{}))
	must(cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, epSlice("work-1", "work", []discoveryv1.EndpointPort{eport("http", 8080)},
		epSpec{"192.0.2.10", true}), metav1.CreateOptions{}))
	must(cs.NetworkingV1().Ingresses(ns).Create(ctx, ing("work", ptr(class), map[string]string{kubesource.AnnotationLoadBalance: "round-robin"}, "",
		path("/work", networkingv1.PathTypePrefix, "work", networkingv1.ServiceBackendPort{Number: 80})), metav1.CreateOptions{}))

	b1, b2 := testbackend.Start(t), testbackend.Start(t)
	dp, err := ingress.New(ingress.Options{
		DialContext: kubetest.LoopbackDialer(t, map[string]string{"192.0.2.10:8080": b1.Addr, "192.0.2.11:8080": b2.Addr}),
		Seed:        1,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = dp.Run(runCtx) }()
	t.Cleanup(func() { stopRun(); <-runDone })
	src, err := kubesource.New(kubesource.Options{Client: cs, Namespace: ns, IngressClass: class})
	if err != nil {
		t.Fatal(err)
	}
	log := &updateLog{Ingress: dp, path: "/work"}
	srcCtx, stopSrc := context.WithCancel(context.Background())
	srcDone := make(chan error, 1)
	go func() { srcDone <- src.Run(srcCtx, log) }()
	t.Cleanup(func() {
		stopSrc()
		if err := <-srcDone; err != nil {
			t.Errorf("source Run: %v", err)
		}
	})

	srvURL := ingresstest.Serve(t, dp)
	client := &http.Client{Timeout: 10 * time.Second}
	get := func() int {
		resp, err := client.Get(srvURL + "/work?iterations=1")
		if err != nil {
			t.Fatalf("GET through the ingress: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	poll := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		end := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(end) {
				t.Fatalf("%s: not within %v; updates seen: %q", what, limit, log.updates())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	poll("route live", wait, func() bool { return get() == http.StatusOK })
	if h := log.updates(); len(h) == 0 || !slices.Equal(h[len(h)-1], []string{"192.0.2.10:8080"}) {
		t.Fatalf("route on /work not as expected; updates %q", h)
	}

	// Down (killed, as in a crash; a graceful stop took longer than
	// envtest's 20 s here): the route set stays and keeps serving.
	pid := childProcess(t, api.Path, "--cert-dir="+api.CertDir)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill kube-apiserver (pid %d): %v", pid, err)
	}
	// Stop succeeds once envtest has reaped the process.
	poll("envtest to reap the killed kube-apiserver", wait, func() bool { return api.Stop() == nil })
	probe := &http.Client{Timeout: time.Second}
	if _, err := probe.Get(cfg.Host + "/healthz"); err == nil {
		t.Fatal("kube-apiserver still answers after Stop")
	}
	downSince := time.Now()
	for n := 0; n < 20 || time.Since(downSince) < 3*time.Second; n++ {
		if code := get(); code != http.StatusOK {
			t.Fatalf("request %d with the kube-apiserver down: status %d", n, code)
		}
		time.Sleep(50 * time.Millisecond) // spread the batch over the outage
	}

	// Back: a change made now reaches the dataplane.
	if err := api.Start(); err != nil {
		t.Fatalf("restart kube-apiserver: %v", err)
	}
	poll("the restarted kube-apiserver accepts the EndpointSlice change", restartWait, func() bool {
		sl, err := cs.DiscoveryV1().EndpointSlices(ns).Get(ctx, "work-1", metav1.GetOptions{})
		if err != nil {
			return false
		}
		sl.Endpoints = epSlice("", "", nil, epSpec{"192.0.2.10", true}, epSpec{"192.0.2.11", true}).Endpoints
		_, err = cs.DiscoveryV1().EndpointSlices(ns).Update(ctx, sl, metav1.UpdateOptions{})
		return err == nil
	})
	poll("the dataplane gets the second endpoint", restartWait, func() bool {
		for _, r := range dp.Routes() {
			if r.Path == "/work" && len(r.Endpoints) == 2 {
				return true
			}
		}
		return false
	})
	poll("traffic reaches the new endpoint", wait, func() bool { get(); return servedBy(t, client, b2) > 0 })
	for i, eps := range log.updates() {
		if len(eps) == 0 {
			t.Fatalf("update %d dropped the route's endpoints: %q", i, log.updates())
		}
	}
}
