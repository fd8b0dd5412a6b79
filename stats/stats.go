// Package stats is the pure statistics core of the reporter: medians with
// order-statistic confidence intervals, the two-sided Mann–Whitney U test
// (exact for small samples) and a seeded bootstrap of the ratio of two
// medians. It does no I/O; doubts about a result are returned as warnings
// next to it, never printed.
package stats

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrEmpty is the warning for a summary of no values.
var ErrEmpty = errors.New("stats: no samples")

// Sorted returns a sorted copy of xs; the caller's slice is left alone.
func Sorted(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

// Median returns the median of xs (the mean of the two middle values for an
// even count), or NaN for no values.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := Sorted(xs)
	return medianSorted(s)
}

func medianSorted(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// MinMax returns the smallest and largest value, or NaNs for no values.
func MinMax(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	return slices.Min(xs), slices.Max(xs)
}

// Mean returns the arithmetic mean, or NaN for no values.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// CV returns the coefficient of variation (population standard deviation
// over the mean): 0 for identical values, NaN when the mean is 0 or there
// are no values.
func CV(xs []float64) float64 {
	m := Mean(xs)
	if len(xs) == 0 || m == 0 {
		return math.NaN()
	}
	var ss float64
	for _, x := range xs {
		d := x - m
		ss += d * d
	}
	return math.Sqrt(ss/float64(len(xs))) / math.Abs(m)
}

// Summary is a median with its confidence interval.
type Summary struct {
	N      int
	Median float64
	// Lo and Hi bound the interval. When Range is true there were too few
	// samples for the requested confidence and they are the min and max.
	Lo, Hi float64
	// Confidence is the requested level; Coverage the exact coverage of
	// [Lo, Hi] (at least Confidence unless Range).
	Confidence float64
	Coverage   float64
	Range      bool
	Warnings   []error
}

// MinSamplesForCI returns the smallest sample count for which a finite
// order-statistic interval around the median reaches confidence (6 at 0.95).
func MinSamplesForCI(confidence float64) int {
	for n := 1; n < 1000; n++ {
		if 1-2*binomCDFHalf(n, 0) >= confidence {
			return n
		}
	}
	return 1000
}

// Summarize returns the median of xs with a distribution-free confidence
// interval [x(k), x(n+1-k)] from order statistics: the widest k whose
// binomial coverage still reaches confidence. With too few samples the
// interval is the min–max range, marked Range, with a warning.
func Summarize(xs []float64, confidence float64) Summary {
	s := Summary{N: len(xs), Confidence: confidence}
	if len(xs) == 0 {
		s.Median, s.Lo, s.Hi = math.NaN(), math.NaN(), math.NaN()
		s.Range = true
		s.Warnings = append(s.Warnings, ErrEmpty)
		return s
	}
	sorted := Sorted(xs)
	n := len(sorted)
	s.Median = medianSorted(sorted)
	k := 0 // 1-based order statistic index of the lower bound
	cov := 0.0
	for j := 1; 2*j <= n+1; j++ {
		c := 1 - 2*binomCDFHalf(n, j-1)
		if c < confidence {
			break
		}
		k, cov = j, c
	}
	if k == 0 {
		s.Lo, s.Hi = sorted[0], sorted[n-1]
		s.Coverage = 1 - 2*binomCDFHalf(n, 0)
		s.Range = true
		s.Warnings = append(s.Warnings, fmt.Errorf("stats: need >= %d samples for a %.0f%% confidence interval, have %d: showing min–max",
			MinSamplesForCI(confidence), confidence*100, n))
		return s
	}
	s.Lo, s.Hi, s.Coverage = sorted[k-1], sorted[n-k], cov
	return s
}

// binomCDFHalf returns P(X <= k) for X ~ Binomial(n, 1/2).
func binomCDFHalf(n, k int) float64 {
	if k < 0 {
		return 0
	}
	var sum float64
	c := 1.0 // C(n, 0)
	for i := 0; i <= k && i <= n; i++ {
		sum += c
		c = c * float64(n-i) / float64(i+1)
	}
	return sum / math.Pow(2, float64(n))
}
