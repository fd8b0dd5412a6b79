package openloop

import (
	"strings"
	"testing"
	"time"
)

func all(t *testing.T, phases []Phase) ([]time.Duration, []int) {
	t.Helper()
	s, err := New(phases)
	if err != nil {
		t.Fatal(err)
	}
	var at []time.Duration
	var idx []int
	for off, ok := s.Next(); ok; off, ok = s.Next() {
		at = append(at, off)
		idx = append(idx, s.Index())
	}
	return at, idx
}

// Hit k of a phase is due when the rate's integral reaches k: steps of 10
// then 20 rps put hit 1 at 100 ms and hit 11 at 1.05 s, 30 in all.
func TestSchedule_StepsIntegrateTheRate(t *testing.T) {
	at, _ := all(t, []Phase{{Kind: KindSteps, From: 10, To: 20, Steps: 2, Duration: 2 * time.Second}})
	if len(at) != 30 || at[0] != 100*time.Millisecond || at[10] != 1050*time.Millisecond {
		t.Errorf("%d hits, first %v, 11th %v; want 30, 100ms, 1.05s", len(at), at[0], at[min(10, len(at)-1)])
	}
}

// A constant phase uses vegeta's integer interval: 3 rps sends every
// 333,333,333 ns, so the third hit is due just before the phase ends.
func TestSchedule_ConstantUsesTheIntegerInterval(t *testing.T) {
	at, _ := all(t, []Phase{{Kind: KindConstant, Rate: 3, Duration: time.Second}})
	want := []time.Duration{333333333, 666666666, 999999999}
	if len(at) != 3 || at[0] != want[0] || at[1] != want[1] || at[2] != want[2] {
		t.Errorf("hits %v, want %v", at, want)
	}
}

// A burst repeats high then low: 100 rps for 100 ms, silence for 400 ms,
// over 1 s is 20 hits, the 11th 10 ms into the second cycle.
func TestSchedule_BurstRepeats(t *testing.T) {
	at, _ := all(t, []Phase{{Kind: KindBurst, High: 100, Low: 0, HighFor: 100 * time.Millisecond, LowFor: 400 * time.Millisecond, Duration: time.Second}})
	if len(at) != 20 || at[10] != 510*time.Millisecond {
		t.Errorf("%d hits, 11th at %v; want 20, 510ms", len(at), at[min(10, len(at)-1)])
	}
}

// Phases run in sequence, offsets keep counting, and Index names the
// phase of each hit.
func TestSchedule_PhasesInSequence(t *testing.T) {
	at, idx := all(t, []Phase{{Kind: KindConstant, Rate: 2, Duration: time.Second}, {Kind: KindConstant, Rate: 1, Duration: time.Second}})
	if len(at) != 3 || at[2] != 2*time.Second || idx[1] != 0 || idx[2] != 1 {
		t.Errorf("hits %v in phases %v; want the third at 2s in phase 1", at, idx)
	}
}

func TestNew_BadPhasesNameTheField(t *testing.T) {
	for want, p := range map[string]Phase{
		"open[0].duration": {Kind: KindConstant, Rate: 1},
		"open[0].kind":     {Kind: "sine", Duration: time.Second},
	} {
		if _, err := New([]Phase{p}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: error %v, want one naming %s", p, err, want)
		}
	}
}

func TestMeanRate(t *testing.T) {
	got := MeanRate([]Phase{{Kind: KindRamp, From: 100, To: 300, Duration: time.Second}, {Kind: KindConstant, Rate: 100, Duration: time.Second}})
	if got != 150 {
		t.Errorf("MeanRate = %v, want 150", got)
	}
}
