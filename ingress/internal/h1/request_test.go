package h1

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// readRequest reads one request whole from raw.
func readRequest(t testing.TB, raw string, max int) (*Request, error) {
	t.Helper()
	var r Request
	br := NewReader(strings.NewReader(raw), 1024)
	if err := br.ReadRequestHead(&r); err != nil {
		return &r, err
	}
	return &r, br.ReadRequestBody(&r, max)
}

func TestReadRequest_Valid(t *testing.T) {
	for _, tt := range []struct {
		name, raw                 string
		method, target, host      string
		minor                     int
		body                      string
		hasBody, close, expect100 bool
		fields                    int
	}{
		{name: "plain GET", raw: "GET /a?b=c HTTP/1.1\r\nHost: x\r\n\r\n",
			method: "GET", target: "/a?b=c", host: "x", minor: 1, fields: 1},
		{name: "bare LF line ends", raw: "GET / HTTP/1.1\nHost: x\nAccept: */*\n\n",
			method: "GET", target: "/", host: "x", minor: 1, fields: 2},
		{name: "leading empty lines are skipped", raw: "\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
			method: "GET", target: "/", host: "x", minor: 1, fields: 1},
		{name: "HTTP/1.0 closes by default", raw: "GET / HTTP/1.0\r\n\r\n",
			method: "GET", target: "/", minor: 0, close: true},
		{name: "HTTP/1.0 keep-alive", raw: "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
			method: "GET", target: "/", minor: 0, fields: 1},
		{name: "HTTP/1.1 close", raw: "GET / HTTP/1.1\r\nHost: x\r\nConnection: upgrade, close\r\n\r\n",
			method: "GET", target: "/", host: "x", minor: 1, close: true, fields: 2},
		{name: "HTTP/1.9 reads as 1.1", raw: "GET / HTTP/1.9\r\nHost: x\r\n\r\n",
			method: "GET", target: "/", host: "x", minor: 1, fields: 1},
		{name: "Content-Length body", raw: "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
			method: "POST", target: "/p", host: "x", minor: 1, body: "hello", hasBody: true, fields: 2},
		{name: "Content-Length 0 frames an empty body", raw: "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
			method: "POST", target: "/p", host: "x", minor: 1, hasBody: true, fields: 2},
		{name: "equal Content-Lengths are one", raw: "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\nabc",
			method: "POST", target: "/p", host: "x", minor: 1, body: "abc", hasBody: true, fields: 3},
		{name: "chunked with extensions and trailer",
			raw:    "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n3;ext=1\r\nabc\r\nA ; x\r\n0123456789\r\n0\r\nForwarded: for=evil\r\n\r\n",
			method: "POST", target: "/c", host: "x", minor: 1, body: "abc0123456789", hasBody: true, fields: 2},
		{name: "expect 100-continue", raw: "PUT /u HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\nok",
			method: "PUT", target: "/u", host: "x", minor: 1, body: "ok", hasBody: true, expect100: true, fields: 3},
		{name: "HTTP/1.0 expectation is ignored", raw: "PUT /u HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok",
			method: "PUT", target: "/u", minor: 0, body: "ok", hasBody: true, close: true, fields: 2},
		{name: "absolute form and obs-text in a value", raw: "GET http://h/p HTTP/1.1\r\nHost: h\r\nX-Name: caf\xc3\xa9\t \r\n\r\n",
			method: "GET", target: "http://h/p", host: "h", minor: 1, fields: 2},
		{name: "empty value", raw: "GET / HTTP/1.1\r\nHost: x\r\nX-Empty:\r\n\r\n",
			method: "GET", target: "/", host: "x", minor: 1, fields: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := readRequest(t, tt.raw, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if string(r.Method) != tt.method || string(r.Target) != tt.target || string(r.Host) != tt.host || r.Minor != tt.minor {
				t.Fatalf("got %q %q host %q minor %d", r.Method, r.Target, r.Host, r.Minor)
			}
			if string(r.Body) != tt.body || r.HasBody != tt.hasBody || r.Close != tt.close || r.ExpectContinue != tt.expect100 {
				t.Fatalf("body %q hasBody %v close %v expect100 %v", r.Body, r.HasBody, r.Close, r.ExpectContinue)
			}
			if len(r.Fields) != tt.fields {
				t.Fatalf("%d fields, want %d: %+v", len(r.Fields), tt.fields, r.Fields)
			}
		})
	}
}

// What a backend could frame or read differently from the proxy is
// refused, with the status the server answers (RFC 9112 §§2.2, 5, 6).
func TestReadRequest_Refused(t *testing.T) {
	for _, tt := range []struct {
		name, raw string
		status    int
	}{
		{"obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", 400},
		{"space before the colon", "GET / HTTP/1.1\r\nHost: x\r\nContent-Length : 5\r\n\r\nhello", 400},
		{"space in a name", "GET / HTTP/1.1\r\nHost: x\r\nX A: b\r\n\r\n", 400},
		{"empty name", "GET / HTTP/1.1\r\nHost: x\r\n: b\r\n\r\n", 400},
		{"no colon", "GET / HTTP/1.1\r\nHost: x\r\nX-A\r\n\r\n", 400},
		{"bare CR in a value", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n", 400},
		{"NUL in a value", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", 400},
		{"DEL in a value", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x7fb\r\n\r\n", 400},
		{"two Host fields", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
		{"invalid Host", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400},
		{"Host with userinfo", "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", 400},
		{"CL and TE", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"differing CLs", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400},
		{"differing CLs in a list", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 4\r\n\r\nabcd", 400},
		{"signed CL", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc", 400},
		{"empty CL", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: \r\n\r\n", 400},
		{"huge CL", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n", 400},
		{"gzip coding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501},
		{"chunked not last", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n", 501},
		{"chunked twice", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"TE in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"empty TE", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ,\r\n\r\n", 400},
		{"HTTP/2.0", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 400},
		{"HTTP/0.9", "GET /\r\n\r\n", 400},
		{"lowercase version", "GET / http/1.1\r\nHost: x\r\n\r\n", 400},
		{"two spaces", "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"tab in the target", "GET /a\tb HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"no target", "GET HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"bad method byte", "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"bad chunk size", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
		{"chunk size overflow", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n", 400},
		{"chunk longer than its size", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", 400},
		{"space before the chunk size", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n 2\r\nab\r\n0\r\n\r\n", 400},
		{"junk after the chunk size", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2 x\r\nab\r\n0\r\n\r\n", 400},
		{"CL over the limit", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world", 413},
		{"chunked over the limit", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n", 413},
		{"head over the buffer", "GET /" + strings.Repeat("a", 2000) + " HTTP/1.1\r\nHost: x\r\n\r\n", 400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readRequest(t, tt.raw, 10)
			if err == nil {
				t.Fatal("taken")
			}
			if got := StatusOf(err); got != tt.status {
				t.Fatalf("status %d (%v), want %d", got, err, tt.status)
			}
		})
	}
}

// A request cut short is the connection's failure (no answer is owed):
// EOF before a byte is io.EOF, within a head or body io.ErrUnexpectedEOF.
func TestReadRequest_CutShort(t *testing.T) {
	if _, err := readRequest(t, "", 100); err != io.EOF {
		t.Fatalf("nothing: %v, want io.EOF", err)
	}
	for _, raw := range []string{
		"GET / HTTP/1.1\r\nHost:",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhel",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Trailer: 1\r\n",
	} {
		_, err := readRequest(t, raw, 100)
		if !errors.Is(err, io.ErrUnexpectedEOF) || StatusOf(err) != 0 {
			t.Fatalf("%q: %v, want io.ErrUnexpectedEOF and no status", raw, err)
		}
	}
}

// Connection names its own hop-by-hop fields, which are marked (Host and
// the framing fields never are); the hop-by-hop kinds are marked whatever
// Connection says.
func TestReadRequest_HopByHop(t *testing.T) {
	r, err := readRequest(t, "GET / HTTP/1.1\r\nHost: x\r\nConnection: X-Secret, host, Content-Length\r\nX-Secret: 1\r\nx-secret: 2\r\n"+
		"Keep-Alive: 5\r\nUpgrade: websocket\r\nTE: trailers\r\nProxy-Authorization: a\r\nX-Keep: 3\r\n\r\n", 100)
	if err != nil {
		t.Fatal(err)
	}
	hop := map[string]bool{}
	for _, f := range r.Fields {
		if f.Hop {
			hop[strings.ToLower(string(f.Name))+"="+string(f.Value)] = true
		}
	}
	for _, want := range []string{"connection=X-Secret, host, Content-Length", "x-secret=1", "x-secret=2", "keep-alive=5", "upgrade=websocket", "te=trailers", "proxy-authorization=a"} {
		if !hop[want] {
			t.Errorf("%s is not marked hop-by-hop", want)
		}
	}
	for _, f := range r.Fields {
		if (f.Kind == KindHost || string(f.Name) == "X-Keep") && f.Hop {
			t.Errorf("%s is marked hop-by-hop", f.Name)
		}
	}
}

// A connection's second request reuses the first's buffers and nothing of
// the first survives in it.
func TestReadRequest_PipelinedAndReused(t *testing.T) {
	raw := "POST /1 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nX-First: 1\r\n\r\nabc" +
		"GET /2 HTTP/1.1\r\nHost: b\r\n\r\n"
	br := NewReader(strings.NewReader(raw), 1024)
	var r Request
	for i, want := range []struct{ target, host, body string }{{"/1", "a", "abc"}, {"/2", "b", ""}} {
		if err := br.ReadRequestHead(&r); err != nil {
			t.Fatal(err)
		}
		if err := br.ReadRequestBody(&r, 100); err != nil {
			t.Fatal(err)
		}
		if string(r.Target) != want.target || string(r.Host) != want.host || string(r.Body) != want.body {
			t.Fatalf("request %d: %q %q %q", i, r.Target, r.Host, r.Body)
		}
	}
	if len(r.Fields) != 1 || r.HasBody || r.ContentLength != -1 {
		t.Fatalf("the second request kept the first's: %+v hasBody %v cl %d", r.Fields, r.HasBody, r.ContentLength)
	}
}

func TestRequest_SetHost(t *testing.T) {
	r, err := readRequest(t, "GET http://a/p HTTP/1.0\r\n\r\n", 10)
	if err != nil {
		t.Fatal(err)
	}
	r.SetHost([]byte("a"))
	r.SetHost([]byte("b"))
	if len(r.Fields) != 1 || string(r.Fields[0].Value) != "b" || string(r.Host) != "b" || r.Fields[0].Kind != KindHost {
		t.Fatalf("fields %+v host %q", r.Fields, r.Host)
	}
}

func TestKindOf(t *testing.T) {
	for name, want := range map[string]Kind{
		"Host": KindHost, "content-LENGTH": KindContentLength, "X-Forwarded-For": KindXForwardedFor,
		"x-real-ip": KindXRealIP, "TE": KindTE, "X-Prequal-Service-Us": KindPrequalServiceUs,
		"Hosts": KindOther, "": KindOther, "X-Forwarded-Fo": KindOther, strings.Repeat("a", 40): KindOther,
	} {
		if got := KindOf([]byte(name)); got != want {
			t.Errorf("KindOf(%q) = %d, want %d", name, got, want)
		}
	}
}

// A head copy grown by a large request is dropped once a small one has
// followed, and nothing of the request points into it any more (fields
// kept in the reused list would keep it alive); after a large one it is
// kept for the next.
func TestRequest_TrimHead(t *testing.T) {
	big := "GET /big HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("h", 10<<10) + "\r\n\r\n"
	small := "GET /small HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n\r\n"
	br := NewReader(strings.NewReader(big+small), 16<<10)
	var r Request
	if err := br.ReadRequestHead(&r); err != nil {
		t.Fatal(err)
	}
	r.trimHead(4 << 10)
	if r.head == nil || string(r.Target) != "/big" {
		t.Fatal("the head of a large request was dropped while its request is the last")
	}
	if err := br.ReadRequestHead(&r); err != nil {
		t.Fatal(err)
	}
	r.trimHead(4 << 10)
	if r.head != nil || r.Method != nil || r.Target != nil || r.Host != nil {
		t.Fatalf("after a small request: head %d bytes, method %q, target %q, host %q", cap(r.head), r.Method, r.Target, r.Host)
	}
	for _, f := range r.Fields[:cap(r.Fields)] {
		if f.Name != nil || f.Value != nil {
			t.Fatal("the field list still points into the dropped head")
		}
	}
}

// A head with more than MaxFields field lines is refused, however small
// each line is; MaxFields lines are taken.
func TestReadRequestHead_FieldCountBound(t *testing.T) {
	head := func(n int) string {
		return "GET / HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("a:\r\n", n-1) + "\r\n"
	}
	for _, tt := range []struct {
		fields int
		ok     bool
	}{{MaxFields, true}, {MaxFields + 1, false}, {4000, false}} {
		var r Request
		br := NewReader(strings.NewReader(head(tt.fields)), 16<<10)
		err := br.ReadRequestHead(&r)
		if (err == nil) != tt.ok || (err != nil && StatusOf(err) != 400) {
			t.Errorf("%d fields: %v, want ok=%v (or 400)", tt.fields, err, tt.ok)
		}
	}
}
