package load

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Half the requests get an instant 503, the others a slow 200: goodput is
// half the offered rate, and the latency of successes is the slow one, not
// flattered by the fast failures, which the pessimistic view counts at the
// timeout.
func TestRun_FastFailuresDoNotCountAsServedOrFast(t *testing.T) {
	const slow = 30 * time.Millisecond
	var n atomic.Int64
	s := server(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		time.Sleep(slow)
	})
	phases := []Phase{{Kind: KindConstant, Rate: 200, Duration: time.Second}}
	res := run(t, Config{Targets: []Target{{URL: s.URL}}, Open: phases, Timeout: 2 * time.Second})
	sum := res.Summary()
	if res.Sent != 200 || res.Succeeded+res.Failed5xx != 200 || res.Failed5xx != 100 {
		t.Fatalf("sent %d, succeeded %d, 5xx %d; want 200 sent, half of them 503", res.Sent, res.Succeeded, res.Failed5xx)
	}
	if sum.Goodput != 100 || sum.ErrorRate != 0.5 {
		t.Errorf("goodput %.1f/s, error rate %.2f; want 100/s (half the 200/s target) and 0.5", sum.Goodput, sum.ErrorRate)
	}
	if got := time.Duration(res.Histogram.Min()) * time.Microsecond; got < slow || res.Histogram.TotalCount() != 100 {
		t.Errorf("success histogram: %d values, min %v; want the 100 successes, none faster than %v", res.Histogram.TotalCount(), got, slow)
	}
	if sum.Success.P50 != sum.P50 || sum.Success.Count != 100 {
		t.Errorf("top-level p50 %.3f, success block %+v; want the top level to be the success latency", sum.P50, sum.Success)
	}
	if sum.Pessimistic.Count != 200 || sum.Pessimistic.P90 < 2000 {
		t.Errorf("pessimistic %+v; want all 200 requests with the failures at the 2 s timeout (p90 >= 2000 ms)", sum.Pessimistic)
	}
}

// A request that outlives its timeout is a timeout, not a connection
// error, and counts in the pessimistic view at the timeout.
func TestRun_TimeoutsAreTheirOwnClass(t *testing.T) {
	release := make(chan struct{})
	s := server(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	res := run(t, Config{
		Targets: []Target{{URL: s.URL}},
		Open:    []Phase{{Kind: KindConstant, Rate: 20, Duration: 500 * time.Millisecond}},
		Timeout: 100 * time.Millisecond,
	})
	if res.Timeouts != 10 || res.ConnErrors != 0 || res.Succeeded != 0 || res.Outstanding != 0 {
		t.Errorf("timeouts %d, conn errors %d, succeeded %d, outstanding %d; want 10 timeouts only", res.Timeouts, res.ConnErrors, res.Succeeded, res.Outstanding)
	}
	if got := res.Pessimistic.Min(); got < 100_000 {
		t.Errorf("pessimistic min %d µs, want every timeout at >= 100 ms", got)
	}
}

// Every send's lag and every request's connection wait are recorded.
func TestRun_SendLagAndConnWaitRecorded(t *testing.T) {
	s := server(t, ok)
	res := run(t, Config{Targets: []Target{{URL: s.URL}}, Open: []Phase{{Kind: KindConstant, Rate: 100, Duration: 500 * time.Millisecond}}})
	if res.SendLag.TotalCount() != int64(res.Sent) || res.ConnWait.TotalCount() != int64(res.Completed) || res.Sent != 50 {
		t.Errorf("send lag holds %d, conn wait %d; want one per send (%d) and per answer (%d)",
			res.SendLag.TotalCount(), res.ConnWait.TotalCount(), res.Sent, res.Completed)
	}
}

// A generator with a single worker against a 20 ms server at 100/s falls
// behind: its send lag grows to hundreds of ms and says so.
func TestRun_FallingBehindShowsInSendLag(t *testing.T) {
	s := server(t, func(w http.ResponseWriter, r *http.Request) { time.Sleep(20 * time.Millisecond) })
	res := run(t, Config{Targets: []Target{{URL: s.URL}}, Open: []Phase{{Kind: KindConstant, Rate: 100, Duration: time.Second}}, MaxWorkers: 1})
	if p99 := res.Summary().SendLag.P99; p99 < 200 {
		t.Errorf("send-lag p99 %.1f ms, want >= 200 ms (a single 20 ms worker for 10 ms arrivals)", p99)
	}
}

// With a cap of one connection, concurrent requests queue for it: the
// wait is counted as cap-bound. With room under the cap, none is.
func TestRun_ConnectionCapBindingCounted(t *testing.T) {
	s := server(t, func(w http.ResponseWriter, r *http.Request) { time.Sleep(20 * time.Millisecond) })
	phases := []Phase{{Kind: KindConstant, Rate: 100, Duration: 500 * time.Millisecond}}
	tight := run(t, Config{Targets: []Target{{URL: s.URL}}, Open: phases, MaxConnections: 1})
	if tight.ConnCapBound < 10 || tight.ConnCap != 1 {
		t.Errorf("cap 1: %d requests counted cap-bound (cap %d), want most of the 50", tight.ConnCapBound, tight.ConnCap)
	}
	if p99 := tight.Summary().ConnWait.P99; p99 < 20 {
		t.Errorf("cap 1: conn-wait p99 %.1f ms, want >= one service time (20 ms)", p99)
	}
	roomy := run(t, Config{Targets: []Target{{URL: s.URL}}, Open: phases, MaxConnections: 1000})
	if roomy.ConnCapBound != 0 || roomy.ConnCap != 1000 {
		t.Errorf("cap 1000: %d requests counted cap-bound (cap %d), want 0", roomy.ConnCapBound, roomy.ConnCap)
	}
}

// The warmup and the window are one schedule: the first intended send of
// the window follows the last of the warmup by one interval, with no gap.
func TestSchedule_WarmupFlowsIntoTheWindow(t *testing.T) {
	cfg := Config{Warmup: 500 * time.Millisecond, WarmupRate: 100, Open: []Phase{{Kind: KindConstant, Rate: 100, Duration: time.Second}}}
	s := newSchedule(cfg.openPhases())
	var last time.Duration
	var warm, window int
	var firstWindow time.Duration = -1
	for off, ok := s.next(); ok; off, ok = s.next() {
		if s.phase() == 0 {
			warm++
			last = off
		} else {
			if firstWindow < 0 {
				firstWindow = off
			}
			window++
		}
	}
	if warm != 50 || window != 100 {
		t.Fatalf("%d warmup and %d window sends, want 50 and 100", warm, window)
	}
	if gap := firstWindow - last; gap != 10*time.Millisecond {
		t.Errorf("window's first send %v after the warmup's last, want one 10 ms interval", gap)
	}
}

// Run sends the warmup and the window as one load: the server sees the
// warmup's requests before the window starts and the window's after it;
// only the window's are counted, and the boundary callbacks fire while
// the load goes on.
func TestRun_WarmupIsSentButNotCounted(t *testing.T) {
	var n atomic.Int64
	s := server(t, func(w http.ResponseWriter, r *http.Request) { n.Add(1) })
	var mu sync.Mutex
	var atStart, atEnd int64 = -1, -1
	res, err := Run(context.Background(), Config{
		Targets:       []Target{{URL: s.URL}},
		Warmup:        300 * time.Millisecond,
		WarmupRate:    100,
		Open:          []Phase{{Kind: KindConstant, Rate: 100, Duration: 500 * time.Millisecond}},
		OnWindowStart: func() { mu.Lock(); atStart = n.Load(); mu.Unlock() },
		OnWindowEnd:   func() { mu.Lock(); atEnd = n.Load(); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 50 || res.Succeeded != 50 || res.Duration != 500*time.Millisecond {
		t.Errorf("sent %d, succeeded %d over %v; want the window's 50 over 500ms", res.Sent, res.Succeeded, res.Duration)
	}
	if got := n.Load(); got != 80 {
		t.Errorf("server got %d requests, want 30 warmup + 50 window", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if atStart < 1 || atStart > 31 || atEnd <= atStart {
		t.Errorf("server had %d requests at the window's start and %d at its end; want the warmup's (about 30) at the start and more at the end", atStart, atEnd)
	}
}

func TestMicros_ClampsAndSays(t *testing.T) {
	if us, clamped := micros(61 * time.Second); !clamped || us != 60_000_000 {
		t.Errorf("micros(61s) = %d, %v; want the 60 s ceiling, clamped", us, clamped)
	}
	if us, clamped := micros(time.Second); clamped || us != 1_000_000 {
		t.Errorf("micros(1s) = %d, %v", us, clamped)
	}
}

// The load can finish before the clock reaches the window's end (here its
// last send is due 9 ms before it): the boundaries are signalled anyway,
// once each, in order.
func TestRun_BoundariesAlwaysSignalled(t *testing.T) {
	s := server(t, ok)
	for i := range 5 {
		var calls []string
		_, err := Run(context.Background(), Config{
			Targets:       []Target{{URL: s.URL}},
			Warmup:        20 * time.Millisecond,
			WarmupRate:    100,
			Open:          []Phase{{Kind: KindConstant, Rate: 100, Duration: 59 * time.Millisecond}},
			OnWindowStart: func() { calls = append(calls, "start") },
			OnWindowEnd:   func() { calls = append(calls, "end") },
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(calls) != 2 || calls[0] != "start" || calls[1] != "end" {
			t.Fatalf("run %d: boundary calls %v, want [start end]", i, calls)
		}
	}
}
