package h1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// deadline bounds every wait of these tests; none expects to reach it.
const wait = 10 * time.Second

type testServer struct {
	*Server
	addr    string
	mu      sync.Mutex
	refused []int
	served  chan struct{}
}

// startServer serves echo-like answers: the body is the method, target and
// request body; /slow waits for release; /big answers 100 KiB.
func startServer(t *testing.T, configure func(*Server)) (*testServer, chan struct{}) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	ts := &testServer{addr: l.Addr().String(), served: make(chan struct{}, 100)}
	ts.Server = &Server{
		Handler: func(x *Exchange) {
			ts.served <- struct{}{}
			switch string(x.Req.Target) {
			case "/slow":
				<-release
			case "/big":
				x.Resp.Text(200, strings.Repeat("b", 100<<10))
				return
			}
			x.Resp.Text(200, string(x.Req.Method)+" "+string(x.Req.Target)+" "+string(x.Req.Body))
		},
		ClientError: func(x *Exchange, status int, _ error) {
			ts.mu.Lock()
			ts.refused = append(ts.refused, status)
			ts.mu.Unlock()
			x.Resp.Text(status, "refused\n")
		},
		MaxHeadSize: 1024,
		MaxBodySize: 100,
		ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, IdleTimeout: time.Minute,
	}
	if configure != nil {
		configure(ts.Server)
	}
	done := make(chan error, 1)
	go func() { done <- ts.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = ts.Shutdown(ctx)
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v after Shutdown, want nil", err)
		}
	})
	return ts, release
}

func (ts *testServer) refusals() []int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]int(nil), ts.refused...)
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(wait))
	return c, bufio.NewReader(c)
}

type answer struct {
	status int
	fields map[string]string
	body   string
}

// readAnswer reads one answer framed by its Content-Length.
func readAnswer(t *testing.T, br *bufio.Reader, head bool) answer {
	t.Helper()
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("status line: %v", err)
	}
	var a answer
	parts := strings.SplitN(strings.TrimRight(line, "\r\n"), " ", 3)
	a.status, _ = strconv.Atoi(parts[1])
	a.fields = map[string]string{}
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("fields: %v", err)
		}
		l = strings.TrimRight(l, "\r\n")
		if l == "" {
			break
		}
		k, v, _ := strings.Cut(l, ": ")
		a.fields[strings.ToLower(k)] = v
	}
	if n, err := strconv.Atoi(a.fields["content-length"]); err == nil && !head {
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			t.Fatalf("body: %v", err)
		}
		a.body = string(b)
	}
	return a
}

// closed reports whether the server closed the connection (EOF next).
func closed(t *testing.T, br *bufio.Reader) bool {
	t.Helper()
	_, err := br.ReadByte()
	return err == io.EOF
}

func TestServer_KeepAliveAndPipelining(t *testing.T) {
	ts, _ := startServer(t, nil)
	c, br := dial(t, ts.addr)
	// Two requests in one write, then a third: answered in order on one
	// connection.
	_, _ = io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nPOST /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
	for _, want := range []string{"GET /1 ", "POST /2 abc"} {
		if a := readAnswer(t, br, false); a.status != 200 || a.body != want || a.fields["connection"] != "" {
			t.Fatalf("got %+v, want body %q", a, want)
		}
	}
	_, _ = io.WriteString(c, "HEAD /3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	a := readAnswer(t, br, true)
	if a.status != 200 || a.fields["content-length"] != "8" || a.fields["connection"] != "close" {
		t.Fatalf("HEAD with close: %+v", a)
	}
	if !closed(t, br) {
		t.Fatal("the connection stayed open after Connection: close (or a HEAD answer carried a body)")
	}
}

func TestServer_HTTP10(t *testing.T) {
	ts, _ := startServer(t, nil)
	c, br := dial(t, ts.addr)
	_, _ = io.WriteString(c, "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
	if a := readAnswer(t, br, false); a.status != 200 || a.fields["connection"] != "keep-alive" {
		t.Fatalf("HTTP/1.0 keep-alive: %+v", a)
	}
	_, _ = io.WriteString(c, "GET /b HTTP/1.0\r\n\r\n")
	if a := readAnswer(t, br, false); a.status != 200 || a.fields["connection"] != "close" || !closed(t, br) {
		t.Fatalf("HTTP/1.0: %+v, want Connection: close and the connection closed", a)
	}
}

// Requests the server cannot take are answered through ClientError with
// their status, never reach the handler, and close the connection.
func TestServer_RefusedRequests(t *testing.T) {
	for _, tt := range []struct {
		name, raw string
		status    int
	}{
		{"no Host in HTTP/1.1", "GET / HTTP/1.1\r\n\r\n", 400},
		{"malformed", "GET / HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n", 400},
		{"smuggling framing", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"head too large", "GET /" + strings.Repeat("a", 2000) + " HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"body too large", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n" + strings.Repeat("a", 101), 413},
		{"transfer coding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts, _ := startServer(t, nil)
			c, br := dial(t, ts.addr)
			_, _ = io.WriteString(c, tt.raw)
			a := readAnswer(t, br, false)
			if a.status != tt.status || a.fields["connection"] != "close" || !closed(t, br) {
				t.Fatalf("%+v, want %d with the connection closed", a, tt.status)
			}
			if got := ts.refusals(); len(got) != 1 || got[0] != tt.status {
				t.Fatalf("ClientError heard %v", got)
			}
			if len(ts.served) != 0 {
				t.Fatal("the handler saw it")
			}
		})
	}
}

// A client that keeps sending a body over the limit still reads its 413:
// the server reads on for a moment before it closes, so the close does not
// reset the connection under the answer.
func TestServer_LargeBodyGets413NotAReset(t *testing.T) {
	ts, _ := startServer(t, nil)
	c, br := dial(t, ts.addr)
	go func() {
		_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
		_, _ = c.Write(make([]byte, 100000))
	}()
	if a := readAnswer(t, br, false); a.status != 413 {
		t.Fatalf("%+v, want 413", a)
	}
}

func TestServer_ExpectContinue(t *testing.T) {
	ts, _ := startServer(t, nil)
	c, br := dial(t, ts.addr)
	_, _ = io.WriteString(c, "PUT /u HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
	if line, _ := br.ReadString('\n'); line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("%q, want 100 Continue", line)
	}
	if line, _ := br.ReadString('\n'); line != "\r\n" {
		t.Fatalf("%q after 100 Continue", line)
	}
	_, _ = io.WriteString(c, "ok")
	if a := readAnswer(t, br, false); a.status != 200 || a.body != "PUT /u ok" {
		t.Fatalf("%+v", a)
	}
	// Over the limit: 413 at once, without the 100 Continue.
	c2, br2 := dial(t, ts.addr)
	_, _ = io.WriteString(c2, "PUT /u HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1000\r\n\r\n")
	if a := readAnswer(t, br2, false); a.status != 413 {
		t.Fatalf("%+v, want 413", a)
	}
}

// A request not whole within ReadTimeout gets 408; a connection idle past
// IdleTimeout is closed without a word.
func TestServer_Timeouts(t *testing.T) {
	ts, _ := startServer(t, func(s *Server) { s.ReadTimeout = 50 * time.Millisecond; s.IdleTimeout = 50 * time.Millisecond })
	c, br := dial(t, ts.addr)
	_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
	if a := readAnswer(t, br, false); a.status != 408 || !closed(t, br) {
		t.Fatalf("%+v, want 408 and a close", a)
	}
	c2, br2 := dial(t, ts.addr)
	_, _ = io.WriteString(c2, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if a := readAnswer(t, br2, false); a.status != 200 {
		t.Fatalf("%+v", a)
	}
	if !closed(t, br2) { // after the idle timeout
		t.Fatal("an idle connection was not closed")
	}
}

func TestServer_LargeAnswer(t *testing.T) {
	ts, _ := startServer(t, nil)
	c, br := dial(t, ts.addr)
	_, _ = io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n")
	if a := readAnswer(t, br, false); a.status != 200 || a.body != strings.Repeat("b", 100<<10) {
		t.Fatalf("status %d, %d bytes", a.status, len(a.body))
	}
	if a := readAnswer(t, br, false); a.body != "GET /after " {
		t.Fatalf("after a large answer: %+v", a)
	}
}

// Shutdown closes idle connections at once, lets an active request finish
// (its answer says Connection: close) and returns once it has.
func TestServer_Shutdown(t *testing.T) {
	ts, release := startServer(t, nil)
	idle, idleBR := dial(t, ts.addr)
	_, _ = io.WriteString(idle, "GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
	readAnswer(t, idleBR, false)
	<-ts.served
	busy, busyBR := dial(t, ts.addr)
	_, _ = io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-ts.served // the slow request is in the handler

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		done <- ts.Shutdown(ctx)
	}()
	if !closed(t, idleBR) {
		t.Fatal("an idle connection was not closed by Shutdown")
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with a request in flight", err)
	default:
	}
	close(release)
	if a := readAnswer(t, busyBR, false); a.status != 200 || a.fields["connection"] != "close" || !closed(t, busyBR) {
		t.Fatalf("the request in flight: %+v, want 200 with Connection: close, then a close", a)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := net.Dial("tcp", ts.addr); err == nil {
		t.Fatal("still accepting after Shutdown")
	}
}

// A Shutdown whose context ends first closes what is left and says so.
func TestServer_ShutdownDeadline(t *testing.T) {
	ts, release := startServer(t, nil)
	defer close(release)
	busy, busyBR := dial(t, ts.addr)
	_, _ = io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-ts.served
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := ts.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want the deadline", err)
	}
	if !closed(t, busyBR) {
		t.Fatal("a connection outlived Shutdown's deadline")
	}
}

// A connection that carried a large head and large bodies, then a small
// request, keeps small buffers once it waits for its next request: idle
// keep-alive connections do not hold what one request needed.
func TestServer_IdleConnectionHoldsLittle(t *testing.T) {
	ts, _ := startServer(t, func(s *Server) { s.MaxHeadSize = 16 << 10; s.MaxBodySize = 1 << 20 })
	c, br := dial(t, ts.addr)
	body := strings.Repeat("b", 100<<10)
	_, _ = io.WriteString(c, "POST /p HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("h", 10<<10)+"\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	if a := readAnswer(t, br, false); a.status != 200 {
		t.Fatalf("%+v", a)
	}
	// A small request next: what the large one needed is let go.
	_, _ = io.WriteString(c, "GET /small HTTP/1.1\r\nHost: x\r\n\r\n")
	if a := readAnswer(t, br, false); a.status != 200 {
		t.Fatalf("%+v", a)
	}
	var held int
	end := time.Now().Add(wait)
	for {
		ts.Server.mu.Lock()
		for k := range ts.conns {
			if k.state.Load() == stateIdle {
				held = len(k.br.buf) + cap(k.x.Req.head) + cap(k.x.Req.Body) + cap(k.x.Resp.head) + cap(k.x.Resp.Body) + cap(k.x.Out) + cap(k.wbuf)
			}
		}
		ts.Server.mu.Unlock()
		if held > 0 || time.Now().After(end) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if held == 0 || held > 16<<10 {
		t.Fatalf("an idle connection holds %d bytes of buffers after a 10 KiB head and a 100 KiB body", held)
	}
}

// Closing after an answer lingers: a request pipelined behind a body read
// straight from the socket is unread when the connection closes, and a
// plain close would reset the connection and drop what of the answer the
// client had not read yet.
func TestServer_CloseAfterAnAnswerLingers(t *testing.T) {
	ts, _ := startServer(t, func(s *Server) { s.MaxBodySize = 1 << 20 })
	c, _ := dial(t, ts.addr)
	body := strings.Repeat("b", 300<<10)
	if _, err := io.WriteString(c, "POST /p HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body+
		"GET /second HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// Read nothing until the server is done with the connection.
	end := time.Now().Add(wait)
	for {
		ts.Server.mu.Lock()
		n := len(ts.conns)
		ts.Server.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the server kept the connection")
		}
		time.Sleep(5 * time.Millisecond)
	}
	out, err := io.ReadAll(c)
	if err != nil || !strings.HasSuffix(string(out), "POST /p "+body) {
		t.Fatalf("read %d bytes, %v; want the whole answer, then EOF", len(out), err)
	}
}

// A request refused before its head is read is not framed as the answer to
// the HEAD before it: the refusal carries its body.
func TestServer_RefusalAfterAHEADHasItsBody(t *testing.T) {
	ts, _ := startServer(t, nil)
	c, br := dial(t, ts.addr)
	_, _ = io.WriteString(c, "HEAD /h HTTP/1.1\r\nHost: x\r\n\r\nGET /"+strings.Repeat("a", 2000)+" HTTP/1.1\r\nHost: x\r\n\r\n")
	if a := readAnswer(t, br, true); a.status != 200 {
		t.Fatalf("HEAD: %+v", a)
	}
	if a := readAnswer(t, br, false); a.status != 400 || a.body != "refused\n" {
		t.Fatalf("the head over the limit after a HEAD: %+v, want 400 with its body", a)
	}
}

// A connection that never sends a byte is closed after FirstRequestTimeout,
// long before IdleTimeout.
func TestServer_FirstRequestTimeout(t *testing.T) {
	ts, _ := startServer(t, func(s *Server) { s.FirstRequestTimeout = 50 * time.Millisecond; s.IdleTimeout = time.Minute })
	_, br := dial(t, ts.addr)
	if !closed(t, br) {
		t.Fatal("a silent new connection was not closed after FirstRequestTimeout")
	}
}

// idleConns counts the server's connections waiting for a request.
func idleConns(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		if c.state.Load() == stateIdle {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(wait); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// At MaxConns a new client is served: the connection idle longest is
// closed for it, the others are kept.
func TestServer_MaxConnsShedsOldestIdle(t *testing.T) {
	ts, _ := startServer(t, func(s *Server) { s.MaxConns = 2 })
	_, oldest := dial(t, ts.addr)
	waitFor(t, "the first idle connection", func() bool { return idleConns(ts.Server) == 1 })
	c2, br2 := dial(t, ts.addr)
	waitFor(t, "the second idle connection", func() bool { return idleConns(ts.Server) == 2 })
	c3, br3 := dial(t, ts.addr)
	_, _ = io.WriteString(c3, "GET /new HTTP/1.1\r\nHost: x\r\n\r\n")
	if a := readAnswer(t, br3, false); a.status != 200 {
		t.Fatalf("the new client at the cap: %+v, want 200", a)
	}
	if !closed(t, oldest) {
		t.Fatal("the oldest idle connection was not shed")
	}
	_, _ = io.WriteString(c2, "GET /kept HTTP/1.1\r\nHost: x\r\n\r\n")
	if a := readAnswer(t, br2, false); a.status != 200 {
		t.Fatalf("the younger idle connection: %+v, want 200", a)
	}
	if ts.Shed() != 1 || ts.Refused() != 0 {
		t.Fatalf("shed %d refused %d, want 1 and 0", ts.Shed(), ts.Refused())
	}
}

// At MaxConns with no idle connection, the new one is closed and the
// active ones finish.
func TestServer_MaxConnsRefusesWhenNoneIdle(t *testing.T) {
	ts, release := startServer(t, func(s *Server) { s.MaxConns = 1 })
	c1, br1 := dial(t, ts.addr)
	_, _ = io.WriteString(c1, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-ts.served
	_, br2 := dial(t, ts.addr)
	if !closed(t, br2) {
		t.Fatal("a connection over the cap was not closed")
	}
	close(release)
	if a := readAnswer(t, br1, false); a.status != 200 {
		t.Fatalf("the active request: %+v", a)
	}
	if ts.Refused() != 1 {
		t.Fatalf("refused %d, want 1", ts.Refused())
	}
}

// Bodies held at once are bounded by the BodyBudget: a request whose body
// would overrun it gets 503 while another holds its share, and is taken
// once that share is released with its answer.
func TestServer_BodyBudget(t *testing.T) {
	budget := NewBodyBudget(150)
	ts, release := startServer(t, func(s *Server) { s.BodyBudget = budget })
	body := strings.Repeat("x", 100)
	post := func(path string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + body
	}
	c1, br1 := dial(t, ts.addr)
	_, _ = io.WriteString(c1, post("/slow"))
	<-ts.served
	c2, br2 := dial(t, ts.addr)
	_, _ = io.WriteString(c2, post("/second"))
	if a := readAnswer(t, br2, false); a.status != 503 {
		t.Fatalf("a body over the budget: %+v, want 503", a)
	}
	close(release)
	if a := readAnswer(t, br1, false); a.status != 200 {
		t.Fatalf("the held request: %+v", a)
	}
	waitFor(t, "the budget released", func() bool { return budget.InUse() == 0 })
	c3, br3 := dial(t, ts.addr)
	_, _ = io.WriteString(c3, post("/third"))
	if a := readAnswer(t, br3, false); a.status != 200 {
		t.Fatalf("after the release: %+v, want 200", a)
	}
}
