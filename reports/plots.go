package reports

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/stats"
)

// palette gives each algorithm (by its position in the campaign) a fixed,
// colour-blind-friendly colour.
var palette = []color.RGBA{
	{0x00, 0x72, 0xb2, 0xff}, // blue
	{0xd5, 0x5e, 0x00, 0xff}, // vermillion
	{0x00, 0x9e, 0x73, 0xff}, // green
	{0xcc, 0x79, 0xa7, 0xff}, // purple
	{0xe6, 0x9f, 0x00, 0xff}, // orange
	{0x56, 0xb4, 0xe9, 0xff}, // sky
	{0x00, 0x00, 0x00, 0xff}, // black
}

func colorOf(i int) color.Color { return palette[i%len(palette)] }

const plotW, plotH = 18 * vg.Centimeter, 10 * vg.Centimeter

// renderPlots draws every plot the data supports, keyed by file name.
// gonum/plot's SVG output has no timestamps or random ids, so equal inputs
// give equal bytes (a test renders twice to keep it so).
func renderPlots(ds *dataset, a *Analysis) (map[string][]byte, error) {
	out := map[string][]byte{}
	type maker struct {
		name string
		make func(*dataset, *Analysis) (*plot.Plot, error)
	}
	for _, m := range []maker{
		{"latency-percentiles.svg", percentilePlot},
		{"p99-over-time.svg", p99TimePlot},
		{"selection-shares.svg", sharesPlot},
	} {
		p, err := m.make(ds, a)
		if err != nil {
			return nil, fmt.Errorf("reports: plot %s: %w", m.name, err)
		}
		if p == nil {
			continue
		}
		wt, err := draw.NewFormattedCanvas(plotW, plotH, "svg")
		if err != nil {
			return nil, fmt.Errorf("reports: plot %s: %w", m.name, err)
		}
		drawBesideLegend(p, draw.New(wt))
		var buf bytes.Buffer
		if _, err := wt.WriteTo(&buf); err != nil {
			return nil, fmt.Errorf("reports: plot %s: %w", m.name, err)
		}
		out[m.name] = buf.Bytes()
	}
	if err := renderSweepPlots(ds, a, out); err != nil {
		return nil, err
	}
	return out, nil
}

// drawBesideLegend draws p with its legend in a column right of the data
// area, so the legend never covers a curve or a bar whatever the data.
func drawBesideLegend(p *plot.Plot, c draw.Canvas) {
	leg := p.Legend
	p.Legend = plot.NewLegend() // nothing drawn inside the data area
	gap := vg.Points(6)
	r := leg.Rectangle(c)
	// A quarter more than the measured width: viewers substitute fonts
	// wider than the metrics gonum measures with.
	width := (r.Max.X - r.Min.X) * 5 / 4
	area := draw.Crop(c, 0, -(width + 2*gap), 0, 0)
	p.Draw(area)
	data := p.DataCanvas(area)
	leg.Top, leg.Left, leg.XOffs, leg.YOffs = true, true, 0, 0
	leg.Draw(draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
		Min: vg.Point{X: area.Max.X + gap, Y: data.Min.Y},
		Max: vg.Point{X: c.Max.X, Y: data.Max.Y},
	}})
	p.Legend = leg
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// logTicks labels a log axis at powers of ten (and 2× and 5× between).
type logTicks struct{ format func(float64) string }

func (t logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	if !(lo > 0) || !(hi > lo) {
		return ticks
	}
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		base := math.Pow(10, e)
		for _, k := range []float64{1, 2, 5} {
			v := k * base
			if v < lo || v > hi {
				continue
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: t.format(v)})
		}
	}
	return ticks
}

// padLogY leaves a margin around the data on a log axis.
func padLogY(p *plot.Plot, lines []plotter.XYs) {
	lo, hi := yRange(lines)
	if lo > 0 && hi >= lo {
		p.Y.Min, p.Y.Max = lo/1.5, hi*1.5
	}
}

// yRange returns the smallest and largest Y of the lines drawn so far.
func yRange(lines []plotter.XYs) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, pts := range lines {
		for _, pt := range pts {
			lo, hi = math.Min(lo, pt.Y), math.Max(hi, pt.Y)
		}
	}
	return lo, hi
}

// addLine draws one algorithm's line; dashed marks a second view of the
// same algorithm.
func addLine(p *plot.Plot, name string, i int, pts plotter.XYs, dashed bool) error {
	if len(pts) == 0 {
		return nil
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = colorOf(i)
	l.Width = vg.Points(1.5)
	l.Dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}}[i/len(palette)%3]
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		l.Width = vg.Points(1)
	}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// percentilePlot draws latency against percentile, HDR style: the x axis is
// 1/(1-q) on a log scale, so the tail gets as much room as the body. An
// algorithm with failures also gets its pessimistic curve (every request,
// failures at the timeout), dashed in the same colour.
func percentilePlot(ds *dataset, a *Analysis) (*plot.Plot, error) {
	p := newPlot("Latency by percentile", "percentile", "latency (ms, log)")
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.Y.Tick.Marker = logTicks{fmtTick}
	maxX := 1.0
	drawn := false
	var lines []plotter.XYs
	curve := func(h *hdrhistogram.Histogram) plotter.XYs {
		var pts plotter.XYs
		for k := 0; k <= 50; k++ {
			x := math.Pow(10, float64(k)/10) // 1/(1-q)
			if x > float64(h.TotalCount()) {
				break
			}
			q := 1 - 1/x
			v := artifacts.Millis(h.ValueAtQuantile(100 * q))
			pts = append(pts, plotter.XY{X: x, Y: math.Max(v, 0.001)})
			maxX = math.Max(maxX, x)
		}
		return pts
	}
	for i, alg := range a.Campaign.Algorithms {
		h, pess := artifacts.NewHistogram(), artifacts.NewHistogram()
		for _, r := range ds.Runs {
			if counted(ds, r) && r.Run.Algorithm == alg {
				h.Merge(r.Hist)
				if r.Pess != nil {
					pess.Merge(r.Pess)
				}
			}
		}
		if h.TotalCount() == 0 {
			continue
		}
		pts := curve(h)
		if err := addLine(p, alg, i, pts, false); err != nil {
			return nil, err
		}
		lines = append(lines, pts)
		drawn = true
		if pess.TotalCount() > h.TotalCount() {
			pp := curve(pess)
			if err := addLine(p, alg+", pess.", i, pp, true); err != nil {
				return nil, err
			}
			lines = append(lines, pp)
		}
	}
	if !drawn {
		return nil, nil
	}
	padLogY(p, lines)
	var ticks []plot.Tick
	for _, t := range []struct {
		x     float64
		label string
	}{{2, "50%"}, {10, "90%"}, {100, "99%"}, {1000, "99.9%"}, {10000, "99.99%"}, {100000, "99.999%"}} {
		if t.x <= maxX {
			ticks = append(ticks, plot.Tick{Value: t.x, Label: t.label})
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = 1, maxX
	return p, nil
}

// p99TimePlot draws each second's p99, median across an algorithm's reps.
func p99TimePlot(ds *dataset, a *Analysis) (*plot.Plot, error) {
	p := newPlot("p99 over the measured window", "second", "p99 (ms, log)")
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{fmtTick}
	drawn := false
	var lines []plotter.XYs
	for i, alg := range a.Campaign.Algorithms {
		bySecond := map[int][]float64{}
		for _, r := range ds.Runs {
			if !counted(ds, r) || r.Run.Algorithm != alg {
				continue
			}
			for _, pt := range r.Series {
				if pt.Answered > 0 && pt.P99 > 0 {
					bySecond[pt.Second] = append(bySecond[pt.Second], pt.P99)
				}
			}
		}
		var secs []int
		for s := range bySecond {
			secs = append(secs, s)
		}
		slices.Sort(secs)
		var pts plotter.XYs
		for _, s := range secs {
			pts = append(pts, plotter.XY{X: float64(s), Y: stats.Median(bySecond[s])})
		}
		if err := addLine(p, alg, i, pts, false); err != nil {
			return nil, err
		}
		lines = append(lines, pts)
		drawn = drawn || len(pts) > 0
	}
	if !drawn {
		return nil, nil
	}
	padLogY(p, lines)
	return p, nil
}

// sharesPlot draws grouped bars: one group of bars per backend group, one
// bar per algorithm.
func sharesPlot(ds *dataset, a *Analysis) (*plot.Plot, error) {
	if len(a.Shares) == 0 {
		return nil, nil
	}
	seen := map[string]bool{}
	for _, s := range a.Shares {
		for _, g := range s.Groups {
			seen[g.Group] = true
		}
	}
	groups := groupOrder(&ds.Campaign, seen)
	if len(groups) == 0 {
		return nil, nil
	}
	p := newPlot("Share of picks by backend group", "backend group", "share of picks (%)")
	n := len(a.Shares)
	width := vg.Points(math.Min(60, 300/float64(n*len(groups))))
	top := 0.0
	for i, s := range a.Shares {
		vals := make(plotter.Values, len(groups))
		for j, g := range groups {
			for _, gs := range s.Groups {
				if gs.Group == g && !math.IsNaN(float64(gs.Share)) {
					vals[j] = 100 * float64(gs.Share)
					top = math.Max(top, vals[j])
				}
			}
		}
		bc, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		bc.Color = colorOf(slices.Index(a.Campaign.Algorithms, s.Algorithm))
		bc.LineStyle.Width = 0
		bc.Offset = vg.Length(float64(i)-float64(n-1)/2) * width
		p.Add(bc)
		p.Legend.Add(s.Algorithm, bc)
	}
	p.NominalX(groups...)
	p.Y.Min, p.Y.Max = 0, math.Min(100, top*1.1+1)
	p.X.Min, p.X.Max = -0.5, float64(len(groups))-0.5
	p.Legend.ThumbnailWidth = vg.Points(10)
	return p, nil
}

// fmtTick prints an axis value without trailing zeros.
func fmtTick(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
