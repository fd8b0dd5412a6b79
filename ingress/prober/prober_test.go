package prober

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

var t0 = time.UnixMilli(1_700_000_000_000)

func TestParseReply(t *testing.T) {
	tests := []struct {
		name string
		body string
		want loadbalancer.ProbeOutcome
		rep  loadbalancer.ProbeReply
	}{
		{"ok", `{"rif":3,"latency_median_ms":12.5,"timestamp_ms":1700000000000,"samples":9}`, loadbalancer.ProbeOK,
			loadbalancer.ProbeReply{RIF: 3, Latency: 12500 * time.Microsecond, LatencyKnown: true}},
		{"null latency is unknown, not zero", `{"rif":0,"latency_median_ms":null,"timestamp_ms":1700000000000,"samples":0}`, loadbalancer.ProbeOK,
			loadbalancer.ProbeReply{}},
		{"seed without timestamp", `{"rif":1,"latency_median_ms":2}`, loadbalancer.ProbeOK,
			loadbalancer.ProbeReply{RIF: 1, Latency: 2 * time.Millisecond, LatencyKnown: true}},
		{"load report", `{"rif":1,"timestamp_ms":1700000000000,"qps":12.5,"eps":0.5,"utilization":0.25}`, loadbalancer.ProbeOK,
			loadbalancer.ProbeReply{RIF: 1, QPS: 12.5, EPS: 0.5, Utilization: 0.25, LoadKnown: true}},
		{"load report without utilization (unlimited backend)", `{"rif":1,"qps":12.5,"eps":0}`, loadbalancer.ProbeOK,
			loadbalancer.ProbeReply{RIF: 1, QPS: 12.5}},
		{"load field null after a value", `{"rif":1,"qps":3,"qps":null,"eps":0,"utilization":0}`, loadbalancer.ProbeOK,
			loadbalancer.ProbeReply{RIF: 1}},
		{"unknown fields ignored", `{"rif":1,"extra":true,"timestamp_ms":1700000000000}`, loadbalancer.ProbeOK,
			loadbalancer.ProbeReply{RIF: 1}},
		{"stale in the past", `{"rif":1,"timestamp_ms":1699999990000}`, loadbalancer.ProbeStale, loadbalancer.ProbeReply{}},
		{"stale in the future", `{"rif":1,"timestamp_ms":1700000010000}`, loadbalancer.ProbeStale, loadbalancer.ProbeReply{}},
		{"not json", `rif=3`, loadbalancer.ProbeMalformed, loadbalancer.ProbeReply{}},
		{"rif missing", `{"latency_median_ms":1}`, loadbalancer.ProbeMalformed, loadbalancer.ProbeReply{}},
		{"rif negative", `{"rif":-1}`, loadbalancer.ProbeMalformed, loadbalancer.ProbeReply{}},
		{"rif fractional", `{"rif":1.5}`, loadbalancer.ProbeMalformed, loadbalancer.ProbeReply{}},
		{"latency negative", `{"rif":1,"latency_median_ms":-3}`, loadbalancer.ProbeMalformed, loadbalancer.ProbeReply{}},
		{"latency wrong type", `{"rif":1,"latency_median_ms":"3"}`, loadbalancer.ProbeMalformed, loadbalancer.ProbeReply{}},
		{"trailing data", `{"rif":1} {}`, loadbalancer.ProbeMalformed, loadbalancer.ProbeReply{}},
		{"huge timestamp", `{"rif":1,"timestamp_ms":18446744073709551615}`, loadbalancer.ProbeMalformed, loadbalancer.ProbeReply{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, got := ParseReply([]byte(tt.body), t0, 5*time.Second)
			if got != tt.want || rep != tt.rep {
				t.Fatalf("ParseReply = %+v, %q; want %+v, %q", rep, got, tt.rep, tt.want)
			}
		})
	}
}

func FuzzParseReply(f *testing.F) {
	f.Add([]byte(`{"rif":3,"latency_median_ms":12.5,"timestamp_ms":1700000000000,"samples":9}`))
	f.Add([]byte(`{"rif":0,"latency_median_ms":null}`))
	f.Add([]byte(`{"rif":1e3}`))
	f.Add([]byte(`{"rif":1,"qps":11.111,"eps":0.000,"utilization":0.0000}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rep, out := ParseReply(body, t0, 5*time.Second)
		switch out {
		case loadbalancer.ProbeOK:
			if rep.RIF < 0 || rep.Latency < 0 || (!rep.LatencyKnown && rep.Latency != 0) ||
				rep.QPS < 0 || rep.EPS < 0 || !(rep.Utilization >= 0 && rep.Utilization <= 1) {
				t.Fatalf("accepted an invalid reply %+v from %q", rep, body)
			}
		case loadbalancer.ProbeMalformed, loadbalancer.ProbeStale:
			if rep != (loadbalancer.ProbeReply{}) {
				t.Fatalf("failure %q carries a reply %+v", out, rep)
			}
		default:
			t.Fatalf("unexpected outcome %q", out)
		}
	})
}

type collect chan Result

func (c collect) ProbeDone(_ string, r Result) { c <- r }

func probeServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestProber_Outcomes(t *testing.T) {
	now := time.Now()
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	cases := map[loadbalancer.ProbeOutcome]http.HandlerFunc{
		loadbalancer.ProbeOK: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != Path {
				http.NotFound(w, r)
				return
			}
			fmt.Fprintf(w, `{"rif":2,"latency_median_ms":4,"timestamp_ms":%d,"samples":3}`, now.UnixMilli())
		},
		loadbalancer.ProbeStatus:    func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) },
		loadbalancer.ProbeMalformed: func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"rif":`) },
		loadbalancer.ProbeStale: func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `{"rif":2,"latency_median_ms":4,"timestamp_ms":%d}`, now.Add(-time.Minute).UnixMilli())
		},
		loadbalancer.ProbeTimeout: func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-block:
			case <-r.Context().Done():
			}
		},
	}
	p, err := New(Config{Workers: 2, Timeout: 200 * time.Millisecond, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	for want, h := range cases {
		got := make(collect, 1)
		if !p.Enqueue(Job{Endpoint: probeServer(t, h), Target: got}) {
			t.Fatal("enqueue failed on an empty queue")
		}
		select {
		case r := <-got:
			if r.Outcome != want {
				t.Errorf("outcome %q, want %q", r.Outcome, want)
			}
			if want == loadbalancer.ProbeOK && (r.Reply.RIF != 2 || r.Reply.Latency != 4*time.Millisecond) {
				t.Errorf("reply %+v", r.Reply)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no result for %q", want)
		}
	}
	// A closed port is a connection failure, reported as a timeout.
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	if r := p.Probe(context.Background(), addr); r.Outcome != loadbalancer.ProbeTimeout {
		t.Errorf("closed port: outcome %q, want timeout", r.Outcome)
	}
}

func TestProber_EnqueueNeverBlocks(t *testing.T) {
	p, err := New(Config{Workers: 1, QueueSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	// No workers run: the third probe must be dropped, immediately.
	var ok int
	for range 3 {
		if p.Enqueue(Job{Endpoint: "127.0.0.1:1"}) {
			ok++
		}
	}
	if ok != 2 || p.QueueDepth() != 2 {
		t.Fatalf("accepted %d, depth %d; want 2 and 2", ok, p.QueueDepth())
	}
}

func TestNew_RejectsNegative(t *testing.T) {
	if _, err := New(Config{Workers: -1}); err == nil || !strings.Contains(err.Error(), "prober:") {
		t.Fatalf("err = %v", err)
	}
}

// deadlineCounter counts the deadlines set on a connection.
type deadlineCounter struct {
	net.Conn
	sets, last *atomic.Int64
}

func (d deadlineCounter) SetDeadline(t time.Time) error {
	d.sets.Add(1)
	d.last.Store(t.UnixNano())
	return d.Conn.SetDeadline(t)
}

// Every probe on a kept connection sets the deadline afresh, its timeout
// from when it started, and a probe that gets no answer times out.
func TestProber_EachProbeSetsItsDeadline(t *testing.T) {
	var sets atomic.Int64
	var last atomic.Int64 // the last deadline set, in Unix nanoseconds
	var d net.Dialer
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return deadlineCounter{Conn: c, sets: &sets, last: &last}, nil
	}
	const timeout = time.Hour
	p, err := New(Config{Workers: 1, Timeout: timeout, DialContext: dial})
	if err != nil {
		t.Fatal(err)
	}
	ep := probeServer(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"rif":1,"latency_median_ms":2,"timestamp_ms":%d}`, time.Now().UnixMilli())
	})
	const probes = 5
	for i := range probes {
		start := time.Now()
		if r := p.Probe(context.Background(), ep); r.Outcome != loadbalancer.ProbeOK {
			t.Fatalf("outcome %q", r.Outcome)
		}
		end := time.Now()
		if got := time.Unix(0, last.Load()); got.Before(start.Add(timeout)) || got.After(end.Add(timeout)) {
			t.Fatalf("probe %d: deadline %v after its start, want the %v timeout", i, got.Sub(start), timeout)
		}
		if sets.Load() != int64(i+1) {
			t.Fatalf("%d deadlines set for %d probes", sets.Load(), i+1)
		}
	}

	// A backend that never answers: the probe times out.
	block := make(chan struct{})
	defer close(block)
	silent := probeServer(t, func(w http.ResponseWriter, r *http.Request) { <-block })
	p2, err := New(Config{Workers: 1, Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r := p2.Probe(context.Background(), silent); r.Outcome != loadbalancer.ProbeTimeout || r.Duration < 50*time.Millisecond {
		t.Fatalf("a silent backend: %q after %v, want a timeout no sooner than 50ms", r.Outcome, r.Duration)
	}
}
