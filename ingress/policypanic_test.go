package ingress

import (
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

// probePanicky panics, when armed, in a policy's probe handling.
type probePanicky struct {
	loadbalancer.Policy
	inFailed, inResult atomic.Bool
}

func (p *probePanicky) ProbeFailed(now time.Time, ep string, o loadbalancer.ProbeOutcome) {
	if p.inFailed.Load() {
		panic("test: ProbeFailed panics")
	}
	p.Policy.ProbeFailed(now, ep, o)
}

func (p *probePanicky) ProbeResult(now time.Time, ep string, r loadbalancer.ProbeReply) {
	if p.inResult.Load() {
		panic("test: ProbeResult panics")
	}
	p.Policy.ProbeResult(now, ep, r)
}

func swapPolicy[P loadbalancer.Policy](rs *routeState, wrap func(loadbalancer.Policy) P) P {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	p := wrap(rs.policy)
	rs.policy = p
	return p
}

// A probe dropped at a full queue is reported to the policy on the request
// path: a policy that panics there is recovered with the route lock
// released, the request still gets its answer, its attempt is reported
// finished, and the panic is counted.
func TestProxy_PanicInProbeFailedOnTheRequestPath(t *testing.T) {
	be, be2 := startRawBackend(t, answerOK), startRawBackend(t, answerOK)
	ing, err := New(Options{DefaultAlgorithm: "prequal", Seed: 1, ProbeQueueSize: 1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// Two endpoints and no prober running: the first probe fills the queue,
	// the second is dropped and reported at once.
	ing.Update([]route.Spec{{Key: "w", Path: "/", Endpoints: []string{be.addr, be2.addr}}})
	url := serveProxy(t, ing)
	rs := ing.table.Load().byKey["w"]
	pol := swapPolicy(rs, func(p loadbalancer.Policy) *probePanicky { return &probePanicky{Policy: p} })
	pol.inFailed.Store(true)
	addr := strings.TrimPrefix(url, "http://")
	for i := range 3 {
		if got := statusLine(exchangeRaw(t, addr, "GET /work HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")); got != "HTTP/1.1 200 OK" {
			t.Fatalf("request %d with a panicking ProbeFailed: %q, want 200", i, got)
		}
	}
	if !rs.mu.TryLock() {
		t.Fatal("the route lock is held after the panic")
	}
	rs.mu.Unlock()
	if n := rs.inFlight.Load(); n != 0 {
		t.Errorf("route in flight %d after the requests, want 0", n)
	}
	if v, _ := metricTotal(t, ing, "prequal_panics_total"); v < 1 {
		t.Errorf("prequal_panics_total = %v, want the recovered panics counted", v)
	}
}

// A policy that panics on a probe answer in a prober worker does not end
// the ingress: the panic is recovered and counted, and the worker goes on.
func TestProxy_PanicInProbeResultOnAProberWorker(t *testing.T) {
	addr, probes := probeServer(t)
	ing, _ := newTestIngress(t, Options{DefaultAlgorithm: "prequal", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		route.Spec{Key: "w", Path: "/", Endpoints: []string{addr}})
	rs := ing.table.Load().byKey["w"]
	pol := swapPolicy(rs, func(p loadbalancer.Policy) *probePanicky { return &probePanicky{Policy: p} })
	pol.inResult.Store(true)
	n := probes.Load()
	rs.enqueue([]string{addr})
	waitFor(t, "the panic in ProbeResult to be recovered and counted", func() bool {
		v, _ := metricTotal(t, ing, "prequal_panics_total")
		return v >= 1
	})
	pol.inResult.Store(false)
	rs.enqueue([]string{addr})
	waitFor(t, "the prober to go on probing", func() bool { return probes.Load() >= n+2 })
}

// fbPanicky panics in ServerFeedback and counts Done calls.
type fbPanicky struct {
	loadbalancer.Policy
	dones atomic.Int32
}

func (p *fbPanicky) ServerFeedback(time.Time, loadbalancer.Picked, loadbalancer.ServerFeedback) {
	panic("test: ServerFeedback panics")
}

func (p *fbPanicky) Done(now time.Time, pk loadbalancer.Picked, latency time.Duration, status int) {
	p.dones.Add(1)
	p.Policy.Done(now, pk, latency, status)
}

// A panic in the server-feedback call still reports the attempt finished,
// once.
func TestProxy_PanicInServerFeedbackStillReportsTheAttempt(t *testing.T) {
	be := startRawBackend(t, func(int, string) (string, bool) {
		return "HTTP/1.1 200 OK\r\nX-Prequal-Queue: 1\r\nX-Prequal-Service-Us: 100\r\nContent-Length: 2\r\n\r\nok", false
	})
	ing, url := newTestIngress(t, Options{DefaultAlgorithm: "least-request", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		route.Spec{Key: "w", Path: "/", Endpoints: []string{be.addr}})
	rs := ing.table.Load().byKey["w"]
	pol := swapPolicy(rs, func(p loadbalancer.Policy) *fbPanicky { return &fbPanicky{Policy: p} })
	got := statusLine(exchangeRaw(t, strings.TrimPrefix(url, "http://"), "GET /work HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
	if got != "HTTP/1.1 502 Bad Gateway" {
		t.Errorf("answer %q, want 502", got)
	}
	if n := pol.dones.Load(); n != 1 {
		t.Errorf("Done called %d times, want 1", n)
	}
	if ep := policyStats(t, ing, "w").Endpoints[0]; ep.InFlight != 0 {
		t.Errorf("endpoint in flight %d after the panic, want 0", ep.InFlight)
	}
}
