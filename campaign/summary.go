package campaign

import (
	"fmt"
	"github.com/prequalbench/prequalbench/reports/stats"
	"io"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/prequalbench/prequalbench/campaign/artifacts"
)

// AlgorithmSummary is the median over the successful reps of one algorithm.
type AlgorithmSummary struct {
	Algorithm  string
	OK, Failed int
	P50, P99   float64 // ms
	P999       float64 // ms
	Throughput float64 // completed requests per second
	ErrorRate  float64 // errors / sent
}

// Summarize groups runs by algorithm, in the order of algorithms, and takes
// the median of each figure over the algorithm's successful runs.
func Summarize(algorithms []string, runs []artifacts.Run) []AlgorithmSummary {
	out := make([]AlgorithmSummary, 0, len(algorithms))
	for _, a := range algorithms {
		s := AlgorithmSummary{Algorithm: a}
		var p50, p99, p999, thr, errRate []float64
		for _, r := range runs {
			if r.Algorithm != a {
				continue
			}
			if r.Status != artifacts.StatusOK {
				s.Failed++
				continue
			}
			s.OK++
			l := r.Load
			p50 = append(p50, l.P50)
			p99 = append(p99, l.P99)
			p999 = append(p999, l.P999)
			thr = append(thr, l.AchievedRate)
			e := 0.0
			if l.Sent > 0 {
				e = float64(l.Errors) / float64(l.Sent)
			}
			errRate = append(errRate, e)
		}
		s.P50, s.P99, s.P999 = median(p50), median(p99), median(p999)
		s.Throughput, s.ErrorRate = median(thr), median(errRate)
		out = append(out, s)
	}
	return out
}

// median of xs, as the report computes it; 0 for none (no run succeeded).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return stats.Median(xs)
}

// WriteSummary prints the per-algorithm table.
func WriteSummary(w io.Writer, sums []AlgorithmSummary) error {
	t := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off))
	t.Header("algorithm", "runs ok", "p50 ms", "p99 ms", "p99.9 ms", "throughput rps", "errors")
	for _, s := range sums {
		runs := fmt.Sprintf("%d", s.OK)
		if s.Failed > 0 {
			runs = fmt.Sprintf("%d (%d failed)", s.OK, s.Failed)
		}
		if s.OK == 0 {
			if err := t.Append(s.Algorithm, runs, "-", "-", "-", "-", "-"); err != nil {
				return err
			}
			continue
		}
		if err := t.Append(s.Algorithm, runs,
			fmt.Sprintf("%.1f", s.P50), fmt.Sprintf("%.1f", s.P99), fmt.Sprintf("%.1f", s.P999),
			fmt.Sprintf("%.1f", s.Throughput), fmt.Sprintf("%.2f%%", 100*s.ErrorRate)); err != nil {
			return err
		}
	}
	return t.Render()
}
