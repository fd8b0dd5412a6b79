package sim

import (
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

// watch wraps a policy and keeps what the world hands it: the latency and
// status of each Done, in call order, and the RIF of each probe answer.
type watch struct {
	loadbalancer.Policy
	done   []doneCall
	probed []int
}

type doneCall struct {
	latency time.Duration
	status  int
}

func (p *watch) Done(now time.Time, pk loadbalancer.Picked, latency time.Duration, status int) {
	p.done = append(p.done, doneCall{latency, status})
	p.Policy.Done(now, pk, latency, status)
}

func (p *watch) ProbeResult(now time.Time, ep string, r loadbalancer.ProbeReply) {
	p.probed = append(p.probed, r.RIF)
	p.Policy.ProbeResult(now, ep, r)
}

// gateWorld is one client in front of one replica with one slot, a queue
// of two and a fixed 100 ms service time, no network delay, and a load
// timeout of timeout; requests are sent by hand.
func gateWorld(t *testing.T, timeout time.Duration) (*World, *watch) {
	t.Helper()
	w, err := New(Config{
		Seed: 1, Clients: 1, Algorithm: loadbalancer.NameRoundRobin, Policy: loadbalancer.DefaultConfig(),
		Routes: []Route{{Name: "r", Groups: []Group{{
			Name: "s", Replicas: 1, Mode: "io", ServiceTime: 100 * time.Millisecond, Distribution: "fixed",
			Concurrency: 1, QueueLimit: 2,
		}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &watch{Policy: w.clients[0].policy}
	w.clients[0].policy = p
	lr := &loadRun{l: Load{Timeout: timeout}, timeout: int64(timeout), start: 0, winFrom: 0, winTo: maxTime}
	w.rec = newRecorder(lr, 0)
	return w, p
}

// runUntil fires every event due at or before at.
func runUntil(w *World, at time.Duration) {
	for w.q.len() > 0 && w.q.peek() <= int64(at) {
		w.step()
	}
	w.now = int64(at)
}

// probeRIF asks the replica for a probe answer now, as the ingress's
// prober would, and returns the RIF it reports.
func probeRIF(t *testing.T, w *World, p *watch) int {
	t.Helper()
	n := len(p.probed)
	w.probeAtServer(0, 0, w.now)
	runUntil(w, time.Duration(w.now))
	if len(p.probed) != n+1 {
		t.Fatalf("the probe was not answered at once (%d answers)", len(p.probed)-n)
	}
	return p.probed[n]
}

// TestServer_GateAsTheBackend: a replica serves its slots, queues in FIFO
// order up to its queue limit, answers 503 beyond it, and counts queued
// requests in the RIF its probes report, as backend/src/gate.rs and
// server.rs do.
func TestServer_GateAsTheBackend(t *testing.T) {
	w, p := gateWorld(t, time.Hour)
	for k := range 4 { // 10 ms apart, so each answer's latency names it
		runUntil(w, time.Duration(k)*10*time.Millisecond)
		w.send(0, w.now, -1, true)
	}
	runUntil(w, 31*time.Millisecond)
	if len(p.done) != 1 || p.done[0].status != 503 {
		t.Fatalf("after 4 sends to 1 slot + a queue of 2: done %v, want one 503", p.done)
	}
	if got := probeRIF(t, w, p); got != 3 {
		t.Errorf("probe RIF %d with 1 in service and 2 queued, want 3 (queued requests count)", got)
	}
	runUntil(w, time.Second)
	// Sent at 0, 10 and 20 ms; served 0-100, 100-200, 200-300 ms.
	want := []time.Duration{100 * time.Millisecond, 190 * time.Millisecond, 280 * time.Millisecond}
	if len(p.done) != 4 {
		t.Fatalf("done %v, want 4 calls", p.done)
	}
	for k, d := range p.done[1:] {
		if d.status != 200 || d.latency != want[k] {
			t.Errorf("answer %d: %v, want 200 after %v (FIFO behind one slot)", k+1, d, want[k])
		}
	}
	if got := probeRIF(t, w, p); got != 0 {
		t.Errorf("probe RIF %d when idle, want 0", got)
	}
}

// TestServer_ClientLeavingDropsAQueuedRequest: when the load generator
// gives up (150 ms), the request still queued leaves the replica's queue
// and its RIF (the gate's cancel), while the one in service runs on and is
// recorded, as the backend does.
func TestServer_ClientLeavingDropsAQueuedRequest(t *testing.T) {
	w, p := gateWorld(t, 150*time.Millisecond)
	for range 3 {
		w.send(0, w.now, -1, true)
	}
	runUntil(w, 160*time.Millisecond)
	if got := probeRIF(t, w, p); got != 1 {
		t.Errorf("probe RIF %d after the timeout, want 1 (the one in service; the queued one dropped)", got)
	}
	w.rec.sendsDone = true
	for !w.rec.finished() || w.q.len() > 0 {
		w.step()
	}
	s := w.servers[0]
	if s.served != 2 || s.rif != 0 || s.queue.len() != 0 {
		t.Errorf("served %d, RIF %d, queued %d; want 2 served (one after its client left), 0, 0", s.served, s.rif, s.queue.len())
	}
	res := w.rec.result()
	if res.Succeeded != 1 || res.Timeouts != 2 {
		t.Errorf("%d successes, %d timeouts; want 1 and 2", res.Succeeded, res.Timeouts)
	}
	if est := s.est.Estimate(0, w.now); est.Samples != 2 {
		t.Errorf("estimator has %d samples, want 2 (the request served after its client left is recorded)", est.Samples)
	}
}
