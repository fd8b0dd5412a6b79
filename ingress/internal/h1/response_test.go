package h1

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// readResponse reads one answer whole from raw, to a HEAD request when
// head, and returns what is left unread.
func readResponse(t testing.TB, raw string, head bool, max int) (*Response, int, error) {
	t.Helper()
	var r Response
	br := NewReader(strings.NewReader(raw), 1024)
	if err := br.ReadResponseHead(&r); err != nil {
		return &r, br.Buffered(), err
	}
	err := br.ReadResponseBody(&r, head, max)
	return &r, br.Buffered(), err
}

func TestReadResponse_Framing(t *testing.T) {
	for _, tt := range []struct {
		name, raw string
		head      bool
		code      int
		reason    string
		body      string
		close     bool
		left      int // bytes left buffered past the answer
	}{
		{name: "content-length", raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", code: 200, reason: "OK", body: "ok"},
		{name: "chunked, trailer dropped", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Sum: 1\r\n\r\n", code: 200, reason: "OK", body: "ok"},
		{name: "until close", raw: "HTTP/1.1 200 OK\r\n\r\nall of it", code: 200, reason: "OK", body: "all of it", close: true},
		{name: "HEAD keeps nothing", raw: "HTTP/1.1 200 OK\r\nContent-Length: 38\r\n\r\n", head: true, code: 200, reason: "OK"},
		{name: "HEAD with a body leaves it unread", raw: "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil", head: true, code: 200, reason: "OK", left: 4},
		{name: "204 has no body", raw: "HTTP/1.1 204 No Content\r\nContent-Length: 4\r\n\r\n", code: 204, reason: "No Content"},
		{name: "304 has no body", raw: "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", code: 304, reason: "Not Modified"},
		{name: "interim answers skipped", raw: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx", code: 201, reason: "Created", body: "x"},
		{name: "no reason phrase", raw: "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", code: 200},
		{name: "HTTP/1.0 closes", raw: "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", code: 200, reason: "OK", body: "x", close: true},
		{name: "HTTP/1.0 keep-alive", raw: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx", code: 200, reason: "OK", body: "x"},
		{name: "Connection: close", raw: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx", code: 200, reason: "OK", body: "x", close: true},
		{name: "TE wins over CL, and closes", raw: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n", code: 200, reason: "OK", body: "x", close: true},
		{name: "longer than its Content-Length", raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1", code: 200, reason: "OK", body: "ok", left: 8},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, left, err := readResponse(t, tt.raw, tt.head, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if r.Code != tt.code || string(r.Reason) != tt.reason || string(r.Body) != tt.body || r.Close != tt.close || left != tt.left {
				t.Fatalf("code %d reason %q body %q close %v left %d", r.Code, r.Reason, r.Body, r.Close, left)
			}
		})
	}
}

func TestReadResponse_Refused(t *testing.T) {
	for _, tt := range []struct {
		name, raw string
		want      error // nil: any error
	}{
		{"upgrade", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", ErrUpgrade},
		{"gzip coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", nil},
		{"chunked twice", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", nil},
		{"differing lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", nil},
		{"bad status", "HTTP/1.1 2x0 OK\r\n\r\n", nil},
		{"status under 100", "HTTP/1.1 099 Low\r\n\r\n", nil},
		{"no space after the status", "HTTP/1.1 200OK\r\n\r\n", nil},
		{"not HTTP", "ICY 200 OK\r\n\r\n", nil},
		{"obs-fold", "HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 0\r\n\r\n", nil},
		{"body over the limit", "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n01234567890123456789", ErrBodyTooLarge},
		{"close-delimited body over the limit", "HTTP/1.1 200 OK\r\n\r\n01234567890123456789", ErrBodyTooLarge},
		{"cut short", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", io.ErrUnexpectedEOF},
		{"too many interim answers", strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 20), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := readResponse(t, tt.raw, false, 10)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
		})
	}
	if _, _, err := readResponse(t, "", false, 10); err != io.EOF {
		t.Fatalf("no answer at all: %v, want io.EOF", err)
	}
}

func TestAppendResponseHead(t *testing.T) {
	raw := "HTTP/1.1 200 Fine\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nTransfer-Encoding: chunked\r\n" +
		"Trailer: X-Sum\r\nUpgrade: h2c\r\nSet-Cookie: a=\"1\"\r\nSet-Cookie: b=2\r\nContent-Type: text/plain\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
	r, _, err := readResponse(t, raw, false, 100)
	if err != nil {
		t.Fatal(err)
	}
	got := string(AppendResponseHead(nil, r, false, false, false))
	want := "HTTP/1.1 200 Fine\r\nSet-Cookie: a=\"1\"\r\nSet-Cookie: b=2\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\n"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if got := string(AppendResponseHead(nil, r, false, true, false)); !strings.HasSuffix(got, "Content-Length: 3\r\nConnection: close\r\n\r\n") {
		t.Fatalf("closing: %q", got)
	}
	if got := string(AppendResponseHead(nil, r, false, false, true)); !strings.HasSuffix(got, "Content-Length: 3\r\nConnection: keep-alive\r\n\r\n") {
		t.Fatalf("HTTP/1.0 kept alive: %q", got)
	}

	// HEAD and 304 keep the declared length; 204 gets none; neither has a body.
	for _, tt := range []struct {
		raw  string
		head bool
		want string
	}{
		{"HTTP/1.1 200 OK\r\nContent-Length: 38\r\n\r\n", true, "HTTP/1.1 200 OK\r\nContent-Length: 38\r\n\r\n"},
		{"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 7\r\n\r\n", false, "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 7\r\n\r\n"},
		{"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", false, "HTTP/1.1 204 No Content\r\n\r\n"},
		{"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", false, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
	} {
		r, _, err := readResponse(t, tt.raw, tt.head, 100)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(AppendResponseHead(nil, r, tt.head, false, false)); got != tt.want || r.HasBody(tt.head) != (r.Code == 200 && !tt.head) {
			t.Fatalf("%q: got %q, want %q", tt.raw, got, tt.want)
		}
	}

	var own Response
	own.Text(503, "busy\n")
	if got := string(AppendResponseHead(nil, &own, false, true, false)); got != "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nContent-Length: 5\r\nConnection: close\r\n\r\n" {
		t.Fatalf("own answer: %q", got)
	}
}

func TestReader_BodyBuffered(t *testing.T) {
	br := NewReader(strings.NewReader("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), 1024)
	var r Response
	if err := br.ReadResponseHead(&r); err != nil {
		t.Fatal(err)
	}
	if !br.BodyBuffered(&r, false) {
		t.Fatal("a body that came with its head is not buffered")
	}
	br = NewReader(&oneByte{s: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"}, 1024)
	if err := br.ReadResponseHead(&r); err != nil {
		t.Fatal(err)
	}
	if br.BodyBuffered(&r, false) || !br.BodyBuffered(&r, true) {
		t.Fatal("a chunked body is taken as buffered, or a HEAD answer's as not")
	}
	if err := br.ReadResponseBody(&r, false, 100); err != nil || string(r.Body) != "ok" {
		t.Fatalf("body read a byte at a time: %q, %v", r.Body, err)
	}
}

// oneByte reads one byte at a time, as a slow connection delivers.
type oneByte struct{ s string }

func (o *oneByte) Read(p []byte) (int, error) {
	if len(o.s) == 0 {
		return 0, io.EOF
	}
	p[0] = o.s[0]
	o.s = o.s[1:]
	return 1, nil
}

// A head that arrives a byte at a time is found once whole, and its end
// is scanned for only once per byte (Reader.scanned).
func TestReader_HeadInPieces(t *testing.T) {
	raw := "GET /slow HTTP/1.1\r\nHost: x\r\nX-A: " + strings.Repeat("b", 500) + "\r\n\r\n"
	br := NewReader(&oneByte{s: raw + raw}, 1024)
	var r Request
	for range 2 {
		if err := br.ReadRequestHead(&r); err != nil {
			t.Fatal(err)
		}
		if string(r.Target) != "/slow" || len(r.Fields) != 2 {
			t.Fatalf("%q %+v", r.Target, r.Fields)
		}
	}
	if err := br.ReadRequestHead(&r); err != io.EOF {
		t.Fatalf("after both: %v, want io.EOF", err)
	}
}

// The proxy's own answer lets go of the length of the backend head before
// it, so a large one is not kept on its account.
func TestResponse_TextResetsTheHead(t *testing.T) {
	r, _, err := readResponse(t, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 900)+"\r\nContent-Length: 0\r\n\r\n", false, 10)
	if err != nil {
		t.Fatal(err)
	}
	r.Text(502, "502 Bad Gateway\n")
	r.trimHead(512)
	if r.head != nil {
		t.Fatalf("after an own answer, a %d-byte head copy is kept", cap(r.head))
	}
}
