package stats

import (
	"math"
	"slices"
)

// Holm returns Holm's step-down adjusted p-values for a family of tests, in
// the order given: the k-th smallest p (1-based) is multiplied by m-k+1 and
// the results are made non-decreasing, capped at 1. A test is significant
// at family-wise level alpha when its adjusted p is below alpha. NaN
// p-values (tests that could not be run) stay NaN and do not count in m.
func Holm(ps []float64) []float64 {
	adj := make([]float64, len(ps))
	var idx []int
	for i, p := range ps {
		adj[i] = math.NaN()
		if !math.IsNaN(p) {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case ps[a] < ps[b]:
			return -1
		case ps[a] > ps[b]:
			return 1
		}
		return 0
	})
	m := len(idx)
	running := 0.0
	for k, i := range idx {
		running = math.Max(running, math.Min(1, float64(m-k)*ps[i]))
		adj[i] = running
	}
	return adj
}

// OutsideMinEffect reports whether the interval [lo, hi] of a ratio lies
// wholly outside the band [1-effect, 1+effect] of differences too small to
// matter. An undefined bound (NaN) never lies outside.
func OutsideMinEffect(lo, hi, effect float64) bool {
	if math.IsNaN(lo) || math.IsNaN(hi) {
		return false
	}
	return hi < 1-effect || lo > 1+effect
}

// MaxRunsPerSide bounds RunsPerSide's search.
const MaxRunsPerSide = 100

// RunsPerSide is the fewest runs per side (equal on both sides) whose
// smallest possible Mann–Whitney p (MinP) is below alpha/tests, the
// threshold Holm puts on the first of a family of tests: with fewer, no
// test of the family can be significant whatever the data. 0 when tests
// is 0 or the answer exceeds MaxRunsPerSide.
func RunsPerSide(tests int, alpha float64) int {
	if tests <= 0 || !(alpha > 0) {
		return 0
	}
	for n := 1; n <= MaxRunsPerSide; n++ {
		if MinP(n, n)*float64(tests) < alpha {
			return n
		}
	}
	return 0
}
