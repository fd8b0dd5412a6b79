package reports

import (
	"strings"
	"testing"
)

// The probe-and-pool table shows probes coalesced, reused picks and slow
// held answers only when some policy counted them, so reports of older
// artifacts (which have none of them) render as they did.
func TestWriteHealth_NewerColumnsOnlyWhenCounted(t *testing.T) {
	t.Parallel()
	a := &Analysis{Health: []HealthResult{
		{Algorithm: "prequal", Runs: 1, Picks: 1000, ProbesPlanned: 3000, ReuseBudgetMin: 2, ReuseBudgetMax: 2},
		{Algorithm: "round-robin", Runs: 1, Picks: 1000},
	}}
	var old strings.Builder
	writeHealth(&old, a)
	if s := old.String(); strings.Contains(s, "coalesced") || strings.Contains(s, "reused") || strings.Contains(s, "held") {
		t.Errorf("columns without counts:\n%s", s)
	}
	a.Health[0].ProbesCoalesced, a.Health[0].ReusedPicks, a.Health[0].SlowHeld = 42, 10, 7
	var b strings.Builder
	writeHealth(&b, a)
	s := b.String()
	for _, want := range []string{"probes coalesced", "reused picks", " 42 |", " 10 (1.00%) |", "slow held", " 7 |", "Probes coalesced were owed but not sent"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
}
