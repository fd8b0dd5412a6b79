package campaign

import (
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/campaign/artifacts"
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
		Load: artifacts.LoadResult{P50: 1, P99: 2, P999: 3, AchievedRate: 100, Sent: 200, Errors: 2}})
	p.RunStart(artifacts.PlannedRun{Index: 3, Rep: 2, Algorithm: "round-robin"}, 0, time.Second)
	p.RunEnd(artifacts.Run{PlannedRun: artifacts.PlannedRun{Index: 3, Rep: 2, Algorithm: "round-robin"}, Status: artifacts.StatusFailed, Error: "boom"})
	p.CampaignEnd()
}

func TestProgress_PlainIsOneLinePerRun(t *testing.T) {
	var b strings.Builder
	progressRun(NewProgress(&b, false))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and one line per run, got:\n%s", b.String())
	}
	if !strings.Contains(lines[1], "[02/03] rep1 prequal") || !strings.Contains(lines[1], "err  1.00%") || !strings.Contains(lines[1], "ETA 10s") {
		t.Errorf("run line %q", lines[1])
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
