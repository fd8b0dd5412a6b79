package h1

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

var fuzzSeeds = []string{
	"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
	"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
	"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;e\r\nabc\r\n0\r\nT: 1\r\n\r\n",
	"GET / HTTP/1.0\nConnection: keep-alive, X-A\nX-A: 1\n\n",
	"\r\nGET http://h/p HTTP/1.1\r\nHost: h\r\nHost: i\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n",
}

// FuzzReadRequest: no input panics the parser; what it takes is what it
// says it took (valid names and values, a body framed as declared), and
// the request written back from what was parsed parses to the same.
func FuzzReadRequest(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var r Request
		br := NewReader(bytes.NewReader(raw), 512)
		if err := br.ReadRequestHead(&r); err != nil {
			return
		}
		if err := br.ReadRequestBody(&r, 1<<16); err != nil {
			return
		}
		checkTaken(t, &r)
		if r.Chunked && r.ContentLength >= 0 {
			t.Fatal("both chunked and a Content-Length were taken")
		}
		if !r.Chunked && r.ContentLength >= 0 && int64(len(r.Body)) != r.ContentLength {
			t.Fatalf("body of %d bytes for Content-Length %d", len(r.Body), r.ContentLength)
		}
		// Written back as a proxy would, with a Content-Length, and read
		// again: the same request.
		again := rewrite(&r)
		var r2 Request
		br2 := NewReader(bytes.NewReader(again), len(again)+16)
		if err := br2.ReadRequestHead(&r2); err != nil {
			t.Fatalf("written back, it does not parse: %v\n%q", err, again)
		}
		if err := br2.ReadRequestBody(&r2, 1<<16); err != nil {
			t.Fatalf("written back, its body does not read: %v\n%q", err, again)
		}
		if !bytes.Equal(r.Method, r2.Method) || !bytes.Equal(r.Target, r2.Target) || !bytes.Equal(r.Host, r2.Host) ||
			!bytes.Equal(r.Body, r2.Body) || len(r.Fields) != len(r2.Fields) || r.Minor != r2.Minor {
			t.Fatalf("read back differently:\n%q\n%q", raw, again)
		}
		if br2.Buffered() != 0 {
			t.Fatalf("written back, %d bytes are left past it", br2.Buffered())
		}
	})
}

func checkTaken(t *testing.T, r *Request) {
	for _, c := range r.Method {
		if !isTchar[c] {
			t.Fatalf("method %q taken", r.Method)
		}
	}
	for _, c := range r.Target {
		if !isTargetByte(c) {
			t.Fatalf("target %q taken", r.Target)
		}
	}
	for _, f := range r.Fields {
		if len(f.Name) == 0 {
			t.Fatal("an empty name taken")
		}
		for _, c := range f.Name {
			if !isTchar[c] {
				t.Fatalf("name %q taken", f.Name)
			}
		}
		for _, c := range f.Value {
			if !isValueByte(c) {
				t.Fatalf("value %q taken", f.Value)
			}
		}
		if len(f.Value) > 0 && (f.Value[0] == ' ' || f.Value[0] == '\t' || f.Value[len(f.Value)-1] == ' ' || f.Value[len(f.Value)-1] == '\t') {
			t.Fatalf("value %q kept its whitespace", f.Value)
		}
	}
}

// rewrite writes r as the proxy sends it on: framing fields replaced by a
// Content-Length.
func rewrite(r *Request) []byte {
	var b []byte
	b = append(b, r.Method...)
	b = append(b, ' ')
	b = append(b, r.Target...)
	b = append(b, " HTTP/1."...)
	b = strconv.AppendInt(b, int64(r.Minor), 10)
	b = append(b, "\r\n"...)
	n := 0
	for _, f := range r.Fields {
		if f.Kind == KindContentLength || f.Kind == KindTransferEncoding {
			continue
		}
		b = AppendField(b, f.Name, f.Value)
		n++
	}
	if r.HasBody {
		b = append(b, "Content-Length: "+strconv.Itoa(len(r.Body))+"\r\n"...)
		n++
	}
	for n < len(r.Fields) { // keep the field count comparable
		b = append(b, "X-Pad: 1\r\n"...)
		n++
	}
	b = append(b, "\r\n"...)
	return append(b, r.Body...)
}

// FuzzReadResponse: no answer panics the reader, and an answer taken is
// written to a client as a head that reads back with the same status.
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.0 100 Continue\r\n\r\nHTTP/1.1 204\r\nConnection: close, x\r\nX: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\n\r\nto the end",
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, raw []byte, head bool) {
		var r Response
		br := NewReader(bytes.NewReader(raw), 512)
		if br.ReadResponseHead(&r) != nil || br.ReadResponseBody(&r, head, 1<<16) != nil {
			return
		}
		out := AppendResponseHead(nil, &r, head, false, false)
		var r2 Response
		if err := NewReader(bytes.NewReader(out), len(out)+16).ReadResponseHead(&r2); err != nil || r2.Code != r.Code {
			t.Fatalf("written to the client, the head does not read back: %v\n%q", err, out)
		}
		if strings.Count(string(out), "\r\n\r\n") != 1 || !bytes.HasSuffix(out, []byte("\r\n\r\n")) {
			t.Fatalf("the head written has an empty line inside: %q", out)
		}
	})
}
