package reports

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"sigs.k8s.io/yaml"

	"github.com/prequalbench/prequalbench/loadbalancer"
	"github.com/prequalbench/prequalbench/scenario"
)

// sweepPanelH is the height of one metric's panel in a sweep plot.
const sweepPanelH = 7 * vg.Centimeter

// renderSweepPlots draws one SVG per sweep: a panel per sweep metric, the
// median of each value as a marker with its CI as an error bar, in x
// order and not joined (only the values shown ran: a line would suggest
// a trend between them), the sweep's plain algorithm as a marker of its
// own at its parameter's value when the axis has a place for it, and the
// campaign's other algorithms as dashed horizontal lines at their
// medians.
func renderSweepPlots(ds *dataset, a *Analysis, out map[string][]byte) error {
	keys := sweepMetricKeys(ds)
	cfg := recordedPolicy(ds)
	for i, s := range a.Sweeps {
		name := sweepPlotName(i, s)
		plain, _ := loadbalancer.ParamValue(s.Algorithm, s.Parameter, cfg)
		var panels []*plot.Plot
		for k, key := range keys {
			p, err := sweepPanel(a, s, k, key, plain)
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

// recordedPolicy is the policy configuration the campaign's ingresses
// started from: the defaults with the resolved scenario's ingress.policy
// over them (only that field is decoded, as recordedSweeps does). The
// defaults are today's: a campaign recorded before a default changed
// places its plain algorithm at the new default.
func recordedPolicy(ds *dataset) loadbalancer.Config {
	cfg := loadbalancer.DefaultConfig()
	var sc struct {
		Ingress struct {
			Policy scenario.Policy `json:"policy"`
		} `json:"ingress"`
	}
	if err := yaml.Unmarshal([]byte(ds.Campaign.ScenarioYAML), &sc); err == nil {
		sc.Ingress.Policy.Apply(&cfg)
	}
	return cfg
}

// errPoints are medians with their CI as distances below and above.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

func (e *errPoints) add(x float64, mr MetricResult, scale float64) {
	med := scale * float64(mr.Median)
	lo, hi := med, med
	if mr.N > 1 {
		lo, hi = scale*float64(mr.Lo), scale*float64(mr.Hi)
	}
	e.XYs = append(e.XYs, plotter.XY{X: x, Y: med})
	e.YErrors = append(e.YErrors, struct{ Low, High float64 }{clampErr(med - lo), clampErr(hi - med)})
}

// usable reports whether mr has a median to plot.
func usable(mr *MetricResult) bool {
	return mr != nil && mr.N > 0 && !math.IsNaN(float64(mr.Median))
}

// sweepPanel draws metric k (key) of sweep s; nil when no value has it.
// plain is the sweep's plain algorithm's own value of the parameter
// (empty when unknown).
func sweepPanel(a *Analysis, s SweepResult, k int, key, plain string) (*plot.Plot, error) {
	m := metricByKey(key)
	scale := 1.0
	if m.Unit == "%" {
		scale = 100 // error rates are fractions
	}
	values := make([]string, len(s.Points))
	for i, pt := range s.Points {
		values[i] = pt.Value
	}
	xs, ax := sweepX(values)
	var pts errPoints
	for _, i := range ax.order(xs) {
		pt := s.Points[i]
		if k >= len(pt.Metrics) || !usable(&pt.Metrics[k]) {
			continue
		}
		pts.add(xs[i], pt.Metrics[k], scale)
	}
	if len(pts.XYs) == 0 {
		return nil, nil
	}
	p := newPlot("", ax.label(s), fmt.Sprintf("%s (%s)", m.Label, m.Unit))
	if k == 0 {
		p.Title.Text = "Headline metrics against " + s.Parameter
	}
	colour := colorOf(max(0, slices.Index(a.Campaign.Algorithms, s.Points[0].Variant)))
	if err := addMarkers(p, pts, colour, draw.CircleGlyph{}, variantLabel(s)); err != nil {
		return nil, err
	}

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	var lines []*MetricResult // the others, drawn once the x range is known
	var lineAlgs []string
	for _, res := range a.Algorithms {
		if slices.ContainsFunc(s.Points, func(pt SweepPoint) bool { return pt.Variant == res.Algorithm }) {
			continue
		}
		mr := metricOf(res, key)
		if !usable(mr) {
			continue
		}
		// The sweep's own algorithm at its value of the parameter: a
		// point beside the swept ones.
		if x, ok := ax.place(plain); ok && res.Algorithm == s.Algorithm {
			var ref errPoints
			ref.add(x, *mr, scale)
			c := colorOf(max(0, slices.Index(a.Campaign.Algorithms, res.Algorithm)))
			label := fmt.Sprintf("%s (%s=%s)", res.Algorithm, s.Parameter, shortValue(plain))
			if err := addMarkers(p, ref, c, draw.TriangleGlyph{}, label); err != nil {
				return nil, err
			}
			lo, hi = math.Min(lo, x), math.Max(hi, x)
			continue
		}
		lines = append(lines, mr)
		lineAlgs = append(lineAlgs, res.Algorithm)
	}
	pad := (hi - lo) * 0.05
	if pad == 0 {
		pad = 0.5
	}
	p.X.Min, p.X.Max = lo-pad, hi+pad
	if ax.kind == axisPosition {
		ticks := make([]plot.Tick, len(values))
		for i, v := range values {
			ticks[i] = plot.Tick{Value: xs[i], Label: v}
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
	}
	// The others, as references across the plotted range.
	for j, mr := range lines {
		y := scale * float64(mr.Median)
		l, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: y}, {X: p.X.Max, Y: y}})
		if err != nil {
			return nil, err
		}
		l.Color = colorOf(max(0, slices.Index(a.Campaign.Algorithms, lineAlgs[j])))
		l.Width = vg.Points(1)
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		p.Add(l)
		p.Legend.Add(lineAlgs[j], l)
	}
	if m.Unit == "%" || key == "goodput_rps" || key == "throughput_rps" {
		p.Y.Min = 0 // rates read against zero
		if p.Y.Max <= 0 {
			p.Y.Max = 1 // all zero: an axis from 0, not one around it
		}
	}
	return p, nil
}

// addMarkers adds pts as unjoined markers with their error bars.
func addMarkers(p *plot.Plot, pts errPoints, c color.Color, glyph draw.GlyphDrawer, label string) error {
	sc, err := plotter.NewScatter(pts.XYs)
	if err != nil {
		return err
	}
	sc.Color, sc.Shape, sc.Radius = c, glyph, vg.Points(3)
	bars, err := plotter.NewYErrorBars(pts)
	if err != nil {
		return err
	}
	bars.Color, bars.Width = c, vg.Points(1)
	p.Add(bars, sc)
	p.Legend.Add(label, sc)
	return nil
}

// metricOf is res's result for the metric key, nil when it has none.
func metricOf(res AlgorithmResult, key string) *MetricResult {
	for j := range res.Metrics {
		if res.Metrics[j].Metric == key {
			return &res.Metrics[j]
		}
	}
	return nil
}

// shortValue spells a parameter value for a legend: numbers to 4
// significant digits (2^-0.25 as 0.8409), anything else as recorded.
func shortValue(v string) string {
	if x, err := strconv.ParseFloat(v, 64); err == nil {
		return strconv.FormatFloat(x, 'g', 4, 64)
	}
	return v
}

// clampErr keeps an error bar's length finite and non-negative.
func clampErr(d float64) float64 {
	if math.IsNaN(d) || math.IsInf(d, 0) || d < 0 {
		return 0
	}
	return d
}

// variantLabel names the swept markers: prequal{qrif=x}, or
// prequal{probes=2,qrif=x} when the base fixes other parameters.
func variantLabel(s SweepResult) string {
	if strings.HasSuffix(s.Algorithm, "}") {
		return strings.TrimSuffix(s.Algorithm, "}") + "," + s.Parameter + "=x}"
	}
	return s.Algorithm + "{" + s.Parameter + "=x}"
}

// Kinds of sweep axis.
const (
	axisNumber   = iota // every value a number: x is the number
	axisDuration        // every value a duration: x in unit
	axisPosition        // anything else: x is the value's position
)

// sweepAxis is how a sweep's values sit on the x axis.
type sweepAxis struct {
	kind int
	unit time.Duration // axisDuration
}

// sweepX returns the x position of each value and the axis: the number
// when every value is one, the duration in one unit (ns, us, ms or s,
// the largest below the longest value) when every value is one, else the
// value's index (labelled with the value).
func sweepX(values []string) ([]float64, sweepAxis) {
	xs := make([]float64, len(values))
	if allParse(values, xs, parseNumber) {
		return xs, sweepAxis{kind: axisNumber}
	}
	if allParse(values, xs, parseDuration) {
		ax := sweepAxis{kind: axisDuration, unit: time.Nanosecond}
		longest := 0.0
		for _, x := range xs {
			longest = math.Max(longest, math.Abs(x))
		}
		for _, u := range []time.Duration{time.Microsecond, time.Millisecond, time.Second} {
			if longest >= float64(u) {
				ax.unit = u
			}
		}
		for i := range xs {
			xs[i] /= float64(ax.unit)
		}
		return xs, ax
	}
	for i := range xs {
		xs[i] = float64(i)
	}
	return xs, sweepAxis{kind: axisPosition}
}

func allParse(values []string, xs []float64, parse func(string) (float64, bool)) bool {
	for i, v := range values {
		x, ok := parse(v)
		if !ok {
			return false
		}
		xs[i] = x
	}
	return len(values) > 0
}

func parseNumber(v string) (float64, bool) {
	x, err := strconv.ParseFloat(v, 64)
	return x, err == nil && !math.IsNaN(x) && !math.IsInf(x, 0)
}

// parseDuration reads a Go duration (either micro sign or "us") in ns.
func parseDuration(v string) (float64, bool) {
	d, err := time.ParseDuration(v)
	return float64(d), err == nil
}

// place is the x position of a value not among the swept ones (the plain
// algorithm's), false when the axis has no place for it.
func (ax sweepAxis) place(v string) (float64, bool) {
	switch ax.kind {
	case axisNumber:
		return parseNumber(v)
	case axisDuration:
		x, ok := parseDuration(v)
		return x / float64(ax.unit), ok
	}
	return 0, false
}

// order is the order to draw the values in: by x, ties (and a positional
// axis) in the order given.
func (ax sweepAxis) order(xs []float64) []int {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case xs[a] < xs[b]:
			return -1
		case xs[a] > xs[b]:
			return 1
		}
		return 0
	})
	return idx
}

// label is the x axis title.
func (ax sweepAxis) label(s SweepResult) string {
	if ax.kind == axisDuration {
		return fmt.Sprintf("%s (%s) of %s", s.Parameter, strings.TrimPrefix(loadbalancer.FormatDuration(ax.unit), "1"), s.Algorithm)
	}
	return s.Parameter + " of " + s.Algorithm
}
