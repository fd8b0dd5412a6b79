package ingress

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/prequalbench/prequalbench/ingress/adminapi"
	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/internal/testbackend"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

func adminServer(t *testing.T, ing *Ingress, cfg AdminConfig) string {
	t.Helper()
	srv := httptest.NewServer(ing.Admin(cfg))
	t.Cleanup(srv.Close)
	return srv.URL
}

func do(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAdmin_Endpoints(t *testing.T) {
	be := testbackend.Start(t, "--service-time", "1ms")
	ing, url := newTestIngress(t, Options{},
		route.Spec{Key: "work", Path: "/", Algorithm: "prequal", Endpoints: []string{be.Addr}},
		route.Spec{Key: "other", Host: "other.test", Path: "/", Algorithm: "random", Endpoints: []string{be.Addr}})
	admin := adminServer(t, ing, AdminConfig{})
	c := adminapi.NewClient(admin, "")
	ctx := context.Background()
	for range 20 {
		get(t, url+"/work?iterations=1", "")
	}

	if err := c.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if code, body := do(t, "GET", admin+"/healthz", "", ""); code != 200 || body != "ok\n" {
		t.Fatalf("healthz %d %q", code, body)
	}
	routes, err := c.Routes(ctx)
	if err != nil || len(routes) != 2 || routes[1].Key != "work" || routes[1].Endpoints[0] != be.Addr {
		t.Fatalf("Routes = %+v, %v", routes, err)
	}
	st, err := c.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w := st.Routes[1]; w.Key != "work" || w.Policy.Picks != 20 || w.Policy.Endpoints[0].Picks != 20 || w.Requests != 20 {
		t.Fatalf("state of work: %+v", w)
	}
	if err := st.VerifyReset(); err == nil || !strings.Contains(err.Error(), `route "work"`) || !strings.Contains(err.Error(), "policy.picks = 20") {
		t.Fatalf("VerifyReset on a used state = %v", err)
	}

	// Algorithm: one route, then all.
	if err := c.SetAlgorithm(ctx, "work", "rr"); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.State(ctx); st.Routes[1].Algorithm != "round-robin" || st.Routes[0].Algorithm != "random" {
		t.Fatalf("algorithms after one-route switch: %s %s", st.Routes[0].Algorithm, st.Routes[1].Algorithm)
	}
	if err := c.SetAlgorithm(ctx, "", "least-request"); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.State(ctx); st.Routes[0].Algorithm != "least-request" || st.Routes[1].Algorithm != "least-request" {
		t.Fatalf("algorithms after all-route switch: %+v", st.Routes)
	}
	// The choice outlives a route update.
	ing.Update([]route.Spec{{Key: "work", Path: "/", Algorithm: "prequal", Endpoints: []string{be.Addr}}})
	if st, _ := c.State(ctx); st.Routes[0].Algorithm != "least-request" {
		t.Fatalf("admin choice lost on update: %s", st.Routes[0].Algorithm)
	}

	var he *adminapi.HTTPError
	err = c.SetAlgorithm(ctx, "work", "fastest")
	if !errors.As(err, &he) || he.StatusCode != 400 || !strings.Contains(he.Message, "prequal, round-robin") {
		t.Fatalf("unknown algorithm: %v", err)
	}
	err = c.SetAlgorithm(ctx, "nope", "prequal")
	if !errors.As(err, &he) || he.StatusCode != 404 || !strings.Contains(he.Message, `unknown route "nope"`) {
		t.Fatalf("unknown route: %v", err)
	}
	if _, err := c.Reset(ctx, "nope"); !errors.As(err, &he) || he.StatusCode != 404 {
		t.Fatalf("reset of unknown route: %v", err)
	}
	for _, body := range []string{"{", `{"algorithm":"rr","extra":1}`, `{"algorithm":"rr"} {}`, ""} {
		if code, msg := do(t, "POST", admin+"/admin/algorithm", "", body); code != 400 || !strings.Contains(msg, `"error"`) {
			t.Errorf("body %q: %d %s", body, code, msg)
		}
	}
	if code, _ := do(t, "GET", admin+"/admin/reset", "", ""); code != 405 {
		t.Errorf("GET /admin/reset = %d, want 405", code)
	}
	if code, _ := do(t, "GET", admin+"/debug/pprof/", "", ""); code != 404 {
		t.Errorf("pprof without --pprof = %d, want 404", code)
	}

	// Reset returns a clean state (empty body resets all routes).
	for range 5 {
		get(t, url+"/work?iterations=1", "")
	}
	code, body := do(t, "POST", admin+"/admin/reset", "", "")
	if code != 200 {
		t.Fatalf("reset %d %s", code, body)
	}
	rs, err := c.Reset(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.VerifyReset(); err != nil {
		t.Fatalf("VerifyReset after reset: %v", err)
	}
	if len(rs.Routes) != 1 || rs.Routes[0].Policy.PoolSize != 0 {
		t.Fatalf("reset state %+v", rs)
	}

	if code, body := do(t, "GET", admin+"/metrics", "", ""); code != 200 || !strings.Contains(body, "prequal_requests_total") {
		t.Fatalf("metrics %d", code)
	}
}

func TestAdmin_TokenAndReadiness(t *testing.T) {
	ing, err := New(Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	admin := adminServer(t, ing, AdminConfig{Token: "s3cret", Pprof: true})
	if code, _ := do(t, "GET", admin+"/readyz", "", ""); code != 503 {
		t.Fatalf("readyz before any routes = %d", code)
	}
	ing.Update(nil)
	if code, _ := do(t, "GET", admin+"/readyz", "", ""); code != 200 {
		t.Fatalf("readyz after routes = %d", code)
	}
	for _, p := range []string{"/admin/state", "/routes", "/metrics", "/debug/pprof/"} {
		if code, body := do(t, "GET", admin+p, "", ""); code != 401 || !strings.Contains(body, "bearer token") {
			t.Errorf("%s without token = %d %s", p, code, body)
		}
		if code, _ := do(t, "GET", admin+p, "wrong", ""); code != 401 {
			t.Errorf("%s with a wrong token = %d", p, code)
		}
		if code, _ := do(t, "GET", admin+p, "s3cret", ""); code != 200 {
			t.Errorf("%s with the token = %d", p, code)
		}
	}
	if _, err := adminapi.NewClient(admin, "s3cret").State(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, _ := do(t, "GET", admin+"/healthz", "", ""); code != 200 {
		t.Errorf("healthz needs no token, got %d", code)
	}
}

func FuzzAdminAlgorithm(f *testing.F) {
	ing, err := New(Options{Seed: 1})
	if err != nil {
		f.Fatal(err)
	}
	ing.Update([]route.Spec{{Key: "k", Path: "/", Endpoints: []string{"127.0.0.1:9"}}})
	h := ing.Admin(AdminConfig{})
	f.Add(`{"route":"k","algorithm":"rr"}`)
	f.Add(`{"algorithm":""}`)
	f.Add(`[1]`)
	f.Fuzz(func(t *testing.T, body string) {
		for _, p := range []string{"/admin/algorithm", "/admin/reset"} {
			w := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, p, strings.NewReader(body))
			req.Host = "127.0.0.1:8081"
			req.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(w, req)
			if w.Code != 200 && w.Code != 400 && w.Code != 404 {
				t.Fatalf("POST %s %q = %d", p, body, w.Code)
			}
		}
	})
}

// counterValue sums a metric family's counter or histogram-count values.
func metricTotal(t *testing.T, ing *Ingress, name string) (float64, bool) {
	t.Helper()
	mfs, err := ing.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var sum float64
		for _, m := range mf.Metric {
			sum += value(m)
		}
		return sum, true
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return 0
}

// TestMetrics_EveryCounterFires makes each series the reports rely on move.
func TestMetrics_EveryCounterFires(t *testing.T) {
	be := testbackend.Start(t, "--service-time", "1ms")
	be2 := testbackend.Start(t, "--service-time", "1ms")
	cfg := loadbalancer.DefaultConfig()
	ing, url := newTestIngress(t, Options{Policy: cfg},
		route.Spec{Key: "work", Path: "/", Algorithm: "prequal", Endpoints: []string{be.Addr, be2.Addr}},
		route.Spec{Key: "clash", Path: "/", Algorithm: "prequal", Endpoints: []string{be.Addr}, Origin: "z"},
	)
	// The first pick of an empty pool is a fallback (with two endpoints:
	// behind one there is no choice to fall back from).
	for range 10 {
		get(t, url+"/work?iterations=1", "")
	}
	// No route: after the update below only bench.local is routed.
	ing.ObserveReconcile("success", time.Millisecond)
	ing.ObserveReconcile("error", time.Millisecond)
	waitFor(t, "probe results", func() bool { v, _ := metricTotal(t, ing, "prequal_probes_sent_total"); return v > 0 })

	ing.Update([]route.Spec{{Key: "work", Host: "bench.local", Path: "/", Endpoints: []string{be.Addr}}})
	get(t, url+"/work", "elsewhere.test")

	for _, name := range []string{
		"prequal_requests_total", "prequal_request_duration_seconds", "prequal_selections_total",
		"prequal_fallbacks_total", "prequal_probes_sent_total", "prequal_probe_results_total",
		"prequal_probe_duration_seconds", "prequal_no_route_total", "prequal_reconciles_total",
		"prequal_reconcile_duration_seconds", "prequal_route_conflicts_total",
		"prequal_active_endpoints", "go_goroutines", "process_cpu_seconds_total",
	} {
		v, ok := metricTotal(t, ing, name)
		if !ok || v == 0 {
			t.Errorf("%s: present %v, value %v; want > 0", name, ok, v)
		}
	}
	for _, name := range []string{"prequal_pool_occupancy", "prequal_in_flight", "prequal_probe_queue_depth"} {
		if _, ok := metricTotal(t, ing, name); !ok {
			t.Errorf("%s missing", name)
		}
	}
}

// TestMetrics_DroppedProbes: with no prober workers running and a queue of
// one, the first query's probes to three replicas fill the queue with one
// and the other two are counted dropped.
func TestMetrics_DroppedProbes(t *testing.T) {
	var eps []string
	for range 3 {
		eps = append(eps, testbackend.Start(t, "--service-time", "1ms").Addr)
	}
	ing, err := New(Options{Seed: 1, ProbeQueueSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	ing.Update([]route.Spec{{Key: "work", Path: "/", Algorithm: "prequal", Endpoints: eps}})
	proxyURL := serveProxy(t, ing)
	for range 3 {
		resp, err := http.Get(proxyURL + "/work?iterations=1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	mfs, _ := ing.Registry().Gather()
	var dropped float64
	for _, mf := range mfs {
		if mf.GetName() != "prequal_probe_results_total" {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "outcome" && l.GetValue() == "dropped" {
					dropped += m.Counter.GetValue()
				}
			}
		}
	}
	if dropped < 2 {
		t.Fatalf("dropped probes counted %v, want >= 2", dropped)
	}
	if n := ing.State().Routes[0].Policy.ProbeOutcomes[loadbalancer.ProbeDropped]; n < 2 {
		t.Fatalf("policy saw %d dropped probes, want >= 2", n)
	}
	if d := ing.State().ProbeQueueDepth; d != 1 {
		t.Fatalf("queue depth %d, want 1", d)
	}
}

type staticSource struct{ specs []route.Spec }

func (s staticSource) Run(ctx context.Context, sink route.Sink) error {
	sink.Update(s.specs)
	<-ctx.Done()
	return nil
}
func (staticSource) Synced() bool { return true }

func TestServe_GracefulShutdownFinishesInFlight(t *testing.T) {
	be := testbackend.Start(t, "--service-time", "400ms")
	ing, err := New(Options{Seed: 1, DefaultAlgorithm: "round-robin"})
	if err != nil {
		t.Fatal(err)
	}
	addrFile := filepath.Join(t.TempDir(), "addrs.json")
	started := make(chan [2]string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ing, ServeConfig{
			Source: staticSource{[]route.Spec{{Key: "w", Path: "/", Endpoints: []string{be.Addr}}}},
			Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", AddrFile: addrFile,
			ShutdownTimeout: 10 * time.Second,
			Started:         func(p, a string) { started <- [2]string{p, a} },
		})
	}()
	addrs := <-started
	data, err := os.ReadFile(addrFile)
	if err != nil || !strings.Contains(string(data), addrs[0]) || !strings.Contains(string(data), addrs[1]) {
		t.Fatalf("addr file %q, %v", data, err)
	}
	waitFor(t, "ready", func() bool { return adminapi.NewClient("http://"+addrs[1], "").Ready(context.Background()) == nil })

	res := make(chan int, 1)
	go func() {
		resp, err := http.Get("http://" + addrs[0] + "/work")
		if err != nil {
			res <- -1
			return
		}
		resp.Body.Close()
		res <- resp.StatusCode
	}()
	waitFor(t, "request in flight", func() bool { return ing.State().Routes[0].Policy.Endpoints[0].InFlight == 1 })
	cancel()
	if code := <-res; code != 200 {
		t.Fatalf("in-flight request got %d, want 200", code)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve = %v", err)
	}
}

func TestServe_NonLoopbackAdminNeedsToken(t *testing.T) {
	ing, _ := New(Options{Seed: 1})
	err := Serve(context.Background(), ing, ServeConfig{Source: staticSource{}, Listen: "127.0.0.1:0", AdminListen: "0.0.0.0:0"})
	if err == nil || !strings.Contains(err.Error(), "admin token") {
		t.Fatalf("Serve = %v", err)
	}
}

// adminRequest sends a POST to the admin API with the given headers.
func adminRequest(t *testing.T, url, host, contentType, origin, token, body string) (int, string) {
	t.Helper()
	return adminRequestAs(t, http.MethodPost, url, host, contentType, origin, token, body)
}

// adminRequestAs sends method to the admin API with the given headers.
func adminRequestAs(t *testing.T, method, url, host, contentType, origin, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Host = host
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// What a web page in a local browser can send must not change the ingress:
// a cross-site "simple" POST (text/plain, no preflight) and, through DNS
// rebinding, a same-origin JSON POST whose Host is the attacker's name.
func TestAdmin_RefusesCrossSiteStateChanges(t *testing.T) {
	ing, err := New(Options{Seed: 1, DefaultAlgorithm: "random"})
	if err != nil {
		t.Fatal(err)
	}
	ing.Update([]route.Spec{{Key: "k", Path: "/", Endpoints: []string{"127.0.0.1:9"}}})
	admin := adminServer(t, ing, AdminConfig{})
	port := strings.TrimPrefix(admin[strings.LastIndex(admin, ":"):], ":")
	algo := func() string { return ing.State().Routes[0].Algorithm }
	const body = `{"algorithm":"round-robin"}`

	refused := []struct {
		name, host, contentType, origin string
		code                            int
	}{
		{"the CSRF request of issue 15", "evil.example", "text/plain", "http://evil.example", http.StatusUnsupportedMediaType},
		{"text/plain to a loopback Host", "127.0.0.1:" + port, "text/plain;charset=UTF-8", "http://evil.example", http.StatusUnsupportedMediaType},
		{"form", "127.0.0.1:" + port, "application/x-www-form-urlencoded", "", http.StatusUnsupportedMediaType},
		{"no Content-Type", "127.0.0.1:" + port, "", "", http.StatusUnsupportedMediaType},
		{"DNS rebinding: JSON to a rebound name", "evil.example:" + port, "application/json", "http://evil.example:" + port, http.StatusForbidden},
		{"DNS rebinding without port", "evil.example", "application/json", "", http.StatusForbidden},
		{"a subdomain of localhost", "a.localhost.evil.example", "application/json", "", http.StatusForbidden},
	}
	for _, tt := range refused {
		for _, p := range []string{"/admin/algorithm", "/admin/reset"} {
			code, msg := adminRequest(t, admin+p, tt.host, tt.contentType, tt.origin, "", body)
			if code != tt.code || !strings.Contains(msg, `"error"`) {
				t.Errorf("%s: POST %s = %d %s, want %d", tt.name, p, code, msg, tt.code)
			}
		}
		if a := algo(); a != "random" {
			t.Fatalf("%s changed the algorithm to %s", tt.name, a)
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "[::1]:" + port, "10.1.2.3:8081", "[fd00::1]"} {
		if code, msg := adminRequest(t, admin+"/admin/algorithm", host, "application/json; charset=utf-8", "", "", `{"algorithm":"p2c"}`); code != 200 {
			t.Fatalf("Host %s: %d %s, want 200", host, code, msg)
		}
	}
	if a := algo(); a != "p2c" {
		t.Fatalf("algorithm %s after allowed requests, want p2c", a)
	}
}

// A valid token proves a real client: any Host is accepted, but the body
// must still be JSON.
func TestAdmin_TokenLiftsTheHostRule(t *testing.T) {
	ing, err := New(Options{Seed: 1, DefaultAlgorithm: "random"})
	if err != nil {
		t.Fatal(err)
	}
	ing.Update([]route.Spec{{Key: "k", Path: "/", Endpoints: []string{"127.0.0.1:9"}}})
	admin := adminServer(t, ing, AdminConfig{Token: "s3cret"})
	if code, msg := adminRequest(t, admin+"/admin/algorithm", "ingress.prequalbench.svc:8081", "application/json", "", "s3cret", `{"algorithm":"p2c"}`); code != 200 {
		t.Fatalf("token and a DNS Host: %d %s", code, msg)
	}
	if code, _ := adminRequest(t, admin+"/admin/algorithm", "ingress.prequalbench.svc:8081", "text/plain", "", "s3cret", `{"algorithm":"rr"}`); code != http.StatusUnsupportedMediaType {
		t.Fatalf("token and text/plain: %d, want 415", code)
	}
	if code, _ := adminRequest(t, admin+"/admin/algorithm", "evil.example", "application/json", "", "", `{"algorithm":"rr"}`); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", code)
	}
	if a := ing.State().Routes[0].Algorithm; a != "p2c" {
		t.Fatalf("algorithm %s, want p2c", a)
	}
}

// Reads name endpoint addresses and route keys, so a page of a rebound DNS
// name must not read them either; loopback, IP literals and a token may.
func TestAdmin_ReadsRefuseRebindingHosts(t *testing.T) {
	ing, err := New(Options{Seed: 1, DefaultAlgorithm: "random"})
	if err != nil {
		t.Fatal(err)
	}
	ing.Update([]route.Spec{{Key: "k", Path: "/", Endpoints: []string{"127.0.0.1:9"}}})
	get := func(url, host, token string) int {
		t.Helper()
		code, _ := adminRequestAs(t, http.MethodGet, url, host, "", "", token, "")
		return code
	}
	open := adminServer(t, ing, AdminConfig{Pprof: true})
	withToken := adminServer(t, ing, AdminConfig{Token: "s3cret", Pprof: true})
	for _, p := range []string{"/admin/state", "/routes", "/metrics", "/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/symbol", "/debug/pprof/heap"} {
		if code := get(open+p, "evil.example", ""); code != http.StatusForbidden {
			t.Errorf("GET %s with Host evil.example: %d, want 403", p, code)
		}
		if code := get(open+p, "127.0.0.1", ""); code != http.StatusOK {
			t.Errorf("GET %s with a loopback Host: %d, want 200", p, code)
		}
		if code := get(withToken+p, "ingress.prequalbench.svc:8081", "s3cret"); code != http.StatusOK {
			t.Errorf("GET %s with a token and a DNS Host: %d, want 200", p, code)
		}
	}
	// Health checks stay open: kubelet probes need no token; Prometheus
	// scrapes by pod IP, an IP literal.
	if code := get(open+"/healthz", "evil.example", ""); code != http.StatusOK {
		t.Errorf("GET /healthz: %d, want 200", code)
	}
}
