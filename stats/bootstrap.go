package stats

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
)

// RatioCI is the ratio of two medians with a percentile bootstrap interval.
type RatioCI struct {
	// Ratio is median(num) / median(den); NaN when undefined.
	Ratio      float64
	Lo, Hi     float64
	Resamples  int
	Confidence float64
	// Small is true when a side has fewer than MinBootstrapRuns values: the
	// percentile interval then covers less than Confidence (about 91–92%
	// for a nominal 95% at 3–4 runs), and the report marks it †.
	Small    bool
	Warnings []error
}

// MinBootstrapRuns is the fewest values per side for which the percentile
// bootstrap interval is taken at its nominal confidence.
const MinBootstrapRuns = 5

// ErrZeroDenominator is the warning for a ratio whose denominator median is 0.
var ErrZeroDenominator = errors.New("stats: median of the denominator is 0, ratio undefined")

// BootstrapRatio estimates median(num)/median(den) and a percentile
// interval at confidence by resampling each sample with replacement,
// independently, resamples times. The runs are the unit of resampling, so
// num and den hold one value per run. rng makes the result reproducible:
// the same seed gives the same bounds, bit for bit.
func BootstrapRatio(num, den []float64, resamples int, confidence float64, rng *rand.Rand) RatioCI {
	r := RatioCI{Ratio: math.NaN(), Lo: math.NaN(), Hi: math.NaN(), Resamples: resamples, Confidence: confidence,
		Small: min(len(num), len(den)) < MinBootstrapRuns}
	if len(num) == 0 || len(den) == 0 {
		r.Warnings = append(r.Warnings, ErrEmpty)
		return r
	}
	r.Ratio = Ratio(Median(num), Median(den))
	if Median(den) == 0 && Median(num) != 0 {
		r.Ratio = math.NaN()
		r.Warnings = append(r.Warnings, ErrZeroDenominator)
		return r
	}
	if resamples <= 0 {
		return r
	}
	ratios := make([]float64, resamples)
	bn := make([]float64, len(num))
	bd := make([]float64, len(den))
	for i := range ratios {
		for j := range bn {
			bn[j] = num[rng.IntN(len(num))]
		}
		for j := range bd {
			bd[j] = den[rng.IntN(len(den))]
		}
		// bn and bd are scratch copies: sorting them in place is safe.
		slices.Sort(bn)
		slices.Sort(bd)
		ratios[i] = Ratio(medianSorted(bn), medianSorted(bd))
	}
	slices.Sort(ratios)
	a := (1 - confidence) / 2
	lo := int(math.Floor(a * float64(resamples)))
	hi := int(math.Ceil((1-a)*float64(resamples))) - 1
	lo = min(max(lo, 0), resamples-1)
	hi = min(max(hi, 0), resamples-1)
	r.Lo, r.Hi = ratios[lo], ratios[hi]
	return r
}

// Ratio divides, calling 0/0 "no change" (1) and x/0 +Inf.
func Ratio(a, b float64) float64 {
	if b == 0 {
		if a == 0 {
			return 1
		}
		return math.Inf(1)
	}
	return a / b
}

// DiffCI is the difference of two medians with a percentile bootstrap
// interval, for rates whose size matters in absolute terms (an error rate
// of 0.002% against 0% is an infinite ratio but no difference at all).
type DiffCI struct {
	// Diff is median(a) - median(b); NaN when a side is empty.
	Diff   float64
	Lo, Hi float64
	// Small is as in RatioCI.
	Small bool
}

// BootstrapDiff estimates median(a) - median(b) and a percentile interval
// at confidence, resampling runs as BootstrapRatio does.
func BootstrapDiff(a, b []float64, resamples int, confidence float64, rng *rand.Rand) DiffCI {
	d := DiffCI{Diff: math.NaN(), Lo: math.NaN(), Hi: math.NaN(), Small: min(len(a), len(b)) < MinBootstrapRuns}
	if len(a) == 0 || len(b) == 0 {
		return d
	}
	d.Diff = Median(a) - Median(b)
	if resamples <= 0 {
		return d
	}
	diffs := make([]float64, resamples)
	ba := make([]float64, len(a))
	bb := make([]float64, len(b))
	for i := range diffs {
		for j := range ba {
			ba[j] = a[rng.IntN(len(a))]
		}
		for j := range bb {
			bb[j] = b[rng.IntN(len(b))]
		}
		slices.Sort(ba)
		slices.Sort(bb)
		diffs[i] = medianSorted(ba) - medianSorted(bb)
	}
	slices.Sort(diffs)
	al := (1 - confidence) / 2
	lo := min(max(int(math.Floor(al*float64(resamples))), 0), resamples-1)
	hi := min(max(int(math.Ceil((1-al)*float64(resamples)))-1, 0), resamples-1)
	d.Lo, d.Hi = diffs[lo], diffs[hi]
	return d
}

// OutsideFloor reports whether the interval [lo, hi] of a difference lies
// wholly outside [-floor, floor]. An undefined bound never lies outside.
func OutsideFloor(lo, hi, floor float64) bool {
	if math.IsNaN(lo) || math.IsNaN(hi) {
		return false
	}
	return hi < -floor || lo > floor
}
