package reports

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/scenario"
)

// SweepResult is one swept parameter: the headline metrics of each of its
// values' variant.
type SweepResult struct {
	// Sweep is the recorded spelling ("prequal:qrif=0.5,0.9").
	Sweep     string       `json:"sweep"`
	Algorithm string       `json:"algorithm"`
	Parameter string       `json:"parameter"`
	Points    []SweepPoint `json:"points"`
}

// SweepPoint is one value of a sweep.
type SweepPoint struct {
	Value string `json:"value"`
	// Variant is the algorithm that ran the value; empty when none of the
	// campaign's algorithms is that variant.
	Variant string `json:"variant"`
	Runs    int    `json:"runs"`
	// Metrics are the sweep metrics (sweepMetricKeys), in that order.
	Metrics []MetricResult `json:"metrics"`
}

// sweepMetricKeys are the metrics a sweep plots and tabulates: the
// headline's throughput or goodput, error rate, success p50 and p99.
func sweepMetricKeys(ds *dataset) []string {
	first := "goodput_rps"
	if !ds.v2() {
		first = "throughput_rps"
	}
	return []string{first, "error_rate", "p50_ms", "p99_ms"}
}

// recordedSweeps reads protocol.sweep from the campaign's resolved
// scenario. Only that field is decoded, so the report does not depend on
// the scenario package's strictness; a campaign without one has none.
func recordedSweeps(c *artifacts.Campaign) []string {
	var sc struct {
		Protocol struct {
			Sweep []string `json:"sweep"`
		} `json:"protocol"`
	}
	if err := yaml.Unmarshal([]byte(c.ScenarioYAML), &sc); err != nil {
		return nil
	}
	return sc.Protocol.Sweep
}

// sweepResults matches every recorded sweep's values to the variants that
// ran them, by syntax: the variant of base{p=..} for value v is the
// algorithm with base's name, base's parameters and p=v. It reads no
// parameter table, so a recorded campaign reads the same whatever the
// algorithms accept today.
func sweepResults(ds *dataset, a *Analysis) ([]SweepResult, []string) {
	var out []SweepResult
	var warnings []string
	keys := sweepMetricKeys(ds)
	for _, spec := range recordedSweeps(&ds.Campaign) {
		base, param, values, err := scenario.SplitSweep(spec)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("sweep %q is unreadable (%v): not plotted", spec, err))
			continue
		}
		bname, bparams, ok := scenario.SplitVariantName(base)
		if !ok {
			warnings = append(warnings, fmt.Sprintf("sweep %q: algorithm %q is unreadable: not plotted", spec, base))
			continue
		}
		sr := SweepResult{Sweep: spec, Algorithm: base, Parameter: param}
		for _, v := range values {
			pt := SweepPoint{Value: v, Metrics: []MetricResult{}}
			for _, res := range a.Algorithms {
				if isVariant(res.Algorithm, bname, bparams, param, v) {
					pt.Variant, pt.Runs = res.Algorithm, res.Runs
					for _, k := range keys {
						for _, m := range res.Metrics {
							if m.Metric == k {
								pt.Metrics = append(pt.Metrics, m)
							}
						}
					}
					break
				}
			}
			if pt.Variant == "" {
				warnings = append(warnings, fmt.Sprintf("sweep %s: no algorithm of the campaign ran %s=%s", spec, param, v))
			}
			sr.Points = append(sr.Points, pt)
		}
		out = append(out, sr)
	}
	return out, warnings
}

// isVariant reports whether alg is base{bparams..., param=value}.
func isVariant(alg, base string, bparams map[string]string, param, value string) bool {
	name, ps, ok := scenario.SplitVariantName(alg)
	if !ok || name != base || len(ps) != len(bparams)+1 || !sameValue(ps[param], value) {
		return false
	}
	for k, v := range bparams {
		if ps[k] != v {
			return false
		}
	}
	return true
}

// sameValue compares two spellings of a parameter value: equal strings,
// equal numbers ("0.50" and "0.5") or equal durations ("500µs", recorded
// before durations were canonical in ASCII, and "500us").
func sameValue(a, b string) bool {
	if a == b {
		return a != ""
	}
	if x, ok := parseNumber(a); ok {
		y, ok := parseNumber(b)
		return ok && x == y
	}
	x, okA := parseDuration(a)
	y, okB := parseDuration(b)
	return okA && okB && x == y
}

// sweepPlotName is the file of sweep i's plot.
func sweepPlotName(i int, s SweepResult) string {
	var b strings.Builder
	for _, r := range s.Parameter {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return fmt.Sprintf("sweep-%d-%s.svg", i+1, b.String())
}

// writeSweeps prints one table per sweep and links its plot.
func writeSweeps(w io.Writer, ds *dataset, a *Analysis, plots []string) {
	if len(a.Sweeps) == 0 {
		return
	}
	fmt.Fprintf(w, "## Sweeps\n\n")
	fmt.Fprintf(w, "Each value of a swept parameter ran as its own algorithm (a variant), interleaved with the others; "+
		"its comparisons against %s are above. Cells: median across valid reps [%.0f%% CI], as in the headline.\n\n",
		a.Campaign.Reference, a.Campaign.Confidence*100)
	// A table of values invites reading a trend or a best value off it;
	// nothing here tests that.
	fmt.Fprintf(w, "The values are not compared with one another: each interval is one value's own (intervals that do not overlap "+
		"are not a test, overlapping ones are not an equivalence), and the only tests are each variant's comparisons against %s above, "+
		"inside the report's Holm family, which every swept value enlarges.\n\n", a.Campaign.Reference)
	keys := sweepMetricKeys(ds)
	for i, s := range a.Sweeps {
		fmt.Fprintf(w, "### %s of %s\n\n", s.Parameter, s.Algorithm)
		runsLabel := "valid runs"
		if !ds.v2() {
			runsLabel = "runs" // v1 has no validity, as in the headline
		}
		header := []string{s.Parameter, "algorithm", runsLabel}
		for _, k := range keys {
			m := metricByKey(k)
			header = append(header, fmt.Sprintf("%s (%s)", m.Label, m.Unit))
		}
		var rows [][]string
		for _, pt := range s.Points {
			if pt.Variant == "" {
				row := []string{pt.Value, "(did not run)", "0"}
				for range keys {
					row = append(row, "—")
				}
				rows = append(rows, row)
				continue
			}
			row := []string{pt.Value, pt.Variant, fmt.Sprintf("%d", pt.Runs)}
			for _, m := range pt.Metrics {
				row = append(row, ciCell(m))
			}
			rows = append(rows, row)
		}
		mdTable(w, header, rows, 0, 2, 3, 4, 5, 6)
		if name := sweepPlotName(i, s); slices.Contains(plots, name) {
			fmt.Fprintf(w, "Headline metrics against %s: %s, %s, p50, p99 (circle: a value's median, in %s order and not joined, since only these values ran; "+
				"bar: the CI; triangle: %s at its own %s, when the campaign ran it; dashed: the campaign's other algorithms)\n\n![%s of %s](plots/%s)\n\n",
				s.Parameter, metricByKey(keys[0]).Label, metricByKey(keys[1]).Label, s.Parameter, s.Algorithm, s.Parameter, s.Parameter, s.Algorithm, name)
		}
	}
}
