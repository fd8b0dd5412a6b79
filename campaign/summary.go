package campaign

import (
	"fmt"
	"io"
	"math"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/stats"
)

// AlgorithmSummary is the median over the valid runs of one algorithm, as
// the report's headline takes it: goodput, error rate, success latency
// and the generator's send lag. When no run of the algorithm is valid the
// medians are of its successful (but invalid) runs and FromInvalid is set,
// so the table can say so instead of hiding the numbers.
type AlgorithmSummary struct {
	Algorithm string
	// OK counts the runs that finished, Valid those of them whose own
	// check passed (artifacts.Validity), Failed those that did not finish.
	OK, Valid, Failed int
	FromInvalid       bool
	TargetRate        float64 // offered rps (open loop); 0 for closed loop
	Goodput           float64 // successes per second of the window
	ErrorRate         float64 // failures of every class / sent
	P50, P99, P999    float64 // success latency, ms; NaN when no run had a success
	SendLagP99        float64 // ms
}

// Summarize groups runs by algorithm, in the order of algorithms, and takes
// the median of each figure over the algorithm's valid runs (over its
// successful runs when none is valid).
func Summarize(algorithms []string, runs []artifacts.Run) []AlgorithmSummary {
	out := make([]AlgorithmSummary, 0, len(algorithms))
	for _, a := range algorithms {
		s := AlgorithmSummary{Algorithm: a}
		var ok, valid []artifacts.LoadResult
		for _, r := range runs {
			if r.Algorithm != a {
				continue
			}
			if r.Status != artifacts.StatusOK {
				s.Failed++
				continue
			}
			ok = append(ok, r.Load)
			if r.Validity.Valid {
				valid = append(valid, r.Load)
			}
		}
		s.OK, s.Valid = len(ok), len(valid)
		use := valid
		if len(valid) == 0 && len(ok) > 0 {
			use, s.FromInvalid = ok, true
		}
		s.TargetRate = medianOf(use, func(l artifacts.LoadResult) float64 { return l.TargetRate })
		s.Goodput = medianOf(use, func(l artifacts.LoadResult) float64 { return l.Goodput })
		s.ErrorRate = medianOf(use, errorRate)
		s.P50 = medianOf(use, successLatency(func(l artifacts.LoadResult) float64 { return l.P50 }))
		s.P99 = medianOf(use, successLatency(func(l artifacts.LoadResult) float64 { return l.P99 }))
		s.P999 = medianOf(use, successLatency(func(l artifacts.LoadResult) float64 { return l.P999 }))
		s.SendLagP99 = medianOf(use, func(l artifacts.LoadResult) float64 { return l.SendLag.P99 })
		out = append(out, s)
	}
	return out
}

// errorRate is every failure class over all requests sent (0 when none
// was sent).
func errorRate(l artifacts.LoadResult) float64 {
	if l.Sent == 0 {
		return 0
	}
	return float64(l.Errors) / float64(l.Sent)
}

// successLatency wraps a latency figure: NaN for a run that sent requests
// and had no success, whose empty histogram would read 0 ms.
func successLatency(f func(artifacts.LoadResult) float64) func(artifacts.LoadResult) float64 {
	return func(l artifacts.LoadResult) float64 {
		if l.Sent > 0 && l.Succeeded == 0 {
			return math.NaN()
		}
		return f(l)
	}
}

// medianOf is the median of f over runs, as the report computes it,
// leaving out NaN (no figure); 0 for no runs, NaN when no run has the
// figure.
func medianOf(runs []artifacts.LoadResult, f func(artifacts.LoadResult) float64) float64 {
	if len(runs) == 0 {
		return 0
	}
	var xs []float64
	for _, l := range runs {
		if x := f(l); !math.IsNaN(x) {
			xs = append(xs, x)
		}
	}
	if len(xs) == 0 {
		return math.NaN()
	}
	return stats.Median(xs)
}

// msCell prints a latency, "-" when there is none.
func msCell(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf("%.1f", x)
}

// WriteSummary prints the per-algorithm table: goodput (of the target),
// error rate, success latency and send lag, medians over the valid runs.
func WriteSummary(w io.Writer, sums []AlgorithmSummary) error {
	t := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off))
	t.Header("algorithm", "runs ok / valid", "goodput rps", "errors", "p50 ms", "p99 ms", "p99.9 ms", "send lag p99 ms")
	fromInvalid := false
	for _, s := range sums {
		runs := fmt.Sprintf("%d / %d", s.OK, s.Valid)
		if s.Failed > 0 {
			runs += fmt.Sprintf(" (%d failed)", s.Failed)
		}
		if s.OK == 0 {
			if err := t.Append(s.Algorithm, runs, "-", "-", "-", "-", "-", "-"); err != nil {
				return err
			}
			continue
		}
		goodput := fmt.Sprintf("%.1f", s.Goodput)
		if s.TargetRate > 0 {
			goodput = fmt.Sprintf("%.1f of %.1f", s.Goodput, s.TargetRate)
		}
		if s.FromInvalid {
			runs += " *"
			fromInvalid = true
		}
		if err := t.Append(s.Algorithm, runs, goodput, fmt.Sprintf("%.2f%%", 100*s.ErrorRate),
			msCell(s.P50), msCell(s.P99), msCell(s.P999),
			fmt.Sprintf("%.2f", s.SendLagP99)); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	fmt.Fprintln(w, "medians over the valid runs; latency of successes, from the intended send")
	if fromInvalid {
		fmt.Fprintln(w, "* no valid run: medians of invalid runs, which measured the host or the generator (see REPORT.md, Validity)")
	}
	return nil
}
