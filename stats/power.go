package stats

import (
	"math"
	"math/rand/v2"
	"sync"
)

// PowerSpec is what a verdict on a ratio of medians needs, and what the
// runs are like: n runs per side whose values spread with coefficient of
// variation CV around their median.
type PowerSpec struct {
	// N is the runs per side; CV the run-to-run spread (sd / mean).
	N  int
	CV float64
	// Threshold is the p-value a test must beat: alpha over the family
	// for the first test of a Holm family, the strictest.
	Threshold float64
	// MinEffect is the relative band the bootstrap interval of the ratio
	// must clear; Confidence is that interval's level.
	MinEffect  float64
	Confidence float64
	// Power is the share of campaigns that must reach the verdict, e.g.
	// 0.8; Trials the simulated campaigns per change (default 400).
	Power  float64
	Trials int
	// Seed makes the answer reproducible.
	Seed uint64
}

// powerResamples is the bootstrap's resamples per simulated campaign: far
// fewer than a report's, enough to place a 95% interval for this purpose.
const powerResamples = 200

// MaxDetectable bounds DetectableChange: a change the runs cannot detect
// below a tripling is reported as +Inf.
const MaxDetectable = 2.0

// DetectableChange is the smallest relative change of the median (0.1 =
// 10%) that a campaign of spec.N runs per side names, with probability
// spec.Power: the exact Mann–Whitney p below spec.Threshold and the
// bootstrap interval of the ratio wholly outside ±spec.MinEffect, the
// same two conditions as a verdict. Campaigns are simulated with each
// run's value median·(1+CV·z), z standard normal (the spread measured,
// shape assumed), the other side scaled by 1+change. The same draws serve
// every change tried (common random numbers), so the power grows with the
// change and a bisection finds it. +Inf when not even MaxDetectable is
// detected (too few runs, or too wide a spread); NaN for bad input.
func DetectableChange(spec PowerSpec) float64 {
	if d, ok := detectable.Load(spec); ok {
		return d.(float64)
	}
	d := detectableChange(spec)
	detectable.Store(spec, d)
	return d
}

// detectable memoises DetectableChange, a pure function of its spec that
// takes a good part of a second: a report is often rendered twice (build,
// then check) and tests render the same campaign many times.
var detectable sync.Map

func detectableChange(spec PowerSpec) float64 {
	if spec.N < 2 || !(spec.CV >= 0) || !(spec.Threshold > 0) || !(spec.Power > 0 && spec.Power < 1) {
		return math.NaN()
	}
	if MinP(spec.N, spec.N) >= spec.Threshold {
		return math.Inf(1)
	}
	sim := newPowerSim(spec)
	if sim.power(MaxDetectable) < spec.Power {
		return math.Inf(1)
	}
	lo, hi := 0.0, MaxDetectable
	for hi-lo > 0.0025 {
		mid := (lo + hi) / 2
		if sim.power(mid) >= spec.Power {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

type powerSim struct {
	spec PowerSpec
	// za, zb are the standard normal draws of each trial's two sides.
	za, zb [][]float64
}

func newPowerSim(spec PowerSpec) *powerSim {
	if spec.Trials <= 0 {
		spec.Trials = 400
	}
	if spec.Confidence == 0 {
		spec.Confidence = 0.95
	}
	rng := rand.New(rand.NewPCG(spec.Seed, 0x9e3779b97f4a7c15))
	s := &powerSim{spec: spec}
	draw := func() []float64 {
		z := make([]float64, spec.N)
		for i := range z {
			z[i] = rng.NormFloat64()
		}
		return z
	}
	for range spec.Trials {
		s.za = append(s.za, draw())
		s.zb = append(s.zb, draw())
	}
	return s
}

// power is the share of the simulated campaigns that name a change of
// the given size.
func (s *powerSim) power(change float64) float64 {
	sp := s.spec
	hits := 0
	a := make([]float64, sp.N)
	b := make([]float64, sp.N)
	for t := range s.za {
		for i := range a {
			// A value at or below 0 is no latency; the floor keeps the
			// model defined for wide spreads.
			a[i] = math.Max(1+sp.CV*s.za[t][i], 1e-3)
			b[i] = (1 + change) * math.Max(1+sp.CV*s.zb[t][i], 1e-3)
		}
		if MannWhitneyU(a, b, sp.Threshold).P >= sp.Threshold {
			continue
		}
		rng := rand.New(rand.NewPCG(sp.Seed, uint64(t)))
		ci := BootstrapRatio(b, a, powerResamples, sp.Confidence, rng)
		if OutsideMinEffect(ci.Lo, ci.Hi, sp.MinEffect) {
			hits++
		}
	}
	return float64(hits) / float64(len(s.za))
}
