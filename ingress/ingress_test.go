package ingress

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress/internal/h1"
	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/internal/testbackend"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

const deadline = 15 * time.Second

// newTestIngress builds an ingress, starts its prober and serves its proxy on
// a loopback httptest server.
func newTestIngress(t *testing.T, opts Options, specs ...route.Spec) (*Ingress, string) {
	t.Helper()
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ing, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ing.Update(specs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ing.Run(ctx) }()
	url := serveProxy(t, ing)
	t.Cleanup(func() { cancel(); <-done })
	return ing, url
}

// serveProxy serves ing's data plane on a loopback listener until the test
// ends (ingresstest.Serve, which this package's tests cannot import).
func serveProxy(t testing.TB, ing *Ingress) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := ing.ProxyServer()
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ing.ProxyListener(l)) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		l.Close()
		<-served
	})
	return "http://" + l.Addr().String()
}

func get(t *testing.T, url, host string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	c := &http.Client{Timeout: deadline}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func policyStats(t *testing.T, ing *Ingress, key string) loadbalancer.Stats {
	t.Helper()
	for _, r := range ing.State().Routes {
		if r.Key == key {
			return r.Policy
		}
	}
	t.Fatalf("route %q not in state", key)
	return loadbalancer.Stats{}
}

// closedAddr returns a loopback address nobody listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestProxy_SpreadsPicksOverRealBackends(t *testing.T) {
	var eps []string
	for range 3 {
		eps = append(eps, testbackend.Start(t, "--service-time", "1ms").Addr)
	}
	for _, algo := range []string{"prequal", "round-robin"} {
		t.Run(algo, func(t *testing.T) {
			ing, url := newTestIngress(t, Options{}, route.Spec{Key: "work", Path: "/work", PathType: route.PathPrefix, Algorithm: algo, Endpoints: eps})
			for range 60 {
				if code, body, _ := get(t, url+"/work?iterations=100", ""); code != 200 || !strings.Contains(body, "duration_ms") {
					t.Fatalf("status %d body %q", code, body)
				}
			}
			st := policyStats(t, ing, "work")
			if st.Picks != 60 {
				t.Fatalf("picks %d, want 60", st.Picks)
			}
			for _, e := range st.Endpoints {
				if e.Picks == 0 {
					t.Errorf("endpoint %s never picked: %+v", e.Address, st.Endpoints)
				}
				if e.InFlight != 0 {
					t.Errorf("endpoint %s in flight %d after all requests finished", e.Address, e.InFlight)
				}
			}
			if algo == "prequal" {
				waitFor(t, "probe answers", func() bool { return policyStats(t, ing, "work").ProbeOutcomes[loadbalancer.ProbeOK] > 0 })
			} else if n := st.ProbesPlanned; n != 0 {
				t.Fatalf("round-robin planned %d probes, want none", n)
			}
		})
	}
}

func TestProxy_StatusBodies(t *testing.T) {
	hang := testbackend.Start(t, "--work-fault", "hang")
	dead := closedAddr(t)
	ing, url := newTestIngress(t, Options{UpstreamTimeout: 300 * time.Millisecond, DefaultAlgorithm: "round-robin"},
		route.Spec{Key: "empty", Path: "/empty", PathType: route.PathPrefix, Endpoints: nil},
		route.Spec{Key: "dead", Path: "/dead", PathType: route.PathPrefix, Endpoints: []string{dead}},
		route.Spec{Key: "hang", Path: "/work", PathType: route.PathPrefix, Endpoints: []string{hang.Addr}},
	)
	tests := []struct {
		path string
		code int
		body string
	}{
		{"/nowhere", 404, "no route for host"},
		{"/empty", 503, "503 Service Unavailable\n"},
		{"/dead/x", 502, "502 Bad Gateway\n"},
		{"/work", 504, "504 Gateway Timeout\n"},
	}
	for _, tt := range tests {
		code, body, h := get(t, url+tt.path, "")
		if code != tt.code || !strings.Contains(body, tt.body) {
			t.Errorf("GET %s = %d %q, want %d containing %q", tt.path, code, body, tt.code, tt.body)
		}
		// Generic answers: no route key, endpoint address or error text.
		for _, secret := range []string{"empty", "dead", "hang", dead, hang.Addr, "dial", "refused"} {
			if tt.code != 404 && strings.Contains(body, secret) {
				t.Errorf("GET %s body %q reveals %q", tt.path, body, secret)
			}
		}
		if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Errorf("GET %s Content-Type %q", tt.path, ct)
		}
	}
	s := ing.State()
	counts := map[string][2]uint64{}
	for _, r := range s.Routes {
		counts[r.Key] = [2]uint64{r.NoEndpoint, r.UpstreamErrors}
	}
	if counts["empty"] != [2]uint64{1, 0} || counts["dead"] != [2]uint64{0, 1} || counts["hang"] != [2]uint64{0, 1} {
		t.Fatalf("no-endpoint/upstream-error counters %v", counts)
	}
	// The details the body leaves out are in the metrics.
	if got := upstreamErrorKinds(t, ing); got["dead/failed"] != 1 || got["hang/timeout"] != 1 {
		t.Fatalf("prequal_upstream_errors_total %v, want dead/failed 1 and hang/timeout 1", got)
	}
}

// upstreamErrorKinds reads prequal_upstream_errors_total as "route/kind" -> value.
func upstreamErrorKinds(t *testing.T, ing *Ingress) map[string]float64 {
	t.Helper()
	mfs, err := ing.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "prequal_upstream_errors_total" {
			continue
		}
		for _, m := range mf.Metric {
			var r, k string
			for _, l := range m.Label {
				switch l.GetName() {
				case "route":
					r = l.GetValue()
				case "kind":
					k = l.GetValue()
				}
			}
			if v := m.Counter.GetValue(); v != 0 {
				out[r+"/"+k] = v
			}
		}
	}
	return out
}

// The client's claims about its address (X-Forwarded-For, X-Real-IP) pass
// only from a trusted proxy; from anyone else both name the peer.
func TestProxy_ForwardedHeadersAndHost(t *testing.T) {
	seen := make(chan http.Header, 1)
	hostSeen := make(chan string, 1)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		hostSeen <- r.Host
	}))
	defer be.Close()
	spec := route.Spec{Key: "h", Host: "bench.local", Path: "/", Endpoints: []string{strings.TrimPrefix(be.URL, "http://")}}
	tests := []struct {
		name        string
		trusted     []netip.Prefix
		xff, realIP string
		sendRealIP  bool // else the client sends a longer chain
	}{
		{"untrusted peer", nil, "127.0.0.1", "127.0.0.1", true},
		{"other proxies trusted", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, "127.0.0.1", "127.0.0.1", true},
		{"trusted peer", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, "203.0.113.7, 127.0.0.1", "203.0.113.9", true},
		{"trusted peer without X-Real-IP", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8")},
			"203.0.113.7, 10.0.0.1, 127.0.0.1", "203.0.113.7", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, url := newTestIngress(t, Options{DefaultAlgorithm: "random", TrustedProxies: tt.trusted}, spec)
			req, _ := http.NewRequest(http.MethodGet, url+"/a", nil)
			req.Host = "bench.local:8080"
			req.Header.Set("X-Forwarded-For", "203.0.113.7")
			if tt.sendRealIP {
				req.Header.Set("X-Real-IP", "203.0.113.9")
			} else {
				req.Header.Set("X-Forwarded-For", "203.0.113.7, 10.0.0.1")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			h := <-seen
			if got := h.Get("X-Forwarded-For"); got != tt.xff {
				t.Errorf("X-Forwarded-For %q, want %q", got, tt.xff)
			}
			if got := h.Values("X-Real-IP"); len(got) != 1 || got[0] != tt.realIP {
				t.Errorf("X-Real-IP %q, want %q", got, tt.realIP)
			}
			if got := h.Get("X-Forwarded-Host"); got != "bench.local:8080" {
				t.Errorf("X-Forwarded-Host %q", got)
			}
			if got := h.Get("X-Forwarded-Proto"); got != "http" {
				t.Errorf("X-Forwarded-Proto %q", got)
			}
			if got := <-hostSeen; got != "bench.local:8080" {
				t.Errorf("backend saw Host %q, want the client's", got)
			}
		})
	}
}

// A dial error (nothing was sent) is retried once on another endpoint by
// default, with or without --retry, with a body too (bodies are in memory).
func TestProxy_RetryOnConnectionFailure(t *testing.T) {
	live := testbackend.Start(t, "--service-time", "1ms")
	dead := closedAddr(t)
	for _, retry := range []bool{true, false} {
		t.Run(fmt.Sprint("retry=", retry), func(t *testing.T) {
			ing, url := newTestIngress(t, Options{Retry: retry, DefaultAlgorithm: "round-robin"},
				route.Spec{Key: "r", Path: "/", Endpoints: []string{dead, live.Addr}})
			var fails int
			for range 10 {
				if code, _, _ := get(t, url+"/work?iterations=10", ""); code != 200 {
					fails++
				}
			}
			if fails != 0 {
				t.Fatalf("%d of 10 failed", fails)
			}
			if picks := policyStats(t, ing, "r").Endpoints[0].Picks; picks == 0 {
				t.Fatal("the dead endpoint was never picked: the retry was not exercised")
			}
		})
	}
	// Two POSTs with a body under round-robin: one goes to the dead
	// endpoint and is retried on the live one with its body intact.
	ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"},
		route.Spec{Key: "r", Path: "/", Endpoints: []string{dead, live.Addr}})
	for range 2 {
		resp, err := http.Post(url+"/work", "application/json", strings.NewReader(`{"iterations":1}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST status %d (%s), want 200 after the retry", resp.StatusCode, body)
		}
	}
	if picks := policyStats(t, ing, "r").Endpoints[0].Picks; picks == 0 {
		t.Fatal("the dead endpoint was never picked: the retry was not exercised")
	}
	if s := ing.State(); s.Routes[0].UpstreamErrors != 0 {
		t.Fatalf("%d upstream errors for 2 POSTs retried after a failed dial, want 0", s.Routes[0].UpstreamErrors)
	}
}

// With one endpoint there is nowhere to retry: the failed request is one
// pick and one error, not a string of discarded picks charged to it.
func TestProxy_RetryWithOneEndpointChargesOnce(t *testing.T) {
	ing, url := newTestIngress(t, Options{Retry: true, DefaultAlgorithm: "round-robin"},
		route.Spec{Key: "r", Path: "/", Endpoints: []string{closedAddr(t)}})
	for range 5 {
		if code, _, _ := get(t, url+"/work", ""); code != http.StatusBadGateway {
			t.Fatalf("status %d, want 502", code)
		}
	}
	ep := ing.State().Routes[0].Policy.Endpoints[0]
	if ep.Picks != 5 || ep.Errors != 5 || ep.InFlight != 0 {
		t.Fatalf("endpoint %+v, want 5 picks, 5 errors, 0 in flight", ep)
	}
}

func TestProber_FailureReasonsFromBackendFaults(t *testing.T) {
	faults := map[string]loadbalancer.ProbeOutcome{
		"timeout": loadbalancer.ProbeTimeout, "500": loadbalancer.ProbeStatus,
		"malformed": loadbalancer.ProbeMalformed, "stale_timestamp": loadbalancer.ProbeStale,
	}
	var specs []route.Spec
	for fault := range faults {
		b := testbackend.Start(t, "--probe-fault", fault, "--fault-timeout", "2s", "--service-time", "1ms")
		specs = append(specs, route.Spec{Key: fault, Host: strings.ReplaceAll(fault, "_", "-") + ".test", Path: "/", Algorithm: "prequal", Endpoints: []string{b.Addr}})
	}
	ing, url := newTestIngress(t, Options{ProbeTimeout: 100 * time.Millisecond}, specs...)
	for fault, want := range faults {
		code, _, _ := get(t, url+"/work?iterations=10", strings.ReplaceAll(fault, "_", "-")+".test")
		if code != 200 {
			t.Fatalf("%s: status %d", fault, code)
		}
		waitFor(t, fault+" outcome", func() bool { return policyStats(t, ing, fault).ProbeOutcomes[want] > 0 })
		if n := policyStats(t, ing, fault).ProbeOutcomes[loadbalancer.ProbeOK]; n != 0 {
			t.Errorf("%s: %d probes counted ok", fault, n)
		}
	}
}

func TestUpdate_KeepsPoolsOfSurvivingRoutes(t *testing.T) {
	b1 := testbackend.Start(t)
	b2 := testbackend.Start(t)
	ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"},
		route.Spec{Key: "a", Host: "a.test", Path: "/", Endpoints: []string{b1.Addr}},
		route.Spec{Key: "b", Host: "b.test", Path: "/", Endpoints: []string{b1.Addr}})
	for range 3 {
		if code, _, _ := get(t, url+"/work?iterations=1", "a.test"); code != 200 {
			t.Fatalf("status %d", code)
		}
	}
	ing.Update([]route.Spec{{Key: "a", Host: "a.test", Path: "/", Endpoints: []string{b1.Addr, b2.Addr}}})
	st := policyStats(t, ing, "a")
	if st.Picks != 3 || len(st.Endpoints) != 2 {
		t.Fatalf("route a after update: %+v", st)
	}
	if code, _, _ := get(t, url+"/work", "b.test"); code != 404 {
		t.Fatalf("removed route b answers %d", code)
	}
}

func TestNew_RejectsBadOptions(t *testing.T) {
	if _, err := New(Options{DefaultAlgorithm: "fastest"}); err == nil || !strings.Contains(err.Error(), "prequal") {
		t.Fatalf("err = %v, want it to list the algorithms", err)
	}
	cfg := loadbalancer.DefaultConfig()
	cfg.Prequal.PoolSize = 0
	if _, err := New(Options{Policy: cfg}); err == nil || !strings.Contains(err.Error(), "PoolSize") {
		t.Fatalf("err = %v", err)
	}
}

// BenchmarkProxy measures the proxy path in process: router, policy,
// upstream connection pool, header rewriting and metrics, from a parsed
// request to the answer read from the backend. The backend is the data
// plane's own server answering {}, which allocates nothing per request,
// so allocs/op are the proxy's own.
func BenchmarkProxy(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	be := &h1.Server{Handler: func(x *h1.Exchange) { x.Resp.Text(200, "{}") }}
	go func() { _ = be.Serve(l) }()
	defer be.Shutdown(context.Background())
	for _, algo := range []string{"round-robin", "prequal"} {
		b.Run(algo, func(b *testing.B) {
			ing, err := New(Options{Seed: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			ing.Update([]route.Spec{{Key: "w", Host: "bench.local", Path: "/work", Algorithm: algo, Endpoints: []string{l.Addr().String()}}})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { _ = ing.Run(ctx) }()
			x := parsedExchange(b, "GET /work HTTP/1.1\r\nHost: bench.local\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				ing.serve(x)
				if code := x.Resp.Code; code != 200 {
					b.Fatalf("status %d: %s", code, x.Resp.Body)
				}
			}
		})
	}
}

// parsedExchange is an exchange holding raw, a request read whole as the
// server reads it, from a client at 127.0.0.1:5555.
func parsedExchange(t testing.TB, raw string) *h1.Exchange {
	t.Helper()
	x := &h1.Exchange{Remote: netip.MustParseAddrPort("127.0.0.1:5555")}
	br := h1.NewReader(strings.NewReader(raw), 16<<10)
	if err := br.ReadRequestHead(&x.Req); err != nil {
		t.Fatalf("parse %q: %v", raw, err)
	}
	if err := br.ReadRequestBody(&x.Req, 1<<20); err != nil {
		t.Fatalf("parse %q: %v", raw, err)
	}
	return x
}

// TestOptions_DialContextServesProxyAndProber maps a documentation address
// (192.0.2.0/24, never routed) to a loopback backend: both the proxied
// requests and the probes must go through the injected dialer.
func TestOptions_DialContextServesProxyAndProber(t *testing.T) {
	be := testbackend.Start(t, "--service-time", "1ms")
	const fake = "192.0.2.10:8080"
	var d net.Dialer
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != fake {
			return nil, fmt.Errorf("test dialer: unexpected address %s", addr)
		}
		return d.DialContext(ctx, network, be.Addr)
	}
	ing, url := newTestIngress(t, Options{DialContext: dial},
		route.Spec{Key: "w", Path: "/", Algorithm: "prequal", Endpoints: []string{fake}})
	for range 5 {
		if code, _, _ := get(t, url+"/work?iterations=1", ""); code != 200 {
			t.Fatalf("status %d", code)
		}
	}
	waitFor(t, "a probe answered through the dialer", func() bool {
		return policyStats(t, ing, "w").ProbeOutcomes[loadbalancer.ProbeOK] > 0
	})
}
