package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	d := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if q := quantile(d, 0.5); q != 5 {
		t.Errorf("p50 = %v, want 5", q)
	}
	if q := quantile(d, 0.99); q != 10 {
		t.Errorf("p99 = %v, want 10", q)
	}
	if q := quantile(nil, 0.5); q != 0 {
		t.Errorf("empty p50 = %v", q)
	}
}

func TestSummary_MediansAndRatios(t *testing.T) {
	tsv := "round\ttarget\trps\tp50_ms\tp99_ms\tproxy_cpu_us_req\tbackend_cpu_us_req\tprobes_per_req\tfr_p50_ms\tfr_p99_ms\tfr_errors\n" +
		"1\tdirect\t50000\t0.5\t1\t-\t8\t-\t0.2\t1\t0\n" +
		"1\tnginx\t20000\t2\t5\t20\t10\t-\t0.5\t2\t0\n" +
		"2\tnginx\t30000\t2\t5\t30\t10\t-\t0.5\t2\t0\n" +
		"3\tnginx\t10000\t2\t5\t10\t10\t-\t0.5\t2\t0\n" +
		"1\tingress-rr\t10000\t4\t9\t40\t10\t-\t0.6\t3\t0\n" +
		"1\tingress-prequal\t8000\t4\t9\t60\t10\t2\t0.7\t3\t1\n" +
		"1\tingress-prequal-16\t9000\t4\t9\t45\t10\t0.05\t0.7\t3\t0\n" +
		"1\tcmp-ingress-rr\t10000\t4\t9\t40\t10\t-\t0.6\t3\t0\n" +
		"1\tcmp-ingress-prequal\t9000\t4\t9\t41\t10\t0.05\t0.7\t3\t0\n" +
		"1\tcmp-ingress-rr-16\t9000\t4\t9\t44\t10\t-\t0.6\t3\t0\n" +
		"1\tcmp-ingress-prequal-16\t8000\t4\t9\t50\t10\t0.5\t0.7\t3\t0\n"
	// Without an rr-16 target, 1-endpoint round-robin stands in, and says so.
	tsv = strings.Replace(tsv, "ingress-prequal-16\t9000\t4\t9\t45\t10\t0.05", "ingress-prequal-16\t9000\t4\t9\t45\t10\t0.5", 1)
	var out bytes.Buffer
	if err := summary(strings.NewReader(tsv), &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"| nginx | 20000 | 1.00 | 2.00 | 5.00 | 0.500 | 0.300 | 2.000 | 0 | 20.0 | 1.00 | 10.0 |",
		"| ingress-rr | 10000 | 0.50 |",
		"| 40.0 | 2.00 | 10.0 |",
		"ingress-prequal CPU per probe ≈ 10.0 µs",
		"ingress-prequal-16 CPU per probe ≈ 10.0 µs (ingress-prequal-16 − ingress-rr CPU per request at saturation = 5.0 µs, over 0.50 probes per request from prequal_probes_sent_total; includes prequal's pick, and the cost of spreading over 16 endpoints: there is no ingress-rr-16 to set it against).",
		"cmp-ingress-prequal sent 0.05 probes per request: too few for a CPU-per-probe estimate",
		// Against round-robin over the same 16 endpoints: (50 − 44) / 0.5.
		"cmp-ingress-prequal-16 CPU per probe ≈ 12.0 µs (cmp-ingress-prequal-16 − cmp-ingress-rr-16",
		"| direct | 50000 | 2.50 | 0.50 | 1.00 | 0.200 | 0.000 | 1.000 | 0 | – | – | 8.0 |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	if err := summary(strings.NewReader("round\ttarget\n"), &out); err == nil {
		t.Error("a TSV without the columns was accepted")
	}
}

func TestRate_SendsAtTheRate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("fail") != "" {
			w.WriteHeader(500)
		}
	}))
	defer srv.Close()
	var out bytes.Buffer
	if err := rate([]string{"-url", srv.URL + "/", "-rate", "200", "-duration", "500ms"}, &out); err != nil {
		t.Fatal(err)
	}
	f := strings.Split(strings.TrimSpace(out.String()), "\t")
	if len(f) != 5 {
		t.Fatalf("output %q", out.String())
	}
	// vegeta stops at the deadline, so a host that falls behind sends
	// fewer; it can never send more than the schedule holds.
	if n, _ := strconv.Atoi(f[0]); n < 1 || n > 100 {
		t.Errorf("sent %d requests, want 1 to 100 (200/s for 0.5 s)", n)
	}
	if f[2] != "0" {
		t.Errorf("%s errors", f[2])
	}
	out.Reset()
	if err := rate([]string{"-url", srv.URL + "/?fail=1", "-rate", "100", "-duration", "100ms"}, &out); err != nil {
		t.Fatal(err)
	}
	if f := strings.Split(strings.TrimSpace(out.String()), "\t"); f[0] != f[2] {
		t.Errorf("every 500 should count as an error: %q", out.String())
	}
	if err := rate([]string{"-url", "http://example.com/"}, &out); err == nil {
		t.Error("a non-loopback target was accepted")
	}
}
