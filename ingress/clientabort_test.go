package ingress

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress/internal/h1"
	"github.com/prequalbench/prequalbench/ingress/internal/hangup"
	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/internal/testbackend"
)

// A client that hangs up (closes, or half-closes as nginx also reads as
// leaving) while its request waits at a backend gets its backend
// connection closed, so the backend sees it go; the request is counted as
// the client's (499, prequal_client_aborts_total), not as an upstream
// error, and the policy hears a 499.
func TestProxy_ClientHangupClosesTheBackendConnection(t *testing.T) {
	for _, tt := range []struct {
		name string
		hang func(c *net.TCPConn)
	}{
		{"close", func(c *net.TCPConn) { c.Close() }},
		{"half-close", func(c *net.TCPConn) { c.CloseWrite() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			// The backend reads the request and never answers; it reports
			// when its connection reads EOF.
			gotReq, gotEOF := make(chan struct{}), make(chan time.Time, 1)
			go func() {
				c, err := l.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				if _, err := readHead(bufio.NewReader(c)); err != nil {
					return
				}
				close(gotReq)
				_ = c.SetReadDeadline(time.Now().Add(deadline))
				if _, err := c.Read(make([]byte, 1)); err == io.EOF {
					gotEOF <- time.Now()
				}
			}()
			ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin", UpstreamTimeout: time.Minute},
				route.Spec{Key: "w", Path: "/", Endpoints: []string{l.Addr().String()}})
			c, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), deadline)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, "GET /work HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			select {
			case <-gotReq:
			case <-time.After(deadline):
				t.Fatal("the request did not reach the backend")
			}
			left := time.Now()
			tt.hang(c.(*net.TCPConn))
			select {
			case at := <-gotEOF:
				t.Logf("the backend saw the close %v after the client left", at.Sub(left))
			case <-time.After(deadline):
				t.Fatal("the backend connection was not closed after the client left")
			}
			waitUntil(t, "the abort counted", func() bool {
				return metricValue(t, ing, "prequal_client_aborts_total", "route", "w") == 1
			})
			if got := requestCodes(t, ing)["499"]; got != 1 {
				t.Errorf("requests_total{code=499} = %v, want 1", got)
			}
			if got := metricValue(t, ing, "prequal_upstream_errors_total", "", ""); got != 0 {
				t.Errorf("upstream errors = %v, want 0: the client left, the backend did not fail", got)
			}
			st := ing.State().Routes[0]
			if st.ClientAborts != 1 || st.UpstreamErrors != 0 {
				t.Errorf("admin state: client_aborts %d, upstream_errors %d; want 1, 0", st.ClientAborts, st.UpstreamErrors)
			}
			if e := st.Policy.Endpoints[0]; e.InFlight != 0 || e.Errors != 0 {
				t.Errorf("policy: in flight %d, errors %d after the abort; want 0, 0 (a 499)", e.InFlight, e.Errors)
			}
			// Nothing is answered: the client connection is closed.
			_ = c.SetReadDeadline(time.Now().Add(deadline))
			if out, _ := io.ReadAll(c); len(out) != 0 {
				t.Errorf("the client that left was answered %q", out)
			}
		})
	}
}

// Acceptance: with the Rust backend at one slot, a request that waits in
// its queue leaves the queue soon after its client hangs up (the backend
// sees the ingress close the connection), while A is still in service.
func TestProxy_ClientHangupFreesTheBackendQueueSlot(t *testing.T) {
	be := testbackend.Start(t, "--concurrency", "1", "--queue-limit", "4", "--service-time", "3s")
	ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin", UpstreamTimeout: time.Minute},
		route.Spec{Key: "w", Path: "/", Endpoints: []string{be.Addr}})
	addr := strings.TrimPrefix(url, "http://")
	send := func() net.Conn {
		c, err := net.DialTimeout("tcp", addr, deadline)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, "GET /work HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		return c
	}
	stats := func() testbackend.Stats {
		s, err := be.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	send() // in service
	waitUntil(t, "A in service", func() bool { return stats().InFlight == 1 })
	b := send()
	waitUntil(t, "B queued", func() bool { return stats().Queued == 1 })
	left := time.Now()
	b.Close()
	var s testbackend.Stats
	waitUntil(t, "B out of the backend's queue", func() bool { s = stats(); return s.Queued == 0 })
	t.Logf("queue slot freed %v after the client left", time.Since(left))
	if s.Served != 0 {
		t.Fatalf("B left the queue only when A was served (%+v): the backend never saw B's client go", s)
	}
	waitUntil(t, "the abort counted", func() bool {
		return metricValue(t, ing, "prequal_client_aborts_total", "", "") == 1
	})
}

// waitUntil polls cond until it holds, failing the test after deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, deadline)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A request whose client is gone before an endpoint is picked (it sent the
// request and half-closed at once) is counted as the client's without a
// pick: no policy hears of an attempt that never reached a backend (its
// near-zero latency would read as a fast answer to the latency policies),
// and no backend connection is made for it.
func TestProxy_ClientGoneBeforePickPicksNothing(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dialed := make(chan struct{}, 1)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			dialed <- struct{}{}
			c.Close()
		}
	}()
	ing, _ := newTestIngress(t, Options{DefaultAlgorithm: "peak-ewma"},
		route.Spec{Key: "w", Path: "/", Endpoints: []string{l.Addr().String()}})

	client, peer := watchedClient(t)
	if err := peer.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the half-close seen", client.Gone)
	ing.serve(getExchange(t, client))

	st := ing.State().Routes[0]
	if st.ClientAborts != 1 {
		t.Errorf("client_aborts = %d, want 1", st.ClientAborts)
	}
	if got := requestCodes(t, ing)["499"]; got != 1 {
		t.Errorf("requests_total{code=499} = %v, want 1", got)
	}
	if e := st.Policy.Endpoints[0]; e.Picks != 0 || e.InFlight != 0 {
		t.Errorf("policy: %d picks, %d in flight for a client gone before the pick; want 0, 0", e.Picks, e.InFlight)
	}
	select {
	case <-dialed:
		t.Error("a backend connection was made for a client that was gone")
	default:
	}
}

// A client that leaves while its first attempt fails in a way that would
// be retried elsewhere (here the dial) gets no second pick.
func TestProxy_ClientGoneDuringFailedAttemptIsNotRetried(t *testing.T) {
	ing, _ := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"},
		route.Spec{Key: "w", Path: "/", Endpoints: []string{"127.0.0.1:1", "127.0.0.1:2"}})
	client, peer := watchedClient(t)
	dials := 0
	ing.upstreams.dial = func(context.Context, string, string) (net.Conn, error) {
		dials++
		if dials == 1 { // the client leaves while the first dial fails
			_ = peer.CloseWrite()
			waitUntil(t, "the half-close seen", client.Gone)
		}
		return nil, syscall.ECONNREFUSED
	}

	ing.serve(getExchange(t, client))

	st := ing.State().Routes[0]
	if st.ClientAborts != 1 || st.UpstreamErrors != 0 {
		t.Errorf("client_aborts %d, upstream_errors %d; want 1, 0", st.ClientAborts, st.UpstreamErrors)
	}
	var picks uint64
	for _, e := range st.Policy.Endpoints {
		picks += e.Picks
	}
	if picks != 1 || dials != 1 {
		t.Errorf("%d picks, %d dials for a client that left during the first attempt; want 1, 1", picks, dials)
	}
}

// watchedClient returns the ingress's side of a loopback client
// connection, watched for hangups, and the client's side.
func watchedClient(t *testing.T) (*hangup.Conn, *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	peer, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	sc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	client, ok := hangup.Watch(sc).(*hangup.Conn)
	if !ok {
		sc.Close()
		t.Skip("hangups are not watched on this platform")
	}
	t.Cleanup(func() { client.Close() })
	return client, peer.(*net.TCPConn)
}

// getExchange is an exchange on client carrying GET /work, read as the
// server reads it.
func getExchange(t *testing.T, client net.Conn) *h1.Exchange {
	t.Helper()
	x := &h1.Exchange{Client: client}
	if err := h1.NewReader(strings.NewReader("GET /work HTTP/1.1\r\nHost: x\r\n\r\n"), 16<<10).ReadRequestHead(&x.Req); err != nil {
		t.Fatal(err)
	}
	return x
}
