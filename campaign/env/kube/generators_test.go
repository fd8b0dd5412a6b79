package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/cluster/deploy"
	"github.com/prequalbench/prequalbench/internal/kubetest"
	"github.com/prequalbench/prequalbench/load"
	"github.com/prequalbench/prequalbench/load/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// kubeletStandIn plays the Job controller and the kubelet for generator
// Jobs: for each new Job it creates its pod, runs the pod's spec with the
// real load engine in this process (the PREQUALBENCH_LOADGEN_SPEC the
// container would get, through the `loadgen` code path's Spec.Config),
// keeps what the container would have printed as the pod's log, and
// marks the pod Succeeded.
type kubeletStandIn struct {
	mu   sync.Mutex
	logs map[string]string
	seen map[string]bool
	jobs atomic.Int32
	// offset is how far the generators' clocks are off this machine's.
	offset time.Duration
}

// clock is a running generator's clock endpoint, offset as set.
func (s *kubeletStandIn) clock(context.Context, string, string) (time.Time, error) {
	return time.Now().Add(s.offset), nil
}

func (s *kubeletStandIn) run(ctx context.Context, t *testing.T, k kubernetes.Interface, ns string) {
	s.logs, s.seen = map[string]string{}, map[string]bool{}
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		list, err := k.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, j := range list.Items {
			if s.seen[j.Name] {
				continue
			}
			s.seen[j.Name] = true
			s.jobs.Add(1)
			c := j.Spec.Template.Spec.Containers[0]
			var spec remote.Spec
			if err := json.Unmarshal([]byte(c.Env[0].Value), &spec); err != nil {
				t.Errorf("job %s: spec: %v", j.Name, err)
				continue
			}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-pod", Namespace: ns, Labels: j.Spec.Template.Labels},
				Spec:       j.Spec.Template.Spec,
			}
			p, err := k.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil {
				t.Errorf("job %s: create pod: %v", j.Name, err)
				continue
			}
			p.Status.Phase = corev1.PodRunning
			if p, err = k.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Errorf("pod %s: status: %v", pod.Name, err)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Until(spec.StartAt))
				rep := remote.Report{Shard: spec.Shard, Shards: spec.Shards}
				res, err := load.Run(ctx, spec.Config())
				if err == nil {
					rep.Result, err = remote.Encode(res)
				}
				if err != nil {
					rep.Error = err.Error()
				}
				var b strings.Builder
				b.WriteString("loadgen: shard starts\n")
				_ = remote.WriteReport(&b, rep)
				s.mu.Lock()
				s.logs[p.Name] = b.String()
				s.mu.Unlock()
				p.Status.Phase = corev1.PodSucceeded
				if _, err := k.CoreV1().Pods(ns).UpdateStatus(context.WithoutCancel(ctx), p, metav1.UpdateOptions{}); err != nil {
					t.Errorf("pod %s: status: %v", p.Name, err)
				}
			}()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *kubeletStandIn) log(_ context.Context, _, pod string) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return io.NopCloser(strings.NewReader(s.logs[pod])), nil
}

// testGenerators runs one schedule over 4 generator Jobs on k and checks
// that the merged result accounts for every request of the schedule, that
// the requests reached the "ingress Service" (a loopback server standing
// for it) with their paths and Host, that both window boundaries were
// called, and that the Jobs are deleted afterwards.
func testGenerators(t *testing.T, k kubernetes.Interface, ns string) {
	var got atomic.Int64
	var badHost atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		if r.Host != "bench.local" || r.URL.Path != "/work" || r.URL.Query().Get("iterations") != "1000" {
			badHost.Add(1)
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	standIn := &kubeletStandIn{}
	standCtx, stopStandIn := context.WithCancel(ctx)
	standDone := make(chan struct{})
	go func() { defer close(standDone); standIn.run(standCtx, t, k, ns) }()
	defer func() { stopStandIn(); <-standDone }()

	g := &Generators{Kube: k, Namespace: ns, Image: "prequalbench/ingress:dev", Count: 4, ProxyURL: srv.URL,
		Lead: 500 * time.Millisecond, Poll: 50 * time.Millisecond, Logs: standIn.log, Clock: standIn.clock}
	var starts, ends atomic.Int32
	cfg := load.Config{
		// Two addresses seen from this machine, at most 3 connections
		// each: 6 in all, split between the generators.
		Targets: []load.Target{{URL: "http://127.0.0.1:31080/work?iterations=1000", Host: "bench.local", Weight: 1},
			{URL: "http://127.0.0.2:31080/work?iterations=1000", Host: "bench.local", Weight: 1}},
		Open:   []load.Phase{{Kind: load.KindConstant, Rate: 200, Duration: time.Second}},
		Warmup: 200 * time.Millisecond, WarmupRate: 100, Seed: 11, MaxConnections: 3,
		OnWindowStart: func() { starts.Add(1) }, OnWindowEnd: func() { ends.Add(1) },
	}
	// The environment's CPU readings (node sampling) are taken on this
	// machine's clock, a baseline and one per second, and land in the
	// merged series' rows.
	var samples atomic.Int32
	cfg.SampleCPU = func() *load.CPU {
		n := samples.Add(1)
		return &load.CPU{HostIdle: float64(40 + n)}
	}
	w := &WithGenerators{Gen: g}
	res, err := w.RunLoad(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Series) != 1 || res.Series[0].CPU == nil || res.Series[0].CPU.HostIdle != 42 || samples.Load() != 2 {
		cpu := "none"
		if len(res.Series) > 0 && res.Series[0].CPU != nil {
			cpu = fmt.Sprint(*res.Series[0].CPU)
		}
		t.Errorf("%d rows, first row's CPU %s, %d samples; want 1 row with the second reading (idle 42) of 2", len(res.Series), cpu, samples.Load())
	}
	// Every generator's clock was measured against this machine's.
	clocks := w.GeneratorClocks()
	if len(clocks) != 4 {
		t.Errorf("%d clock readings, want 4: %+v", len(clocks), clocks)
	}
	for i, c := range clocks {
		if c.Shard != i || c.Error != "" || c.Pod == "" || math.Abs(c.OffsetMS) > 50 {
			t.Errorf("clock of shard %d: %+v", i, c)
		}
	}
	if standIn.jobs.Load() != 4 {
		t.Errorf("%d Jobs created, want 4", standIn.jobs.Load())
	}
	// 200 rps for 1 s in the window, 20 more in the warmup.
	if res.Sent != 200 || res.Succeeded != 200 || res.Histogram.TotalCount() != 200 || got.Load() != 220 {
		t.Errorf("merged: sent %d, succeeded %d, histogram %d; the server got %d (want 200, 200, 200, 220)", res.Sent, res.Succeeded, res.Histogram.TotalCount(), got.Load())
	}
	if badHost.Load() != 0 {
		t.Errorf("%d requests lost their path, query or Host on the way in-cluster", badHost.Load())
	}
	if starts.Load() != 1 || ends.Load() != 1 {
		t.Errorf("window boundaries: %d starts, %d ends, want 1 each", starts.Load(), ends.Load())
	}
	if res.TargetRate != 200 || res.Planned != 200 {
		t.Errorf("merged target rate %v (%d planned), want 200 (200)", res.TargetRate, res.Planned)
	}
	if res.ConnCap != 6 {
		t.Errorf("the generators' connection caps add up to %d, want the runner's 2 addresses x 3", res.ConnCap)
	}
	jobs, err := k.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: deploy.LoadgenRunLabel})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if j.DeletionTimestamp == nil {
			t.Errorf("Job %s left behind", j.Name)
		}
	}
}

func TestGeneratorsOnFakeClientset(t *testing.T) {
	testGenerators(t, fake.NewClientset(), "prequalbench")
}

// The same against the real kube-apiserver: the rendered Jobs pass its
// validation and are created, listed and deleted there; pods are made by
// the stand-in (no kubelet), their logs kept by it.
func TestGeneratorsOnRealAPIServer(t *testing.T) {
	e := kubetest.Start(t)
	testGenerators(t, e.Client, e.Namespace(t))
}

// A generator whose report carries an error fails the run with it.
func TestGeneratorsReportError(t *testing.T) {
	k := fake.NewClientset()
	standIn := &kubeletStandIn{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); standIn.run(ctx, t, k, "ns") }()
	defer func() { cancel(); <-done }()
	g := &Generators{Kube: k, Namespace: "ns", Image: "x", Count: 2, ProxyURL: "http://127.0.0.1:1",
		Lead: 200 * time.Millisecond, Poll: 20 * time.Millisecond, Logs: standIn.log, Clock: standIn.clock}
	// A negative timeout is refused by the engine in every shard.
	cfg := load.Config{Targets: []load.Target{{URL: "http://x/work"}}, Open: []load.Phase{{Kind: load.KindConstant, Rate: 10, Duration: 100 * time.Millisecond}}, Timeout: -1}
	if _, err := g.Run(ctx, cfg); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("run: %v, want the generators' error", err)
	}
}

// A generator whose clock is further off this machine's than the bound
// fails the run before its start, with the measured offset and the bound;
// one whose clock cannot be read is recorded as not measured.
func TestGeneratorsRefuseASkewedClock(t *testing.T) {
	k := fake.NewClientset()
	standIn := &kubeletStandIn{offset: 300 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); standIn.run(ctx, t, k, "ns") }()
	defer func() { cancel(); <-done }()
	var started atomic.Bool
	g := &Generators{Kube: k, Namespace: "ns", Image: "x", Count: 2, ProxyURL: "http://127.0.0.1:1",
		Lead: 2 * time.Second, Poll: 20 * time.Millisecond, Logs: standIn.log, Clock: standIn.clock}
	cfg := load.Config{Targets: []load.Target{{URL: "http://x/work"}}, Open: []load.Phase{{Kind: load.KindConstant, Rate: 10, Duration: 100 * time.Millisecond}},
		OnWindowStart: func() { started.Store(true) }}
	_, err := g.Run(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "its clock is +300") || !strings.Contains(err.Error(), "beyond the 100ms") {
		t.Errorf("run with a clock 300 ms ahead: %v; want it refused, naming the offset and the bound", err)
	}
	if started.Load() {
		t.Error("the window started before the skewed clock was refused")
	}

	standIn2 := &kubeletStandIn{}
	k2 := fake.NewClientset()
	done2 := make(chan struct{})
	ctx2, cancel2 := context.WithCancel(ctx)
	go func() { defer close(done2); standIn2.run(ctx2, t, k2, "ns") }()
	defer func() { cancel2(); <-done2 }()
	g2 := &Generators{Kube: k2, Namespace: "ns", Image: "x", Count: 1, ProxyURL: "http://127.0.0.1:1",
		Lead: 300 * time.Millisecond, Poll: 20 * time.Millisecond, Logs: standIn2.log,
		Clock: func(context.Context, string, string) (time.Time, error) {
			return time.Time{}, errors.New("pods/proxy forbidden")
		}}
	w := &WithGenerators{Gen: g2}
	if _, err := w.RunLoad(ctx, load.Config{Targets: []load.Target{{URL: "http://x/work"}}, Open: []load.Phase{{Kind: load.KindConstant, Rate: 10, Duration: 100 * time.Millisecond}}}); err != nil {
		t.Fatal(err)
	}
	if c := w.GeneratorClocks(); len(c) != 1 || !strings.Contains(c[0].Error, "not measured") || !strings.Contains(c[0].Error, "pods/proxy forbidden") {
		t.Errorf("unreadable clock recorded as %+v", c)
	}
}

// A slow API server proxy widens the measurement, it does not skew the
// clock: a generator with a perfect clock measured through 260 ms round
// trips (± 130 ms, above the 100 ms bound) runs, and its reading records
// that it could not be shown within the bound; one certainly beyond the
// bound (400 ms ahead, ± 130 ms) is still refused.
func TestGeneratorsSlowProxyIsNotASkewedClock(t *testing.T) {
	slow := func(ahead time.Duration) func(context.Context, string, string) (time.Time, error) {
		return func(ctx context.Context, _, _ string) (time.Time, error) {
			time.Sleep(130 * time.Millisecond)
			at := time.Now().Add(ahead)
			time.Sleep(130 * time.Millisecond)
			return at, nil
		}
	}
	for _, tc := range []struct {
		ahead   time.Duration
		refused bool
	}{{0, false}, {400 * time.Millisecond, true}} {
		k := fake.NewClientset()
		standIn := &kubeletStandIn{}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		done := make(chan struct{})
		go func() { defer close(done); standIn.run(ctx, t, k, "ns") }()
		g := &Generators{Kube: k, Namespace: "ns", Image: "x", Count: 1, ProxyURL: "http://127.0.0.1:1",
			Lead: 3 * time.Second, Poll: 20 * time.Millisecond, Logs: standIn.log, Clock: slow(tc.ahead)}
		w := &WithGenerators{Gen: g}
		_, err := w.RunLoad(ctx, load.Config{Targets: []load.Target{{URL: "http://x/work"}}, Open: []load.Phase{{Kind: load.KindConstant, Rate: 10, Duration: 100 * time.Millisecond}}})
		cancel()
		<-done
		if tc.refused {
			if err == nil || !strings.Contains(err.Error(), "at least") {
				t.Errorf("clock %v ahead through a slow proxy: %v; want it refused as certainly off", tc.ahead, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("perfect clock through a slow proxy refused: %v", err)
		}
		if c := w.GeneratorClocks(); len(c) != 1 || c[0].Error != "" || !strings.Contains(c[0].Unresolved, "too coarse") {
			t.Errorf("perfect clock through a slow proxy recorded as %+v; want it unresolved, too coarse", c)
		}
	}
}

// A generator pod whose image cannot be pulled fails the run at once,
// with the reason and the image, and the Jobs are deleted; a shard whose
// pod never came fails the run soon after the common start, not after
// the whole window.
func TestGeneratorsFailFast(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k := fake.NewClientset()
	// A kubelet that cannot pull: every Job's pod waits in ImagePullBackOff.
	go func() {
		seen := map[string]bool{}
		for ctx.Err() == nil {
			list, _ := k.BatchV1().Jobs("ns").List(ctx, metav1.ListOptions{})
			for _, j := range list.Items {
				if seen[j.Name] {
					continue
				}
				seen[j.Name] = true
				_, _ = k.CoreV1().Pods("ns").Create(ctx, &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-pod", Namespace: "ns", Labels: j.Spec.Template.Labels},
					Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
						Name: deploy.LoadgenContainer, Image: "prequalbench/ingress:dev",
						State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "pull access denied"}},
					}}},
				}, metav1.CreateOptions{})
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	window := 10 * time.Minute
	cfg := load.Config{Targets: []load.Target{{URL: "http://x/work"}}, Open: []load.Phase{{Kind: load.KindConstant, Rate: 10, Duration: window}}}
	g := &Generators{Kube: k, Namespace: "ns", Image: "prequalbench/ingress:dev", Count: 2, ProxyURL: "http://127.0.0.1:1",
		Lead: time.Hour, Poll: 10 * time.Millisecond}
	began := time.Now()
	_, err := g.Run(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "ImagePullBackOff") || !strings.Contains(err.Error(), "prequalbench/ingress:dev") {
		t.Errorf("run: %v, want the pull failure", err)
	}
	if time.Since(began) > 20*time.Second {
		t.Errorf("took %v", time.Since(began))
	}
	jobs, _ := k.BatchV1().Jobs("ns").List(ctx, metav1.ListOptions{})
	if len(jobs.Items) != 0 {
		t.Errorf("%d Jobs left", len(jobs.Items))
	}

	// No kubelet at all in another namespace: the shards are lost once
	// the grace after the start has passed.
	g = &Generators{Kube: k, Namespace: "other", Image: "x", Count: 2, ProxyURL: "http://127.0.0.1:1",
		Lead: 50 * time.Millisecond, Poll: 10 * time.Millisecond, StartGrace: 100 * time.Millisecond}
	_, err = g.Run(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "shard(s) 0, 1 not running") {
		t.Errorf("run without pods: %v, want the lost shards", err)
	}
}

// The generators split the run's exact total connection cap (the runner
// rounds it up per address: a total of 10 over 3 addresses is 4 each,
// which multiplied back read 12) and the engine's default worker bound
// (0 gave every shard the whole 10 000); more generators than the cap
// allows connections are refused before any Job is created.
func TestGenerators_SplitTheRunsBounds(t *testing.T) {
	cfg := load.Config{
		Targets: []load.Target{{URL: "http://127.0.0.1:1/work"}, {URL: "http://127.0.0.2:1/work"}, {URL: "http://127.0.0.3:1/work"}},
		Open:    []load.Phase{{Kind: load.KindConstant, Rate: 10, Duration: time.Second}}, MaxConnections: 4,
	}
	g := &Generators{Count: 4, ProxyURL: "http://svc:8080", ConnectionCap: 10}
	_, specs, err := g.shards(cfg, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	conns, workers := 0, 0
	for _, s := range specs {
		conns += s.MaxConnections
		workers += s.MaxWorkers
	}
	if conns != 10 || workers != load.DefaultMaxWorkers {
		t.Errorf("the shards' caps add up to %d connections and %d workers, want 10 and %d", conns, workers, load.DefaultMaxWorkers)
	}

	k := fake.NewClientset()
	g = &Generators{Kube: k, Namespace: "ns", Image: "x", Count: 11, ProxyURL: "http://svc:8080", ConnectionCap: 10}
	if _, err := g.Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "cannot split a cap of 10 connections") {
		t.Errorf("11 generators under a cap of 10: %v", err)
	}
	if jobs, _ := k.BatchV1().Jobs("ns").List(context.Background(), metav1.ListOptions{}); len(jobs.Items) != 0 {
		t.Errorf("%d Jobs created for a refused run", len(jobs.Items))
	}
}
