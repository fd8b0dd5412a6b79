package prober

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress/internal/h1"
	"github.com/prequalbench/prequalbench/ingress/internal/tcppair"
)

// exchange sends answer to one probe on a fresh loopback connection and
// returns what roundTrip read. The server end stays open, so only the
// answer's own framing can end it.
func exchange(t *testing.T, answer string) (code int, body string, reusable bool, err error) {
	t.Helper()
	client, server := tcppair.New(t)
	go func() {
		buf := make([]byte, 512)
		_, _ = server.Read(buf) // the probe request
		_, _ = io.WriteString(server, answer)
	}()
	c := newConn(client)
	r, reusable, err := c.roundTrip([]byte("GET /prequal/probe HTTP/1.1\r\nHost: x\r\n\r\n"), time.Now().Add(200*time.Millisecond))
	return r.Code, string(r.Body), reusable, err
}

func TestRoundTrip_ReadsAnswers(t *testing.T) {
	body := `{"rif":1}`
	for _, tt := range []struct {
		name     string
		in       string
		code     int
		body     string
		reusable bool
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n" + body, 200, body, true},
		{"no reason, bare LF, odd case", "HTTP/1.1 200\nCONTENT-length:  9 \n\n" + body, 200, body, true},
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 9\r\n\r\n" + body, 200, body, false},
		{"HTTP/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 9\r\n\r\n" + body, 200, body, true},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 9\r\n\r\n" + body, 200, body, false},
		{"chunked", "HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n4\r\n{\"ri\r\n5;ext\r\nf\":1}\r\n0\r\n\r\n", 200, body, true},
		{"chunked with trailers", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n" + body + "\r\n0\r\nA: b\r\nC: d\r\n\r\n", 200, body, true},
		{"chunked, bare LF", "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n9\n" + body + "\n0\n\n", 200, body, true},
		// Transfer-Encoding wins, and the connection is not trusted again.
		{"length and chunked", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n" + body + "\r\n0\r\n\r\n", 200, body, false},
		{"500 with body", "HTTP/1.1 500 Oops\r\nContent-Length: 4\r\n\r\nboom", 500, "boom", true},
		{"204", "HTTP/1.1 204 No Content\r\n\r\n", 204, "", true},
		{"interim answer skipped", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n" + body, 200, body, true},
		{"bytes past the answer", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n" + body + "HTTP/1.1", 200, body, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Bytes past the answer must be in the same segment to be seen.
			code, got, reusable, err := exchange(t, tt.in)
			if err != nil || code != tt.code || got != tt.body || reusable != tt.reusable {
				t.Fatalf("got %d %q reusable %v, %v; want %d %q reusable %v", code, got, reusable, err, tt.code, tt.body, tt.reusable)
			}
		})
	}
	t.Run("body too large keeps the status", func(t *testing.T) {
		code, _, reusable, err := exchange(t, fmt.Sprintf("HTTP/1.1 503 X\r\nContent-Length: %d\r\n\r\n", maxBody+1))
		if err != h1.ErrBodyTooLarge || code != 503 || reusable {
			t.Fatalf("got %d reusable %v, %v; want 503, h1.ErrBodyTooLarge", code, reusable, err)
		}
	})
}

// A malformed answer is refused by the prober exactly as the proxy refuses
// a backend's (the proxy reads with h1's ReadResponseHead and
// ReadResponseBody and turns the error into a 502): same error, and the
// connection is not kept.
func TestRoundTrip_RefusesMalformedAnswersAsTheProxyDoes(t *testing.T) {
	for name, answer := range map[string]string{
		"not http":            "hello world\r\n\r\n",
		"HTTP/2":              "HTTP/2.0 200 OK\r\n\r\n",
		"short status":        "HTTP/1.1 20 OK\r\n\r\n",
		"status glued":        "HTTP/1.1 200OK\r\n\r\n",
		"field without colon": "HTTP/1.1 200 OK\r\nfoo\r\n\r\n",
		"space before colon":  "HTTP/1.1 200 OK\r\nContent-Length : 9\r\n\r\n{\"rif\":1}",
		"obs-fold":            "HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 9\r\n\r\n{\"rif\":1}",
		"NUL in a value":      "HTTP/1.1 200 OK\r\nX: a\x00b\r\nContent-Length: 9\r\n\r\n{\"rif\":1}",
		"two lengths":         "HTTP/1.1 200 OK\r\nContent-Length: 9\r\nContent-Length: 8\r\n\r\n{\"rif\":1}",
		"length not a number": "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n",
		"gzip":                "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"chunked twice":       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
		"bad chunk size":      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"chunk without CRLF":  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n0\r\n\r\n",
		"switching protocols": "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			var resp h1.Response
			br := h1.NewReader(strings.NewReader(answer), maxHeader)
			proxyErr := br.ReadResponseHead(&resp)
			if proxyErr == nil {
				proxyErr = br.ReadResponseBody(&resp, false, maxBody)
			}
			if proxyErr == nil || errors.Is(proxyErr, io.EOF) || errors.Is(proxyErr, io.ErrUnexpectedEOF) {
				t.Fatalf("the proxy's reader gives %v: not a refusal, fix the case", proxyErr)
			}
			_, _, reusable, err := exchange(t, answer)
			if err == nil || err.Error() != proxyErr.Error() || reusable {
				t.Fatalf("prober: %v (reusable %v); the proxy's reader: %v", err, reusable, proxyErr)
			}
		})
	}
}

// A probe on a kept connection allocates nothing once its buffers have
// grown.
func TestRoundTrip_DoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	client, server := tcppair.New(t)
	a, b := `{"rif":3,"latency_median_ms":12.5`, `,"timestamp_ms":1700000000000,"samples":9,"qps":1.5,"eps":0,"utilization":0.375}`
	answer := fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n",
		len(a), a, len(b), b)
	req := []byte("GET /prequal/probe HTTP/1.1\r\nHost: x\r\n\r\n")
	go func() {
		buf := make([]byte, 512)
		for {
			n, err := server.Read(buf)
			if err != nil {
				return
			}
			if bytes.HasSuffix(buf[:n], []byte("\r\n\r\n")) {
				if _, err := server.Write(answer); err != nil {
					return
				}
			}
		}
	}()
	c := newConn(client)
	deadline := time.Now().Add(time.Minute)
	allocs := testing.AllocsPerRun(100, func() {
		r, reusable, err := c.roundTrip(req, deadline)
		if err != nil || !reusable || len(r.Body) != len(a)+len(b) {
			t.Fatalf("%d %q reusable %v, %v", r.Code, r.Body, reusable, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per round trip, want 0", allocs)
	}
}
