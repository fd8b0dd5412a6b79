package load

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/prequalbench/prequalbench/artifacts"
)

// Second is one row of the per-second series of the window. Sent and
// Late count sends that left during the second; Completed (every outcome),
// Succeeded, Errors and the percentiles (of successes) cover the requests
// answered during it. Only
// requests whose intended send time is in the window count. The last row
// also holds the requests answered after the window, while Run drained
// them. CPU is nil when not sampled.
type Second struct {
	Second                     int
	Sent, Completed, Succeeded uint64
	Errors, Late               uint64
	P50, P99                   time.Duration
	CPU                        *CPU
	// Histogram holds the second's success latencies when
	// Config.SecondHistograms is set (nil otherwise).
	Histogram *hdrhistogram.Histogram
	// Warmup marks a second of the warmup, passed to OnSecond only (for
	// progress); it carries no counts and is not part of the series.
	Warmup bool
}

// Result is what a run measured, over the requests whose intended send
// time lies in the measured window (the warmup is not counted).
type Result struct {
	// Model is "open" or "closed"; Users is set for a closed loop.
	Model string
	Users int
	// Histogram holds the latency in µs (artifacts.NewHistogram bounds) of
	// every success (2xx/3xx). Open loop: from the intended send time;
	// closed loop: from the actual send.
	Histogram *hdrhistogram.Histogram
	// Pessimistic holds every answered or failed request, each failure at
	// max(its latency, Timeout).
	Pessimistic *hdrhistogram.Histogram
	// SendLag holds actual minus intended send time (open loop) and
	// ConnWait the time from the send to getting a connection, in µs.
	SendLag  *hdrhistogram.Histogram
	ConnWait *hdrhistogram.Histogram
	Series   []Second
	// StatusCodes counts answers by status; 0 = no answer (transport
	// error or timeout).
	StatusCodes map[int]uint64
	Sent        uint64
	// Completed counts requests with an outcome (answer or failure).
	Completed uint64
	// CompletedInWindow counts the outcomes that arrived before the
	// window ended (the v1 achieved rate, kept for compatibility).
	CompletedInWindow uint64
	// Succeeded counts 2xx/3xx answers; the failures are by class.
	Succeeded, Failed4xx, Failed5xx, Timeouts, ConnErrors uint64
	// Errors is the sum of the failures.
	Errors uint64
	// Outstanding counts sends without an outcome when Run stopped waiting
	// (only a cancelled run has any: every request is bounded by Timeout).
	Outstanding uint64
	// Clamped counts latencies longer than the histogram's ceiling,
	// recorded at it.
	Clamped uint64
	// Late counts open-loop sends that left more than LateAfter after
	// their intended time.
	Late uint64
	// Dropped counts scheduled open-loop sends never sent because every
	// worker was still busy when the window plus Timeout had passed.
	Dropped uint64
	// ConnCap is the connection cap in force over all target addresses
	// (0 = none); ConnCapBound counts requests that waited more than
	// CapBoundAfter for a connection while the cap was full.
	ConnCap      int
	ConnCapBound uint64
	// Duration is the measured window: from its first scheduled send to
	// the end of the schedule (or the cancellation).
	Duration time.Duration
	// Planned counts the open-loop hits of the window's schedule that
	// were this generator's to send (its shard's, Config.Shard), dropped
	// ones included: what the schedule planned, whatever got sent.
	Planned uint64
	// TargetRate is the planned rate over Duration (open loop): Planned
	// per second of the window, so the shards' Planned add up to one
	// generator's and Merge gives its TargetRate exactly. A cancelled
	// run's is what it offered before the cancellation, per second of the
	// shortened window.
	TargetRate float64
}

// LateAfter is how far behind its intended time a send may leave before it
// counts as late. It is near the timer granularity, so some late sends are
// normal; the send-lag histogram says how late.
const LateAfter = time.Millisecond

// CapBoundAfter is how long a request must wait for a connection, with the
// cap full, to count in ConnCapBound.
const CapBoundAfter = time.Millisecond

// Percentiles summarises h (µs) in milliseconds.
func Percentiles(h *hdrhistogram.Histogram) artifacts.Percentiles {
	if h == nil || h.TotalCount() == 0 {
		return artifacts.Percentiles{}
	}
	// ValueAtQuantile takes a percentage (0–100).
	return artifacts.Percentiles{
		P50:   artifacts.Millis(h.ValueAtQuantile(50)),
		P90:   artifacts.Millis(h.ValueAtQuantile(90)),
		P99:   artifacts.Millis(h.ValueAtQuantile(99)),
		P999:  artifacts.Millis(h.ValueAtQuantile(99.9)),
		Max:   artifacts.Millis(h.Max()),
		Mean:  h.Mean() / 1000,
		Count: h.TotalCount(),
	}
}

// Summary condenses r into the run.json form. Percentiles come from the
// exact histograms.
func (r *Result) Summary() artifacts.LoadResult {
	s := artifacts.LoadResult{
		Model:        r.Model,
		Duration:     r.Duration,
		TargetRate:   r.TargetRate,
		Users:        r.Users,
		Sent:         r.Sent,
		Completed:    r.Completed,
		Errors:       r.Errors,
		Dropped:      r.Dropped,
		LateSends:    r.Late,
		StatusCodes:  make(map[string]uint64, len(r.StatusCodes)),
		Succeeded:    r.Succeeded,
		Failed4xx:    r.Failed4xx,
		Failed5xx:    r.Failed5xx,
		Timeouts:     r.Timeouts,
		ConnErrors:   r.ConnErrors,
		Outstanding:  r.Outstanding,
		Clamped:      r.Clamped,
		Success:      Percentiles(r.Histogram),
		Pessimistic:  Percentiles(r.Pessimistic),
		SendLag:      Percentiles(r.SendLag),
		ConnWait:     Percentiles(r.ConnWait),
		ConnCap:      r.ConnCap,
		ConnCapBound: r.ConnCapBound,
	}
	if r.Duration > 0 {
		s.AchievedRate = float64(r.CompletedInWindow) / r.Duration.Seconds()
		s.Goodput = float64(r.Succeeded) / r.Duration.Seconds()
	}
	if r.Sent > 0 {
		s.ErrorRate = float64(r.Errors) / float64(r.Sent)
	}
	for code, n := range r.StatusCodes {
		s.StatusCodes[strconv.Itoa(code)] = n
	}
	p := s.Success
	s.P50, s.P90, s.P99, s.P999, s.Max, s.Mean, s.Count = p.P50, p.P90, p.P99, p.P999, p.Max, p.Mean, p.Count
	return s
}

// WriteTimeseries writes r.Series as CSV under artifacts.TimeseriesHeader;
// CPU columns are empty when not measured.
func (r *Result) WriteTimeseries(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, artifacts.TimeseriesHeader)
	for _, s := range r.Series {
		idle, gen, in, be := math.NaN(), math.NaN(), math.NaN(), math.NaN()
		if s.CPU != nil {
			idle, gen, in, be = s.CPU.HostIdle, s.CPU.Generator, s.CPU.Ingress, s.CPU.Backends
		}
		fmt.Fprintf(bw, "%d,%d,%d,%d,%d,%s,%s,%s,%s,%s,%s\n", s.Second, s.Sent, s.Succeeded, s.Errors, s.Late,
			ms(s.P50), ms(s.P99), pct(idle), pct(gen), pct(in), pct(be))
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("load: write timeseries: %w", err)
	}
	return nil
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

func pct(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// recorder aggregates outcomes into the run totals and the current second.
// Memory is fixed: a few histograms and counters, never per-request
// records. Everything sits behind mu; a record is a few tens of
// nanoseconds, far below the cost of the request it records.
type recorder struct {
	mu      sync.Mutex
	timeout time.Duration
	res     Result
	sec     *hdrhistogram.Histogram
	keepSec bool   // copy sec into each row (Config.SecondHistograms)
	cur     Second // counters of the open second
	stopped bool   // no more outcomes are taken (cancelled run)

	windowEnd time.Time // outcomes after it are drained, not in the window
}

func newRecorder(timeout time.Duration) *recorder {
	return &recorder{
		timeout: timeout,
		sec:     artifacts.NewHistogram(),
		res: Result{
			Histogram:   artifacts.NewHistogram(),
			Pessimistic: artifacts.NewHistogram(),
			SendLag:     artifacts.NewHistogram(),
			ConnWait:    artifacts.NewHistogram(),
			StatusCodes: map[int]uint64{},
		},
	}
}

// micros converts d to a histogram value, clamped into its bounds; clamped
// reports a value above the ceiling.
func micros(d time.Duration) (us int64, clamped bool) {
	us = int64(d / time.Microsecond)
	return min(max(us, 0), artifacts.HistogramHighest), us > artifacts.HistogramHighest
}

// sent records one send of the window that left lag after its intended
// time (open loop).
func (r *recorder) sent(lag time.Duration, open bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.cur.Sent++
	r.res.Sent++
	if open {
		us, _ := micros(lag)
		_ = r.res.SendLag.RecordValue(us)
		if lag > LateAfter {
			r.cur.Late++
			r.res.Late++
		}
	}
}

// done records the outcome of one request of the window.
func (r *recorder) done(latency time.Duration, out outcome) {
	us, clamped := micros(latency)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	res := &r.res
	// Values are in bounds by micros, so RecordValue cannot fail.
	if out.gotConn {
		w, _ := micros(out.connWait)
		_ = res.ConnWait.RecordValue(w)
		if out.capBound && out.connWait > CapBoundAfter {
			res.ConnCapBound++
		}
	}
	if clamped {
		res.Clamped++
	}
	res.StatusCodes[out.status]++
	res.Completed++
	r.cur.Completed++
	if !time.Now().After(r.windowEnd) {
		res.CompletedInWindow++
	}
	success := out.err == nil && out.status >= 200 && out.status < 400
	if success {
		res.Succeeded++
		r.cur.Succeeded++
		_ = res.Histogram.RecordValue(us)
		_ = r.sec.RecordValue(us)
		_ = res.Pessimistic.RecordValue(us)
		return
	}
	switch {
	case out.err != nil && out.timeout:
		res.Timeouts++
	case out.err != nil:
		res.ConnErrors++
	case out.status >= 500:
		res.Failed5xx++
	default: // 1xx as a final status counts with the client errors
		res.Failed4xx++
	}
	res.Errors++
	r.cur.Errors++
	p, _ := micros(max(latency, r.timeout))
	_ = res.Pessimistic.RecordValue(p)
}

// stop makes later outcomes count for nothing: the requests a cancellation
// aborts are not answers.
func (r *recorder) stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
}

// closeSecond ends the open second and returns its row.
func (r *recorder) closeSecond(cpu *CPU) Second {
	r.mu.Lock()
	defer r.mu.Unlock()
	row := r.cur
	row.Second = len(r.res.Series)
	row.CPU = cpu
	if r.sec.TotalCount() > 0 {
		row.P50 = time.Duration(r.sec.ValueAtQuantile(50)) * time.Microsecond
		row.P99 = time.Duration(r.sec.ValueAtQuantile(99)) * time.Microsecond
	}
	if r.keepSec {
		row.Histogram = artifacts.NewHistogram()
		row.Histogram.Merge(r.sec)
	}
	r.sec.Reset()
	r.cur = Second{}
	r.res.Series = append(r.res.Series, row)
	return row
}

// result returns the totals; call it once every worker has finished.
func (r *recorder) result() *Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.res
	res.Outstanding = res.Sent - res.Completed
	return &res
}
