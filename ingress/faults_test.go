package ingress

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/internal/testbackend"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

// With 1 of 3 endpoints refusing connections, no client sees a 502 under
// any policy with default settings: the dial error is retried on another
// endpoint (picked directly: least-request asked again would pick the
// refusing, idle endpoint again), and error aversion and ejection then keep
// it out.
func TestFaults_RefusingEndpointGivesNo502(t *testing.T) {
	a := testbackend.Start(t, "--service-time", "1ms")
	b := testbackend.Start(t, "--service-time", "1ms")
	dead := closedAddr(t)
	for _, algo := range loadbalancer.Names() {
		t.Run(algo, func(t *testing.T) {
			ing, url := newTestIngress(t, Options{DefaultAlgorithm: algo},
				route.Spec{Key: "r", Path: "/", Endpoints: []string{dead, a.Addr, b.Addr}})
			bad := 0
			for range 60 {
				if code, _, _ := get(t, url+"/work?iterations=10", ""); code != 200 {
					bad++
				}
			}
			if bad != 0 {
				t.Fatalf("%s: %d of 60 requests failed", algo, bad)
			}
			// A synchronous prober's failed probe keeps the refusing
			// endpoint out of the pick itself; the others must meet it.
			if picks := policyStats(t, ing, "r").Endpoints[0].Picks; picks == 0 && !loadbalancer.CapsOf(algo).Sync {
				t.Fatalf("%s: the refusing endpoint was never picked: the test did not exercise the retry", algo)
			}
		})
	}
}

// With --retry, an idempotent request whose connection was accepted and
// then dropped before any response is retried elsewhere; without it, not.
func TestFaults_WiderRetryOnDroppedConnection(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close() // accepted, nothing answered
		}
	}()
	live := testbackend.Start(t, "--service-time", "1ms")
	for _, retry := range []bool{false, true} {
		_, url := newTestIngress(t, Options{Retry: retry, DefaultAlgorithm: "round-robin", Outlier: OutlierConfig{Disabled: true}},
			route.Spec{Key: "r", Path: "/", Endpoints: []string{l.Addr().String(), live.Addr}})
		bad := 0
		for range 4 { // round-robin: two of them go to the dropping endpoint first
			if code, _, _ := get(t, url+"/work?iterations=10", ""); code != 200 {
				bad++
			}
		}
		if retry && bad != 0 {
			t.Errorf("retry on: %d of 4 failed", bad)
		}
		if !retry && bad == 0 {
			t.Errorf("retry off: no request failed, so the dropping endpoint was never tried")
		}
	}
}

// A fail-fast endpoint is ejected after 5 failures in a row, shows in the
// admin state and the metrics, gets no picks while ejected, and returns
// after its time.
func TestFaults_EjectionInStateMetricsAndReturn(t *testing.T) {
	faulty := testbackend.Start(t, "--work-fault", "fail_fast")
	a := testbackend.Start(t, "--service-time", "1ms")
	b := testbackend.Start(t, "--service-time", "1ms")
	ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin", Outlier: OutlierConfig{BaseEjection: 500 * time.Millisecond}},
		route.Spec{Key: "r", Path: "/", Endpoints: []string{faulty.Addr, a.Addr, b.Addr}})
	var ejectedAt time.Time
	for range 40 {
		get(t, url+"/work?iterations=10", "")
		if o := ing.State().Routes[0].Outliers; len(o.Ejected) > 0 {
			ejectedAt = time.Now()
			if o.Ejected[0].Address != faulty.Addr || o.Ejected[0].Reason != "consecutive" || o.Ejections["consecutive"] != 1 {
				t.Fatalf("outlier state %+v, want %s ejected for consecutive failures", o, faulty.Addr)
			}
			break
		}
	}
	if ejectedAt.IsZero() {
		t.Fatalf("fail-fast endpoint not ejected after 40 requests: %+v", ing.State().Routes[0].Outliers)
	}
	if v := metricValue(t, ing, "prequal_outlier_ejections_total", "reason", "consecutive"); v != 1 {
		t.Fatalf("prequal_outlier_ejections_total{reason=consecutive} = %v, want 1", v)
	}
	before := policyStats(t, ing, "r").Endpoints[0].Picks
	for range 10 {
		get(t, url+"/work?iterations=10", "")
	}
	st := ing.State().Routes[0]
	if len(st.Outliers.Ejected) > 0 && st.Policy.Endpoints[0].Picks != before {
		t.Fatalf("the ejected endpoint got %d picks while ejected", st.Policy.Endpoints[0].Picks-before)
	}
	waitFor(t, "the ejected endpoint's return", func() bool { return ing.State().Routes[0].Outliers.Returns == 1 })
	if v := metricValue(t, ing, "prequal_outlier_returns_total", "", ""); v != 1 {
		t.Fatalf("prequal_outlier_returns_total = %v, want 1", v)
	}
	// An admin reset returns every endpoint and zeroes the counters.
	s, err := ing.Reset("")
	if err != nil {
		t.Fatal(err)
	}
	if o := s.Routes[0].Outliers; len(o.Ejected) != 0 || o.Returns != 0 || o.Ejections["consecutive"] != 0 {
		t.Fatalf("outlier state after reset %+v", o)
	}
}

// metricValue sums a counter's series of the ingress's registry, optionally
// only those with label = value.
func metricValue(t *testing.T, ing *Ingress, name, label, value string) float64 {
	t.Helper()
	mfs, err := ing.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.Metric {
			if label != "" {
				for _, l := range m.Label {
					if l.GetName() == label && l.GetValue() != value {
						continue series
					}
				}
			}
			sum += m.Counter.GetValue()
		}
	}
	return sum
}

// Route level, virtual time: an ejected endpoint gets no pick until its
// time even after the policy's own error aversion has worn off, and picks
// again after it. (Aversion wears off after about 0.45 s; the ejection
// here lasts 3 s.)
func TestFaults_EjectedEndpointGetsNoPicksUntilItsTime(t *testing.T) {
	ing, err := New(Options{DefaultAlgorithm: "round-robin", Seed: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Outlier: OutlierConfig{BaseEjection: 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	eps := []string{"127.0.0.1:4001", "127.0.0.1:4002", "127.0.0.1:4003"}
	ing.Update([]route.Spec{{Key: "r", Path: "/", Endpoints: eps}})
	rs := ing.table.Load().byKey["r"]
	t0 := time.Unix(1_700_000_000, 0)
	now := t0
	for fails := 0; fails < 5; {
		pol, p, err := rs.pick(now)
		if err != nil {
			t.Fatal(err)
		}
		status := 200
		if p.Endpoint == eps[0] {
			status, fails = 500, fails+1
		}
		rs.attemptDone(pol, p, time.Millisecond, status, now)
		now = now.Add(time.Millisecond)
	}
	picksOf := func(from, to time.Duration) int {
		n := 0
		for at := t0.Add(from); at.Before(t0.Add(to)); at = at.Add(10 * time.Millisecond) {
			pol, p, err := rs.pick(at)
			if err != nil {
				t.Fatal(err)
			}
			if p.Endpoint == eps[0] {
				n++
			}
			rs.attemptDone(pol, p, time.Millisecond, 200, at)
		}
		return n
	}
	if n := picksOf(time.Second, 2900*time.Millisecond); n != 0 {
		t.Fatalf("the ejected endpoint got %d picks during its ejection", n)
	}
	if n := picksOf(3100*time.Millisecond, 4*time.Second); n == 0 {
		t.Fatalf("the endpoint got no pick after its ejection ended")
	}
	rs.mu.Lock()
	o := rs.outliers.state()
	rs.mu.Unlock()
	if o.Returns != 1 || o.Ejections["consecutive"] != 1 {
		t.Fatalf("outlier state %+v, want 1 ejection and 1 return", o)
	}
}
