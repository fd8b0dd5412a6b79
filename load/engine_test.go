package load

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
)

func server(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func ok(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }

func run(t *testing.T, cfg Config) *Result {
	t.Helper()
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func TestRun_OpenLoopSendsTheSchedule(t *testing.T) {
	s := server(t, ok)
	phases := []Phase{
		{Kind: KindConstant, Rate: 100, Duration: time.Second},
		{Kind: KindRamp, From: 50, To: 150, Duration: time.Second},
	}
	res := run(t, Config{Targets: []Target{{URL: s.URL}}, Open: phases})
	want := plannedHits(phases)
	if res.Sent != want || res.Completed != want {
		t.Errorf("sent %d, completed %d; want both %d (the schedule)", res.Sent, res.Completed, want)
	}
	if res.Errors != 0 || res.StatusCodes[200] != want {
		t.Errorf("errors %d, codes %v; want 0 errors and %d × 200", res.Errors, res.StatusCodes, want)
	}
	if got := res.Histogram.TotalCount(); uint64(got) != want {
		t.Errorf("histogram holds %d values, want %d", got, want)
	}
	// The target is the schedule's planned hits per second (the ramp's
	// pacer holds one hit less than its integral of 100).
	if res.Model != ModelOpen || res.Duration != 2*time.Second || res.Planned != want || res.TargetRate != float64(want)/2 {
		t.Errorf("model %q, duration %v, planned %d, target rate %v; want open, 2s, %d, %v", res.Model, res.Duration, res.Planned, res.TargetRate, want, float64(want)/2)
	}
	if res.Dropped != 0 {
		t.Errorf("dropped %d, want 0", res.Dropped)
	}
}

// stallServer answers at once, except that the request numbered stallAt
// holds the only worker for stall: every send scheduled meanwhile waits.
func TestRun_LatencyRunsFromTheIntendedSendTime(t *testing.T) {
	const stall = 200 * time.Millisecond
	var n atomic.Int64
	s := server(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 20 {
			time.Sleep(stall)
		}
	})
	phases := []Phase{{Kind: KindConstant, Rate: 100, Duration: time.Second}}
	res := run(t, Config{Targets: []Target{{URL: s.URL}}, Open: phases, MaxWorkers: 1})
	if want := plannedHits(phases); res.Sent != want || res.Completed != want {
		t.Fatalf("sent %d, completed %d; want %d", res.Sent, res.Completed, want)
	}
	// The 20 sends scheduled every 10 ms during the stall left after it:
	// timed from their intended time, about 10 of them waited >= 100 ms.
	// Timed from the actual send, only the stalled request would.
	slow := countAtLeast(res, 100*time.Millisecond)
	if slow < 8 {
		t.Errorf("%d requests >= 100ms, want >= 8 (the sends queued behind the stall)", slow)
	}
	if res.Late < 15 {
		t.Errorf("late sends = %d, want >= 15 (those scheduled during the stall)", res.Late)
	}
	if max := time.Duration(res.Histogram.Max()) * time.Microsecond; max < stall {
		t.Errorf("max latency %v, want >= the %v stall", max, stall)
	}
}

func countAtLeast(res *Result, d time.Duration) int64 {
	var n int64
	for _, b := range res.Histogram.Distribution() {
		if b.From >= int64(d/time.Microsecond) {
			n += b.Count
		}
	}
	return n
}

func TestRun_LateSendsCounted(t *testing.T) {
	s := server(t, func(http.ResponseWriter, *http.Request) { time.Sleep(30 * time.Millisecond) })
	phases := []Phase{{Kind: KindConstant, Rate: 100, Duration: 500 * time.Millisecond}}
	// One worker managing at most ~33 requests/s cannot keep a 100/s
	// schedule: most sends leave late, yet all of them are sent.
	res := run(t, Config{Targets: []Target{{URL: s.URL}}, Open: phases, MaxWorkers: 1})
	if res.Sent != 50 {
		t.Errorf("sent %d, want 50", res.Sent)
	}
	if res.Late < 30 {
		t.Errorf("late = %d, want >= 30", res.Late)
	}
	if p50 := res.Summary().P50; p50 < 100 {
		t.Errorf("p50 %vms, want >= 100ms: the queueing behind the one worker counts", p50)
	}
}

func TestRun_ClosedLoopNeverExceedsUsers(t *testing.T) {
	const users = 3
	var inFlight, peak atomic.Int64
	s := server(t, func(http.ResponseWriter, *http.Request) {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(5 * time.Millisecond)
		inFlight.Add(-1)
	})
	res := run(t, Config{Targets: []Target{{URL: s.URL}}, Users: users, Duration: 500 * time.Millisecond})
	if p := peak.Load(); p > users || p < 1 {
		t.Errorf("peak concurrency %d, want 1..%d", p, users)
	}
	if res.Sent == 0 || res.Sent != res.Completed {
		t.Errorf("sent %d, completed %d; want equal and > 0", res.Sent, res.Completed)
	}
	if res.Model != ModelClosed || res.Users != users || res.Late != 0 {
		t.Errorf("model %q, users %d, late %d; want closed, %d, 0", res.Model, res.Users, res.Late, users)
	}
	if sum := res.Summary(); sum.Users != users || sum.TargetRate != 0 {
		t.Errorf("summary users %d, target rate %v; want %d, 0", sum.Users, sum.TargetRate, users)
	}
}

func TestRun_ClosedLoopThinkTime(t *testing.T) {
	s := server(t, ok)
	// One user thinking 100 ms between requests over 350 ms sends 4.
	res := run(t, Config{Targets: []Target{{URL: s.URL}}, Users: 1, Duration: 350 * time.Millisecond, ThinkTime: 100 * time.Millisecond})
	if res.Sent < 1 || res.Sent > 4 {
		t.Errorf("sent %d, want 1..4", res.Sent)
	}
}

func TestRun_WeightsAndHostHeaders(t *testing.T) {
	var mu sync.Mutex
	hosts := map[string]int{}
	bodies := map[string]int{}
	s := server(t, func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		b.ReadFrom(r.Body)
		mu.Lock()
		hosts[r.Host]++
		bodies[r.Method+" "+b.String()+" "+r.Header.Get("X-Test")]++
		mu.Unlock()
	})
	res := run(t, Config{
		Targets: []Target{
			{URL: s.URL, Host: "a.example", Weight: 8, Method: "POST", Body: []byte("hello"), Header: http.Header{"X-Test": {"1"}}},
			{URL: s.URL, Host: "b.example", Weight: 2},
		},
		Open: []Phase{{Kind: KindConstant, Rate: 500, Duration: time.Second}},
		Seed: 42,
	})
	mu.Lock()
	defer mu.Unlock()
	if total := hosts["a.example"] + hosts["b.example"]; uint64(total) != res.Sent || total != 500 {
		t.Fatalf("hosts seen %v, sent %d; want 500 split over a.example and b.example", hosts, res.Sent)
	}
	if frac := float64(hosts["a.example"]) / 500; frac < 0.74 || frac > 0.86 {
		t.Errorf("a.example got %.3f of requests, want ≈0.8", frac)
	}
	if bodies["POST hello 1"] != hosts["a.example"] || bodies["GET  "] != hosts["b.example"] {
		t.Errorf("method/body/header per target = %v, hosts %v", bodies, hosts)
	}
}

func TestRun_StatusCodesAndTransportErrors(t *testing.T) {
	s := server(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/fail") {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	// A port nobody listens on: connections are refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String() + "/"
	l.Close()
	res := run(t, Config{
		Targets: []Target{{URL: s.URL + "/ok"}, {URL: s.URL + "/fail"}, {URL: dead}},
		Open:    []Phase{{Kind: KindConstant, Rate: 300, Duration: 500 * time.Millisecond}},
		Seed:    7,
	})
	c := res.StatusCodes
	if c[200] == 0 || c[503] == 0 || c[0] == 0 {
		t.Fatalf("status codes %v, want 200, 503 and 0 (refused)", c)
	}
	if c[200]+c[503]+c[0] != res.Completed || res.Completed != 150 {
		t.Errorf("codes %v sum to %d; completed %d, want 150", c, c[200]+c[503]+c[0], res.Completed)
	}
	if res.Errors != c[503]+c[0] {
		t.Errorf("errors %d, want 503s + transport errors = %d", res.Errors, c[503]+c[0])
	}
	if got := uint64(res.Histogram.TotalCount()); got != c[200] || res.Succeeded != c[200] {
		t.Errorf("success histogram holds %d, succeeded %d; want the 200s (%d) only", got, res.Succeeded, c[200])
	}
	if got := uint64(res.Pessimistic.TotalCount()); got != res.Completed {
		t.Errorf("pessimistic histogram holds %d, want every completed request (%d), errors included", got, res.Completed)
	}
	if res.Failed5xx != c[503] || res.ConnErrors != c[0] || res.Timeouts != 0 || res.Failed4xx != 0 {
		t.Errorf("failures 5xx %d, conn %d, timeouts %d, 4xx %d; want %d 5xx, %d refused, nothing else",
			res.Failed5xx, res.ConnErrors, res.Timeouts, res.Failed4xx, c[503], c[0])
	}
	sum := res.Summary()
	if sum.StatusCodes["503"] != c[503] || sum.StatusCodes["0"] != c[0] {
		t.Errorf("summary codes %v, want %v keyed by string", sum.StatusCodes, c)
	}
}

func TestRun_CancelStopsPromptly(t *testing.T) {
	var n atomic.Int64
	release := make(chan struct{})
	s := server(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > 3 {
			select { // hang until the client gives up
			case <-r.Context().Done():
			case <-release:
			}
		}
	})
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		deadline := time.Now().Add(20 * time.Second)
		for n.Load() < 5 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	began := time.Now()
	res, err := Run(ctx, Config{
		Targets: []Target{{URL: s.URL}},
		Open:    []Phase{{Kind: KindConstant, Rate: 20, Duration: time.Minute}},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if took := time.Since(began); took > 30*time.Second {
		t.Errorf("Run took %v after cancel of a 1-minute schedule", took)
	}
	if res == nil {
		t.Fatal("no result with the cancellation")
	}
	if res.Completed < 3 || res.Completed >= res.Sent {
		t.Errorf("completed %d of %d sent; want the 3+ answered, not the aborted", res.Completed, res.Sent)
	}
	if res.Duration >= time.Minute || res.Duration <= 0 {
		t.Errorf("duration %v, want the shortened window", res.Duration)
	}
	if res.Errors != 0 {
		t.Errorf("errors %d: aborted requests were counted", res.Errors)
	}
}

func TestRun_OneRowPerSecond(t *testing.T) {
	s := server(t, ok)
	var mu sync.Mutex
	var seen []Second
	res := run(t, Config{
		Targets:  []Target{{URL: s.URL}},
		Open:     []Phase{{Kind: KindConstant, Rate: 50, Duration: 2500 * time.Millisecond}},
		OnSecond: func(s Second) { mu.Lock(); seen = append(seen, s); mu.Unlock() },
	})
	if len(res.Series) != 3 {
		t.Fatalf("%d rows for 2.5s, want 3", len(res.Series))
	}
	var sent, completed uint64
	for i, row := range res.Series {
		if row.Second != i {
			t.Errorf("row %d numbered %d", i, row.Second)
		}
		sent += row.Sent
		completed += row.Completed
		if row.Completed > 0 && (row.P50 <= 0 || row.P99 < row.P50) {
			t.Errorf("row %d: p50 %v, p99 %v", i, row.P50, row.P99)
		}
	}
	if sent != res.Sent || completed != res.Completed || sent != 125 {
		t.Errorf("rows sum to sent %d, completed %d; totals %d, %d; want 125", sent, completed, res.Sent, res.Completed)
	}
	mu.Lock()
	if len(seen) != 3 {
		t.Errorf("OnSecond called %d times, want 3", len(seen))
	}
	mu.Unlock()

	var buf bytes.Buffer
	if err := res.WriteTimeseries(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 || lines[0] != artifacts.TimeseriesHeader {
		t.Fatalf("timeseries.csv:\n%s", buf.String())
	}
	if !strings.HasPrefix(lines[1], "0,") || strings.Count(lines[1], ",") != strings.Count(artifacts.TimeseriesHeader, ",") {
		t.Errorf("first row %q", lines[1])
	}
}

func TestRun_SharedClientReusesConnections(t *testing.T) {
	var conns atomic.Int64
	s := httptest.NewUnstartedServer(http.HandlerFunc(ok))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	warm := Config{Targets: []Target{{URL: s.URL}}, Users: 2, Duration: 200 * time.Millisecond}
	warm.Client = NewClient(warm)
	run(t, warm)
	before := conns.Load()
	if before < 1 {
		t.Fatalf("warmup opened %d connections", before)
	}
	// Two sends 500 ms apart: each finds a warm connection idle.
	measured := Config{Targets: warm.Targets, Client: warm.Client, Open: []Phase{{Kind: KindConstant, Rate: 2, Duration: time.Second}}}
	if res := run(t, measured); res.Completed != 2 {
		t.Fatalf("completed %d, want 2", res.Completed)
	}
	if after := conns.Load(); after != before {
		t.Errorf("measured run opened %d new connections, want 0", after-before)
	}
}

func TestRun_InvalidConfig(t *testing.T) {
	_, err := Run(context.Background(), Config{})
	if err == nil || !strings.Contains(err.Error(), "load: targets") {
		t.Errorf("err = %v, want the validation error", err)
	}
}

func TestNewClient_DoesNotFollowRedirects(t *testing.T) {
	s := server(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:1/elsewhere", http.StatusFound)
	})
	res := run(t, Config{Targets: []Target{{URL: s.URL}}, Open: []Phase{{Kind: KindConstant, Rate: 10, Duration: 200 * time.Millisecond}}})
	if res.StatusCodes[302] != res.Completed || res.Completed != 2 {
		t.Errorf("codes %v, want every answer the 302 itself", res.StatusCodes)
	}
}

// Requests that finish after the window must not count toward the achieved
// rate: a system that fell behind would otherwise look as if it kept up.
func TestRun_AchievedRateExcludesDrainedRequests(t *testing.T) {
	s := server(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond) // every request outlives a 200 ms window
	})
	res := run(t, Config{Targets: []Target{{URL: s.URL}}, Open: []Phase{{Kind: KindConstant, Rate: 20, Duration: 200 * time.Millisecond}}})
	if res.Completed != res.Sent || res.Sent == 0 {
		t.Fatalf("completed %d of %d sent; want all drained", res.Completed, res.Sent)
	}
	if res.CompletedInWindow != 0 {
		t.Errorf("completed in window = %d, want 0: every answer came after the window", res.CompletedInWindow)
	}
	if got := res.Summary().AchievedRate; got != 0 {
		t.Errorf("achieved rate = %v, want 0", got)
	}
	// Goodput counts by intended send time: every request of the window
	// was waited for and succeeded, so it is the offered rate.
	if want := float64(res.Sent) / res.Duration.Seconds(); res.Succeeded != res.Sent || res.Summary().Goodput != want {
		t.Errorf("succeeded %d of %d, goodput %v; want every drained success counted, goodput %v", res.Succeeded, res.Sent, res.Summary().Goodput, want)
	}
}

func TestSummary_PercentilesFromHistogram(t *testing.T) {
	h := artifacts.NewHistogram()
	for i := int64(1); i <= 1000; i++ {
		h.RecordValue(i * 1000) // 1 ms .. 1000 ms
	}
	r := &Result{Model: ModelOpen, Histogram: h, Completed: 1000, CompletedInWindow: 1000, Sent: 1000, Duration: 10 * time.Second, TargetRate: 100, StatusCodes: map[int]uint64{200: 1000}}
	s := r.Summary()
	near := func(name string, got, want float64) {
		if got < want*0.99 || got > want*1.01 {
			t.Errorf("%s = %v, want ≈%v", name, got, want)
		}
	}
	near("p50", s.P50, 500)
	near("p90", s.P90, 900)
	near("p99", s.P99, 990)
	near("p99.9", s.P999, 999)
	near("max", s.Max, 1000)
	near("mean", s.Mean, 500.5)
	near("achieved", s.AchievedRate, 100)
	if s.Count != 1000 || s.StatusCodes["200"] != 1000 || s.Model != "open" {
		t.Errorf("summary %+v", s)
	}
}

// The last second's CPU reading ends at the window's end, not after the
// drain: a host idle while the run waits for its last answers must not
// hide a saturated last second. The server holds every answer until the
// window has ended; a reading taken after that is marked.
func TestRun_LastSecondCPUIsSampledAtTheWindowEnd(t *testing.T) {
	var released atomic.Bool
	release := make(chan struct{})
	s := server(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	var once sync.Once
	res := run(t, Config{
		Targets: []Target{{URL: s.URL}},
		Open:    []Phase{{Kind: KindConstant, Rate: 20, Duration: 1500 * time.Millisecond}},
		Timeout: 10 * time.Second,
		SampleCPU: func() *CPU {
			if released.Load() {
				return &CPU{HostIdle: 1} // taken during the drain
			}
			return &CPU{HostIdle: 0}
		},
		OnWindowEnd: func() {
			once.Do(func() { released.Store(true); close(release) })
		},
	})
	if res.Succeeded != res.Sent || res.Sent == 0 {
		t.Fatalf("succeeded %d of %d", res.Succeeded, res.Sent)
	}
	last := res.Series[len(res.Series)-1]
	if last.CPU == nil || last.CPU.HostIdle != 0 {
		t.Errorf("last row's CPU %+v was sampled during the drain, want at the window's end", last.CPU)
	}
}

// A Start in the past anchors the schedule there: the hits already due
// leave at once, late, and their latency runs from their intended times,
// so generators that started at different moments keep the same seconds.
// A Start in the future is waited for.
func TestRun_StartAnchorsTheSchedule(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	cfg := Config{
		Targets: []Target{{URL: srv.URL}},
		Open:    []Phase{{Kind: KindConstant, Rate: 100, Duration: time.Second}},
		Start:   time.Now().Add(-400 * time.Millisecond),
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Hits 0..39 were due before Run began.
	if res.Sent != 100 || res.Late < 35 {
		t.Errorf("sent %d, late %d; want 100 sent, the first 40 of them late", res.Sent, res.Late)
	}
	if lag := time.Duration(res.SendLag.Max()) * time.Microsecond; lag < 350*time.Millisecond {
		t.Errorf("largest send lag %v, want about 400ms (the first hit's)", lag)
	}
	if lat := time.Duration(res.Histogram.Max()) * time.Microsecond; lat < 350*time.Millisecond {
		t.Errorf("largest latency %v: the late hits' latency must run from their intended times", lat)
	}

	cfg.Start = time.Now().Add(300 * time.Millisecond)
	cfg.Open[0].Duration = 100 * time.Millisecond
	began := time.Now()
	res, err = Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < 380*time.Millisecond || res.Sent != 10 {
		t.Errorf("a start 300ms ahead: took %v, sent %d; want >= 380ms and 10", took, res.Sent)
	}
}
