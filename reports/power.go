package reports

import (
	"fmt"
	"math"

	"github.com/prequalbench/prequalbench/stats"
)

// Power is what the campaign's reps can detect on its primary metric: from
// the run-to-run spread measured in this campaign, the smallest relative
// change that its runs per side would name (significant after Holm and
// beyond the minimum effect) in PowerLevel of campaigns. A change below it
// can go unnamed, so "no verdict" means "equal within Detectable", not
// "equal".
type Power struct {
	Metric string `json:"metric"`
	// N is the fewest valid runs on a side of a primary comparison.
	N int `json:"runs_per_side"`
	// CV is the run-to-run coefficient of variation of the primary
	// metric, pooled over the algorithms (root mean square).
	CV Num `json:"cv"`
	// Tests is the Holm family; Threshold = alpha / Tests, the p the
	// first test must beat.
	Tests     int `json:"tests"`
	Threshold Num `json:"threshold"`
	// Detectable is the smallest relative change named with probability
	// Level (+Inf: not even a tripling).
	Detectable Num     `json:"detectable_change"`
	Level      float64 `json:"power"`
}

// PowerLevel is the share of campaigns in which a change of the
// detectable size is named: the customary 80%.
const PowerLevel = 0.8

// powerOf states the power of a campaign whose primary metric is a
// latency (rates have absolute floors, not relative changes): nil when
// there is no primary comparison to make, or too few runs to measure a
// spread. values gives an algorithm's valid runs' values of the metric.
func powerOf(a *Analysis, m metric, values func(alg string) []float64, seed uint64, o Options) *Power {
	if m.Unit != "ms" {
		return nil
	}
	tests, n := 0, math.MaxInt
	for _, c := range a.Comparisons {
		if c.Primary && !c.Identical && c.NR > 0 && c.NA > 0 {
			tests++
			n = min(n, c.NR, c.NA)
		}
	}
	if tests == 0 {
		return nil
	}
	// The spread of each side around its own median: a difference
	// between the algorithms is not noise.
	var sum float64
	var arms int
	for _, alg := range a.Campaign.Algorithms {
		if xs := values(alg); len(xs) >= 2 {
			if cv := stats.CV(xs); !math.IsNaN(cv) {
				sum += cv * cv
				arms++
			}
		}
	}
	if arms == 0 {
		return nil
	}
	cv := math.Sqrt(sum / float64(arms))
	th := o.Alpha / float64(tests)
	d := stats.DetectableChange(stats.PowerSpec{N: n, CV: cv, Threshold: th, MinEffect: o.MinEffect,
		Confidence: o.Confidence, Power: PowerLevel, Seed: seed})
	return &Power{Metric: m.Key, N: n, CV: Num(cv), Tests: tests, Threshold: Num(th), Detectable: Num(d), Level: PowerLevel}
}

// sentence says what the reps can detect, for the conclusion.
func (p *Power) sentence() string {
	m := metricByKey(p.Metric)
	head := fmt.Sprintf("**What these runs can detect:** with %d valid runs per side, a run-to-run spread of the %s of %.1f%% (coefficient of variation, measured here) and the Holm threshold p < %s",
		p.N, m.Label, 100*float64(p.CV), fmtP(float64(p.Threshold)))
	d := float64(p.Detectable)
	if math.IsInf(d, 1) || math.IsNaN(d) {
		return head + fmt.Sprintf(", no change up to %s is named reliably: add reps (see docs/ab.md).", fmtEffect(stats.MaxDetectable))
	}
	return head + fmt.Sprintf(", a change of %s or more is named in %.0f%% of campaigns; a smaller one can go unnamed, so no verdict means equal within about %s.",
		fmtChange(d), 100*p.Level, fmtChange(d))
}

func powerSentence(a *Analysis) string {
	if a.Power == nil {
		return ""
	}
	return a.Power.sentence()
}

// fmtChange prints a detectable change rounded up to half a percent: a
// simulated figure has no more precision than that.
func fmtChange(d float64) string {
	if math.IsInf(d, 1) || math.IsNaN(d) {
		return "more than " + fmtEffect(stats.MaxDetectable)
	}
	return fmtEffect(math.Ceil(d*200) / 200)
}
