package testbackend_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/internal/testbackend"
)

// The backend contract, end to end on loopback. Assertions are structural
// (ordering, counts, lower bounds) so that a slow machine cannot fail them.

const deadline = 15 * time.Second

type workResp struct {
	DurationMS   *float64 `json:"duration_ms"`
	QueueMS      *float64 `json:"queue_ms"`
	RIFAtArrival *int     `json:"rif_at_arrival"`
}

type probeResp struct {
	RIF         int      `json:"rif"`
	LatencyMS   *float64 `json:"latency_median_ms"`
	TimestampMS int64    `json:"timestamp_ms"`
	Samples     int      `json:"samples"`
}

type statsResp struct {
	InFlight int `json:"in_flight"`
	Queued   int `json:"queued"`
	Served   int `json:"served"`
	Rejected int `json:"rejected"`
	MaxQueue int `json:"max_queue"`
	Capacity int `json:"capacity"`
}

func do(t *testing.T, c *http.Client, method, url, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return resp.StatusCode, data
}

func decode[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", data, err)
	}
	return v
}

func client() *http.Client { return &http.Client{Timeout: deadline} }

func getWork(t *testing.T, c *http.Client, b *testbackend.Backend, iterations int) workResp {
	t.Helper()
	code, body := do(t, c, "GET", b.URL(fmt.Sprintf("/work?iterations=%d", iterations)), "")
	if code != 200 {
		t.Fatalf("GET /work: status %d, body %q", code, body)
	}
	w := decode[workResp](t, body)
	if w.DurationMS == nil || w.QueueMS == nil || w.RIFAtArrival == nil {
		t.Fatalf("GET /work: missing fields in %s", body)
	}
	return w
}

func stats(t *testing.T, c *http.Client, b *testbackend.Backend) statsResp {
	t.Helper()
	code, body := do(t, c, "GET", b.URL("/stats"), "")
	if code != 200 {
		t.Fatalf("GET /stats: status %d", code)
	}
	return decode[statsResp](t, body)
}

func probe(t *testing.T, c *http.Client, b *testbackend.Backend) probeResp {
	t.Helper()
	code, body := do(t, c, "GET", b.URL("/prequal/probe"), "")
	if code != 200 {
		t.Fatalf("GET /prequal/probe: status %d, body %q", code, body)
	}
	return decode[probeResp](t, body)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// async runs a GET /work in the background.
type result struct {
	code int
	work workResp
	done time.Time
	err  error
}

func asyncWork(b *testbackend.Backend, url string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		resp, err := client().Get(b.URL(url))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var w workResp
		if resp.StatusCode == 200 {
			err = json.Unmarshal(data, &w)
		}
		ch <- result{code: resp.StatusCode, work: w, done: time.Now(), err: err}
	}()
	return ch
}

func TestWork_GetAndPost(t *testing.T) {
	t.Parallel()
	b := testbackend.Start(t, "--service-time", "1ms")
	c := client()
	w := getWork(t, c, b, 10)
	if *w.RIFAtArrival != 0 || *w.DurationMS < 0 || *w.QueueMS < 0 {
		t.Errorf("GET /work: %+v", w)
	}
	code, body := do(t, c, "POST", b.URL("/work"), `{"iterations": 20}`)
	if code != 200 {
		t.Fatalf("POST /work: %d %q", code, body)
	}
	if w := decode[workResp](t, body); w.DurationMS == nil {
		t.Errorf("POST /work: no duration_ms in %s", body)
	}
	// Seed clients post without a body too: the default is 1000 iterations.
	if code, body := do(t, c, "POST", b.URL("/work"), ""); code != 200 {
		t.Errorf("POST /work without body: %d %q", code, body)
	}
	for _, bad := range []struct{ method, path, body string }{
		{"POST", "/work", `{"iterations": -1}`},
		{"POST", "/work", `{"iterations": "x"}`},
		{"POST", "/work", `not json`},
		{"GET", "/work?iterations=abc", ""},
	} {
		code, body := do(t, c, bad.method, b.URL(bad.path), bad.body)
		if code != 400 || !strings.Contains(string(body), "iterations") {
			t.Errorf("%s %s %q: got %d %q, want 400 naming iterations", bad.method, bad.path, bad.body, code, body)
		}
	}
	if code, _ := do(t, c, "GET", b.URL("/nope"), ""); code != 404 {
		t.Errorf("GET /nope: %d, want 404", code)
	}
	if code, _ := do(t, c, "DELETE", b.URL("/work"), ""); code != 405 {
		t.Errorf("DELETE /work: %d, want 405", code)
	}
	for _, p := range []string{"/healthz", "/health"} {
		if code, body := do(t, c, "GET", b.URL(p), ""); code != 200 || string(body) != "ok" {
			t.Errorf("GET %s: %d %q, want 200 ok", p, code, body)
		}
	}
}

func TestWork_KeepAliveAndChunkedBody(t *testing.T) {
	t.Parallel()
	b := testbackend.Start(t, "--service-time", "1ms")
	c := client()
	reused := 0
	for i := 0; i < 20; i++ {
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
			if info.Reused {
				reused++
			}
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace),
			"GET", b.URL("/work?iterations=1"), nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// Go's transport returns a connection to its idle pool from its read
	// loop, so a request now and then races ahead and dials anew; without
	// keep-alive, though, no request would reuse a connection at all.
	if reused < 10 {
		t.Errorf("connection reused %d of 19 times; keep-alive broken", reused)
	}
	// An unknown length makes the Go client send a chunked body.
	req, _ := http.NewRequest("POST", b.URL("/work"), io.MultiReader(strings.NewReader(`{"iterations"`), strings.NewReader(`: 3}`)))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("chunked POST: status %d", resp.StatusCode)
	}
}

// raw sends bytes on a fresh connection and returns everything the server
// writes until it closes.
func raw(t *testing.T, b *testbackend.Backend, request string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", b.Addr, deadline)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(deadline))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(conn)
	return string(data)
}

func TestWork_RawHTTP(t *testing.T) {
	t.Parallel()
	b := testbackend.Start(t, "--service-time", "1ms")
	if got := raw(t, b, "GARBAGE\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 400 ") {
		t.Errorf("malformed request answered %q, want 400", got)
	}
	// Two pipelined requests, the second chunked and closing the connection.
	got := raw(t, b, "GET /work?iterations=1 HTTP/1.1\r\nHost: x\r\n\r\n"+
		"POST /work HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"+
		"5\r\n{\"ite\r\nc\r\nrations\": 2}\r\n0\r\n\r\n")
	if n := strings.Count(got, "HTTP/1.1 200 OK"); n != 2 || !strings.Contains(got, `"iterations":2`) {
		t.Errorf("pipelined GET + chunked POST answered %q", got)
	}
	if got := raw(t, b, "GET / HTTP/1.1\r\nX: "+strings.Repeat("a", 64<<10)+"\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 431 ") {
		t.Errorf("huge headers answered %.40q, want 431", got)
	}
}

func TestModes(t *testing.T) {
	t.Parallel()
	c := client()
	t.Run("io spends the service time", func(t *testing.T) {
		t.Parallel()
		b := testbackend.Start(t, "--mode", "io", "--service-time", "100ms", "--slow", "2")
		// 500 iterations = half of 100ms, times slow 2.
		if w := getWork(t, c, b, 500); *w.DurationMS < 99 {
			t.Errorf("io: duration %.3f ms, want >= 100", *w.DurationMS)
		}
	})
	t.Run("cpu work grows with iterations", func(t *testing.T) {
		t.Parallel()
		b := testbackend.Start(t, "--mode", "cpu", "--cpu-rounds", "2")
		small := getWork(t, c, b, 0)
		big := getWork(t, c, b, 50000)
		if *big.DurationMS <= *small.DurationMS {
			t.Errorf("cpu: 100k rounds took %.3f ms, 0 rounds %.3f ms", *big.DurationMS, *small.DurationMS)
		}
	})
	t.Run("sleep ignores the concurrency limit", func(t *testing.T) {
		t.Parallel()
		b := testbackend.Start(t, "--mode", "sleep", "--concurrency", "1", "--service-time", "1s")
		a1 := asyncWork(b, "/work")
		a2 := asyncWork(b, "/work")
		waitFor(t, "two requests in flight", func() bool { return stats(t, c, b).InFlight == 2 })
		if s := stats(t, c, b); s.Queued != 0 || s.Capacity != 0 {
			t.Errorf("sleep mode stats %+v, want nothing queued and capacity 0 (unlimited)", s)
		}
		for _, ch := range []<-chan result{a1, a2} {
			r := <-ch
			if r.err != nil || r.code != 200 {
				t.Fatalf("sleep work: %d %v", r.code, r.err)
			}
			if *r.work.QueueMS > *r.work.DurationMS {
				t.Errorf("sleep mode queued %.3f ms (service %.3f)", *r.work.QueueMS, *r.work.DurationMS)
			}
		}
	})
	t.Run("distributions run", func(t *testing.T) {
		t.Parallel()
		for _, d := range []string{"exp", "normal"} {
			b := testbackend.Start(t, "--distribution", d, "--service-time", "1ms", "--seed", "1")
			getWork(t, c, b, 1000)
		}
	})
}

func TestCapacity_FIFO(t *testing.T) {
	t.Parallel()
	b := testbackend.Start(t, "--concurrency", "1", "--service-time", "300ms")
	c := client()
	first := asyncWork(b, "/work")
	waitFor(t, "first in service", func() bool { return stats(t, c, b).InFlight == 1 })
	second := asyncWork(b, "/work")
	waitFor(t, "second queued", func() bool { return stats(t, c, b).Queued == 1 })
	third := asyncWork(b, "/work")
	waitFor(t, "third queued", func() bool { return stats(t, c, b).Queued == 2 })
	if p := probe(t, c, b); p.RIF != 3 {
		t.Errorf("probe rif %d while 3 requests are in flight", p.RIF)
	}
	r1, r2, r3 := <-first, <-second, <-third
	for i, r := range []result{r1, r2, r3} {
		if r.err != nil || r.code != 200 {
			t.Fatalf("request %d: %d %v", i+1, r.code, r.err)
		}
	}
	if !(r1.done.Before(r2.done) && r2.done.Before(r3.done)) {
		t.Errorf("completion order not FIFO: %v %v %v", r1.done, r2.done, r3.done)
	}
	if *r2.work.RIFAtArrival != 1 || *r3.work.RIFAtArrival != 2 {
		t.Errorf("rif_at_arrival %d, %d; want 1, 2", *r2.work.RIFAtArrival, *r3.work.RIFAtArrival)
	}
	// The second waited for (most of) the first's service, the third for two.
	if !(*r2.work.QueueMS > 0 && *r3.work.QueueMS > *r2.work.QueueMS) {
		t.Errorf("queue_ms %.3f then %.3f: want positive and increasing", *r2.work.QueueMS, *r3.work.QueueMS)
	}
	if *r3.work.QueueMS < *r1.work.DurationMS {
		t.Errorf("third queued %.3f ms, less than the first's service %.3f ms", *r3.work.QueueMS, *r1.work.DurationMS)
	}
	// RIF drops just after a response is written, so the client can read
	// its answer a moment before the backend counts the request as gone.
	waitFor(t, "nothing in flight", func() bool { return stats(t, c, b).InFlight == 0 })
	if s := stats(t, c, b); s.MaxQueue != 2 || s.Served != 3 || s.Capacity != 1 {
		t.Errorf("stats after FIFO run: %+v", s)
	}
}

func TestCapacity_OverflowIs503(t *testing.T) {
	t.Parallel()
	b := testbackend.Start(t, "--concurrency", "1", "--queue-limit", "1", "--service-time", "300ms")
	c := client()
	first := asyncWork(b, "/work")
	waitFor(t, "first in service", func() bool { return stats(t, c, b).InFlight == 1 })
	second := asyncWork(b, "/work")
	waitFor(t, "second queued", func() bool { return stats(t, c, b).Queued == 1 })
	code, body := do(t, c, "GET", b.URL("/work"), "")
	if code != 503 {
		t.Errorf("third request: %d %q, want 503", code, body)
	}
	if r := <-first; r.code != 200 {
		t.Errorf("first: %d %v", r.code, r.err)
	}
	if r := <-second; r.code != 200 {
		t.Errorf("second: %d %v", r.code, r.err)
	}
	if s := stats(t, c, b); s.Rejected != 1 || s.Served != 2 {
		t.Errorf("stats: %+v, want 1 rejected, 2 served", s)
	}
}

func TestProbe_Contract(t *testing.T) {
	t.Parallel()
	b := testbackend.Start(t, "--concurrency", "2", "--service-time", "300ms", "--latency-window", "2s")
	c := client()
	code, body := do(t, c, "GET", b.URL("/prequal/probe"), "")
	if code != 200 {
		t.Fatalf("probe: %d", code)
	}
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("probe body %q: %v", body, err)
	}
	var keys []string
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if got := strings.Join(keys, ","); got != "eps,latency_median_ms,qps,rif,samples,timestamp_ms,utilization" {
		t.Errorf("probe keys %s", got)
	}
	if raw["latency_median_ms"] != nil || raw["samples"] != float64(0) || raw["rif"] != float64(0) {
		t.Errorf("probe before any work: %s, want rif 0, null latency, 0 samples", body)
	}
	if raw["qps"] != float64(0) || raw["eps"] != float64(0) || raw["utilization"] != float64(0) {
		t.Errorf("probe of an idle replica: %s, want qps, eps and utilization 0", body)
	}
	p := decode[probeResp](t, body)
	if skew := time.Since(time.UnixMilli(p.TimestampMS)); skew < -time.Minute || skew > time.Minute {
		t.Errorf("timestamp_ms %d is %v from now", p.TimestampMS, skew)
	}
	// RIF is visible while requests are in service.
	r1, r2 := asyncWork(b, "/work"), asyncWork(b, "/work")
	waitFor(t, "probe rif 2", func() bool { return probe(t, c, b).RIF == 2 })
	<-r1
	<-r2
	// RIF drops just after the response is written: poll for it.
	waitFor(t, "probe rif 0", func() bool { p = probe(t, c, b); return p.RIF == 0 })
	if p.LatencyMS == nil || *p.LatencyMS < 299 || p.Samples != 2 {
		t.Errorf("probe after two 300ms requests: %+v", p)
	}
}

func TestProbe_LatencyAgesToNull(t *testing.T) {
	t.Parallel()
	b := testbackend.Start(t, "--service-time", "1ms", "--latency-window", "200ms")
	c := client()
	getWork(t, c, b, 1000)
	waitFor(t, "latency to age out", func() bool {
		p := probe(t, c, b)
		return p.LatencyMS == nil && p.Samples == 0
	})
}

func TestProbe_Faults(t *testing.T) {
	t.Parallel()
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		b := testbackend.Start(t, "--probe-fault", "timeout", "--fault-timeout", "2s")
		impatient := &http.Client{Timeout: 100 * time.Millisecond}
		_, err := impatient.Get(b.URL("/prequal/probe"))
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("probe with 100ms timeout: %v, want a timeout", err)
		}
		// The delayed answer still comes, and /work is unaffected.
		if p := probe(t, client(), b); p.TimestampMS == 0 {
			t.Errorf("delayed probe: %+v", p)
		}
	})
	t.Run("500", func(t *testing.T) {
		t.Parallel()
		b := testbackend.Start(t, "--probe-fault", "500")
		if code, _ := do(t, client(), "GET", b.URL("/prequal/probe"), ""); code != 500 {
			t.Errorf("probe: %d, want 500", code)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		t.Parallel()
		b := testbackend.Start(t, "--probe-fault", "malformed")
		code, body := do(t, client(), "GET", b.URL("/prequal/probe"), "")
		if code != 200 || json.Valid(body) {
			t.Errorf("probe: %d %q, want 200 with invalid JSON", code, body)
		}
	})
	t.Run("stale_timestamp", func(t *testing.T) {
		t.Parallel()
		b := testbackend.Start(t, "--probe-fault", "stale_timestamp", "--fault-stale-offset", "1h")
		p := probe(t, client(), b)
		if age := time.Since(time.UnixMilli(p.TimestampMS)); age < 50*time.Minute {
			t.Errorf("stale timestamp only %v old", age)
		}
	})
}

func TestWork_Faults(t *testing.T) {
	t.Parallel()
	t.Run("fail_fast", func(t *testing.T) {
		t.Parallel()
		b := testbackend.Start(t, "--work-fault", "fail_fast", "--service-time", "1s")
		c := client()
		if code, _ := do(t, c, "GET", b.URL("/work"), ""); code != 500 {
			t.Errorf("work: %d, want 500", code)
		}
		// A failing-fast replica looks fast: the sinkhole case.
		if p := probe(t, c, b); p.LatencyMS == nil || *p.LatencyMS >= 1000 {
			t.Errorf("probe after fail_fast: %+v", p)
		}
	})
	t.Run("hang", func(t *testing.T) {
		t.Parallel()
		b := testbackend.Start(t, "--work-fault", "hang")
		c := client()
		impatient := &http.Client{Timeout: 200 * time.Millisecond}
		if _, err := impatient.Get(b.URL("/work")); err == nil {
			t.Fatal("hanging /work answered")
		}
		// Once the client has gone, the hung request leaves RIF.
		waitFor(t, "in_flight back to 0", func() bool { return stats(t, c, b).InFlight == 0 })
	})
}

func TestStatsAndReset(t *testing.T) {
	t.Parallel()
	b := testbackend.Start(t, "--service-time", "1ms", "--concurrency", "3")
	c := client()
	getWork(t, c, b, 10)
	getWork(t, c, b, 10)
	// The backend counts a request as gone just after writing its answer.
	waitFor(t, "nothing in flight", func() bool { return stats(t, c, b).InFlight == 0 })
	if s := stats(t, c, b); s.Served != 2 || s.Capacity != 3 {
		t.Errorf("stats: %+v", s)
	}
	code, body := do(t, c, "POST", b.URL("/reset"), "")
	if code != 200 {
		t.Fatalf("reset: %d", code)
	}
	if s := decode[statsResp](t, body); s.Served != 0 || s.Rejected != 0 || s.MaxQueue != 0 {
		t.Errorf("reset returned %+v", s)
	}
	if p := probe(t, c, b); p.LatencyMS != nil {
		t.Errorf("probe after reset: %+v, want null latency", p)
	}
	if code, _ := do(t, c, "GET", b.URL("/reset"), ""); code != 405 {
		t.Errorf("GET /reset: %d, want 405", code)
	}
}

func TestAntagonist_LowersThenRestoresCapacity(t *testing.T) {
	t.Parallel()
	b := testbackend.Start(t, "--concurrency", "4", "--antagonist", "at=0,for=300ms,capacity=1")
	c := client()
	// The drop may already be over on a slow machine; the restore must come.
	waitFor(t, "capacity restored to 4", func() bool { return stats(t, c, b).Capacity == 4 })
	b2 := testbackend.Start(t, "--concurrency", "4", "--antagonist", "at=0,for=1h,capacity=1")
	if s := stats(t, c, b2); s.Capacity != 1 {
		t.Errorf("capacity during the drop: %d, want 1", s.Capacity)
	}
}

func TestFlags_BadValueExits2NamingTheFlag(t *testing.T) {
	t.Parallel()
	bin := testbackend.Binary(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "gpu"}, "--mode"},
		{[]string{"--concurrency", "-1"}, "--concurrency"},
		{[]string{"--service-time", "20"}, "--service-time"},
		{[]string{"--antagonist", "at=1s"}, "--antagonist"},
		{[]string{"--no-such-flag", "1"}, "--no-such-flag"},
	} {
		cmd := exec.Command(bin, tc.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%v: %v, want exit code 2", tc.args, err)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: stderr %q does not name %s", tc.args, stderr.String(), tc.want)
		}
	}
}

func TestSignal_TermFinishesInFlightAndExits0(t *testing.T) {
	t.Parallel()
	b := testbackend.Start(t, "--service-time", "300ms")
	c := client()
	pending := asyncWork(b, "/work")
	waitFor(t, "request in flight", func() bool { return stats(t, c, b).InFlight == 1 })
	c.CloseIdleConnections()
	code, err := b.Stop()
	if code != 0 {
		t.Fatalf("exit code %d: %v", code, err)
	}
	if r := <-pending; r.err != nil || r.code != 200 {
		t.Errorf("in-flight request during shutdown: %d %v", r.code, r.err)
	}
}

func TestBackend_Helpers(t *testing.T) {
	t.Parallel()
	b := testbackend.Start(t, "--service-time", "1ms", "--concurrency", "2")
	getWork(t, client(), b, 1)
	s, err := b.Stats()
	if err != nil || s.Served != 1 || s.Capacity != 2 {
		t.Errorf("Stats: %+v %v", s, err)
	}
	p, err := b.Probe()
	if err != nil || p.LatencyMS == nil || p.Samples != 1 {
		t.Errorf("Probe: %+v %v", p, err)
	}
	if s, err := b.Reset(); err != nil || s.Served != 0 {
		t.Errorf("Reset: %+v %v", s, err)
	}
	b.Kill()
	if _, err := b.Stats(); err == nil {
		t.Error("Stats after Kill succeeded")
	}
	select {
	case <-b.Done():
	default:
		t.Error("Done not closed after Kill")
	}
}

func TestStart_ManyConcurrentClients(t *testing.T) {
	t.Parallel()
	b := testbackend.Start(t, "--service-time", "1ms", "--concurrency", "8")
	c := &http.Client{Timeout: deadline, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				resp, err := c.Get(b.URL("/work?iterations=100"))
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					errs <- fmt.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := stats(t, client(), b); s.Served != 800 {
		t.Errorf("served %d, want 800", s.Served)
	}
}
