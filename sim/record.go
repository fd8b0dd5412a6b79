package sim

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/prequalbench/prequalbench/artifacts"
)

// Result is what the load generator measured in one Run, in the units of
// package load: latencies in µs in histograms with the project's bounds,
// counters, and one row per second of the window.
type Result struct {
	// Model is "open" or "closed"; Users is set for a closed loop.
	Model string
	Users int
	// Success holds the latencies of 2xx/3xx answers; Pessimistic every
	// request, each failure at max(its latency, the request timeout).
	Success, Pessimistic *hdrhistogram.Histogram
	Series               []Second
	StatusCodes          map[int]uint64 // 0 = no answer (timeout)
	Sent, Completed      uint64
	CompletedInWindow    uint64
	Succeeded            uint64
	Failed4xx, Failed5xx uint64
	Timeouts             uint64
	Errors               uint64 // every failure
	Clamped              uint64
	Duration             time.Duration
	TargetRate           float64
	// Events is the number of simulation events the Run processed.
	Events uint64
}

// Second is one row of the per-second series: sends during the second,
// answers during it, and the percentiles of its successes.
type Second struct {
	Second                             int
	Sent, Completed, Succeeded, Errors uint64
	P50, P99                           time.Duration
	// Warmup marks a second of the warmup (progress only, not a row).
	Warmup bool
}

// recorder aggregates one Run's outcomes: a few histograms and counters,
// never a record per request.
type recorder struct {
	load        *loadRun
	res         Result
	sec         *hdrhistogram.Histogram
	cur         Second
	windowEnd   int64
	outstanding uint64
	sendsDone   bool
	windowShut  bool // the window's end has passed (OnWindowEnd called)
	targetRate  float64
	window      int64
	warmups     int
}

func newRecorder(l *loadRun, window int64) *recorder {
	r := &recorder{load: l, sec: artifacts.NewHistogram(), windowEnd: l.winTo, window: window}
	r.res.Success, r.res.Pessimistic = artifacts.NewHistogram(), artifacts.NewHistogram()
	r.res.StatusCodes = map[int]uint64{}
	return r
}

func (r *recorder) finished() bool { return r.sendsDone && r.outstanding == 0 }

// sent counts one send; only those inside the window count in the result.
func (r *recorder) sent(counted bool) {
	r.outstanding++
	if counted {
		r.res.Sent++
		r.cur.Sent++
	}
}

// done records one outcome at virtual time at: its latency in ns and
// status (0: no answer).
func (r *recorder) done(counted bool, at, latency int64, status int, timedOut bool) {
	r.outstanding--
	if !counted {
		return
	}
	us := latency / int64(time.Microsecond)
	if us > artifacts.HistogramHighest {
		r.res.Clamped++
	}
	us = min(max(us, 0), artifacts.HistogramHighest)
	r.res.StatusCodes[status]++
	r.res.Completed++
	r.cur.Completed++
	if at <= r.windowEnd {
		r.res.CompletedInWindow++
	}
	if status >= 200 && status < 400 && !timedOut {
		r.res.Succeeded++
		r.cur.Succeeded++
		_ = r.res.Success.RecordValue(us)
		_ = r.sec.RecordValue(us)
		_ = r.res.Pessimistic.RecordValue(us)
		return
	}
	r.res.Errors++
	r.cur.Errors++
	switch {
	case timedOut:
		r.res.Timeouts++
	case status >= 500:
		r.res.Failed5xx++
	case status >= 400:
		r.res.Failed4xx++
	}
	to := min(r.load.timeout/int64(time.Microsecond), artifacts.HistogramHighest)
	_ = r.res.Pessimistic.RecordValue(max(us, to))
}

func (r *recorder) closeSecond() {
	row := r.cur
	row.Second = len(r.res.Series)
	if r.sec.TotalCount() > 0 {
		row.P50 = time.Duration(r.sec.ValueAtQuantile(50)) * time.Microsecond
		row.P99 = time.Duration(r.sec.ValueAtQuantile(99)) * time.Microsecond
	}
	r.sec.Reset()
	r.cur = Second{}
	r.res.Series = append(r.res.Series, row)
	if f := r.load.l.OnSecond; f != nil {
		f(row)
	}
}

func (r *recorder) warmupSecond() {
	if f := r.load.l.OnSecond; f != nil {
		f(Second{Second: r.warmups, Warmup: true})
	}
	r.warmups++
}

func (r *recorder) result() *Result {
	r.closeSecond()
	res := r.res
	res.Duration = time.Duration(r.window)
	res.TargetRate = r.targetRate
	res.Model = "open"
	if r.load.l.Users > 0 {
		res.Model, res.Users = "closed", r.load.l.Users
	}
	return &res
}
