package campaign

import (
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
)

func progressRun(p Progress) {
	c := &artifacts.Campaign{ID: "x", Plan: make([]artifacts.PlannedRun, 3)}
	p.CampaignStart(c, 1, 10*time.Second)
	pr := artifacts.PlannedRun{Index: 2, Rep: 1, Algorithm: "prequal"}
	p.RunStart(pr, time.Second, 2*time.Second)
	for _, ph := range []string{"reset", "warmup", "measure"} {
		p.Phase(ph)
		p.Second()
	}
	p.RunEnd(artifacts.Run{PlannedRun: pr, Status: artifacts.StatusOK, ResetVerified: true,
		Load: artifacts.LoadResult{P50: 1, P99: 2, P999: 3, Goodput: 99, TargetRate: 100, Sent: 200, Errors: 2, Succeeded: 198,
			LateSends: 17, SendLag: artifacts.Percentiles{P99: 0.4}},
		Validity: artifacts.Validity{Valid: true}})
	p.RunStart(artifacts.PlannedRun{Index: 3, Rep: 2, Algorithm: "round-robin"}, 0, time.Second)
	p.RunEnd(artifacts.Run{PlannedRun: artifacts.PlannedRun{Index: 3, Rep: 2, Algorithm: "round-robin"}, Status: artifacts.StatusFailed, Error: "boom"})
	p.CampaignEnd()
}

// fakeClock advances by step on every reading.
func fakeClock(step time.Duration) func() time.Time {
	t := time.Unix(0, 0)
	return func() time.Time { t = t.Add(step); return t }
}

func TestProgress_PlainIsOneLinePerRun(t *testing.T) {
	var b strings.Builder
	p := NewProgress(&b, false)
	// A run takes 7 s of this clock: the ETA says 7 s for the one left,
	// not its planned 10 s.
	p.(*display).now = fakeClock(7 * time.Second)
	progressRun(p)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and one line per run, got:\n%s", b.String())
	}
	for _, want := range []string{"[02/03] rep1 prequal", "goodput    99.0/100.0 rps", "err  1.00%", "lag p99  0.40 ms", "valid", "ETA 7s"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("run line %q lacks %q", lines[1], want)
		}
	}
	// The > 1 ms late count is timer noise, not a measure: it stays out.
	if strings.Contains(lines[1], "late") || strings.Contains(lines[1], "17") {
		t.Errorf("run line %q shows the late-send count", lines[1])
	}
	if !strings.Contains(lines[2], "FAILED: boom") || !strings.Contains(lines[2], "ETA 0s") {
		t.Errorf("failed run line %q", lines[2])
	}
	if strings.ContainsRune(b.String(), '\r') {
		t.Error("plain output contains carriage returns")
	}
}

func TestProgress_TerminalDrawsBars(t *testing.T) {
	var b strings.Builder
	progressRun(NewProgress(&b, true))
	out := b.String()
	for _, want := range []string{"campaign", "[02/03] rep1 prequal", "FAILED: boom", "|"} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, out)
		}
	}
}

// Variant names are longer than the plain ones: the algorithm column is
// as wide as the plan's longest name, so every run line's columns align.
func TestProgress_ColumnFitsVariantNames(t *testing.T) {
	long, short := "prequal{probes=2,qrif=0.84}", "round-robin"
	c := &artifacts.Campaign{ID: "x", Plan: []artifacts.PlannedRun{
		{Index: 1, Rep: 1, Algorithm: long}, {Index: 2, Rep: 1, Algorithm: short}}}
	var b strings.Builder
	p := NewProgress(&b, false)
	p.CampaignStart(c, 0, time.Second)
	for _, pr := range c.Plan {
		p.RunStart(pr, 0, time.Second)
		p.RunEnd(artifacts.Run{PlannedRun: pr, Status: artifacts.StatusOK, ResetVerified: true,
			Load: artifacts.LoadResult{Goodput: 10, Sent: 10, Succeeded: 10}, Validity: artifacts.Validity{Valid: true}})
	}
	p.CampaignEnd()
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")[1:]
	if len(lines) != 2 {
		t.Fatalf("want two run lines, got:\n%s", b.String())
	}
	at := func(l string) int { return strings.Index(l, " ok  goodput") }
	if a, s := at(lines[0]), at(lines[1]); a < 0 || a != s {
		t.Errorf("columns do not align (%d vs %d):\n%s\n%s", a, s, lines[0], lines[1])
	}
	if !strings.Contains(lines[0], long+" ok") {
		t.Errorf("long name not followed directly by its status: %q", lines[0])
	}
}
