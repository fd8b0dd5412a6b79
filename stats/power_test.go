package stats

import (
	"math"
	"testing"
)

func spec(n int, cv float64) PowerSpec {
	return PowerSpec{N: n, CV: cv, Threshold: 0.05, MinEffect: 0.05, Confidence: 0.95, Power: 0.8, Seed: 1}
}

// The detectable change grows with the spread, shrinks with the runs,
// never falls inside the minimum effect, and is infinite where the U
// test cannot reach the threshold at all.
func TestDetectableChange_FollowsSpreadAndRuns(t *testing.T) {
	tight, wide := DetectableChange(spec(8, 0.02)), DetectableChange(spec(8, 0.10))
	if !(tight > 0.05 && tight < wide) {
		t.Errorf("8 runs: CV 2%% detects %.3f, CV 10%% %.3f: want above the 5%% band and growing with the spread", tight, wide)
	}
	if few, many := DetectableChange(spec(4, 0.05)), DetectableChange(spec(12, 0.05)); !(many < few) {
		t.Errorf("CV 5%%: 4 runs detect %.3f, 12 runs %.3f: want fewer runs to need more", few, many)
	}
	if d := DetectableChange(spec(3, 0.01)); !math.IsInf(d, 1) {
		t.Errorf("3 runs per side (min p 0.1): %v, want +Inf", d)
	}
	if d := DetectableChange(spec(8, 0.05)); math.IsNaN(d) || d != detectableChange(spec(8, 0.05)) {
		t.Errorf("not reproducible: %v", d)
	}
}

// The simulated power at the detectable change is the asked-for power,
// checked on fresh draws: a change that size is named in about 80% of
// campaigns, a change of half that size far less often.
func TestDetectableChange_HoldsOnFreshDraws(t *testing.T) {
	s := spec(8, 0.06)
	d := DetectableChange(s)
	fresh := s
	fresh.Seed, fresh.Trials = 99, 1000
	sim := newPowerSim(fresh)
	if p := sim.power(d); p < 0.72 {
		t.Errorf("power at the detectable change %.3f is %.2f on fresh draws, want about 0.8", d, p)
	}
	if p := sim.power(d / 2); p > 0.6 {
		t.Errorf("power at half the detectable change is %.2f, want well below 0.8", p)
	}
}
