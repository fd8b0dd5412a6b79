package ingress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress/internal/h1"
	"github.com/prequalbench/prequalbench/ingress/route"
)

// rawRequest sends request bytes as they are (no client-side cleaning or
// escaping) and reads one response.
func rawRequest(t *testing.T, addr, request string) (*http.Response, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, deadline)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(deadline))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", request, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// pathRecorder is a backend that records the request target it received.
func pathRecorder(t *testing.T) (string, func() []string) {
	var mu sync.Mutex
	var got []string
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.RequestURI)
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(be.Close)
	return strings.TrimPrefix(be.URL, "http://"), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// The router matches the cleaned path, the backend gets the raw one: a path
// whose two readings differ must never be forwarded.
func TestProxy_RejectsPathsNotForwardedAsMatched(t *testing.T) {
	appAddr, appGot := pathRecorder(t)
	secretAddr, secretGot := pathRecorder(t)
	ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"},
		route.Spec{Key: "app", Path: "/app", PathType: route.PathPrefix, Endpoints: []string{appAddr}},
		route.Spec{Key: "secret", Path: "/secret", PathType: route.PathPrefix, Endpoints: []string{secretAddr}})
	addr := strings.TrimPrefix(url, "http://")
	for _, target := range []string{
		"/secret/..%2Fapp", "/secret/..%2fapp", "/secret/../app", "/secret/%2e%2e/app", "/secret/%2E%2E%2Fapp",
		"/secret/./../app", "/secret/..", "/app/.", "/app//x", "//app", "/app/x%5C..%5Csecret", "/app/x%5c", "/app\\..\\secret",
	} {
		resp, body := rawRequest(t, addr, "GET "+target+" HTTP/1.1\r\nHost: bench.local\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "400") {
			t.Errorf("GET %s = %d %q, want 400", target, resp.StatusCode, body)
		}
	}
	if a, s := appGot(), secretGot(); len(a)+len(s) != 0 {
		t.Fatalf("rejected paths reached backends: app %q, secret %q", a, s)
	}
	// Clean paths, encoded or not, reach the backend byte for byte.
	for _, target := range []string{"/app/x%20y", "/app/a.b/..c/...", "/app/", "/app?q=/../secret"} {
		resp, body := rawRequest(t, addr, "GET "+target+" HTTP/1.1\r\nHost: bench.local\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("GET %s = %d %q, want 200", target, resp.StatusCode, body)
		}
	}
	if got := appGot(); strings.Join(got, " ") != "/app/x%20y /app/a.b/..c/... /app/ /app?q=/../secret" {
		t.Fatalf("the app backend received %q", got)
	}
	if v, _ := metricTotal(t, ing, "prequal_rejected_paths_total"); v != 13 {
		t.Fatalf("prequal_rejected_paths_total = %v, want 13", v)
	}
}

// A client that sends part of its body and stalls gets 408 after the client
// body timeout, and the endpoint is not blamed.
func TestProxy_ClientBodyTimeout(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer be.Close()
	ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin", ClientBodyTimeout: 200 * time.Millisecond},
		route.Spec{Key: "up", Path: "/", Endpoints: []string{strings.TrimPrefix(be.URL, "http://")}})
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), deadline)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(deadline))
	if _, err := io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", resp.StatusCode)
	}
	waitFor(t, "the attempt to finish", func() bool { return policyStats(t, ing, "up").Endpoints[0].InFlight == 0 })
	if ep := policyStats(t, ing, "up").Endpoints[0]; ep.Errors != 0 {
		t.Fatalf("endpoint charged %d errors for a stalled client", ep.Errors)
	}
	if n := ing.State().Routes[0].UpstreamErrors; n != 0 {
		t.Fatalf("%d upstream errors counted for a stalled client", n)
	}
}

// stallingBackend sends its headers and the first bytes of a longer body,
// then, with hangUp, closes the connection, or otherwise stalls until the
// test ends.
func stallingBackend(t *testing.T, hangUp bool) string {
	release := make(chan struct{})
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nContent-Type: text/plain\r\n\r\n0123456789")
		_ = buf.Flush()
		if !hangUp {
			<-release
		}
	}))
	be.Start()
	t.Cleanup(func() { close(release); be.Close() })
	return strings.TrimPrefix(be.URL, "http://")
}

// A response that breaks off after its headers is the backend's error in
// the admin state, the metrics and the policy, never a success.
func TestProxy_BodyBrokenOffIsAnUpstreamError(t *testing.T) {
	for _, tt := range []struct {
		name   string
		hangUp bool
	}{{"backend hangs up", true}, {"backend stalls past the read timeout", false}} {
		t.Run(tt.name, func(t *testing.T) {
			// The header timeout is far longer than the client's: the read
			// timeout alone must end a stalled body.
			ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin", UpstreamReadTimeout: 200 * time.Millisecond, UpstreamTimeout: time.Hour},
				route.Spec{Key: "cut", Path: "/", Endpoints: []string{stallingBackend(t, tt.hangUp)}})
			// The answer is read whole before the client sees any of it,
			// so the client gets a clean 502, never a cut 200.
			c := &http.Client{Timeout: deadline}
			resp, err := c.Get(url + "/x")
			if err != nil {
				t.Fatalf("the client got %v, want a 502", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadGateway {
				t.Fatalf("status %d, want 502 for a body broken off", resp.StatusCode)
			}
			waitFor(t, "the attempt to finish", func() bool { return policyStats(t, ing, "cut").Endpoints[0].InFlight == 0 })
			if ep := policyStats(t, ing, "cut").Endpoints[0]; ep.Errors != 1 {
				t.Fatalf("policy saw %d errors, want 1", ep.Errors)
			}
			if n := ing.State().Routes[0].UpstreamErrors; n != 1 {
				t.Fatalf("upstream errors %d, want 1", n)
			}
			if got := upstreamErrorKinds(t, ing); got["cut/body"] != 1 {
				t.Fatalf("prequal_upstream_errors_total %v, want cut/body 1", got)
			}
			if got := requestCodes(t, ing); got["502"] != 1 || got["200"] != 0 {
				t.Fatalf("prequal_requests_total codes %v, want one 502 and no 200", got)
			}
		})
	}
}

// requestCodes reads prequal_requests_total as code -> value.
func requestCodes(t *testing.T, ing *Ingress) map[string]float64 {
	t.Helper()
	mfs, err := ing.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "prequal_requests_total" {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "code" {
					out[l.GetValue()] += m.Counter.GetValue()
				}
			}
		}
	}
	return out
}

// Keep-alive connections to a backend close after the upstream idle timeout.
func TestProxy_UpstreamIdleTimeout(t *testing.T) {
	var closed atomic.Int32
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	be.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed.Add(1)
		}
	}
	be.Start()
	defer be.Close()
	_, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin", UpstreamIdleTimeout: 100 * time.Millisecond},
		route.Spec{Key: "k", Path: "/", Endpoints: []string{strings.TrimPrefix(be.URL, "http://")}})
	if code, _, _ := get(t, url+"/x", ""); code != 200 {
		t.Fatalf("status %d", code)
	}
	waitFor(t, "the idle upstream connection to close", func() bool { return closed.Load() == 1 })
}

func TestNew_RejectsNegativeTimeouts(t *testing.T) {
	for _, o := range []Options{{UpstreamReadTimeout: -1}, {UpstreamIdleTimeout: -1}, {ClientBodyTimeout: -1}} {
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), "must not be negative") {
			t.Errorf("New(%+v) = %v", o, err)
		}
	}
}

// FuzzForwardablePath: every accepted path is one the router would not
// rewrite (no resolving of dot-segments or empty segments), and no separator
// hides in an escape, so the matched and the forwarded path are the same.
// Only targets the request parser takes reach forwardablePath, so only
// those are checked ("/0\x13" has a control byte the parser refuses and
// net/url too: it is no counterexample).
func FuzzForwardablePath(f *testing.F) {
	for _, s := range []string{"/app", "/secret/..%2Fapp", "/a/./b", "/a//b", "/a/b/", "/%2e%2e/x", "/a%5cb", "/a%2Fb", "/a%2fb", "/a\\b", "/x%20y", "/a/..b/c.", "*", "/0\x13"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		if !parserTakes(target) {
			return
		}
		raw, _, _ := strings.Cut(target, "?")
		p, ok := forwardablePath(raw)
		if !ok {
			return
		}
		if u, err := url.ParseRequestURI(raw); err != nil || u.Path != p {
			t.Fatalf("accepted %q as %q; net/url reads it as %v, %v", raw, p, u, err)
		}
		cleaned := path.Clean(p)
		if strings.HasSuffix(p, "/") && cleaned != "/" {
			cleaned += "/"
		}
		if cleaned != p {
			t.Fatalf("accepted %q: the router matches %q", target, cleaned)
		}
		if strings.ContainsRune(p, '\\') {
			t.Fatalf("accepted %q with a backslash", target)
		}
		escaped := strings.ToLower(raw)
		if strings.Contains(escaped, "%2f") || strings.Contains(escaped, "%5c") {
			t.Fatalf("accepted %q: the backend gets an encoded separator", target)
		}
	})
}

// parserTakes reports whether the ingress's request parser takes target in
// a request line.
func parserTakes(target string) bool {
	var r h1.Request
	raw := "GET " + target + " HTTP/1.1\r\nHost: a\r\n\r\n"
	br := h1.NewReader(strings.NewReader(raw), len(raw)+16)
	return br.ReadRequestHead(&r) == nil && string(r.Target) == target
}

func TestLogLimiter_OneLinePerIntervalCountsTheRest(t *testing.T) {
	var l logLimiter
	t0 := time.Unix(1000, 0)
	if ok, n := l.allow(t0); !ok || n != 0 {
		t.Fatalf("first line: %v %d", ok, n)
	}
	for i := range 5 {
		if ok, _ := l.allow(t0.Add(time.Duration(i) * 100 * time.Millisecond)); ok {
			t.Fatalf("line %d within the interval let through", i)
		}
	}
	if ok, n := l.allow(t0.Add(logEvery)); !ok || n != 5 {
		t.Fatalf("after the interval: %v, suppressed %d; want true, 5", ok, n)
	}
}
