package ingress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress/internal/h1"
	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

// The request target and Host reach the backend exactly as the client sent
// them: no decoding of escapes (%3B is not ;, %41 is not A), no re-encoding
// (' | { } ^ stay), no change of case in escapes or in the Host.
func TestProxy_ForwardsRequestTargetAndHostAsReceived(t *testing.T) {
	be := startRawBackend(t, answerOK)
	_, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"}, route.Spec{Key: "w", Path: "/", Endpoints: []string{be.addr}})
	addr := strings.TrimPrefix(url, "http://")
	for _, tt := range []struct{ target, host string }{
		{"/a%41", "x"},
		{"/a%3Bb;p=1?q=%3B", "x"},
		{"/a%2Bb?x=+y&&z", "x"},
		{"/a%e2%82%ac/%C3%28", "x"},
		{"/a'b|c{d}^e", "x"},
		{"/a%7Eb%3Ac?q=%2F#frag", "x"},
		{"/work", "Bench.LOCAL:8080"},
		{"/work", "[::1]:80"},
	} {
		n := len(be.requests())
		out := exchangeRaw(t, addr, "GET "+tt.target+" HTTP/1.1\r\nHost: "+tt.host+"\r\nConnection: close\r\n\r\n")
		if got := statusLine(out); got != "HTTP/1.1 200 OK" {
			t.Errorf("GET %s (Host %s) = %q, want 200", tt.target, tt.host, got)
			continue
		}
		got := be.requests()
		if len(got) != n+1 {
			t.Fatalf("GET %s: the backend got %d requests, want 1", tt.target, len(got)-n)
		}
		lines := headLines(got[n])
		if want := "GET " + tt.target + " HTTP/1.1"; lines[0] != want {
			t.Errorf("request line %q, want %q", lines[0], want)
		}
		if want := "Host: " + tt.host; lines[1] != want {
			t.Errorf("GET %s: %q, want %q", tt.target, lines[1], want)
		}
	}
}

// A fragment in the path ends the path for the backend but not for the
// router ("/admin#x" would match "/" and reach its backend, which serves
// /admin), so it is refused as the other ambiguous paths are.
func TestProxy_RejectsFragmentInPath(t *testing.T) {
	be := startRawBackend(t, answerOK)
	ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"}, route.Spec{Key: "w", Path: "/", Endpoints: []string{be.addr}})
	out := exchangeRaw(t, strings.TrimPrefix(url, "http://"), "GET /admin#x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if got := statusLine(out); got != "HTTP/1.1 400 Bad Request" {
		t.Fatalf("GET /admin#x = %q, want 400", got)
	}
	if n := len(be.requests()); n != 0 {
		t.Fatalf("the backend got %d requests, want none", n)
	}
	if v, _ := metricTotal(t, ing, "prequal_rejected_paths_total"); v != 1 {
		t.Fatalf("prequal_rejected_paths_total = %v, want 1", v)
	}
}

// The proxy adds no header that neither side sent: no default Content-Type
// on a request body, and none (nor a Date) on an answer, also when it came
// after an interim 1xx answer or on a retry.
func TestProxy_AddsNoHeaders(t *testing.T) {
	be := startRawBackend(t, func(_ int, head string) (string, bool) {
		if strings.HasPrefix(head, "GET /early-hints ") {
			return "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false
		}
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false
	})
	dead := closedAddr(t)
	ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"},
		route.Spec{Key: "w", Path: "/", Endpoints: []string{dead, be.addr}})
	addr := strings.TrimPrefix(url, "http://")
	noneOf := func(what string, lines []string, names ...string) {
		t.Helper()
		for _, l := range lines[1:] {
			for _, n := range names {
				if strings.HasPrefix(strings.ToLower(l), strings.ToLower(n)+":") {
					t.Errorf("%s: %q added", what, l)
				}
			}
		}
	}
	for range 2 { // round-robin: one of the two goes to the dead endpoint first and is retried
		n := len(be.requests())
		out := exchangeRaw(t, addr, "POST /work HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
		if statusLine(out) != "HTTP/1.1 200 OK" || answerBody(out) != "ok" {
			t.Fatalf("POST = %q", out)
		}
		noneOf("answer", headLines(out), "Content-Type", "Date")
		noneOf("request", headLines(be.requests()[n]), "Content-Type")
	}
	if picks := policyStats(t, ing, "w").Endpoints[0].Picks; picks == 0 {
		t.Fatal("the dead endpoint was never picked: no retry was exercised")
	}
	for range 2 {
		out := exchangeRaw(t, addr, "GET /early-hints HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if statusLine(out) != "HTTP/1.1 200 OK" || answerBody(out) != "ok" {
			t.Fatalf("GET after 103 = %q", out)
		}
		noneOf("answer after a 1xx", headLines(out), "Content-Type", "Date")
	}
}

// requireNobodyCharged fails unless the route's endpoints show no error, no
// aversion and no ejection, and the route no upstream error.
func requireNobodyCharged(t *testing.T, ing *Ingress, key string) {
	t.Helper()
	waitFor(t, "the attempts to finish", func() bool {
		for _, ep := range policyStats(t, ing, key).Endpoints {
			if ep.InFlight != 0 {
				return false
			}
		}
		return true
	})
	for _, st := range ing.State().Routes {
		if st.Key != key {
			continue
		}
		if st.UpstreamErrors != 0 {
			t.Errorf("%d upstream errors counted", st.UpstreamErrors)
		}
		for _, ep := range st.Policy.Endpoints {
			if ep.Errors != 0 || ep.Averse {
				t.Errorf("endpoint %s charged: errors %d, averse %v", ep.Address, ep.Errors, ep.Averse)
			}
		}
		var ejections uint64
		for _, n := range st.Outliers.Ejections {
			ejections += n
		}
		if ejections != 0 || len(st.Outliers.Ejected) != 0 {
			t.Errorf("endpoints ejected: %+v", st.Outliers)
		}
	}
}

// An HTTP/1.0 request may come without Host; one that does is answered 400
// before any endpoint is picked. It was a 502 charged to the endpoint, so 15
// tiny requests made every endpoint of a route averse and ejected one.
func TestProxy_RequestWithoutHostIsTheClientsFault(t *testing.T) {
	var bes []*rawBackend
	var eps []string
	for range 3 {
		be := startRawBackend(t, answerOK)
		bes = append(bes, be)
		eps = append(eps, be.addr)
	}
	ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"}, route.Spec{Key: "w", Path: "/", Endpoints: eps})
	addr := strings.TrimPrefix(url, "http://")
	for range 15 {
		if got := statusLine(exchangeRaw(t, addr, "GET /work HTTP/1.0\r\n\r\n")); got != "HTTP/1.1 400 Bad Request" {
			t.Fatalf("HTTP/1.0 without Host = %q, want 400", got)
		}
	}
	requireNobodyCharged(t, ing, "w")
	for _, be := range bes {
		if n := len(be.requests()); n != 0 {
			t.Errorf("a backend got %d requests without Host", n)
		}
	}
	if got := requestCodes(t, ing); got["400"] != 0 {
		t.Errorf("requests without Host counted on the route: %v", got)
	}
	if v, _ := metricTotal(t, ing, "prequal_client_errors_total"); v != 15 {
		t.Errorf("prequal_client_errors_total = %v, want 15", v)
	}
	if got := statusLine(exchangeRaw(t, addr, "GET /work HTTP/1.0\r\nHost: x\r\n\r\n")); got != "HTTP/1.1 200 OK" {
		t.Fatalf("HTTP/1.0 with Host = %q, want 200", got)
	}
}

// A response head up to 16 KiB passes (a long Content-Security-Policy or a
// few cookies are over 4 KiB); a longer one is a 502.
func TestProxy_ResponseHeadUpTo16KiB(t *testing.T) {
	be := startRawBackend(t, func(_ int, head string) (string, bool) {
		n := 15 << 10
		if strings.HasPrefix(head, "GET /too-long ") {
			n = 17 << 10
		}
		return "HTTP/1.1 200 OK\r\nContent-Security-Policy: " + strings.Repeat("a", n) + "\r\nContent-Length: 2\r\n\r\nok", false
	})
	_, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"}, route.Spec{Key: "w", Path: "/", Endpoints: []string{be.addr}})
	addr := strings.TrimPrefix(url, "http://")
	out := exchangeRaw(t, addr, "GET /long HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if statusLine(out) != "HTTP/1.1 200 OK" || answerBody(out) != "ok" || !strings.Contains(out, strings.Repeat("a", 15<<10)) {
		t.Fatalf("a 15 KiB head: %q", statusLine(out))
	}
	if got := statusLine(exchangeRaw(t, addr, "GET /too-long HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")); got != "HTTP/1.1 502 Bad Gateway" {
		t.Fatalf("a 17 KiB head: %q, want 502", got)
	}
}

// A pooled connection stays in step with its backend: a chunked answer's
// trailer section is read to its end, and a connection with bytes past the
// answer (a HEAD answer with a body, a body longer than its Content-Length)
// is not reused, so none of them is read as the next answer.
func TestProxy_PooledConnectionStaysInStep(t *testing.T) {
	answers := map[string]string{
		"/chunked-trailer": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n2\r\nok\r\n0\r\nX-Checksum: abc\r\n\r\n",
		"/head-with-body":  "HTTP/1.1 200 OK\r\nContent-Length: 38\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil",
		"/overlong":        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil",
		"/plain":           "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nplain",
	}
	for _, tt := range []struct{ first, body string }{
		{"GET /chunked-trailer", "ok"},
		{"HEAD /head-with-body", ""},
		{"GET /overlong", "ok"},
	} {
		t.Run(tt.first, func(t *testing.T) {
			be := startRawBackend(t, func(_ int, head string) (string, bool) {
				return answers[strings.Fields(head)[1]], false
			})
			_, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"}, route.Spec{Key: "w", Path: "/", Endpoints: []string{be.addr}})
			addr := strings.TrimPrefix(url, "http://")
			for i, r := range []string{tt.first, "GET /plain", "GET /plain"} {
				out := exchangeRaw(t, addr, r+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
				want := "plain"
				if i == 0 {
					want = tt.body
				}
				if statusLine(out) != "HTTP/1.1 200 OK" || answerBody(out) != want {
					t.Fatalf("%s (request %d) = %q %q, want 200 %q", r, i+1, statusLine(out), answerBody(out), want)
				}
				if strings.Contains(out, "X-Checksum") {
					t.Fatalf("%s: the trailer reached the client: %q", r, out)
				}
			}
		})
	}
}

// idleBackend answers every request "plain" and keeps its connections, so
// that a test can write to or close one while the ingress holds it idle.
type idleBackend struct {
	addr  string
	mu    sync.Mutex
	conns []net.Conn
}

func startIdleBackend(t *testing.T) *idleBackend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &idleBackend{addr: l.Addr().String()}
	t.Cleanup(func() {
		l.Close()
		b.mu.Lock()
		for _, c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
			go func() {
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nplain"); err != nil {
						return
					}
				}
			}()
		}
	}()
	return b
}

func (b *idleBackend) conn(i int) net.Conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.conns[i]
}

func (b *idleBackend) connections() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}

// What a backend does on an idle keep-alive connection does not reach the
// next request: a connection it closed (as its idle timeout does), said 408
// on before closing (Apache httpd) or sent stray bytes on is found out
// before reuse and replaced, so a POST, which cannot be replayed, goes
// through too, and the stray bytes are never read as its answer.
func TestProxy_IdleConnectionCheckedBeforeReuse(t *testing.T) {
	for _, tt := range []struct {
		name   string
		stray  string // written on the idle connection
		close  bool   // then closed
		method string
	}{
		{"closed, then a POST", "", true, "POST"},
		{"closed, then a GET", "", true, "GET"},
		{"408 and closed", "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", true, "POST"},
		{"stray answer", "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil", false, "GET"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			be := startIdleBackend(t)
			ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"}, route.Spec{Key: "w", Path: "/", Endpoints: []string{be.addr}})
			addr := strings.TrimPrefix(url, "http://")
			send := func(method string) string {
				t.Helper()
				return exchangeRaw(t, addr, method+" /work HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx")
			}
			if out := send(tt.method); answerBody(out) != "plain" {
				t.Fatalf("first request: %q", out)
			}
			c := be.conn(0)
			if tt.stray != "" {
				if _, err := io.WriteString(c, tt.stray); err != nil {
					t.Fatal(err)
				}
			}
			if tt.close {
				c.Close()
			}
			out := send(tt.method)
			if statusLine(out) != "HTTP/1.1 200 OK" || answerBody(out) != "plain" {
				t.Fatalf("%s after the backend's %s: %q %q, want 200 plain", tt.method, tt.name, statusLine(out), answerBody(out))
			}
			if n := be.connections(); n != 2 {
				t.Fatalf("%d backend connections, want 2 (the idle one replaced)", n)
			}
			requireNobodyCharged(t, ing, "w")
		})
	}
}

// A reused connection that fails before any answer (the backend closed it
// just as the request went out) is replaced once, and only for an
// idempotent method: the request reaches the backend at most twice, never
// once per idle connection, and a POST or PATCH once.
func TestProxy_StaleConnectionReplayedOnceAndOnlyIdempotent(t *testing.T) {
	const idle = 3
	for _, tt := range []struct {
		method string
		sends  int
	}{{"GET", 2}, {"PUT", 2}, {"DELETE", 2}, {"POST", 1}, {"PATCH", 1}} {
		t.Run(tt.method, func(t *testing.T) {
			var hangUp atomic.Bool
			all := make(chan struct{})
			var once sync.Once
			var n atomic.Int32
			be := startRawBackend(t, func(_ int, _ string) (string, bool) {
				if hangUp.Load() {
					return "", true // read, then closed unanswered
				}
				if n.Add(1) == idle {
					once.Do(func() { close(all) })
				}
				<-all // answer only once all are in, so that each had a connection of its own
				return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false
			})
			_, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin", Outlier: OutlierConfig{Disabled: true}},
				route.Spec{Key: "w", Path: "/", Endpoints: []string{be.addr}})
			addr := strings.TrimPrefix(url, "http://")
			var wg sync.WaitGroup
			for range idle {
				wg.Add(1)
				go func() {
					defer wg.Done()
					exchangeRaw(t, addr, "GET /warm HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
				}()
			}
			wg.Wait()
			if c := be.connections(); c != idle {
				t.Fatalf("%d backend connections, want %d idle ones", c, idle)
			}
			hangUp.Store(true)
			before := len(be.requests())
			out := exchangeRaw(t, addr, tt.method+" /work HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx")
			if got := statusLine(out); got != "HTTP/1.1 502 Bad Gateway" {
				t.Fatalf("%s = %q, want 502", tt.method, got)
			}
			if got := len(be.requests()) - before; got != tt.sends {
				t.Fatalf("%s reached the backend %d times, want %d", tt.method, got, tt.sends)
			}
		})
	}
}

// earlyAnswerBackend reads a request's head only, answers 413 at once and
// closes, with the body still coming (a backend refusing a body too large
// for it), after delay.
func earlyAnswerBackend(t *testing.T, delay time.Duration) string {
	t.Helper()
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
			go func() {
				defer c.Close()
				if _, err := readHead(bufio.NewReader(c)); err != nil {
					return
				}
				_, _ = io.WriteString(c, "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 9\r\n\r\ntoo large")
				time.Sleep(delay) // the backend's own pace, not a wait for the test
			}()
		}
	}()
	return l.Addr().String()
}

// A backend that answers before it has read the whole request (413 for a
// body it will not take) and closes makes writing the rest of the body
// fail; its answer reaches the client all the same, as it would without
// the proxy, and is no failure of the endpoint.
func TestProxy_EarlyAnswerWhileTheBodyIsWritten(t *testing.T) {
	for _, delay := range []time.Duration{0, 20 * time.Millisecond} {
		t.Run(fmt.Sprint("close after ", delay), func(t *testing.T) {
			be := earlyAnswerBackend(t, delay)
			ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin", MaxBodySize: 64 << 20},
				route.Spec{Key: "w", Path: "/", Endpoints: []string{be}})
			resp, err := http.Post(url+"/upload", "application/octet-stream", bytes.NewReader(make([]byte, 16<<20)))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge || string(body) != "too large" {
				t.Fatalf("the client got %d %q, want the backend's 413", resp.StatusCode, body)
			}
			requireNobodyCharged(t, ing, "w")
		})
	}
}

// An endpoint that leaves while a request to it is in flight keeps no
// connection open: the request ends normally and its connection is closed
// instead of going back to the pool the endpoint no longer has.
func TestProxy_EndpointLeavingMidRequestLeavesNoConnection(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	var open atomic.Int32
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
			open.Add(1)
			go func() {
				defer open.Add(-1)
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					arrived <- struct{}{}
					<-release
					if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
						return
					}
				}
			}()
		}
	}()
	other := startRawBackend(t, answerOK)
	ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"}, route.Spec{Key: "w", Path: "/", Endpoints: []string{l.Addr().String()}})
	done := make(chan string, 1)
	go func() {
		done <- statusLine(exchangeRaw(t, strings.TrimPrefix(url, "http://"), "GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
	}()
	<-arrived
	ing.Update([]route.Spec{{Key: "w", Path: "/", Endpoints: []string{other.addr}}}) // the endpoint leaves
	close(release)
	if got := <-done; got != "HTTP/1.1 200 OK" {
		t.Fatalf("the request in flight got %q", got)
	}
	waitFor(t, "the departed endpoint's connection to close", func() bool { return open.Load() == 0 })
}

// panicky is a policy that panics in Pick, or in Done once the real Done
// ran, when told to, and counts the calls of Done.
type panicky struct {
	loadbalancer.Policy
	inPick, inDone atomic.Bool
	dones          atomic.Int32
}

func (p *panicky) Pick(now time.Time, rng *rand.Rand) (loadbalancer.Picked, error) {
	if p.inPick.Load() {
		panic("test: Pick panics")
	}
	return p.Policy.Pick(now, rng)
}

func (p *panicky) Done(now time.Time, pk loadbalancer.Picked, latency time.Duration, status int) {
	p.dones.Add(1)
	p.Policy.Done(now, pk, latency, status)
	if p.inDone.Load() {
		panic("test: Done panics")
	}
}

// A panic on the request path (in the policy, under the route's lock, or in
// the exchange) is answered 502, logged and counted; the ingress and the
// route go on serving, the route's lock is not left held, and an attempt
// picked before the panic is reported finished (status 0) exactly once.
func TestProxy_PanicIsAnsweredAndTheIngressGoesOn(t *testing.T) {
	be := startRawBackend(t, answerOK)
	var dialPanics atomic.Bool
	var d net.Dialer
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dialPanics.Load() {
			panic("test: dial panics")
		}
		return d.DialContext(ctx, network, addr)
	}
	var logs lockedBuffer
	ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin", DialContext: dial, Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		route.Spec{Key: "w", Path: "/", Endpoints: []string{be.addr}})
	rs := ing.table.Load().byKey["w"]
	pol := &panicky{Policy: rs.policy}
	rs.mu.Lock()
	rs.policy = pol
	rs.mu.Unlock()
	addr := strings.TrimPrefix(url, "http://")
	get := func() string {
		t.Helper()
		return statusLine(exchangeRaw(t, addr, "GET /work HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
	}
	for i, tt := range []struct {
		name   string
		set    *atomic.Bool
		dones  int32  // calls of Done for the request that panicked
		errors uint64 // the endpoint's errors after it
	}{
		{"in the exchange, after the pick", &dialPanics, 1, 1},
		{"in Pick, under the route lock", &pol.inPick, 0, 1},
		{"in Done, under the route lock", &pol.inDone, 1, 1},
	} {
		tt.set.Store(true)
		before := pol.dones.Load()
		if got := get(); got != "HTTP/1.1 502 Bad Gateway" {
			t.Fatalf("panic %s: %q, want 502", tt.name, got)
		}
		if n := pol.dones.Load() - before; n != tt.dones {
			t.Fatalf("panic %s: Done called %d times, want %d", tt.name, n, tt.dones)
		}
		tt.set.Store(false)
		if got := get(); got != "HTTP/1.1 200 OK" {
			t.Fatalf("after the panic %s: %q, want 200", tt.name, got)
		}
		ep := policyStats(t, ing, "w").Endpoints[0]
		if ep.InFlight != 0 || ep.Errors != tt.errors {
			t.Fatalf("after the panic %s: in flight %d, errors %d; want 0 and %d (the attempt reported once)", tt.name, ep.InFlight, ep.Errors, tt.errors)
		}
		if n := rs.inFlight.Load(); n != 0 {
			t.Fatalf("after the panic %s: route in flight %d, want 0", tt.name, n)
		}
		if v, _ := metricTotal(t, ing, "prequal_panics_total"); v != float64(i+1) {
			t.Fatalf("prequal_panics_total = %v, want %d", v, i+1)
		}
	}
	if n := logs.count("panic on the request path"); n == 0 {
		t.Fatal("no panic logged")
	}
}

// probeServer answers probes (and counts them) and nothing else.
func probeServer(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/prequal/probe" {
			http.NotFound(w, r)
			return
		}
		n.Add(1)
		fmt.Fprintf(w, `{"rif":1,"latency_median_ms":2,"timestamp_ms":%d,"samples":3}`, time.Now().UnixMilli())
	}))
	t.Cleanup(be.Close)
	return strings.TrimPrefix(be.URL, "http://"), &n
}

// The polling policies (wrr, yarp-po2c) keep polling an idle route when
// Prequal's idle probes are off: the idle ticker runs for every policy that
// probes, not only when Prequal's IdleProbeInterval is set.
func TestRun_IdleRoutesOfPollingPoliciesArePolled(t *testing.T) {
	for _, algo := range []string{"wrr", "yarp-po2c"} {
		t.Run(algo, func(t *testing.T) {
			addr, probes := probeServer(t)
			cfg := loadbalancer.DefaultConfig()
			cfg.Prequal.IdleProbeInterval = 0
			cfg.WRR.Period = 20 * time.Millisecond
			cfg.YARP.Poll = 20 * time.Millisecond
			_, _ = newTestIngress(t, Options{DefaultAlgorithm: algo, Policy: cfg}, route.Spec{Key: "w", Path: "/", Endpoints: []string{addr}})
			waitFor(t, "an idle route's endpoint to be polled again and again", func() bool { return probes.Load() >= 3 })
		})
	}
}

// The idle ticker runs only while a route's policy probes: a route that
// turns from round-robin to wrr is polled without traffic, and the ticker
// stops again when it turns back.
func TestRun_IdleTickerFollowsTheProbingPolicies(t *testing.T) {
	addr, probes := probeServer(t)
	cfg := loadbalancer.DefaultConfig()
	cfg.WRR.Period = 20 * time.Millisecond
	ing, _ := newTestIngress(t, Options{DefaultAlgorithm: "round-robin", Policy: cfg}, route.Spec{Key: "w", Path: "/", Endpoints: []string{addr}})
	if ing.probing.Load() {
		t.Fatal("a round-robin ingress counts as probing")
	}
	if err := ing.SetAlgorithm("w", "wrr"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the route turned wrr to be polled again and again", func() bool { return probes.Load() >= 3 })
	if err := ing.SetAlgorithm("w", "round-robin"); err != nil {
		t.Fatal(err)
	}
	if ing.probing.Load() {
		t.Fatal("back on round-robin, the ingress still counts as probing")
	}
}

// A request that expects 100 Continue for a body over --max-body-size gets
// 413 at once, without the 100 Continue that would have the client send
// the body; one within the limit gets the 100 Continue and goes through.
func TestProxy_ExpectContinueOverTheLimitGets413Directly(t *testing.T) {
	be := startRawBackend(t, answerOK)
	ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin", MaxBodySize: 1024},
		route.Spec{Key: "w", Path: "/", Endpoints: []string{be.addr}})
	addr := strings.TrimPrefix(url, "http://")
	// The head only: the client waits for 100 Continue before the body.
	out := exchangeRaw(t, addr, "POST /up HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5000\r\n\r\n")
	if statusLine(out) != "HTTP/1.1 413 Content Too Large" || strings.Contains(out, "100 Continue") { // RFC 9110 §15.5.14's name
		t.Fatalf("Expect: 100-continue with 5000 bytes over a 1024 limit: %q, want 413 and no 100 Continue", out)
	}
	if n := len(be.requests()); n != 0 {
		t.Fatalf("the backend got %d requests", n)
	}
	if v, _ := metricTotal(t, ing, "prequal_client_errors_total"); v != 1 {
		t.Fatalf("prequal_client_errors_total = %v, want 1", v)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(deadline))
	br := bufio.NewReader(c)
	_, _ = io.WriteString(c, "POST /up HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\nConnection: close\r\n\r\n")
	if line, _ := br.ReadString('\n'); line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("within the limit: %q, want 100 Continue", line)
	}
	_, _ = io.WriteString(c, "hello")
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "HTTP/1.1 200 OK") {
		t.Fatalf("within the limit, after the body: %q", rest)
	}
}

// histogramSum is the sum of a histogram family's observations.
func histogramSum(t *testing.T, ing *Ingress, name string) float64 {
	t.Helper()
	mfs, err := ing.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.Metric {
				sum += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return sum
}

// prequal_request_duration_seconds is what the client waited, from the
// first pick to the end of the body: a retried request's covers both
// attempts, not the second only.
func TestProxy_RequestDurationCoversTheRetry(t *testing.T) {
	const firstAttempt = 150 * time.Millisecond
	slow := startRawBackend(t, func(int, string) (string, bool) {
		time.Sleep(firstAttempt) // the backend's own pace: it reads the request, then hangs up unanswered
		return "", true
	})
	fast := startRawBackend(t, answerOK)
	ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin", Retry: true, Outlier: OutlierConfig{Disabled: true}},
		route.Spec{Key: "w", Path: "/", Endpoints: []string{slow.addr, fast.addr}})
	addr := strings.TrimPrefix(url, "http://")
	for range 2 { // round-robin: one of the two goes to the slow endpoint first
		if got := statusLine(exchangeRaw(t, addr, "GET /work HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")); got != "HTTP/1.1 200 OK" {
			t.Fatalf("GET = %q, want 200 after the retry", got)
		}
	}
	if n := len(slow.requests()); n != 1 {
		t.Fatalf("the slow endpoint got %d requests, want 1", n)
	}
	if sum := histogramSum(t, ing, "prequal_request_duration_seconds"); sum < firstAttempt.Seconds() {
		t.Fatalf("request durations sum to %.3fs, less than the first attempt's %v", sum, firstAttempt)
	}
}

// An HTTP/1.0 client's requests go upstream as HTTP/1.1 on a kept-alive
// connection, as every other request (the request line said HTTP/1.0, so
// the backend closed each connection after its answer).
func TestProxy_HTTP10ClientsGoUpstreamAsHTTP11(t *testing.T) {
	be := startRawBackend(t, func(_ int, head string) (string, bool) {
		// As a backend does: an HTTP/1.0 request without keep-alive ends its connection.
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", strings.Contains(headLines(head)[0], "HTTP/1.0")
	})
	_, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"}, route.Spec{Key: "w", Path: "/", Endpoints: []string{be.addr}})
	addr := strings.TrimPrefix(url, "http://")
	for range 3 {
		if out := exchangeRaw(t, addr, "GET /work HTTP/1.0\r\nHost: x\r\n\r\n"); answerBody(out) != "ok" {
			t.Fatalf("HTTP/1.0 GET = %q", out)
		}
	}
	for _, r := range be.requests() {
		lines := headLines(r)
		if lines[0] != "GET /work HTTP/1.1" {
			t.Errorf("the backend got %q, want HTTP/1.1", lines[0])
		}
		for _, l := range lines[1:] {
			if strings.HasPrefix(strings.ToLower(l), "connection:") {
				t.Errorf("the backend got %q", l)
			}
		}
	}
	if n := be.connections(); n != 1 {
		t.Errorf("%d backend connections for 3 requests, want 1 kept alive", n)
	}
}

// A Connection header naming Host does not take the Host away: the request
// goes upstream with the client's Host (without one it could not be sent).
func TestProxy_ConnectionNamingHostKeepsHost(t *testing.T) {
	be := startRawBackend(t, answerOK)
	_, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"}, route.Spec{Key: "w", Path: "/", Endpoints: []string{be.addr}})
	out := exchangeRaw(t, strings.TrimPrefix(url, "http://"), "GET /work HTTP/1.1\r\nHost: Bench.local\r\nX-Hop: 1\r\nConnection: Host, X-Hop, close\r\n\r\n")
	if got := statusLine(out); got != "HTTP/1.1 200 OK" {
		t.Fatalf("GET with Connection: Host = %q, want 200", got)
	}
	lines := headLines(be.requests()[0])
	if lines[1] != "Host: Bench.local" {
		t.Fatalf("the backend got %q, want the client's Host", lines[1])
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "X-Hop") {
			t.Fatalf("the backend got %q, a header the Connection header named", l)
		}
	}
}

// Hop-by-hop headers and the client's forwarding claims do not reach the
// backend, whatever their case and however many lines they take; the
// backend's hop-by-hop headers do not reach the client. The forwarding
// headers the backend gets are the ingress's own, once each.
func TestProxy_DropsHopByHopAndForwardingClaims(t *testing.T) {
	be := startRawBackend(t, func(int, string) (string, bool) {
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nkeep-alive: timeout=5\r\nProxy-Authenticate: Basic\r\n" +
			"UPGRADE: h2c\r\nTrailer: X-T\r\nTe: trailers\r\nProxy-Connection: keep-alive\r\nX-Kept: 1\r\n\r\nok", false
	})
	_, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"}, route.Spec{Key: "w", Path: "/", Endpoints: []string{be.addr}})
	out := exchangeRaw(t, strings.TrimPrefix(url, "http://"), "GET /x HTTP/1.1\r\nHost: app\r\n"+
		"keep-alive: 300\r\nPROXY-AUTHORIZATION: Basic Zm9vOmJhcg==\r\nte: trailers\r\nTrailer: X-T\r\nUpgrade: websocket\r\n"+
		"Proxy-Connection: keep-alive\r\nFORWARDED: for=203.0.113.9\r\nx-forwarded-host: evil\r\nX-Forwarded-Proto: https\r\n"+
		"x-forwarded-for: 203.0.113.7\r\nX-Forwarded-For: 203.0.113.8\r\nx-real-ip: 203.0.113.9\r\nX-Other: 1\r\nConnection: close\r\n\r\n")
	if got := statusLine(out); got != "HTTP/1.1 200 OK" {
		t.Fatalf("status %q, want 200", got)
	}
	reqs := be.requests()
	if len(reqs) != 1 {
		t.Fatalf("the backend got %d requests, want 1", len(reqs))
	}
	count := map[string]int{}
	value := map[string]string{}
	for _, l := range headLines(reqs[0])[1:] {
		name, v, _ := strings.Cut(l, ":")
		count[strings.ToLower(name)]++
		value[strings.ToLower(name)] = strings.TrimSpace(v)
	}
	for _, gone := range []string{"keep-alive", "proxy-authorization", "te", "trailer", "upgrade", "proxy-connection", "forwarded"} {
		if count[gone] != 0 {
			t.Errorf("the backend got %s: %q", gone, reqs[0])
		}
	}
	for name, want := range map[string]string{"x-forwarded-for": "127.0.0.1", "x-real-ip": "127.0.0.1", "x-forwarded-host": "app", "x-forwarded-proto": "http", "x-other": "1", "host": "app"} {
		if count[name] != 1 || value[name] != want {
			t.Errorf("the backend got %d %s lines, the last %q; want one, %q:\n%s", count[name], name, value[name], want, reqs[0])
		}
	}
	for _, l := range headLines(out)[1:] {
		name, _, _ := strings.Cut(l, ":")
		switch strings.ToLower(name) {
		case "keep-alive", "proxy-authenticate", "upgrade", "trailer", "te", "proxy-connection":
			t.Errorf("the client got the backend's %q", l)
		}
	}
	if !strings.Contains(out, "X-Kept: 1\r\n") {
		t.Errorf("the client lost the backend's X-Kept: %q", out)
	}
}

// Cookies reach the backend as the client sent them: quoted values, values
// with a backslash or JSON in them, several Cookie lines. (The fasthttp
// data plane once parsed them into cookies and wrote them back, dropping
// some and merging the lines.)
func TestProxy_ForwardsCookiesAsReceived(t *testing.T) {
	be := startRawBackend(t, answerOK)
	_, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"}, route.Spec{Key: "w", Path: "/", Endpoints: []string{be.addr}})
	lines := []string{`Cookie: a="quoted"`, `Cookie: b=x\y; c=1;d=2`, `Cookie: s={"u":1}; t=2`}
	out := exchangeRaw(t, strings.TrimPrefix(url, "http://"), "GET /x HTTP/1.1\r\nHost: app\r\n"+strings.Join(lines, "\r\n")+"\r\nConnection: close\r\n\r\n")
	if got := statusLine(out); got != "HTTP/1.1 200 OK" {
		t.Fatalf("status %q, want 200", got)
	}
	reqs := be.requests()
	if len(reqs) != 1 {
		t.Fatalf("the backend got %d requests, want 1", len(reqs))
	}
	var got []string
	for _, l := range headLines(reqs[0])[1:] {
		if strings.HasPrefix(strings.ToLower(l), "cookie:") {
			got = append(got, l)
		}
	}
	if strings.Join(got, "\n") != strings.Join(lines, "\n") {
		t.Fatalf("the backend got the cookie lines\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(lines, "\n"))
	}
}

// A forwarding claim or a hop-by-hop header in a chunked request's
// trailer section does not reach the backend either, also when the
// request names Trailer in its Connection header (dropping it moves the
// trailer fields into the headers).
func TestProxy_DropsForwardedFromTrailer(t *testing.T) {
	for _, conn := range []string{"close", "Trailer, close", "keep-alive, TRAILER, close"} {
		be := startRawBackend(t, answerOK)
		_, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"}, route.Spec{Key: "w", Path: "/", Endpoints: []string{be.addr}})
		out := exchangeRaw(t, strings.TrimPrefix(url, "http://"), "POST /x HTTP/1.1\r\nHost: app\r\nTransfer-Encoding: chunked\r\nConnection: "+conn+"\r\n\r\n"+
			"2\r\nhi\r\n0\r\nForwarded: for=203.0.113.6\r\nForwarded: for=203.0.113.7\r\nUpgrade: websocket\r\n\r\n")
		if got := statusLine(out); got != "HTTP/1.1 200 OK" {
			t.Fatalf("Connection: %s: status %q, want 200", conn, got)
		}
		reqs := be.requests()
		if len(reqs) != 1 {
			t.Fatalf("Connection: %s: the backend got %d requests, want 1", conn, len(reqs))
		}
		if r := strings.ToLower(reqs[0]); strings.Contains(r, "forwarded: for=203.0.113") || strings.Contains(r, "upgrade:") {
			t.Fatalf("Connection: %s: the trailer's Forwarded or Upgrade reached the backend:\n%s", conn, reqs[0])
		}
	}
}

// Bodies larger than the ones written with their head (16 KiB each way)
// pass whole: a 100 KiB Content-Length body and a chunked one go upstream
// with a Content-Length, and a 100 KiB answer comes back intact, twice on
// one kept-alive client connection.
func TestProxy_LargeBodiesBothWays(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 100<<10/16)
	be := startRawBackend(t, func(int, string) (string, bool) {
		return "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(big)) + "\r\n\r\n" + big, false
	})
	_, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"}, route.Spec{Key: "w", Path: "/", Endpoints: []string{be.addr}})
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(deadline))
	br := bufio.NewReader(c)
	var chunked strings.Builder
	for i := 0; i < len(big); i += 7000 {
		part := big[i:min(i+7000, len(big))]
		chunked.WriteString(strconv.FormatInt(int64(len(part)), 16) + "\r\n" + part + "\r\n")
	}
	chunked.WriteString("0\r\n\r\n")
	for _, req := range []string{
		"POST /cl HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(len(big)) + "\r\n\r\n" + big,
		"POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked.String(),
	} {
		go func() { _, _ = io.WriteString(c, req) }()
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 || string(body) != big {
			t.Fatalf("answer: status %d, %d bytes (%v), want 200 and %d bytes", resp.StatusCode, len(body), err, len(big))
		}
	}
	reqs := be.requests()
	if len(reqs) != 2 {
		t.Fatalf("the backend got %d requests, want 2", len(reqs))
	}
	for _, r := range reqs {
		if answerBody(r) != big || !strings.Contains(r, "\r\nContent-Length: "+strconv.Itoa(len(big))+"\r\n") ||
			strings.Contains(strings.ToLower(r), "transfer-encoding") {
			t.Fatalf("the backend got %.80q... (%d bytes), want the body whole with a Content-Length", r, len(r))
		}
	}
}

// An absolute-form target (from a client that takes the ingress for a
// forward proxy) goes upstream in origin form with its authority as the
// Host; the scheme's case does not matter and an empty path is "/". One
// with userinfo is refused, so "user@host" never becomes a Host.
func TestProxy_AbsoluteFormTargets(t *testing.T) {
	be := startRawBackend(t, answerOK)
	_, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"}, route.Spec{Key: "w", Path: "/", Endpoints: []string{be.addr}})
	addr := strings.TrimPrefix(url, "http://")
	for _, tt := range []struct{ target, line, host string }{
		{"http://app.local/p?q=1", "GET /p?q=1 HTTP/1.1", "app.local"},
		{"HTTP://App.Local:8080/p", "GET /p HTTP/1.1", "App.Local:8080"},
		{"http://app.local", "GET / HTTP/1.1", "app.local"},
		{"http://app.local?q=2", "GET /?q=2 HTTP/1.1", "app.local"},
		{"http://[::1]:8080/p", "GET /p HTTP/1.1", "[::1]:8080"},
	} {
		n := len(be.requests())
		out := exchangeRaw(t, addr, "GET "+tt.target+" HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n")
		if statusLine(out) != "HTTP/1.1 200 OK" {
			t.Fatalf("%s: %q", tt.target, statusLine(out))
		}
		reqs := be.requests()
		if len(reqs) != n+1 {
			t.Fatalf("%s: the backend got %d requests", tt.target, len(reqs)-n)
		}
		lines := headLines(reqs[n])
		if lines[0] != tt.line || !slices.Contains(lines, "Host: "+tt.host) || slices.Contains(lines, "Host: other") {
			t.Fatalf("%s: the backend got %q", tt.target, lines)
		}
	}
	for _, target := range []string{"http://user@app.local/p", "http://user:pw@app.local", "https://app.local/p", "http:///p", "ftp://a/b",
		"http://h#frag/p", "http://[::1/p", "http://a:b:c/p"} {
		n := len(be.requests())
		if got := statusLine(exchangeRaw(t, addr, "GET "+target+" HTTP/1.1\r\nHost: app.local\r\nConnection: close\r\n\r\n")); got != "HTTP/1.1 400 Bad Request" {
			t.Fatalf("%s: %q, want 400", target, got)
		}
		if len(be.requests()) != n {
			t.Fatalf("%s reached the backend", target)
		}
	}
}

// With --retry, only a connection that broke is tried elsewhere: an answer
// that came and was refused (a 101, a malformed head) is not sent again.
func TestRetryable_OnlyBrokenConnections(t *testing.T) {
	get := parsedExchange(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{&upstreamError{phase: phaseHeader, err: io.EOF, silent: true}, true},
		{&upstreamError{phase: phaseHeader, err: syscall.ECONNRESET}, true},
		{&upstreamError{phase: phaseHeader, err: h1.ErrUpgrade}, false},
		{&upstreamError{phase: phaseHeader, err: h1.ErrHeadTooLarge}, false},
		{&upstreamError{phase: phaseHeader, err: errors.New("h1: malformed status line")}, false},
		{&upstreamError{phase: phaseHeader, err: os.ErrDeadlineExceeded}, false},
		{&upstreamError{phase: phaseBody, err: io.ErrUnexpectedEOF}, false},
	} {
		if got := retryable(&get.Req, tt.err, true); got != tt.want {
			t.Errorf("%v: retryable %v, want %v", tt.err, got, tt.want)
		}
	}
}

// An answer with no body by the rules but one declared (to a HEAD, a 204
// or 304 with a length) leaves its connection unpooled: a body the backend
// sends anyway, late, would be the next request's answer.
func TestDeclaredUnsentBody(t *testing.T) {
	head := parsedExchange(t, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
	get := parsedExchange(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	for _, tt := range []struct {
		x    *h1.Exchange
		resp string
		want bool
	}{
		{head, "HTTP/1.1 200 OK\r\nContent-Length: 38\r\n\r\n", true},
		{head, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false},
		{get, "HTTP/1.1 304 Not Modified\r\nContent-Length: 38\r\n\r\n", true},
		{get, "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n", true},
		{get, "HTTP/1.1 200 OK\r\nContent-Length: 38\r\n\r\n", false},
	} {
		var resp h1.Response
		if err := h1.NewReader(strings.NewReader(tt.resp), 1024).ReadResponseHead(&resp); err != nil {
			t.Fatal(err)
		}
		if got := declaredUnsentBody(&tt.x.Req, &resp); got != tt.want {
			t.Errorf("%s to %s: %v, want %v", strings.SplitN(tt.resp, "\r\n", 2)[0], tt.x.Req.Method, got, tt.want)
		}
	}
}
