package prober

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

func TestParseResponse(t *testing.T) {
	body := `{"rif":1}`
	tests := []struct {
		name   string
		in     string
		status int
		body   string
		keep   bool
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n" + body, 200, body, true},
		{"no reason, bare LF, odd case", "HTTP/1.1 200\nCONTENT-length:  9 \n\n" + body, 200, body, true},
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 9\r\n\r\n" + body, 200, body, false},
		{"HTTP/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 9\r\n\r\n" + body, 200, body, true},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 9\r\n\r\n" + body, 200, body, false},
		{"chunked", "HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n4\r\n{\"ri\r\n5;ext\r\nf\":1}\r\n0\r\n\r\n", 200, body, true},
		{"chunked with trailers", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n" + body + "\r\n0\r\nA: b\r\nC: d\r\n\r\n", 200, body, true},
		{"chunked, bare LF", "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n9\n" + body + "\n0\n\n", 200, body, true},
		{"500 with body", "HTTP/1.1 500 Oops\r\nContent-Length: 4\r\n\r\nboom", 500, "boom", true},
		{"204", "HTTP/1.1 204 No Content\r\n\r\n", 204, "", true},
		{"1xx closes", "HTTP/1.1 100 Continue\r\n\r\n", 100, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Every strict prefix asks for more.
			for i := range len(tt.in) {
				if _, err := parseResponse([]byte(tt.in[:i]), false); err != errIncomplete {
					t.Fatalf("prefix %q: err %v, want errIncomplete", tt.in[:i], err)
				}
			}
			r, err := parseResponse([]byte(tt.in), false)
			if err != nil || r.status != tt.status || string(r.body) != tt.body || r.keepAlive != tt.keep || r.end != len(tt.in) {
				t.Fatalf("got %+v (body %q), %v; want status %d, body %q, keep-alive %v, end %d",
					r, r.body, err, tt.status, tt.body, tt.keep, len(tt.in))
			}
		})
	}
	t.Run("read until close", func(t *testing.T) {
		in := "HTTP/1.1 200 OK\r\n\r\n" + body
		if _, err := parseResponse([]byte(in), false); err != errIncomplete {
			t.Fatalf("before EOF: %v", err)
		}
		r, err := parseResponse([]byte(in), true)
		if err != nil || string(r.body) != body || r.keepAlive {
			t.Fatalf("at EOF: %+v, %v", r, err)
		}
	})
	t.Run("cut short by close", func(t *testing.T) {
		if _, err := parseResponse([]byte("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}"), true); err != errProtocol {
			t.Fatalf("err %v, want errProtocol", err)
		}
	})
	t.Run("extra bytes stay outside", func(t *testing.T) {
		in := "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n" + body
		r, err := parseResponse([]byte(in+"HTTP/1.1"), false)
		if err != nil || r.end != len(in) {
			t.Fatalf("%+v, %v", r, err)
		}
	})
	for name, in := range map[string]string{
		"HTTP/2":              "HTTP/2.0 200 OK\r\n\r\n",
		"short status":        "HTTP/1.1 20 OK\r\n\r\n",
		"status glued":        "HTTP/1.1 200OK\r\n\r\n",
		"header without :":    "HTTP/1.1 200 OK\r\nfoo\r\n\r\n",
		"length and chunked":  "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
		"length not a number": "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n",
		"chunk size too long": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n123456789\r\n",
		"chunk without CRLF":  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n0\r\n\r\n",
	} {
		if _, err := parseResponse([]byte(in), false); err != errProtocol {
			t.Errorf("%s: err %v, want errProtocol", name, err)
		}
	}
	huge := fmt.Sprintf("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n", maxBody+1)
	if _, err := parseResponse([]byte(huge), false); err != errBodyTooBig {
		t.Errorf("chunk over the limit: err %v", err)
	}
	if r, err := parseResponse([]byte("HTTP/1.1 503 X\r\nContent-Length: 99999\r\n\r\n"), false); err != errBodyTooBig || r.status != 503 {
		t.Errorf("length over the limit: %+v, %v", r, err)
	}
}

func TestParseReply_LoadFields(t *testing.T) {
	tests := []struct {
		body string
		ok   bool
		load bool
	}{
		{`{"rif":1,"qps":120.5,"eps":0,"utilization":0.25}`, true, true},
		{`{"rif":1,"qps":120.5,"eps":0}`, true, false},
		{`{"rif":1,"qps":null,"eps":0,"utilization":1}`, true, false},
		{`{"rif":1,"qps":-1,"eps":0,"utilization":0}`, false, false},
		{`{"rif":1,"eps":"0"}`, false, false},
		{`{"rif":1,"utilization":1.5}`, false, false},
		{`{"rif":1,"qps":1e400}`, false, false},
	}
	for _, tt := range tests {
		var w wireReply
		err := decodeReply([]byte(tt.body), &w)
		if (err == nil) != tt.ok || (err == nil && w.loadKnown() != tt.load) {
			t.Errorf("%s: err %v, load known %v; want ok %v, load known %v", tt.body, err, w.loadKnown(), tt.ok, tt.load)
		}
	}
	var w wireReply
	if err := decodeReply([]byte(`{"rif":1,"qps":120.5,"eps":2,"utilization":0.25}`), &w); err != nil ||
		w.qps != 120.5 || w.eps != 2 || w.utilization != 0.25 {
		t.Fatalf("%+v, %v", w, err)
	}
}

func TestParseReply_EdgeCases(t *testing.T) {
	tests := []struct {
		body string
		want loadbalancer.ProbeOutcome
		rif  int
	}{
		{`{"r\u0069f":7}`, loadbalancer.ProbeOK, 7},
		{`{"rif":1,"rif":5}`, loadbalancer.ProbeOK, 5},
		{`{"rif":1,"rif":null}`, loadbalancer.ProbeMalformed, 0},
		{` {"rif" : -0 , "x":[1,{"a":[true,false,null,"\"\\"]},-2.5e-3]} `, loadbalancer.ProbeOK, 0},
		{`{"rif":2147483648}`, loadbalancer.ProbeOK, 1 << 31},
		{`{"rif":2147483649}`, loadbalancer.ProbeMalformed, 0},
		{`{"rif":99999999999999999999}`, loadbalancer.ProbeMalformed, 0},
		{`{"rif":1,"samples":-9223372036854775808}`, loadbalancer.ProbeMalformed, 0},
		{`{"rif":1,"timestamp_ms":-5}`, loadbalancer.ProbeMalformed, 0},
		{`{"rif":1,"timestamp_ms":0}`, loadbalancer.ProbeOK, 1},
		{`{"rif":01}`, loadbalancer.ProbeMalformed, 0},
		{`{"rif":1,}`, loadbalancer.ProbeMalformed, 0},
		{`{"rif":1,"s":"a` + "\n" + `"}`, loadbalancer.ProbeMalformed, 0},
		{`{"rif":1,"s":"\x"}`, loadbalancer.ProbeMalformed, 0},
		{`{"rif":1}}`, loadbalancer.ProbeMalformed, 0},
		{``, loadbalancer.ProbeMalformed, 0},
	}
	for _, tt := range tests {
		rep, got := ParseReply([]byte(tt.body), t0, 5*time.Second)
		if got != tt.want || rep.RIF != tt.rif {
			t.Errorf("%s: %+v, %q; want rif %d, %q", tt.body, rep, got, tt.rif, tt.want)
		}
	}
}

// referenceReply decodes a probe answer with encoding/json under the rules
// decodeReply implements: a strict JSON object, exact keys, the last of
// duplicates, null as absent.
func referenceReply(body []byte) (wireReply, bool) {
	var w wireReply
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return w, false
	}
	num := func(key string, f func(json.Number) bool) (bool, bool) {
		raw, ok := m[key]
		if !ok || string(raw) == "null" {
			return false, true
		}
		var n json.Number
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if dec.Decode(&n) != nil || raw[0] == '"' {
			return false, false
		}
		return true, f(n)
	}
	var ok [7]bool
	w.hasRIF, ok[0] = num("rif", func(n json.Number) bool {
		v, err := strconv.ParseInt(n.String(), 10, 64)
		w.rif = v
		return err == nil
	})
	w.hasSamples, ok[1] = num("samples", func(n json.Number) bool {
		v, err := strconv.ParseInt(n.String(), 10, 64)
		w.samples = v
		return err == nil
	})
	w.hasTimestamp, ok[2] = num("timestamp_ms", func(n json.Number) bool {
		v, err := strconv.ParseUint(n.String(), 10, 64)
		w.timestampMS = v
		return err == nil
	})
	fl := func(dst *float64) func(json.Number) bool {
		return func(n json.Number) bool {
			v, err := strconv.ParseFloat(n.String(), 64)
			*dst = v
			return err == nil
		}
	}
	w.hasLatency, ok[3] = num("latency_median_ms", fl(&w.latencyMS))
	w.hasQPS, ok[4] = num("qps", fl(&w.qps))
	w.hasEPS, ok[5] = num("eps", fl(&w.eps))
	w.hasUtil, ok[6] = num("utilization", fl(&w.utilization))
	for _, o := range ok {
		if !o {
			return w, false
		}
	}
	return w, true
}

func FuzzDecodeReply_MatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"rif":3,"latency_median_ms":12.5,"timestamp_ms":1700000000000,"samples":9}`,
		`{"rif":0,"latency_median_ms":null,"qps":1,"eps":0.5,"utilization":0.1}`,
		`{"r\u0069f":1e3,"x":[{"y":"\ud800"}]}`,
		`{"rif":-0,"samples":9223372036854775807,"timestamp_ms":18446744073709551615}`,
		`{"rif":1,"rif":"2"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got wireReply
		err := decodeReply(body, &got)
		want, wantOK := referenceReply(body)
		if !wantOK {
			if err == nil {
				t.Fatalf("accepted %q, which encoding/json rejects", body)
			}
			return
		}
		if !want.hasRIF || want.rif < 0 || want.rif > 1<<31 ||
			(want.hasLatency && !(want.latencyMS >= 0 && want.latencyMS <= 24*3600*1000)) ||
			(want.hasSamples && want.samples < 0) ||
			(want.hasQPS && !(want.qps >= 0 && want.qps <= maxRate)) ||
			(want.hasEPS && !(want.eps >= 0 && want.eps <= maxRate)) ||
			(want.hasUtil && !(want.utilization >= 0 && want.utilization <= 1)) {
			if err == nil {
				t.Fatalf("accepted out-of-range %q", body)
			}
			return
		}
		if err != nil {
			t.Fatalf("rejected %q, which encoding/json reads as %+v", body, want)
		}
		// Values are compared only where present: absent ones may hold
		// a duplicate key's earlier value.
		same := func(has bool, a, b float64) bool { return !has || a == b || (math.IsNaN(a) && math.IsNaN(b)) }
		if got.hasRIF != want.hasRIF || got.rif != want.rif ||
			got.hasLatency != want.hasLatency || !same(want.hasLatency, got.latencyMS, want.latencyMS) ||
			got.hasTimestamp != want.hasTimestamp || (want.hasTimestamp && got.timestampMS != want.timestampMS) ||
			got.hasSamples != want.hasSamples || (want.hasSamples && got.samples != want.samples) ||
			got.hasQPS != want.hasQPS || !same(want.hasQPS, got.qps, want.qps) ||
			got.hasEPS != want.hasEPS || !same(want.hasEPS, got.eps, want.eps) ||
			got.hasUtil != want.hasUtil || !same(want.hasUtil, got.utilization, want.utilization) {
			t.Fatalf("%q: got %+v, encoding/json %+v", body, got, want)
		}
	})
}

// Any answer split anywhere parses the same as in one piece, and a parse
// never reads past what it was given.
func FuzzParseResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{\"rif\":1}"), uint16(10))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"ri\r\n5\r\nf\":1}\r\n0\r\n\r\n"), uint16(50))
	f.Add([]byte("HTTP/1.0 503 X\r\n\r\nbusy"), uint16(3))
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		whole, errWhole := parseResponse(bytes.Clone(in), true)
		if errWhole == nil && (whole.end > len(in) || len(whole.body) > maxBody || whole.status > 999) {
			t.Fatalf("%q: %+v", in, whole)
		}
		i := int(cut) % (len(in) + 1)
		part, err := parseResponse(bytes.Clone(in[:i]), false)
		if err == nil && part.end > i {
			t.Fatalf("%q[:%d]: end %d", in, i, part.end)
		}
		// A complete answer found in a prefix is the same answer in all.
		if err == nil && part.end <= i && (errWhole != nil || whole.end != part.end || !bytes.Equal(whole.body, part.body)) {
			if !(part.keepAlive == false && whole.end != part.end) { // read-to-close bodies grow with the input
				t.Fatalf("%q: prefix %d gives %+v, whole %+v (%v)", in, i, part, whole, errWhole)
			}
		}
	})
}

// A body sent in chunks of any size comes back whole.
func FuzzChunkedRoundTrip(f *testing.F) {
	f.Add([]byte(`{"rif":1}`), uint8(3))
	f.Fuzz(func(t *testing.T, body []byte, size uint8) {
		if len(body) > maxBody {
			return
		}
		step := int(size)%32 + 1
		var b strings.Builder
		b.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
		for i := 0; i < len(body); i += step {
			chunk := body[i:min(i+step, len(body))]
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(chunk), chunk)
		}
		b.WriteString("0\r\n\r\n")
		r, err := parseResponse([]byte(b.String()), false)
		if err != nil || !bytes.Equal(r.body, body) || r.end != b.Len() {
			t.Fatalf("%q in chunks of %d: %q, %v", body, step, r.body, err)
		}
	})
}

func TestParse_DoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	now := time.UnixMilli(1_700_000_000_000)
	a, b := `{"rif":3,"latency_median_ms":12.5`, `,"timestamp_ms":1700000000000,"samples":9,"qps":1.5,"eps":0,"utilization":0.375}`
	answer := fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n",
		len(a), a, len(b), b)
	buf := make([]byte, len(answer))
	allocs := testing.AllocsPerRun(100, func() {
		copy(buf, answer)
		r, err := parseResponse(buf, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, out := ParseReply(r.body, now, 5*time.Second); out != loadbalancer.ProbeOK {
			t.Fatal(out)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per parse, want 0", allocs)
	}
}
