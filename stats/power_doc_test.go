package stats

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docs/ab.md publishes what N runs detect at a few spreads; the table
// must be what DetectableChange computes (rounded up to half a percent,
// as the report prints it).
func TestDetectableChange_DocsTableIsComputed(t *testing.T) {
	b, err := os.ReadFile("../docs/ab.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| (\d+) \| ([\d.]+)% \| ([\d.]+)% \| ([\d.]+)% \|$`)
	rows := row.FindAllStringSubmatch(string(b), -1)
	if len(rows) < 3 {
		t.Fatalf("docs/ab.md: %d rows of the detectable-change table, want 3", len(rows))
	}
	for _, r := range rows {
		n, _ := strconv.Atoi(r[1])
		for i, cv := range []float64{0.03, 0.05, 0.10} {
			d := DetectableChange(PowerSpec{N: n, CV: cv, Threshold: 0.05, MinEffect: 0.05, Confidence: 0.95, Power: 0.8, Seed: 1})
			want := strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", 100*math.Ceil(d*200)/200), "0"), ".")
			if r[2+i] != want {
				t.Errorf("docs/ab.md: %d runs at a %.0f%% spread says %s%%, DetectableChange gives %s%%", n, 100*cv, r[2+i], want)
			}
		}
	}
}
