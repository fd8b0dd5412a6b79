package prober

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

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

func TestParseReply_DoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	now := time.UnixMilli(1_700_000_000_000)
	body := []byte(`{"rif":3,"latency_median_ms":12.5,"timestamp_ms":1700000000000,"samples":9,"qps":1.5,"eps":0,"utilization":0.375}`)
	allocs := testing.AllocsPerRun(100, func() {
		if _, out := ParseReply(body, now, 5*time.Second); out != loadbalancer.ProbeOK {
			t.Fatal(out)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per parse, want 0", allocs)
	}
}
