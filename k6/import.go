package k6

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/scenario"
)

// Summary is the part of k6's --summary-export JSON the import reads.
type Summary struct {
	Metrics map[string]map[string]any `json:"metrics"`
	State   struct {
		TestRunDurationMs float64 `json:"testRunDurationMs"`
	} `json:"state"`
}

// Approximations says, in every imported run, what k6's summary cannot
// carry that a run of this tool measures.
var Approximations = []string{
	"imported from k6: percentiles are k6's trend estimates, not an exact HDR histogram (no histogram files)",
	"imported from k6: latency is timed from each request's actual send, not its intended one (coordinated omission not corrected)",
	"imported from k6: failures are not split by class (4xx, 5xx, timeout, connection) and there are no status codes",
	"imported from k6: no per-second series, send lag, connection wait or CPU; the pessimistic latency is k6's latency of every request, failures at their own duration rather than the timeout",
}

// Import reads a k6 summary export of a script written by Export into a
// run's load accounting. s is the scenario the script was exported from,
// with the same --duration-scale: it gives the measured window's length
// and the load model (open, or closed with its users); nil takes k6's
// whole test duration, warmup included, and an open loop, and says so.
// A summary whose test ran far longer or shorter than s's warmup and
// window is refused: it was exported from another scenario or scale, and
// every rate would be off by that factor. The returned reasons list
// every approximation; the caller records them in the run's validity,
// which is therefore never valid.
func Import(r io.Reader, s *scenario.Scenario) (artifacts.LoadResult, []string, error) {
	var sum Summary
	if err := json.NewDecoder(r).Decode(&sum); err != nil {
		return artifacts.LoadResult{}, nil, fmt.Errorf("k6: summary: %w", err)
	}
	win := "{phase:" + PhaseWindow + "}"
	reqs, ok := sum.Metrics["http_reqs"+win]
	if !ok {
		return artifacts.LoadResult{}, nil, errors.New("k6: the summary has no http_reqs{phase:window}: was the script written by `prequalbench campaign export --k6` (or `k6 export`) and run with --summary-export?")
	}
	reasons := append([]string(nil), Approximations...)
	ran := time.Duration(sum.State.TestRunDurationMs * float64(time.Millisecond))
	l := artifacts.LoadResult{Model: "open"}
	var window time.Duration
	if s == nil {
		window = ran
		reasons = append(reasons, "imported from k6: no scenario given, so the window is k6's whole test duration (warmup included: rates are low) and the load model is taken as open")
	} else {
		window = s.Load.MeasuredDuration()
		if s.Load.Users > 0 {
			l.Model, l.Users = "closed", s.Load.Users
		}
		warmup := time.Duration(0)
		if s.Protocol.Warmup != nil {
			warmup = s.Protocol.Warmup.Std()
		}
		planned := warmup + window
		// k6 may run on for up to the graceful stop (the request timeout)
		// after the last executor's end; the slack is bounded by a quarter
		// of the planned test too, so a short test run at another scale
		// (half the length, plus a timeout's slack) is not taken for it.
		slack := min(s.Load.Timeout.Std(), planned/4)
		if ran > 0 && (ran < planned*4/5 || ran > planned+slack) {
			return artifacts.LoadResult{}, nil, fmt.Errorf("k6: the summary's test ran %v, but scenario %s's warmup and window take %v: "+
				"import with the scenario and --duration-scale the script was exported with", ran.Round(time.Millisecond), s.Name, planned)
		}
	}
	sent := uint64(num(reqs["count"]))
	failed := uint64(num(sum.Metrics["http_req_failed"+win]["passes"]))
	l.Duration, l.Sent, l.Completed, l.Errors = window, sent, sent, failed
	l.Succeeded, l.StatusCodes = sent-min(failed, sent), map[string]uint64{}
	l.Dropped = uint64(num(sum.Metrics["dropped_iterations"]["count"]))
	l.Success = trend(sum.Metrics["http_req_duration{phase:"+PhaseWindow+",expected_response:true}"])
	l.Pessimistic = trend(sum.Metrics["http_req_duration"+win])
	if l.Dropped > 0 {
		reasons = append(reasons, fmt.Sprintf("imported from k6: %d iterations dropped (k6 ran out of VUs), over the whole test", l.Dropped))
	}
	if window > 0 {
		secs := window.Seconds()
		l.AchievedRate, l.Goodput = float64(sent)/secs, float64(l.Succeeded)/secs
	}
	if sent > 0 {
		l.ErrorRate = float64(failed) / float64(sent)
	}
	p := l.Success
	l.P50, l.P90, l.P99, l.P999, l.Max, l.Mean, l.Count = p.P50, p.P90, p.P99, p.P999, p.Max, p.Mean, p.Count
	return l, reasons, nil
}

// trend maps a k6 trend (milliseconds) onto Percentiles.
func trend(m map[string]any) artifacts.Percentiles {
	return artifacts.Percentiles{
		P50: num(m["med"]), P90: num(m["p(90)"]), P99: num(m["p(99)"]), P999: num(m["p(99.9)"]),
		Max: num(m["max"]), Mean: num(m["avg"]), Count: int64(num(m["count"])),
	}
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

// ResetDetail is an imported run's reset detail: nothing is known of
// the reset before k6's run. Imports written before Run.Imported existed
// are recognised by it.
const ResetDetail = "imported from k6: reset unknown"

// Run wraps an import as a run.json: status ok, marked imported
// (artifacts.ImportedK6), never valid, the approximations as the
// validity's reasons, so a report lists it in its own section and never
// takes its estimates for a measurement. Its directory,
// runs/k6-ALGORITHM, is outside any campaign's plan (index 0), so it
// never takes a planned run's place.
func Run(algorithm string, l artifacts.LoadResult, reasons []string) artifacts.Run {
	return artifacts.Run{
		PlannedRun: artifacts.PlannedRun{Algorithm: algorithm, Dir: path.Join(artifacts.RunsDir, "k6-"+slug(algorithm))},
		Status:     artifacts.StatusOK, ResetDetail: ResetDetail, Load: l,
		Validity: artifacts.Validity{Valid: false, Reasons: reasons},
		Imported: artifacts.ImportedK6,
	}
}

// slug keeps a label's letters, digits, '.', '-' and '_' (others become
// '_'), so any label makes one path element.
func slug(label string) string {
	b := []byte(label)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || (c == '.' && i > 0)) {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}
