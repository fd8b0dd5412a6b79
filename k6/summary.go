package k6

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"
)

// The two shapes of k6's end-of-test summary JSON the import reads. Both
// are k6's summarizeMetricsToObject (internal/js/summary.go): handleSummary
// is given that object as it is; --summary-export writes it through
// summary-wrapper.js's oldJSONSummary, which deletes "options" and
// "state", flattens each metric to its values and renames a rate metric's
// "rate" to "value".
const (
	ShapeSummaryExport = "--summary-export"
	ShapeHandleSummary = "handleSummary"
)

// Summary is one k6 runner's end-of-test summary, in either shape,
// reduced to what the import reads.
type Summary struct {
	// Name says where it came from (a file name), for messages.
	Name  string
	Shape string
	// Metrics are each metric's numeric values (k6's Sink.Format: a
	// counter's count and rate, a rate's passes, fails and rate, a trend's
	// summaryTrendStats), by metric or submetric name.
	Metrics map[string]map[string]float64
	// Counters names the metrics that are counters.
	Counters map[string]bool
	// RunMs is state.testRunDurationMs (handleSummary's shape only; 0 in
	// --summary-export's, which deletes state).
	RunMs float64
}

// MaxSummaryBytes bounds a summary file: k6 writes one object of a few
// hundred bytes per metric, so anything near this is not one.
const MaxSummaryBytes = 64 << 20

// ParseSummary reads one runner's summary, in --summary-export's shape
// or handleSummary's, and refuses anything else with what it is.
func ParseSummary(name string, r io.Reader) (*Summary, error) {
	var raw struct {
		Metrics map[string]map[string]json.RawMessage `json:"metrics"`
		State   *struct {
			TestRunDurationMs *float64 `json:"testRunDurationMs"`
		} `json:"state"`
		Version *json.RawMessage `json:"version"`
		Results *json.RawMessage `json:"results"`
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxSummaryBytes+1))
	if err != nil {
		return nil, fmt.Errorf("k6: %s: %w", name, err)
	}
	if len(b) > MaxSummaryBytes {
		return nil, fmt.Errorf("k6: %s is larger than %d MiB: not a k6 summary, which holds a few hundred bytes per metric", name, MaxSummaryBytes>>20)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("k6: %s: not k6 summary JSON: %w", name, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("k6: %s: more follows the summary's JSON object (at byte %d): give each runner's summary as a file of its own", name, dec.InputOffset())
	}
	if raw.Version != nil && raw.Results != nil {
		return nil, fmt.Errorf("k6: %s is k6's --new-machine-readable-summary format, whose trends stop at p(95): "+
			"run k6 without --new-machine-readable-summary (or K6_NEW_MACHINE_READABLE_SUMMARY)", name)
	}
	if len(raw.Metrics) == 0 {
		return nil, fmt.Errorf("k6: %s: \"metrics\" is missing or empty: not a k6 summary (want k6's --summary-export file or the data handleSummary() is given)", name)
	}
	s := &Summary{Name: name, Metrics: map[string]map[string]float64{}, Counters: map[string]bool{}}
	for metric, fields := range raw.Metrics {
		values := fields
		shape := ShapeSummaryExport
		if v, ok := fields["values"]; ok {
			shape = ShapeHandleSummary
			values = nil
			if err := json.Unmarshal(v, &values); err != nil {
				return nil, fmt.Errorf("k6: %s: metrics[%q].values: want an object of numbers: %w", name, metric, err)
			}
		}
		if s.Shape == "" {
			s.Shape = shape
		} else if s.Shape != shape {
			return nil, fmt.Errorf("k6: %s: metrics[%q] is in %s's shape but others in %s's: not one k6 summary", name, metric, shape, s.Shape)
		}
		nums := map[string]float64{}
		for k, v := range values {
			var f float64
			if json.Unmarshal(v, &f) == nil {
				nums[k] = f
			}
		}
		switch shape {
		case ShapeHandleSummary:
			var typ string
			_ = json.Unmarshal(fields["type"], &typ)
			if typ == "" {
				return nil, fmt.Errorf("k6: %s: metrics[%q] has values but no type: not handleSummary's data", name, metric)
			}
			s.Counters[metric] = typ == "counter"
		default:
			// oldJSONSummary renamed a rate's "rate" to "value"; a
			// counter is the one metric with a count and a rate.
			if _, isRate := nums["passes"]; isRate {
				if v, ok := nums["value"]; ok {
					nums["rate"] = v
				}
			} else {
				_, c := nums["count"]
				_, r := nums["rate"]
				s.Counters[metric] = c && r
			}
		}
		s.Metrics[metric] = nums
	}
	if raw.State != nil && raw.State.TestRunDurationMs != nil {
		s.RunMs = *raw.State.TestRunDurationMs
		// k6 divides every counter by this same duration: a counter
		// that says otherwise was not written with it.
		if counter, fromCounters := s.counterRun(); s.RunMs > 0 && fromCounters > 0 && math.Abs(fromCounters.Seconds()*1000-s.RunMs) > s.RunMs/1000+1 {
			return nil, fmt.Errorf("k6: %s: state.testRunDurationMs is %v, but %s count / rate is %.1f ms: k6 computes both from the same test run; not one run's summary",
				name, s.RunMs, counter, fromCounters.Seconds()*1000)
		}
	}
	return s, nil
}

// counterRun is the test run's length as its largest counter says
// (count / rate), and that counter's name; zero when none says.
func (s *Summary) counterRun() (string, time.Duration) {
	best, which := 0.0, ""
	var secs float64
	for name, c := range s.Counters {
		if !c {
			continue
		}
		v := s.Metrics[name]
		if v["count"] > best && v["rate"] > 0 {
			best, secs, which = v["count"], v["count"]/v["rate"], name
		}
	}
	if secs <= 0 || secs > float64(math.MaxInt64)/float64(time.Second) {
		return which, 0
	}
	return which, time.Duration(secs * float64(time.Second))
}

// TestRun is how long k6's test ran: state.testRunDurationMs when the
// summary has it (handleSummary's shape), else count/rate of its largest
// counter, since k6 computes every counter's rate as its count over the
// test run's duration (CounterSink.Rate). Zero when neither says.
func (s *Summary) TestRun() time.Duration {
	if s.RunMs > 0 {
		return time.Duration(s.RunMs * float64(time.Millisecond))
	}
	_, d := s.counterRun()
	return d
}
