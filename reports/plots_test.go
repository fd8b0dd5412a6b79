package reports_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/reports"
	"github.com/prequalbench/prequalbench/reports/reportstest"
)

// TestRender_LegendLiesRightOfEveryCurve checks that the legend cannot
// cover a curve: every legend label starts right of the rightmost point of
// every line drawn.
func TestRender_LegendLiesRightOfEveryCurve(t *testing.T) {
	t.Parallel()
	files, err := reports.Render(fixture(t, reportstest.Default(4)), reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"plots/latency-percentiles.svg", "plots/p99-over-time.svg"} {
		svg := string(files[name])
		lines := regexp.MustCompile(`<path d="(M[^"]*)" style="fill:none;stroke:#[0-9A-F]{6};stroke-width:1.5"`).FindAllStringSubmatch(svg, -1)
		curveRight := 0.0
		curves := 0
		for _, l := range lines {
			pts := regexp.MustCompile(`[ML](-?[0-9.]+),`).FindAllStringSubmatch(l[1], -1)
			if len(pts) <= 2 {
				continue // a legend thumbnail
			}
			curves++
			for _, p := range pts {
				x, _ := strconv.ParseFloat(p[1], 64)
				curveRight = max(curveRight, x)
			}
		}
		if curves != 2 {
			t.Fatalf("%s: %d curves, want 2", name, curves)
		}
		for _, alg := range []string{"prequal", "round-robin"} {
			m := regexp.MustCompile(`<text x="(-?[0-9.]+)"[^>]*\n?[^>]*>` + alg + `</text>`).FindStringSubmatch(svg)
			if m == nil {
				t.Fatalf("%s: no legend label %s", name, alg)
			}
			x, _ := strconv.ParseFloat(m[1], 64)
			if x <= curveRight {
				t.Errorf("%s: legend label %s at x=%v, left of the curves' right edge %v", name, alg, x, curveRight)
			}
		}
	}
}

func TestRender_PessimisticCurveOnlyForAlgorithmsWithFailures(t *testing.T) {
	t.Parallel()
	spec := reportstest.Default(4)
	p := spec.Profiles["round-robin"]
	p.ErrorRate, p.FastFail = 0.05, true
	spec.Profiles["round-robin"] = p
	files, err := reports.Render(fixture(t, spec), reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svg := string(files["plots/latency-percentiles.svg"])
	if !strings.Contains(svg, ">round-robin, pess.</text>") {
		t.Error("no pessimistic curve for round-robin, which failed 5% of its requests")
	}
	if strings.Contains(svg, ">prequal, pess.</text>") {
		t.Error("a pessimistic curve for prequal, which had no failures")
	}
}
