package prober

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

// countingListener counts accepted connections and those the peer closed.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// countedServer is an HTTP server whose accepted connections are counted.
func countedServer(t *testing.T, h http.HandlerFunc) (string, *countingListener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = cl
	srv.Start()
	t.Cleanup(srv.Close)
	return ln.Addr().String(), cl
}

// rawServer answers each connection with serve, on its own goroutine.
func rawServer(t *testing.T, serve func(c net.Conn)) (string, *countingListener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close() // connections the prober keeps idle
		}
		mu.Unlock()
		wg.Wait()
	})
	go func() {
		for {
			c, err := cl.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String(), cl
}

// readRequest reads one request's head from r; false at EOF or on error.
func readRequest(r *bufio.Reader) bool {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return false
		}
		if line == "\r\n" {
			return true
		}
	}
}

func okBody(now time.Time) string {
	return fmt.Sprintf(`{"rif":2,"latency_median_ms":4,"timestamp_ms":%d,"samples":3}`, now.UnixMilli())
}

func newProber(t *testing.T, cfg Config) *Prober {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func wantOK(t *testing.T, r Result) {
	t.Helper()
	if r.Outcome != loadbalancer.ProbeOK || r.Reply.RIF != 2 || r.Reply.Latency != 4*time.Millisecond || !r.Reply.LatencyKnown {
		t.Fatalf("result %+v, want ok with rif 2 and 4 ms", r)
	}
}

func TestProber_ReusesOneConnection(t *testing.T) {
	addr, ln := countedServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != Path || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, okBody(time.Now()))
	})
	p := newProber(t, Config{Timeout: 5 * time.Second})
	for range 20 {
		wantOK(t, p.Probe(context.Background(), addr))
	}
	if n := ln.accepted.Load(); n != 1 {
		t.Fatalf("20 sequential probes opened %d connections, want 1", n)
	}
	if n := p.conns.idleCount(addr); n != 1 {
		t.Fatalf("%d idle connections, want 1", n)
	}
}

func TestProber_ServerClosingAfterEachAnswer(t *testing.T) {
	addr, ln := countedServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		fmt.Fprint(w, okBody(time.Now()))
	})
	p := newProber(t, Config{Timeout: 5 * time.Second})
	for range 5 {
		wantOK(t, p.Probe(context.Background(), addr))
	}
	if n := ln.accepted.Load(); n != 5 {
		t.Fatalf("accepted %d connections, want 5 (one per probe)", n)
	}
	if n := p.conns.idleCount(addr); n != 0 {
		t.Fatalf("kept %d connections the server closes", n)
	}
}

// A backend that closes a keep-alive connection while it is idle (its idle
// timeout) must not turn the next probe into a failure.
func TestProber_RetriesAnIdleConnectionTheBackendClosed(t *testing.T) {
	addr, ln := rawServer(t, func(c net.Conn) {
		if readRequest(bufio.NewReader(c)) {
			body := okBody(time.Now())
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		}
		// ... and close, without saying so.
	})
	p := newProber(t, Config{Timeout: 5 * time.Second})
	for range 5 {
		wantOK(t, p.Probe(context.Background(), addr))
	}
	if n := ln.accepted.Load(); n != 5 {
		t.Fatalf("accepted %d connections, want 5", n)
	}
}

func TestProber_ChunkedAnswers(t *testing.T) {
	addr, ln := rawServer(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		for readRequest(r) {
			body := okBody(time.Now())
			// Three chunks, an extension and a trailer.
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x;x=y\r\n%s\r\n%x\r\n%s\r\n%x\r\n%s\r\n0\r\nX-T: 1\r\n\r\n",
				5, body[:5], 1, body[5:6], len(body)-6, body[6:])
		}
	})
	p := newProber(t, Config{Timeout: 5 * time.Second})
	for range 3 {
		wantOK(t, p.Probe(context.Background(), addr))
	}
	if n := ln.accepted.Load(); n != 1 {
		t.Fatalf("accepted %d connections, want 1: chunked answers keep the connection", n)
	}
}

// net/http chunks an answer whose handler flushes before the end.
func TestProber_ChunkedAnswerFromNetHTTP(t *testing.T) {
	addr, _ := countedServer(t, func(w http.ResponseWriter, r *http.Request) {
		body := okBody(time.Now())
		fmt.Fprint(w, body[:10])
		w.(http.Flusher).Flush()
		fmt.Fprint(w, body[10:])
	})
	p := newProber(t, Config{Timeout: 5 * time.Second})
	wantOK(t, p.Probe(context.Background(), addr))
}

func TestProber_GarbageIsAConnectionError(t *testing.T) {
	for name, answer := range map[string]string{
		"not http":        "hello world\r\n\r\n",
		"bad status":      "HTTP/1.1 2x0 OK\r\n\r\n",
		"bad length":      "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"two lengths":     "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n{}",
		"bad chunk":       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"gzip":            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"cut short":       "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{\"rif\":1}",
		"header too long": "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", maxHeader) + "\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			addr, ln := rawServer(t, func(c net.Conn) {
				r := bufio.NewReader(c)
				for readRequest(r) {
					io.WriteString(c, answer)
					// Keep the connection open: the prober must close it.
				}
			})
			// "cut short" waits for the rest until the deadline.
			p := newProber(t, Config{Timeout: 200 * time.Millisecond})
			for range 2 {
				if r := p.Probe(context.Background(), addr); r.Outcome != loadbalancer.ProbeTimeout {
					t.Fatalf("outcome %q, want timeout", r.Outcome)
				}
			}
			if n := ln.accepted.Load(); n != 2 {
				t.Fatalf("accepted %d connections, want 2: a connection that gave garbage is not reused", n)
			}
		})
	}
}

func TestProber_StatusAndBodyLimits(t *testing.T) {
	big := `{"rif":1,"pad":"` + strings.Repeat("x", maxBody) + `"}`
	for name, tt := range map[string]struct {
		answer string
		want   loadbalancer.ProbeOutcome
		reuse  bool
	}{
		"500 keeps the connection": {"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nboom", loadbalancer.ProbeStatus, true},
		"204":                      {"HTTP/1.1 204 No Content\r\n\r\n", loadbalancer.ProbeStatus, true},
		"200 too large":            {fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(big), big), loadbalancer.ProbeMalformed, false},
		"503 too large":            {fmt.Sprintf("HTTP/1.1 503 Busy\r\nContent-Length: %d\r\n\r\n%s", len(big), big), loadbalancer.ProbeStatus, false},
		"not json":                 {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nrif=3", loadbalancer.ProbeMalformed, true},
		"HTTP/1.0 closes":          {"HTTP/1.0 200 OK\r\nContent-Length: 8\r\n\r\n{\"rif\":1}", loadbalancer.ProbeMalformed, false},
	} {
		t.Run(name, func(t *testing.T) {
			addr, ln := rawServer(t, func(c net.Conn) {
				r := bufio.NewReader(c)
				for readRequest(r) {
					io.WriteString(c, tt.answer)
				}
			})
			p := newProber(t, Config{Timeout: 2 * time.Second})
			for range 2 {
				if r := p.Probe(context.Background(), addr); r.Outcome != tt.want {
					t.Fatalf("outcome %q, want %q", r.Outcome, tt.want)
				}
			}
			want := int64(2)
			if tt.reuse {
				want = 1
			}
			if n := ln.accepted.Load(); n != want {
				t.Fatalf("accepted %d connections, want %d", n, want)
			}
		})
	}
}

func TestProber_SlowServerTimesOut(t *testing.T) {
	release := make(chan struct{})
	addr, _ := rawServer(t, func(c net.Conn) {
		readRequest(bufio.NewReader(c))
		<-release
	})
	defer close(release)
	p := newProber(t, Config{Timeout: 50 * time.Millisecond})
	r := p.Probe(context.Background(), addr)
	if r.Outcome != loadbalancer.ProbeTimeout {
		t.Fatalf("outcome %q, want timeout", r.Outcome)
	}
	if r.Duration < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before the 50ms timeout", r.Duration)
	}
	if n := p.conns.idleCount(addr); n != 0 {
		t.Fatalf("kept %d timed-out connections", n)
	}
}

func TestProber_ContextDeadlineBoundsTheProbe(t *testing.T) {
	release := make(chan struct{})
	addr, _ := rawServer(t, func(c net.Conn) {
		readRequest(bufio.NewReader(c))
		<-release
	})
	defer close(release)
	p := newProber(t, Config{Timeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if r := p.Probe(ctx, addr); r.Outcome != loadbalancer.ProbeTimeout {
		t.Fatalf("outcome %q, want timeout", r.Outcome)
	}
}

// Probes running at once each hold a connection; afterwards no more than
// MaxIdlePerEndpoint stay open.
func TestProber_BoundsIdleConnections(t *testing.T) {
	const probes = 5
	var waiting sync.WaitGroup
	waiting.Add(probes)
	closed := make(chan struct{}, probes)
	addr, ln := rawServer(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		if !readRequest(r) {
			return
		}
		waiting.Done()
		waiting.Wait() // every probe is in flight on its own connection
		body := okBody(time.Now())
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		if !readRequest(r) {
			closed <- struct{}{}
		}
	})
	p := newProber(t, Config{Timeout: 10 * time.Second, MaxIdlePerEndpoint: 2})
	var wg sync.WaitGroup
	for range probes {
		wg.Go(func() { wantOK(t, p.Probe(context.Background(), addr)) })
	}
	wg.Wait()
	if n := ln.accepted.Load(); n != probes {
		t.Fatalf("accepted %d, want %d", n, probes)
	}
	if n := p.conns.idleCount(addr); n != 2 {
		t.Fatalf("%d idle connections, want 2", n)
	}
	for range probes - 2 {
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("the connections over the idle bound were not closed")
		}
	}
}

func TestProber_RunClosesIdleConnections(t *testing.T) {
	closed := make(chan struct{}, 1)
	addr, _ := rawServer(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		for readRequest(r) {
			body := okBody(time.Now())
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		}
		closed <- struct{}{}
	})
	p := newProber(t, Config{Timeout: 5 * time.Second, IdleTimeout: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	got := make(collect, 1)
	p.Enqueue(Job{Endpoint: addr, Target: got})
	wantOK(t, <-got)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("an idle connection outlived the idle timeout")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.conns.mu.Lock()
		n := len(p.conns.eps)
		p.conns.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an unused endpoint is still remembered")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestProber_RunEndClosesConnections(t *testing.T) {
	closed := make(chan struct{}, 1)
	addr, _ := rawServer(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		for readRequest(r) {
			body := okBody(time.Now())
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		}
		closed <- struct{}{}
	})
	p := newProber(t, Config{Timeout: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	got := make(collect, 1)
	p.Enqueue(Job{Endpoint: addr, Target: got})
	wantOK(t, <-got)
	cancel()
	<-done
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Run returned with a connection open")
	}
}

// Bytes that arrive on an idle connection after a complete answer (a
// backend that answered twice) are not read as the next probe's answer:
// the connection is checked before reuse and replaced.
func TestProber_LateBytesAfterAnAnswerAreNotTheNextAnswer(t *testing.T) {
	sendStray, strayWritten := make(chan struct{}), make(chan struct{})
	var requests atomic.Int32
	var first atomic.Bool
	answer := func(c net.Conn, rif int32) {
		body := fmt.Sprintf(`{"rif":%d,"latency_median_ms":4,"timestamp_ms":%d,"samples":3}`, rif, time.Now().UnixMilli())
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	addr, ln := rawServer(t, func(c net.Conn) {
		stray := first.CompareAndSwap(false, true)
		br := bufio.NewReader(c)
		for readRequest(br) {
			answer(c, requests.Add(1))
			if stray {
				stray = false
				<-sendStray // once the prober has read the answer and put the connection back
				answer(c, 99)
				close(strayWritten)
			}
		}
	})
	p := newProber(t, Config{Timeout: 5 * time.Second})
	for i := int32(1); i <= 4; i++ {
		r := p.Probe(context.Background(), addr)
		if r.Outcome != loadbalancer.ProbeOK || r.Reply.RIF != int(i) {
			t.Fatalf("probe %d: %v with rif %d, want ok with the backend's rif %d", i, r.Outcome, r.Reply.RIF, i)
		}
		if i == 1 {
			close(sendStray)
			<-strayWritten
		}
	}
	if n := ln.accepted.Load(); n != 2 {
		t.Fatalf("accepted %d connections, want 2 (the one with stray bytes replaced)", n)
	}
}
