package load

import (
	"errors"
	"fmt"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/prequalbench/prequalbench/artifacts"
)

// Merge adds up the Results of the shards of one run (Config.Shard):
// histograms added, counters summed, the series aligned on the second of
// the window (the shards share a start time), each row's percentiles
// recomputed from its merged histogram. Shards' planned hits, users and
// connection caps add up, and the target rate is the planned hits per
// second of the window, as one generator computes it; the window is the
// longest shard's. CPU columns
// are dropped: each shard ran on its own host. Per-second percentiles
// need every shard's row histograms (Config.SecondHistograms); without
// them Merge fails rather than estimate.
func Merge(parts []*Result) (*Result, error) {
	if len(parts) == 0 {
		return nil, errors.New("load: merge: no results")
	}
	m := &Result{
		Model:       parts[0].Model,
		Histogram:   artifacts.NewHistogram(),
		Pessimistic: artifacts.NewHistogram(),
		SendLag:     artifacts.NewHistogram(),
		ConnWait:    artifacts.NewHistogram(),
		StatusCodes: map[int]uint64{},
	}
	for i, p := range parts {
		if p.Model != m.Model {
			return nil, fmt.Errorf("load: merge: shard %d is %s loop, shard 0 %s", i, p.Model, m.Model)
		}
		for _, h := range []struct{ dst, src *hdrhistogram.Histogram }{
			{m.Histogram, p.Histogram}, {m.Pessimistic, p.Pessimistic}, {m.SendLag, p.SendLag}, {m.ConnWait, p.ConnWait},
		} {
			if h.src != nil {
				if dropped := h.dst.Merge(h.src); dropped != 0 {
					return nil, fmt.Errorf("load: merge: shard %d: %d values outside the histogram's bounds", i, dropped)
				}
			}
		}
		for code, n := range p.StatusCodes {
			m.StatusCodes[code] += n
		}
		m.Users += p.Users
		m.Sent += p.Sent
		m.Completed += p.Completed
		m.CompletedInWindow += p.CompletedInWindow
		m.Succeeded += p.Succeeded
		m.Failed4xx += p.Failed4xx
		m.Failed5xx += p.Failed5xx
		m.Timeouts += p.Timeouts
		m.ConnErrors += p.ConnErrors
		m.Errors += p.Errors
		m.Outstanding += p.Outstanding
		m.Clamped += p.Clamped
		m.Late += p.Late
		m.Dropped += p.Dropped
		m.ConnCap += p.ConnCap
		m.ConnCapBound += p.ConnCapBound
		m.Duration = max(m.Duration, p.Duration)
		m.Planned += p.Planned
		m.TargetRate += p.TargetRate
	}
	if m.Model == ModelOpen && m.Planned > 0 && m.Duration > 0 && sameWindow(parts) {
		// The sum of the shards' rates would differ from one generator's
		// Planned/Duration in the last bits.
		m.TargetRate = float64(m.Planned) / m.Duration.Seconds()
	}
	series, err := mergeSeries(parts)
	if err != nil {
		return nil, err
	}
	m.Series = series
	return m, nil
}

// sameWindow reports whether every part ran the whole same window (none
// was cut short by a cancellation).
func sameWindow(parts []*Result) bool {
	for _, p := range parts {
		if p.Duration != parts[0].Duration {
			return false
		}
	}
	return true
}

func mergeSeries(parts []*Result) ([]Second, error) {
	if len(parts) == 1 {
		return parts[0].Series, nil
	}
	n := 0
	for _, p := range parts {
		n = max(n, len(p.Series))
	}
	out := make([]Second, n)
	for s := range out {
		row := Second{Second: s, Histogram: artifacts.NewHistogram()}
		for i, p := range parts {
			if s >= len(p.Series) {
				continue
			}
			r := p.Series[s]
			row.Sent += r.Sent
			row.Completed += r.Completed
			row.Succeeded += r.Succeeded
			row.Errors += r.Errors
			row.Late += r.Late
			switch {
			case r.Histogram != nil:
				row.Histogram.Merge(r.Histogram)
			case r.Succeeded > 0:
				return nil, fmt.Errorf("load: merge: shard %d second %d has no histogram (Config.SecondHistograms), so its percentiles cannot be merged exactly", i, s)
			}
		}
		if row.Histogram.TotalCount() > 0 {
			row.P50 = time.Duration(row.Histogram.ValueAtQuantile(50)) * time.Microsecond
			row.P99 = time.Duration(row.Histogram.ValueAtQuantile(99)) * time.Microsecond
		}
		out[s] = row
	}
	return out, nil
}
