package load

import (
	"math"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/openloop"
)

func collect(t *testing.T, phases []Phase) []time.Duration {
	t.Helper()
	s := newSchedule(phases)
	var out []time.Duration
	for off, ok := s.next(); ok; off, ok = s.next() {
		if len(out) > 0 && off < out[len(out)-1] {
			t.Fatalf("schedule went back in time: %v after %v", off, out[len(out)-1])
		}
		out = append(out, off)
	}
	return out
}

func TestSchedule_ConstantYieldsRateTimesDuration(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		dur  time.Duration
		want int
	}{
		{10, time.Second, 10},
		{100, 2 * time.Second, 200},
		{10000, 3 * time.Second, 30000},
		{2.5, 2 * time.Second, 5},
		{7, time.Second, 7},
	} {
		got := collect(t, []Phase{{Kind: KindConstant, Rate: tc.rate, Duration: tc.dur}})
		if len(got) != tc.want {
			t.Errorf("constant %v/s for %v: %d hits, want %d", tc.rate, tc.dur, len(got), tc.want)
		}
		if last := got[len(got)-1]; last > tc.dur {
			t.Errorf("constant %v/s: last hit at %v, after the phase end %v", tc.rate, last, tc.dur)
		}
	}
}

func TestSchedule_ConstantIsEvenlySpaced(t *testing.T) {
	got := collect(t, []Phase{{Kind: KindConstant, Rate: 100, Duration: time.Second}})
	for i := 1; i < len(got); i++ {
		if d := got[i] - got[i-1]; d != 10*time.Millisecond {
			t.Fatalf("gap %d = %v, want 10ms", i, d)
		}
	}
}

func TestSchedule_PhasesRunInSequence(t *testing.T) {
	got := collect(t, []Phase{
		{Kind: KindConstant, Rate: 10, Duration: time.Second},
		{Kind: KindConstant, Rate: 100, Duration: time.Second},
	})
	if len(got) != 110 {
		t.Fatalf("%d hits, want 110", len(got))
	}
	var first, second int
	for _, off := range got {
		if off <= time.Second {
			first++
		} else {
			second++
		}
	}
	if first != 10+1 && first != 10 {
		t.Errorf("first second holds %d hits, want 10 (or 11 with the boundary hit)", first)
	}
}

func TestSchedule_RampFollowsLinearRate(t *testing.T) {
	got := collect(t, []Phase{{Kind: KindRamp, From: 100, To: 300, Duration: 2 * time.Second}})
	// Expected hits: the integral, (100+300)/2 × 2 = 400.
	if n := len(got); n < 395 || n > 405 {
		t.Fatalf("ramp 100→300 over 2s: %d hits, want ≈400", n)
	}
	var firstHalf int
	for _, off := range got {
		if off < time.Second {
			firstHalf++
		}
	}
	// ∫0..1 (100 + 100 t) dt = 150.
	if firstHalf < 145 || firstHalf > 155 {
		t.Errorf("first second of the ramp: %d hits, want ≈150", firstHalf)
	}
}

func TestSchedule_DescendingRamp(t *testing.T) {
	got := collect(t, []Phase{{Kind: KindRamp, From: 300, To: 100, Duration: 2 * time.Second}})
	if n := len(got); n < 395 || n > 405 {
		t.Fatalf("ramp 300→100 over 2s: %d hits, want ≈400", n)
	}
}

func TestSchedule_StepsHoldEachRate(t *testing.T) {
	got := collect(t, []Phase{{Kind: KindSteps, From: 10, To: 30, Steps: 3, Duration: 3 * time.Second}})
	if len(got) != 60 {
		t.Fatalf("steps 10,20,30 for 1s each: %d hits, want 60", len(got))
	}
	per := make([]int, 3)
	for _, off := range got {
		// A hit due exactly on a boundary belongs to the earlier second.
		i := int((off - 1) / time.Second)
		per[i]++
	}
	if per[0] != 10 || per[1] != 20 || per[2] != 30 {
		t.Errorf("hits per step = %v, want [10 20 30]", per)
	}
}

func TestSchedule_BurstAlternates(t *testing.T) {
	got := collect(t, []Phase{{Kind: KindBurst, High: 100, Low: 0, HighFor: 100 * time.Millisecond, LowFor: 400 * time.Millisecond, Duration: 2 * time.Second}})
	if len(got) != 40 {
		t.Fatalf("4 bursts of 10: %d hits, want 40", len(got))
	}
	for _, off := range got {
		if in := (off - 1) % (500 * time.Millisecond); in >= 100*time.Millisecond {
			t.Fatalf("hit at %v falls in a silent stretch", off)
		}
	}
}

func TestSchedule_BurstWithLowRate(t *testing.T) {
	got := collect(t, []Phase{{Kind: KindBurst, High: 100, Low: 10, HighFor: 500 * time.Millisecond, LowFor: 500 * time.Millisecond, Duration: 2 * time.Second}})
	if len(got) != 110 {
		t.Fatalf("2 × (50 + 5): %d hits, want 110", len(got))
	}
}

func TestMeanRate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		phases []Phase
		want   float64
	}{
		{"constant", []Phase{{Kind: KindConstant, Rate: 50, Duration: time.Second}}, 50},
		{"ramp", []Phase{{Kind: KindRamp, From: 100, To: 300, Duration: time.Second}}, 200},
		{"two phases", []Phase{{Kind: KindConstant, Rate: 10, Duration: time.Second}, {Kind: KindConstant, Rate: 30, Duration: 3 * time.Second}}, 25},
		{"steps", []Phase{{Kind: KindSteps, From: 10, To: 30, Steps: 3, Duration: 3 * time.Second}}, 20},
		{"burst", []Phase{{Kind: KindBurst, High: 100, Low: 0, HighFor: 100 * time.Millisecond, LowFor: 400 * time.Millisecond, Duration: 2 * time.Second}}, 20},
	} {
		if got := meanRate(tc.phases); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: meanRate = %v, want %v", tc.name, got, tc.want)
		}
		// The engine's TargetRate is the schedule's planned hits per
		// second: the integral, to within the one hit a schedule may hold
		// at a phase's end.
		var secs float64
		for _, p := range tc.phases {
			secs += p.Duration.Seconds()
		}
		if got := float64(plannedHits(tc.phases)) / secs; math.Abs(got-tc.want) > 1/secs+1e-9 {
			t.Errorf("%s: planned hits per second %v, want %v", tc.name, got, tc.want)
		}
	}
}

// meanRate is the mean rate of the phases over their whole length: their
// integral per second, the reference for the schedule's planned hits.
func meanRate(phases []Phase) float64 { return openloop.MeanRate(phases) }
