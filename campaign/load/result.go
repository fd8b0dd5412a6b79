package load

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/prequalbench/prequalbench/campaign/artifacts"
)

// Second is one row of the per-second series. Sent and Late count sends
// that left during the second; Completed, Errors and the percentiles cover
// the requests that finished during it. The last row also holds the
// requests that finished after the window, while Run drained them.
type Second struct {
	Second                        int
	Sent, Completed, Errors, Late uint64
	P50, P99                      time.Duration
}

// Result is what a run measured.
type Result struct {
	// Model is "open" or "closed"; Users is set for a closed loop.
	Model string
	Users int
	// Histogram holds the latency in µs (artifacts.NewHistogram bounds) of
	// every completed request, errors included. Open loop: from the
	// intended send time; closed loop: from the actual send.
	Histogram   *hdrhistogram.Histogram
	Series      []Second
	StatusCodes map[int]uint64 // 0 = transport error
	Sent        uint64
	Completed   uint64
	// CompletedInWindow counts the completions that arrived before the
	// window ended; the achieved rate is CompletedInWindow / Duration, so
	// requests drained after the window cannot make a system that fell
	// behind look as if it kept up.
	CompletedInWindow uint64
	// Errors counts transport errors and statuses >= 400.
	Errors uint64
	// Late counts open-loop sends that left more than LateAfter after
	// their intended time.
	Late uint64
	// Dropped counts scheduled open-loop sends never sent because every
	// worker was still busy when the window plus Timeout had passed.
	Dropped uint64
	// Duration is the load window: from the first scheduled send to the
	// end of the schedule (or the cancellation).
	Duration time.Duration
	// TargetRate is the mean offered rate over Duration (open loop).
	TargetRate float64
}

// LateAfter is how far behind its intended time a send may leave before it
// counts as late.
const LateAfter = time.Millisecond

// Summary condenses r into the run.json form. Percentiles come from the
// exact histogram.
func (r *Result) Summary() artifacts.LoadResult {
	h := r.Histogram
	s := artifacts.LoadResult{
		Model:       r.Model,
		Duration:    r.Duration,
		TargetRate:  r.TargetRate,
		Users:       r.Users,
		Sent:        r.Sent,
		Completed:   r.Completed,
		Errors:      r.Errors,
		LateSends:   r.Late,
		StatusCodes: make(map[string]uint64, len(r.StatusCodes)),
	}
	s.Dropped = r.Dropped
	if r.Duration > 0 {
		s.AchievedRate = float64(r.CompletedInWindow) / r.Duration.Seconds()
	}
	for code, n := range r.StatusCodes {
		s.StatusCodes[strconv.Itoa(code)] = n
	}
	if h != nil && h.TotalCount() > 0 {
		// ValueAtQuantile takes a percentage (0–100).
		s.P50 = artifacts.Millis(h.ValueAtQuantile(50))
		s.P90 = artifacts.Millis(h.ValueAtQuantile(90))
		s.P99 = artifacts.Millis(h.ValueAtQuantile(99))
		s.P999 = artifacts.Millis(h.ValueAtQuantile(99.9))
		s.Max = artifacts.Millis(h.Max())
		s.Mean = h.Mean() / 1000
		s.Count = h.TotalCount()
	}
	return s
}

// WriteTimeseries writes r.Series as CSV under artifacts.TimeseriesHeader.
func (r *Result) WriteTimeseries(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, artifacts.TimeseriesHeader)
	for _, s := range r.Series {
		fmt.Fprintf(bw, "%d,%d,%d,%d,%d,%s,%s\n", s.Second, s.Sent, s.Completed, s.Errors, s.Late, ms(s.P50), ms(s.P99))
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("load: write timeseries: %w", err)
	}
	return nil
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

// recorder aggregates outcomes into the run totals and the current second.
// Memory is fixed: two histograms and a few counters, never per-request
// records. Everything sits behind mu; a record is a few tens of
// nanoseconds, far below the cost of the request it records.
type recorder struct {
	mu      sync.Mutex
	total   *hdrhistogram.Histogram
	sec     *hdrhistogram.Histogram
	codes   map[int]uint64
	cur     Second // counters of the open second
	tot     Second // counters of the whole run
	series  []Second
	stopped bool // no more outcomes are taken (cancelled run)

	windowEnd time.Time // completions after it are drained, not in the window
	inWindow  uint64
}

func newRecorder() *recorder {
	return &recorder{total: artifacts.NewHistogram(), sec: artifacts.NewHistogram(), codes: map[int]uint64{}}
}

// sent records one send that left lateBy after its intended time.
func (r *recorder) sent(lateBy time.Duration) {
	r.mu.Lock()
	r.cur.Sent++
	r.tot.Sent++
	if lateBy > LateAfter {
		r.cur.Late++
		r.tot.Late++
	}
	r.mu.Unlock()
}

// done records one completed request: its latency and status (0 for a
// transport error).
func (r *recorder) done(latency time.Duration, status int) {
	us := int64(latency / time.Microsecond)
	us = min(max(us, artifacts.HistogramLowest), artifacts.HistogramHighest)
	failed := status == 0 || status >= 400
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	// In bounds by the clamp above, so RecordValue cannot fail.
	_ = r.total.RecordValue(us)
	_ = r.sec.RecordValue(us)
	r.codes[status]++
	r.cur.Completed++
	r.tot.Completed++
	if !time.Now().After(r.windowEnd) {
		r.inWindow++
	}
	if failed {
		r.cur.Errors++
		r.tot.Errors++
	}
}

// stop makes later outcomes count for nothing: the requests a cancellation
// aborts are not answers.
func (r *recorder) stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
}

// closeSecond ends the open second and returns its row.
func (r *recorder) closeSecond() Second {
	r.mu.Lock()
	defer r.mu.Unlock()
	row := r.cur
	row.Second = len(r.series)
	if r.sec.TotalCount() > 0 {
		row.P50 = time.Duration(r.sec.ValueAtQuantile(50)) * time.Microsecond
		row.P99 = time.Duration(r.sec.ValueAtQuantile(99)) * time.Microsecond
	}
	r.sec.Reset()
	r.cur = Second{}
	r.series = append(r.series, row)
	return row
}

// result returns the totals; call it once every worker has finished.
func (r *recorder) result() *Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &Result{
		Histogram:   r.total,
		Series:      r.series,
		StatusCodes: r.codes,
		Sent:        r.tot.Sent,
		Completed:   r.tot.Completed,
		Errors:      r.tot.Errors,
		// A cancelled run's window ends early; its in-window count stays
		// an upper bound, which is fine: a cancelled run is discarded.
		CompletedInWindow: r.inWindow,
		Late:              r.tot.Late,
	}
}
