package h1

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"
)

// allocated runs f and returns the bytes it allocated (the process's, so
// the bounds below leave room for anything else running).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A body of many tiny chunks costs memory in proportion to its size: the
// buffer grows by doubling, not by a copy per chunk (80,000 one-byte
// chunks took 3.3 GB before).
func TestReadChunked_ManySmallChunksGrowLinearly(t *testing.T) {
	var raw strings.Builder
	raw.WriteString("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
	for range 80000 {
		raw.WriteString("1\r\na\r\n")
	}
	raw.WriteString("0\r\n\r\n")
	in := raw.String()
	var r Request
	var err error
	n := allocated(func() {
		br := NewReader(strings.NewReader(in), 1024)
		if err = br.ReadRequestHead(&r); err == nil {
			err = br.ReadRequestBody(&r, 1<<20)
		}
	})
	if err != nil || len(r.Body) != 80000 {
		t.Fatalf("body of %d bytes, %v", len(r.Body), err)
	}
	if n > 4<<20 {
		t.Fatalf("an 80,000-byte body of one-byte chunks allocated %d bytes", n)
	}
}

// A Content-Length is not taken on trust: a head that declares 32 MiB and
// sends 10 bytes makes no 32 MiB buffer.
func TestReadLength_MemoryFollowsTheBytes(t *testing.T) {
	for _, in := range []string{
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 33554432\r\n\r\n0123456789",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 33554432\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 33554432\r\n\r\n" + strings.Repeat("a", 900),
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1fffff0\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1fffff0\r\nabc",
	} {
		var r Request
		var err error
		n := allocated(func() {
			br := NewReader(strings.NewReader(in), 1024)
			if err = br.ReadRequestHead(&r); err == nil {
				err = br.ReadRequestBody(&r, 32<<20)
			}
		})
		if err != io.ErrUnexpectedEOF {
			t.Fatalf("%.60q: err %v, want io.ErrUnexpectedEOF", in, err)
		}
		if n > 4<<20 {
			t.Fatalf("%.60q: a head declaring 32 MiB with %d bytes sent allocated %d bytes", in, len(r.Body), n)
		}
	}
	var r Request
	// A whole large body still arrives intact, through reads of any size.
	body := bytes.Repeat([]byte("0123456789abcdef"), 40000)
	br := NewReader(&oneByteThenAll{s: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 640000\r\n\r\n" + string(body)}, 1024)
	if err := br.ReadRequestHead(&r); err != nil {
		t.Fatal(err)
	}
	if err := br.ReadRequestBody(&r, 1<<20); err != nil || !bytes.Equal(r.Body, body) {
		t.Fatalf("%d bytes, %v", len(r.Body), err)
	}
}

// oneByteThenAll gives a byte per read for a while, then the rest at once.
type oneByteThenAll struct {
	s     string
	reads int
}

func (o *oneByteThenAll) Read(p []byte) (int, error) {
	if len(o.s) == 0 {
		return 0, io.EOF
	}
	o.reads++
	n := 1
	if o.reads > 5000 {
		n = len(p)
	}
	n = copy(p[:min(n, len(p))], o.s)
	o.s = o.s[n:]
	return n, nil
}

// More than 32 Connection options are refused: each is compared with every
// field, so a head of thousands of both cost quadratic time.
func TestReadRequest_ConnectionOptionsBounded(t *testing.T) {
	opts := make([]string, 33)
	for i := range opts {
		opts[i] = "x-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	raw := "GET / HTTP/1.1\r\nHost: x\r\nConnection: " + strings.Join(opts[:32], ", ") + ", close\r\n\r\n"
	if r, err := readRequest(t, raw, 10); err != nil || !r.Close {
		t.Fatalf("32 options and close: %v (close %v)", err, r.Close)
	}
	raw = "GET / HTTP/1.1\r\nHost: x\r\nConnection: " + strings.Join(opts, ",") + "\r\n\r\n"
	if _, err := readRequest(t, raw, 10); StatusOf(err) != 400 {
		t.Fatalf("33 options: %v, want 400", err)
	}
	resp := "HTTP/1.1 200 OK\r\nConnection: " + strings.Join(opts, ",") + "\r\nContent-Length: 0\r\n\r\n"
	if _, _, err := readResponse(t, resp, false, 10); err == nil {
		t.Fatal("an answer with 33 Connection options was taken")
	}
}

// A name with underscores that reads as a known field with dashes is never
// forwarded: CGI-style servers make X_Forwarded_For and X-Forwarded-For, or
// Transfer_Encoding and Transfer-Encoding, the same variable.
func TestReadRequest_UnderscoreAliasesAreDropped(t *testing.T) {
	r, err := readRequest(t, "GET / HTTP/1.1\r\nHost: x\r\nX_Forwarded_For: 6.6.6.6\r\nx_real_ip: 6.6.6.6\r\nX-Forwarded_Proto: https\r\n"+
		"Transfer_Encoding: chunked\r\nContent_Length: 99\r\nProxy_Authorization: a\r\nKeep_Alive: 1\r\n"+
		"Forwarded: for=1\r\nX_Custom_Thing: kept\r\nX_Forwarded_For_Long_Name_Beyond: kept\r\n\r\n", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Fields {
		kept := strings.HasPrefix(string(f.Value), "kept") || f.Kind == KindHost || f.Kind == KindForwarded
		if f.Hop == kept {
			t.Errorf("%s: hop-by-hop %v", f.Name, f.Hop)
		}
	}
}

// segments delivers one segment per read, as a connection delivers
// packets that arrive apart.
type segments struct{ s []string }

func (g *segments) Read(p []byte) (int, error) {
	if len(g.s) == 0 {
		return 0, io.EOF
	}
	n := copy(p, g.s[0])
	if g.s[0] = g.s[0][n:]; g.s[0] == "" {
		g.s = g.s[1:]
	}
	return n, nil
}

// A large chunk followed by tiny chunks whose data arrive apart from their
// size lines: each tiny chunk once grew the buffer to its own end, so the
// whole body was copied again for each (813 MB for a 4 MiB body).
func TestReadChunked_TinyChunksAfterALargeOneArrivingApart(t *testing.T) {
	big := strings.Repeat("x", 4<<20)
	segs := []string{"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n400000\r\n", big, "\r\n"}
	for range 200 {
		segs = append(segs, "1\r\n", "a", "\r\n")
	}
	segs = append(segs, "0\r\n\r\n")
	var r Request
	var err error
	n := allocated(func() {
		br := NewReader(&segments{s: segs}, 1024)
		if err = br.ReadRequestHead(&r); err == nil {
			err = br.ReadRequestBody(&r, 32<<20)
		}
	})
	if err != nil || len(r.Body) != 4<<20+200 {
		t.Fatalf("body of %d bytes, %v", len(r.Body), err)
	}
	if n > 40<<20 {
		t.Fatalf("a 4 MiB body and 200 tiny chunks allocated %d bytes", n)
	}
}

// A body at the limit, in chunks, keeps its buffer within the limit.
func TestReadChunked_BufferWithinTheLimit(t *testing.T) {
	const limit = 128 << 10
	raw := "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1ffff\r\n" + strings.Repeat("a", limit-1) + "\r\n1\r\nb\r\n0\r\n\r\n"
	r, err := readRequest(t, raw, limit)
	if err != nil || len(r.Body) != limit || cap(r.Body) > limit {
		t.Fatalf("body %d bytes in a buffer of %d (limit %d), %v", len(r.Body), cap(r.Body), limit, err)
	}
}

// A small chunked body whose chunk came whole gets a buffer its size, not
// the 64 KiB a read from the connection reserves; an unframed answer's
// buffer stays within the limit.
func TestBodyBuffers_SmallStaysSmall(t *testing.T) {
	r, err := readRequest(t, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 32<<20)
	if err != nil || string(r.Body) != "hello" || cap(r.Body) > 1024 {
		t.Fatalf("body %q in a buffer of %d, %v", r.Body, cap(r.Body), err)
	}
	const limit = 1 << 20
	resp, _, err := readResponse(t, "HTTP/1.1 200 OK\r\n\r\n"+strings.Repeat("a", limit), false, limit)
	if err != nil || len(resp.Body) != limit || cap(resp.Body) > limit+1 {
		t.Fatalf("an unframed body of %d bytes in a buffer of %d (limit %d), %v", len(resp.Body), cap(resp.Body), limit, err)
	}
}
