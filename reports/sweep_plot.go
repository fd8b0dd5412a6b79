package reports

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// sweepPanelH is the height of one metric's panel in a sweep plot.
const sweepPanelH = 7 * vg.Centimeter

// renderSweepPlots draws one SVG per sweep: a panel per sweep metric, the
// median of each value with its CI as an error bar, and the campaign's
// other algorithms as dashed horizontal lines at their medians.
func renderSweepPlots(ds *dataset, a *Analysis, out map[string][]byte) error {
	keys := sweepMetricKeys(ds)
	for i, s := range a.Sweeps {
		name := sweepPlotName(i, s)
		var panels []*plot.Plot
		for k, key := range keys {
			p, err := sweepPanel(a, s, k, key)
			if err != nil {
				return fmt.Errorf("reports: plot %s: %w", name, err)
			}
			if p != nil {
				panels = append(panels, p)
			}
		}
		if len(panels) == 0 {
			continue
		}
		wt, err := draw.NewFormattedCanvas(plotW, sweepPanelH*vg.Length(len(panels)), "svg")
		if err != nil {
			return fmt.Errorf("reports: plot %s: %w", name, err)
		}
		c := draw.New(wt)
		tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Points(4)}
		for j, p := range panels {
			drawBesideLegend(p, tiles.At(c, 0, j))
		}
		var buf bytes.Buffer
		if _, err := wt.WriteTo(&buf); err != nil {
			return fmt.Errorf("reports: plot %s: %w", name, err)
		}
		out[name] = buf.Bytes()
	}
	return nil
}

// errPoints are medians with their CI as distances below and above.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// sweepPanel draws metric k (key) of sweep s; nil when no value has it.
func sweepPanel(a *Analysis, s SweepResult, k int, key string) (*plot.Plot, error) {
	m := metricByKey(key)
	scale := 1.0
	if m.Unit == "%" {
		scale = 100 // error rates are fractions
	}
	values := make([]string, len(s.Points))
	for i, pt := range s.Points {
		values[i] = pt.Value
	}
	xs, numeric := sweepX(values)
	var pts errPoints
	for i, pt := range s.Points {
		if k >= len(pt.Metrics) || pt.Metrics[k].N == 0 || math.IsNaN(float64(pt.Metrics[k].Median)) {
			continue
		}
		mr := pt.Metrics[k]
		med := scale * float64(mr.Median)
		lo, hi := med, med
		if mr.N > 1 {
			lo, hi = scale*float64(mr.Lo), scale*float64(mr.Hi)
		}
		pts.XYs = append(pts.XYs, plotter.XY{X: xs[i], Y: med})
		pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{clampErr(med - lo), clampErr(hi - med)})
	}
	if len(pts.XYs) == 0 {
		return nil, nil
	}
	p := newPlot("", s.Parameter+" of "+s.Algorithm, fmt.Sprintf("%s (%s)", m.Label, m.Unit))
	if k == 0 {
		p.Title.Text = "Headline metrics against " + s.Parameter
	}
	colour := colorOf(max(0, slices.Index(a.Campaign.Algorithms, s.Points[0].Variant)))
	line, points, err := plotter.NewLinePoints(pts.XYs)
	if err != nil {
		return nil, err
	}
	line.Color, line.Width = colour, vg.Points(1.5)
	points.Color, points.Shape = colour, draw.CircleGlyph{}
	bars, err := plotter.NewYErrorBars(pts)
	if err != nil {
		return nil, err
	}
	bars.Color, bars.Width = colour, vg.Points(1)
	p.Add(line, points, bars)
	p.Legend.Add(variantLabel(s), line, points)

	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	pad := (hi - lo) * 0.05
	if pad == 0 {
		pad = 0.5
	}
	p.X.Min, p.X.Max = lo-pad, hi+pad
	if !numeric {
		ticks := make([]plot.Tick, len(values))
		for i, v := range values {
			ticks[i] = plot.Tick{Value: xs[i], Label: v}
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
	}
	// The others, as references across the swept range.
	for _, res := range a.Algorithms {
		if slices.ContainsFunc(s.Points, func(pt SweepPoint) bool { return pt.Variant == res.Algorithm }) {
			continue
		}
		var mr *MetricResult
		for j := range res.Metrics {
			if res.Metrics[j].Metric == key {
				mr = &res.Metrics[j]
			}
		}
		if mr == nil || mr.N == 0 || math.IsNaN(float64(mr.Median)) {
			continue
		}
		y := scale * float64(mr.Median)
		l, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: y}, {X: p.X.Max, Y: y}})
		if err != nil {
			return nil, err
		}
		l.Color = colorOf(max(0, slices.Index(a.Campaign.Algorithms, res.Algorithm)))
		l.Width = vg.Points(1)
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		p.Add(l)
		p.Legend.Add(res.Algorithm, l)
	}
	if m.Unit == "%" || key == "goodput_rps" || key == "throughput_rps" {
		p.Y.Min = 0 // rates read against zero
		if p.Y.Max <= 0 {
			p.Y.Max = 1 // all zero: an axis from 0, not one around it
		}
	}
	return p, nil
}

// clampErr keeps an error bar's length finite and non-negative.
func clampErr(d float64) float64 {
	if math.IsNaN(d) || math.IsInf(d, 0) || d < 0 {
		return 0
	}
	return d
}

// variantLabel names the swept line: prequal{qrif=x}, or
// prequal{probes=2,qrif=x} when the base fixes other parameters.
func variantLabel(s SweepResult) string {
	if strings.HasSuffix(s.Algorithm, "}") {
		return strings.TrimSuffix(s.Algorithm, "}") + "," + s.Parameter + "=x}"
	}
	return s.Algorithm + "{" + s.Parameter + "=x}"
}
