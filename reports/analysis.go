package reports

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/ingress/adminapi"
	"github.com/prequalbench/prequalbench/loadbalancer"
	"github.com/prequalbench/prequalbench/scenario"
	"github.com/prequalbench/prequalbench/stats"
)

// Num is a float64 that encodes NaN and ±Inf as JSON null.
type Num float64

// MarshalJSON implements json.Marshaler.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

var _ json.Marshaler = Num(0)

// metric is one per-run number the report summarises.
type metric struct {
	Key, Label, Unit string
	// LowerBetter is true for latencies and the error rate.
	LowerBetter bool
	// Tested metrics get a verdict against the reference (and count in the
	// Holm family); the others are shown beside them.
	Tested bool
	get    func(runMetrics) float64
	// floor > 0 compares the metric as a rate: by the difference of
	// medians against this absolute floor, not by their ratio.
	floor float64
}

// runMetrics are the headline numbers of one run.
type runMetrics struct {
	Goodput, Throughput, ErrorRate float64
	P50, P99, P999                 float64 // success latency (v2), every answer (v1)
	PessP99, PessP999              float64 // every request, failures at the timeout (v2)
}

// orNaN returns v, or NaN when the percentile block p covers no request
// (the writer had nothing to record), so an empty block never reads as 0 ms.
func orNaN(p artifacts.Percentiles, v float64) float64 {
	if p.Count == 0 {
		return math.NaN()
	}
	return v
}

// metricsV2 are the headline of schema v2: goodput, error rate, success
// latency, and the pessimistic view beside them (not tested: it repeats
// the error rate at the timeout).
var metricsV2 = []metric{
	{"goodput_rps", "goodput", "req/s", false, true, func(m runMetrics) float64 { return m.Goodput }, 0},
	{"error_rate", "error rate", "%", true, true, func(m runMetrics) float64 { return m.ErrorRate }, errorRateFloor},
	{"p50_ms", "p50", "ms", true, true, func(m runMetrics) float64 { return m.P50 }, 0},
	{"p99_ms", "p99", "ms", true, true, func(m runMetrics) float64 { return m.P99 }, 0},
	{"p999_ms", "p99.9", "ms", true, true, func(m runMetrics) float64 { return m.P999 }, 0},
	{"pessimistic_p99_ms", "pessimistic p99", "ms", true, false, func(m runMetrics) float64 { return m.PessP99 }, 0},
	{"pessimistic_p999_ms", "pessimistic p99.9", "ms", true, false, func(m runMetrics) float64 { return m.PessP999 }, 0},
}

// metricsV1 are what schema v1 artifacts hold: throughput of in-window
// completions and latency of every answer, errors included.
var metricsV1 = []metric{
	{"throughput_rps", "throughput", "req/s", false, true, func(m runMetrics) float64 { return m.Throughput }, 0},
	{"error_rate", "error rate", "%", true, true, func(m runMetrics) float64 { return m.ErrorRate }, errorRateFloor},
	{"p50_ms", "p50", "ms", true, true, func(m runMetrics) float64 { return m.P50 }, 0},
	{"p99_ms", "p99", "ms", true, true, func(m runMetrics) float64 { return m.P99 }, 0},
	{"p999_ms", "p99.9", "ms", true, true, func(m runMetrics) float64 { return m.P999 }, 0},
}

// metricsOf returns the metrics the dataset's schema supports.
func metricsOf(ds *dataset) []metric {
	if ds.v2() {
		return metricsV2
	}
	return metricsV1
}

func metricByKey(key string) metric {
	for _, ms := range [][]metric{metricsV2, metricsV1} {
		for _, m := range ms {
			if m.Key == key {
				return m
			}
		}
	}
	panic("reports: unknown metric " + key)
}

// measure computes a run's headline numbers from its histogram and run.json.
func measure(r *runData) runMetrics {
	ms := func(q float64) float64 { return artifacts.Millis(r.Hist.ValueAtQuantile(q)) }
	l := r.Run.Load
	m := runMetrics{P50: ms(50), P99: ms(99), P999: ms(99.9), Throughput: l.AchievedRate, Goodput: l.Goodput,
		PessP99: orNaN(l.Pessimistic, l.Pessimistic.P99), PessP999: orNaN(l.Pessimistic, l.Pessimistic.P999), ErrorRate: l.ErrorRate}
	if l.ErrorRate == 0 && l.Sent > 0 {
		m.ErrorRate = float64(l.Errors) / float64(l.Sent) // v1 has no error_rate field
	}
	if r.Hist.TotalCount() == 0 {
		// No success, no success latency: an empty histogram reads 0 ms,
		// the best latency there is, for a run that failed every request.
		m.P50, m.P99, m.P999 = math.NaN(), math.NaN(), math.NaN()
	}
	return m
}

// pooledErrorRate is the failures over the requests sent, pooled across
// the runs. A median of per-run rates would hide a policy that sheds in
// a minority of its runs (0 in 4 of 6, 0.9% in 2: median 0).
func pooledErrorRate(runs []*runData) float64 {
	var errs, sent uint64
	var sum float64
	for _, r := range runs {
		errs += r.Run.Load.Errors
		sent += r.Run.Load.Sent
		sum += measure(r).ErrorRate
	}
	switch {
	case sent > 0:
		return float64(errs) / float64(sent)
	case len(runs) > 0:
		return sum / float64(len(runs)) // no request counts: the mean rate
	}
	return math.NaN()
}

// counted reports whether a run enters the headline and the comparisons:
// it finished, and (schema v2) it judged its own measurement valid.
func counted(ds *dataset, r *runData) bool {
	return r.ok() && (!ds.v2() || r.Run.Validity.Valid)
}

// Analysis is the aggregated content of a report, printed by -o json.
type Analysis struct {
	Campaign    CampaignInfo      `json:"campaign"`
	Algorithms  []AlgorithmResult `json:"algorithms"`
	Comparisons []Comparison      `json:"comparisons"`
	// NotCompared lists the algorithms with too few valid runs (on their
	// side or the reference's) to be compared at all.
	NotCompared []NotCompared  `json:"not_compared"`
	Shares      []ShareResult  `json:"shares"`
	Health      []HealthResult `json:"health"`
	Warnings    []string       `json:"warnings"`
	Runs        []RunRow       `json:"runs"`
	// Power is what the reps can detect on the primary metric (nil for
	// a rate or without comparisons).
	Power *Power `json:"power,omitempty"`
	// Sweeps are the campaign's swept parameters, if any.
	Sweeps []SweepResult `json:"sweeps,omitempty"`
	// Imported are the runs imported from another tool (k6), outside the
	// plan and every statistic above, with their own numbers.
	Imported []ImportedRun `json:"imported,omitempty"`
}

// ImportedRun is a run imported from another tool's summary (k6): its
// numbers are that tool's, never part of the statistics.
type ImportedRun struct {
	Dir string `json:"dir"`
	// Label is what ran under the imported load (an algorithm name or any
	// label given to the import).
	Label string `json:"label"`
	// From is the tool the numbers come from (artifacts.ImportedK6).
	From      string  `json:"from"`
	Model     string  `json:"model"`
	Users     int     `json:"users,omitempty"`
	WindowSec float64 `json:"window_s"`
	Sent      uint64  `json:"sent"`
	Errors    uint64  `json:"errors"`
	Dropped   uint64  `json:"dropped"`
	Goodput   Num     `json:"goodput_rps"`
	ErrorRate Num     `json:"error_rate"`
	// Percentiles of successes and of every request (k6's).
	P50     Num `json:"p50_ms"`
	P90     Num `json:"p90_ms"`
	P99     Num `json:"p99_ms"`
	P999    Num `json:"p999_ms"`
	Max     Num `json:"max_ms"`
	PessP99 Num `json:"all_p99_ms"`
	// Reasons are the run's validity reasons: what the import cannot
	// carry.
	Reasons []string `json:"reasons"`
}

// importedRuns lists ds's imported runs, by directory.
func importedRuns(ds *dataset) []ImportedRun {
	var out []ImportedRun
	for _, r := range ds.Imported {
		l := r.Run.Load
		ir := ImportedRun{
			Dir: r.Dir, Label: r.Run.Algorithm, From: r.Run.Imported, Model: l.Model, Users: l.Users,
			WindowSec: l.Duration.Seconds(), Sent: l.Sent, Errors: l.Errors, Dropped: l.Dropped,
			Goodput: Num(l.Goodput), ErrorRate: Num(l.ErrorRate),
			P50: Num(orNaN(l.Success, l.Success.P50)), P90: Num(orNaN(l.Success, l.Success.P90)),
			P99: Num(orNaN(l.Success, l.Success.P99)), P999: Num(orNaN(l.Success, l.Success.P999)),
			Max: Num(orNaN(l.Success, l.Success.Max)), PessP99: Num(orNaN(l.Pessimistic, l.Pessimistic.P99)),
			Reasons: slices.Clone(r.Run.Validity.Reasons),
		}
		if ir.Reasons == nil {
			ir.Reasons = []string{}
		}
		if l.Duration <= 0 {
			ir.Goodput = Num(math.NaN())
		}
		out = append(out, ir)
	}
	return out
}

// CampaignInfo identifies the campaign and the statistics settings.
type CampaignInfo struct {
	ID         string   `json:"id"`
	Scenario   string   `json:"scenario"`
	Reference  string   `json:"reference"`
	Algorithms []string `json:"algorithms"`
	Reps       int      `json:"reps"`
	Seed       uint64   `json:"seed"`
	Confidence float64  `json:"confidence"`
	Alpha      float64  `json:"alpha"`
	Resamples  int      `json:"bootstrap_resamples"`
	MinEffect  float64  `json:"min_effect"`
	// PrimaryMetric is the metric verdicts are made on ("none": no
	// verdicts); ErrorRateFloor and GoodputShareFloor the absolute
	// floors of the rates.
	PrimaryMetric     string  `json:"primary_metric"`
	ErrorRateFloor    float64 `json:"error_rate_floor"`
	GoodputShareFloor float64 `json:"goodput_share_floor"`
	// SchemaVersion of the artifacts (1 when campaign.json has none).
	SchemaVersion int `json:"schema_version"`
	// Builds of an A/B campaign, baseline first (see artifacts.Build).
	Builds []artifacts.Build `json:"builds,omitempty"`
}

// AlgorithmResult summarises one algorithm's successful runs.
type AlgorithmResult struct {
	Algorithm string `json:"algorithm"`
	// Runs counts the runs in the statistics: finished and valid.
	Runs    int            `json:"runs"`
	Failed  int            `json:"failed"`
	Invalid int            `json:"invalid"`
	Metrics []MetricResult `json:"metrics"`
}

// MetricResult is a median across runs with its confidence interval.
type MetricResult struct {
	Metric string `json:"metric"`
	Unit   string `json:"unit"`
	N      int    `json:"n"`
	Median Num    `json:"median"`
	Lo     Num    `json:"lo"`
	Hi     Num    `json:"hi"`
	// Range is true when Lo–Hi is the min–max range (too few runs for a
	// finite confidence interval).
	Range    bool  `json:"range"`
	Coverage Num   `json:"coverage"`
	Values   []Num `json:"values"`
}

// Comparison is one algorithm against the reference on one metric.
type Comparison struct {
	Algorithm string `json:"algorithm"`
	Reference string `json:"reference"`
	Metric    string `json:"metric"`
	// Ratio is median(reference) / median(algorithm), Lo–Hi its bootstrap CI.
	Ratio Num `json:"ratio"`
	Lo    Num `json:"lo"`
	Hi    Num `json:"hi"`
	P     Num `json:"p"`
	// Exact is true when P is from the exact U distribution.
	Exact bool `json:"exact"`
	// Identical is true when every run of both sides gave the same value:
	// such a test cannot reject and is left out of the Holm family.
	Identical bool `json:"identical"`
	// AdjustedP is P after the Holm correction over every comparison of
	// the report; Significant means AdjustedP < alpha.
	AdjustedP   Num  `json:"adjusted_p"`
	Significant bool `json:"significant"`
	// MinP is the smallest p these run counts can give.
	MinP Num `json:"min_p"`
	// Small marks a bootstrap interval over fewer than 5 runs on a side
	// (printed †): it covers less than its nominal confidence.
	Small bool `json:"small_sample"`
	// Outcome is one of the Outcome* constants; Winner names the
	// algorithm with the better median when Outcome is OutcomeBetter.
	Outcome string `json:"outcome"`
	Winner  string `json:"winner,omitempty"`
	Verdict string `json:"verdict"`
	// Primary marks the comparison on the report's primary metric: only
	// these are in the Holm family and get a verdict.
	Primary bool `json:"primary"`
	// Floor is the absolute floor of a rate (0 for metrics compared by
	// ratio); Diff is median(reference) - median(other), DiffLo–DiffHi its
	// bootstrap interval. For goodput with an open-loop target the values
	// are shares of the target.
	Floor  float64 `json:"absolute_floor,omitempty"`
	Diff   Num     `json:"difference"`
	DiffLo Num     `json:"difference_lo"`
	DiffHi Num     `json:"difference_hi"`
	// RefErrorRate and OtherErrorRate are the sides' pooled error rates
	// (failures over requests sent, across the valid runs): a latency or
	// goodput verdict never goes to the side that fails more.
	RefErrorRate   Num `json:"reference_error_rate"`
	OtherErrorRate Num `json:"other_error_rate"`
	// NR and NA count the reference's and the other algorithm's runs.
	NR int `json:"n_reference"`
	NA int `json:"n_other"`
	// Medians of the two sides.
	RefMedian   Num `json:"reference_median"`
	OtherMedian Num `json:"other_median"`
}

// ShareResult is one algorithm's selection shares by backend group.
type ShareResult struct {
	Algorithm string         `json:"algorithm"`
	Runs      int            `json:"runs"`
	Groups    []GroupShare   `json:"groups"`
	Backends  []BackendShare `json:"backends"`
}

// GroupShare is a backend group's share of picks and the spread inside it;
// every number is the median across runs, ShareMin–ShareMax the range.
type GroupShare struct {
	Group    string `json:"group"`
	Replicas int    `json:"replicas"`
	Share    Num    `json:"share"`
	ShareMin Num    `json:"share_min"`
	ShareMax Num    `json:"share_max"`
	// MaxMin is the largest over the smallest per-replica pick count (Inf
	// when a replica got none); CV the coefficient of variation of picks.
	MaxMin Num `json:"max_over_min"`
	CV     Num `json:"cv"`
}

// BackendShare is one backend's share of picks (median across runs).
type BackendShare struct {
	Address string `json:"address"`
	Group   string `json:"group"`
	Share   Num    `json:"share"`
	Picks   uint64 `json:"picks_total"`
}

// HealthResult sums an algorithm's policy counters over its runs.
type HealthResult struct {
	Algorithm      string    `json:"algorithm"`
	Runs           int       `json:"runs"`
	Requests       uint64    `json:"requests"`
	NoEndpoint     uint64    `json:"no_endpoint"`
	UpstreamErrors uint64    `json:"upstream_errors"`
	Picks          uint64    `json:"picks"`
	Fallbacks      uint64    `json:"fallbacks"`
	HotPicks       uint64    `json:"hot_picks"`
	ColdPicks      uint64    `json:"cold_picks"`
	ProbesPlanned  uint64    `json:"probes_planned"`
	ProbeOutcomes  []Counter `json:"probe_outcomes"`
	PoolRemovals   []Counter `json:"pool_removals"`
	// PoolSize is the median across runs of the pool size at the end of the
	// window, summed over routes and averaged over ingress replicas.
	PoolSize Num `json:"pool_size"`
	// ProbeQueueDepth is the largest queue depth seen at the end of a window.
	ProbeQueueDepth int `json:"probe_queue_depth_max"`
	// ReuseBudgetMin and ReuseBudgetMax bound Prequal's reuse budget
	// (b_reuse) in force at the end of the windows, over routes, replicas
	// and runs: which regime of Eq. 1 the runs were in. Zero for policies
	// without one.
	ReuseBudgetMin float64 `json:"reuse_budget_min"`
	ReuseBudgetMax float64 `json:"reuse_budget_max"`
	// StaleAnswers counts probe answers dropped because a newer answer from
	// the same replica was already in the pool.
	StaleAnswers uint64 `json:"stale_answers"`
	// ProbesCoalesced counts probes owed but not sent because every other
	// target had a probe in flight; ReusedPicks the picks made on a probe
	// already used (reuse in practice, under the budget).
	ProbesCoalesced uint64 `json:"probes_coalesced,omitempty"`
	ReusedPicks     uint64 `json:"reused_picks,omitempty"`
	// SlowHeld counts unknown-latency answers that slow memory answered
	// with a remembered, far slower latency: explorations withheld.
	SlowHeld uint64 `json:"slow_held,omitempty"`
}

// Counter is one named count.
type Counter struct {
	Name  string `json:"name"`
	Count uint64 `json:"count"`
}

// RunRow is one line of the per-run appendix.
type RunRow struct {
	Index         int    `json:"index"`
	Rep           int    `json:"rep"`
	Algorithm     string `json:"algorithm"`
	Dir           string `json:"dir"`
	Status        string `json:"status"`
	Error         string `json:"error,omitempty"`
	ResetVerified bool   `json:"reset_verified"`
	// Valid is the run's own validity verdict (always true for schema v1,
	// which has none); Reasons say why not.
	Valid   bool     `json:"valid"`
	Reasons []string `json:"reasons,omitempty"`
	// HostCheck is the run's host-headroom check (artifacts.HostCheck*;
	// empty when the artifacts predate it); Saturation says how much of
	// the host the campaign's own processes used when they exhausted it.
	HostCheck  string `json:"host_check,omitempty"`
	Saturation string `json:"saturation,omitempty"`
	// HostCheckNote is what the host check sampled, or why it did not
	// run (artifacts.Validity.HostCheckNote).
	HostCheckNote string `json:"host_check_note,omitempty"`
	Goodput       Num    `json:"goodput_rps"`
	Throughput    Num    `json:"throughput_rps"`
	ErrorRate     Num    `json:"error_rate"`
	P50           Num    `json:"p50_ms"`
	P99           Num    `json:"p99_ms"`
	P999          Num    `json:"p999_ms"`
	PessP99       Num    `json:"pessimistic_p99_ms"`
	SendLagP99    Num    `json:"send_lag_p99_ms"`
	ConnWait99    Num    `json:"conn_wait_p99_ms"`
	// ConnCapBound counts requests the connection cap held back.
	ConnCapBound uint64  `json:"conn_cap_bound"`
	TargetRate   float64 `json:"target_rate"`
	Sent         uint64  `json:"sent"`
	Errors       uint64  `json:"errors"`
	LateSends    uint64  `json:"late_sends"`
}

// NotCompared says why an algorithm was not compared with the reference.
type NotCompared struct {
	Algorithm string `json:"algorithm"`
	Reason    string `json:"reason"`
}

// minRunsToCompare is the fewest valid runs per side for a comparison: a
// median of one run says nothing about the spread.
const minRunsToCompare = 2

// analyze turns a dataset into the report's numbers. It is a pure function
// of the dataset and the options.
func analyze(ds *dataset, o Options) *Analysis {
	c := &ds.Campaign
	a := &Analysis{
		Campaign: CampaignInfo{
			ID: c.ID, Scenario: c.Scenario, Reference: o.reference(c), Algorithms: algorithms(ds),
			Reps: c.Reps, Seed: c.Seed, Confidence: o.Confidence, Alpha: o.Alpha, Resamples: o.Resamples,
			MinEffect: o.MinEffect, SchemaVersion: ds.schema(), PrimaryMetric: primaryOf(ds),
			ErrorRateFloor: errorRateFloor, GoodputShareFloor: goodputShareFloor, Builds: c.Builds,
		},
		Comparisons: []Comparison{}, NotCompared: []NotCompared{}, Shares: []ShareResult{}, Health: []HealthResult{},
		Warnings: slices.Clone(ds.Warnings),
	}
	if a.Warnings == nil {
		a.Warnings = []string{}
	}
	for _, w := range c.Warnings { // the scenario's own, recorded at the start
		a.Warnings = append(a.Warnings, "scenario: "+w)
	}
	if c.Finished.IsZero() {
		a.Warnings = append(a.Warnings, "the campaign has no finish time: it is unfinished or was interrupted")
	}
	if l := c.Environment.Load; l != nil {
		for _, w := range l.Warnings {
			a.Warnings = append(a.Warnings, "load path: "+w)
		}
	}
	var issues []runIssue
	byAlg := map[string][]*runData{}
	perRun := map[*runData]runMetrics{}
	for _, r := range ds.Runs {
		issues = append(issues, runIssues(ds, r)...)
		l := r.Run.Load
		row := RunRow{
			Index: r.Run.Index, Rep: r.Run.Rep, Algorithm: r.Run.Algorithm, Dir: r.Dir, Status: r.Run.Status,
			Error: r.Run.Error, ResetVerified: r.Run.ResetVerified, TargetRate: l.TargetRate,
			Sent: l.Sent, Errors: l.Errors, LateSends: l.LateSends, Valid: !ds.v2() || r.Run.Validity.Valid,
			Reasons: r.Run.Validity.Reasons, ConnCapBound: l.ConnCapBound,
			HostCheck: r.Run.Validity.HostCheck, Saturation: r.Run.Validity.Saturation, HostCheckNote: r.Run.Validity.HostCheckNote,
		}
		nan := Num(math.NaN())
		row.P50, row.P99, row.P999, row.PessP99, row.Goodput, row.Throughput, row.ErrorRate = nan, nan, nan, nan, nan, nan, nan
		row.SendLagP99, row.ConnWait99 = nan, nan
		if r.ok() {
			m := measure(r)
			row.P50, row.P99, row.P999 = Num(m.P50), Num(m.P99), Num(m.P999)
			row.Throughput, row.ErrorRate = Num(m.Throughput), Num(m.ErrorRate)
			if ds.v2() {
				row.Goodput, row.PessP99 = Num(m.Goodput), Num(m.PessP99)
				row.SendLagP99, row.ConnWait99 = Num(orNaN(l.SendLag, l.SendLag.P99)), Num(orNaN(l.ConnWait, l.ConnWait.P99))
			}
			if counted(ds, r) {
				perRun[r] = m
				byAlg[r.Run.Algorithm] = append(byAlg[r.Run.Algorithm], r)
			}
		}
		a.Runs = append(a.Runs, row)
	}
	if a.Runs == nil {
		a.Runs = []RunRow{}
	}
	values := func(alg string, m metric) []float64 {
		var xs []float64
		for _, r := range byAlg[alg] {
			// A run without the figure (an empty percentile block) adds
			// nothing rather than a NaN the order statistics cannot place.
			if v := m.get(perRun[r]); !math.IsNaN(v) {
				xs = append(xs, v)
			}
		}
		return xs
	}
	minCI := stats.MinSamplesForCI(o.Confidence)
	ms := metricsOf(ds)
	for _, alg := range a.Campaign.Algorithms {
		res := AlgorithmResult{Algorithm: alg, Runs: len(byAlg[alg])}
		for _, r := range ds.Runs {
			switch {
			case r.Run.Algorithm != alg:
			case !r.ok():
				res.Failed++
			case !counted(ds, r):
				res.Invalid++
			}
		}
		for _, m := range ms {
			xs := values(alg, m)
			s := stats.Summarize(xs, o.Confidence)
			mr := MetricResult{Metric: m.Key, Unit: m.Unit, N: s.N, Median: Num(s.Median), Lo: Num(s.Lo), Hi: Num(s.Hi),
				Range: s.Range, Coverage: Num(s.Coverage), Values: []Num{}}
			for _, x := range xs {
				mr.Values = append(mr.Values, Num(x))
			}
			res.Metrics = append(res.Metrics, mr)
		}
		a.Algorithms = append(a.Algorithms, res)
		if n, m := len(byAlg[alg]), len(values(alg, metricByKey("p50_ms"))); m < n {
			// Said, not silent: a run that failed every request has no
			// success latency, so those cells rest on fewer runs.
			a.Warnings = append(a.Warnings, fmt.Sprintf("%d of %s's %d valid runs had no success: its success-latency cells rest on %d run(s); goodput, error rate and the pessimistic view count them",
				n-m, alg, n, m))
		}
		switch n := len(byAlg[alg]); {
		case n == 0:
			issues = append(issues, runIssue{issueNoValidRun, alg, ""})
		case n < minCI:
			issues = append(issues, runIssue{issueFewForCI, alg, fmt.Sprintf("%d of the %d needed", n, minCI)})
		}
	}
	ref := a.Campaign.Reference
	if slices.Contains(a.Campaign.Algorithms, ref) {
		for _, alg := range a.Campaign.Algorithms {
			if alg == ref {
				continue
			}
			if nr, na := len(byAlg[ref]), len(byAlg[alg]); nr < minRunsToCompare || na < minRunsToCompare {
				a.NotCompared = append(a.NotCompared, NotCompared{alg, fmt.Sprintf("%s vs %s could not be made: %s, %s; a comparison needs at least %d valid runs of each",
					ref, alg, runCount(a, ref), runCount(a, alg), minRunsToCompare)})
				continue
			}
			for _, m := range ms {
				if !m.Tested && m.Key != a.Campaign.PrimaryMetric {
					continue
				}
				rv, av := values(ref, m), values(alg, m)
				if t := targetRate(ds); m.Key == "goodput_rps" && t > 0 {
					// Open loop: goodput as a share of the target, a rate
					// with an absolute floor.
					m.floor, rv, av = goodputShareFloor, shares(rv, t), shares(av, t)
				}
				cmp := compare(ref, alg, m, rv, av, c.Seed, o)
				cmp.Primary = m.Key == a.Campaign.PrimaryMetric
				cmp.RefErrorRate, cmp.OtherErrorRate = Num(pooledErrorRate(byAlg[ref])), Num(pooledErrorRate(byAlg[alg]))
				a.Comparisons = append(a.Comparisons, cmp)
			}
		}
		pairs, family := decide(a.Comparisons, o)
		issues = append(issues, pairs...)
		if a.Campaign.PrimaryMetric != scenario.PrimaryNone {
			primary := metricByKey(a.Campaign.PrimaryMetric)
			a.Power = powerOf(a, primary, func(alg string) []float64 { return values(alg, primary) }, c.Seed, o)
		}
		if family != "" {
			a.Warnings = append(a.Warnings, family)
		}
	} else {
		a.Warnings = append(a.Warnings, fmt.Sprintf("reference algorithm %q did not run in this campaign: no comparisons", ref))
	}
	groups := groupOf(c)
	for _, alg := range a.Campaign.Algorithms {
		sh, h, more := selection(alg, byAlg[alg], groups, c)
		issues = append(issues, more...)
		if sh != nil {
			a.Shares = append(a.Shares, *sh)
			a.Health = append(a.Health, *h)
		}
	}
	a.Warnings = append(a.Warnings, groupIssues(issues)...)
	var sweepWarnings []string
	a.Sweeps, sweepWarnings = sweepResults(ds, a)
	a.Warnings = append(a.Warnings, sweepWarnings...)
	a.Imported = importedRuns(ds)
	return a
}

// primaryOf is the metric the dataset's verdicts are made on: the
// campaign's declared one, else the pessimistic p99 (schema v2) or the p99
// of every answer, failures included (schema v1, which has no other).
func primaryOf(ds *dataset) string {
	p := ds.Campaign.PrimaryMetric
	if p == scenario.PrimaryNone {
		return p
	}
	for _, m := range metricsOf(ds) {
		if m.Key == p {
			return p
		}
	}
	if ds.v2() {
		return scenario.DefaultPrimaryMetric
	}
	return "p99_ms"
}

// shares divides each goodput by the target rate.
func shares(xs []float64, target float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x / target
	}
	return out
}

// runCount describes an algorithm's runs: "prequal has 3 valid runs" or
// "prequal has 0 valid runs (3 invalid, 1 failed)".
func runCount(a *Analysis, alg string) string {
	for _, r := range a.Algorithms {
		if r.Algorithm != alg {
			continue
		}
		s := fmt.Sprintf("%s has %d valid run(s)", alg, r.Runs)
		var left []string
		if r.Invalid > 0 {
			left = append(left, fmt.Sprintf("%d invalid", r.Invalid))
		}
		if r.Failed > 0 {
			left = append(left, fmt.Sprintf("%d failed", r.Failed))
		}
		if len(left) > 0 {
			s += " (" + strings.Join(left, ", ") + ")"
		}
		return s
	}
	return alg + " did not run"
}

// algorithms lists the campaign's algorithms, then any that ran but are
// not listed, in order of first run.
func algorithms(ds *dataset) []string {
	algs := slices.Clone(ds.Campaign.Algorithms)
	for _, r := range ds.Runs {
		if !slices.Contains(algs, r.Run.Algorithm) {
			algs = append(algs, r.Run.Algorithm)
		}
	}
	return algs
}

// groupOf maps backend address to group.
func groupOf(c *artifacts.Campaign) map[string]string {
	g := map[string]string{}
	for _, b := range c.Backends {
		g[b.Address] = b.Group
	}
	return g
}

// groupOrder lists groups in the order of the campaign's backend list, with
// "unknown" last.
func groupOrder(c *artifacts.Campaign, seen map[string]bool) []string {
	var out []string
	for _, b := range c.Backends {
		if seen[b.Group] && !slices.Contains(out, b.Group) {
			out = append(out, b.Group)
		}
	}
	var rest []string
	for g := range seen {
		if !slices.Contains(out, g) {
			rest = append(rest, g)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

const unknownGroup = "unknown"

// windowDelta is the difference of the counters across one run's window,
// summed over ingress replicas and routes.
type windowDelta struct {
	picks                        map[string]uint64 // per endpoint
	requests, noEndpoint, upErrs uint64
	total, fallbacks, hot, cold  uint64
	planned                      uint64
	outcomes, removals           map[string]uint64
	poolSize                     float64
	queueDepth                   int
	counterReset                 bool
	stale, coalesced, reused     uint64
	slowHeld                     uint64
	// reuseMin and reuseMax bound the reuse budget at the window's end
	// (both 0 when no route reports one).
	reuseMin, reuseMax float64
}

func sub(after, before uint64, reset *bool) uint64 {
	if after < before {
		*reset = true
		return after
	}
	return after - before
}

// delta computes a run's window counters from its snapshots.
func delta(before, after []adminapi.State) windowDelta {
	d := windowDelta{picks: map[string]uint64{}, outcomes: map[string]uint64{}, removals: map[string]uint64{}}
	var pool float64
	for i, st := range after {
		var prev adminapi.State
		if i < len(before) {
			prev = before[i]
		}
		prevRoutes := map[string]adminapi.RouteState{}
		for _, r := range prev.Routes {
			prevRoutes[r.Key] = r
		}
		for _, r := range st.Routes {
			p := prevRoutes[r.Key]
			d.requests += sub(r.Requests, p.Requests, &d.counterReset)
			d.noEndpoint += sub(r.NoEndpoint, p.NoEndpoint, &d.counterReset)
			d.upErrs += sub(r.UpstreamErrors, p.UpstreamErrors, &d.counterReset)
			ps, as := p.Policy, r.Policy
			d.total += sub(as.Picks, ps.Picks, &d.counterReset)
			d.fallbacks += sub(as.Fallbacks, ps.Fallbacks, &d.counterReset)
			d.hot += sub(as.HotPicks, ps.HotPicks, &d.counterReset)
			d.cold += sub(as.ColdPicks, ps.ColdPicks, &d.counterReset)
			d.planned += sub(as.ProbesPlanned, ps.ProbesPlanned, &d.counterReset)
			d.stale += sub(as.StaleAnswers, ps.StaleAnswers, &d.counterReset)
			d.coalesced += sub(as.ProbesCoalesced, ps.ProbesCoalesced, &d.counterReset)
			d.reused += sub(as.ReusedPicks, ps.ReusedPicks, &d.counterReset)
			d.slowHeld += sub(as.SlowHeld, ps.SlowHeld, &d.counterReset)
			if b := as.ReuseBudget; b > 0 {
				if d.reuseMin == 0 || b < d.reuseMin {
					d.reuseMin = b
				}
				d.reuseMax = max(d.reuseMax, b)
			}
			for k, v := range as.ProbeOutcomes {
				d.outcomes[string(k)] += sub(v, ps.ProbeOutcomes[k], &d.counterReset)
			}
			for k, v := range as.PoolRemovals {
				d.removals[k] += sub(v, ps.PoolRemovals[k], &d.counterReset)
			}
			prevEP := map[string]uint64{}
			for _, e := range ps.Endpoints {
				prevEP[e.Address] += e.Picks
			}
			for _, e := range as.Endpoints {
				d.picks[e.Address] += sub(e.Picks, prevEP[e.Address], &d.counterReset)
			}
			pool += float64(as.PoolSize)
		}
		d.queueDepth = max(d.queueDepth, st.ProbeQueueDepth)
	}
	if len(after) > 0 {
		d.poolSize = pool / float64(len(after))
	}
	return d
}

// selection computes shares and health for one algorithm's runs.
func selection(alg string, runs []*runData, groups map[string]string, c *artifacts.Campaign) (*ShareResult, *HealthResult, []runIssue) {
	var warns []runIssue
	sh := &ShareResult{Algorithm: alg, Groups: []GroupShare{}, Backends: []BackendShare{}}
	h := &HealthResult{Algorithm: alg, ProbeOutcomes: []Counter{}, PoolRemovals: []Counter{}}
	outcomes, removals := map[string]uint64{}, map[string]uint64{}
	type groupRun struct{ share, maxMin, cv float64 }
	perGroup := map[string][]groupRun{}
	backendShares := map[string][]float64{}
	backendPicks := map[string]uint64{}
	replicas := map[string]map[string]bool{}
	var pools []float64
	for _, b := range c.Backends {
		if replicas[b.Group] == nil {
			replicas[b.Group] = map[string]bool{}
		}
		replicas[b.Group][b.Address] = true
	}
	for _, r := range runs {
		if r.Before == nil || r.After == nil {
			warns = append(warns, runIssue{issueNoSnapshots, r.Dir, ""})
			continue
		}
		d := delta(r.Before, r.After)
		if d.counterReset {
			warns = append(warns, runIssue{issueCounterReset, r.Dir, ""})
		}
		sh.Runs++
		h.Runs++
		h.Requests += d.requests
		h.NoEndpoint += d.noEndpoint
		h.UpstreamErrors += d.upErrs
		h.Picks += d.total
		h.Fallbacks += d.fallbacks
		h.HotPicks += d.hot
		h.ColdPicks += d.cold
		h.ProbesPlanned += d.planned
		h.StaleAnswers += d.stale
		h.ProbesCoalesced += d.coalesced
		h.ReusedPicks += d.reused
		h.SlowHeld += d.slowHeld
		if d.reuseMax > 0 {
			if h.ReuseBudgetMin == 0 || d.reuseMin < h.ReuseBudgetMin {
				h.ReuseBudgetMin = d.reuseMin
			}
			h.ReuseBudgetMax = max(h.ReuseBudgetMax, d.reuseMax)
		}
		for k, v := range d.outcomes {
			outcomes[k] += v
		}
		for k, v := range d.removals {
			removals[k] += v
		}
		pools = append(pools, d.poolSize)
		h.ProbeQueueDepth = max(h.ProbeQueueDepth, d.queueDepth)

		var total uint64
		byGroup := map[string][]float64{}
		for addr, n := range d.picks {
			total += n
			if _, ok := groups[addr]; !ok {
				if replicas[unknownGroup] == nil {
					replicas[unknownGroup] = map[string]bool{}
				}
				replicas[unknownGroup][addr] = true
			}
		}
		// Every known replica counts, including those never picked.
		for g, addrs := range replicas {
			for addr := range addrs {
				byGroup[g] = append(byGroup[g], float64(d.picks[addr]))
			}
		}
		for addr, n := range d.picks {
			backendPicks[addr] += n
		}
		if total == 0 {
			warns = append(warns, runIssue{issueNoPicks, r.Dir, ""})
			continue
		}
		for addr := range allAddresses(replicas) {
			backendShares[addr] = append(backendShares[addr], float64(d.picks[addr])/float64(total))
		}
		for g, xs := range byGroup {
			slices.Sort(xs)
			var sum float64
			for _, x := range xs {
				sum += x
			}
			mm := math.Inf(1)
			if xs[0] > 0 {
				mm = xs[len(xs)-1] / xs[0]
			} else if xs[len(xs)-1] == 0 {
				mm = math.NaN()
			}
			perGroup[g] = append(perGroup[g], groupRun{share: sum / float64(total), maxMin: mm, cv: stats.CV(xs)})
		}
	}
	if h.Runs == 0 {
		return nil, nil, warns
	}
	seen := map[string]bool{}
	for g := range replicas {
		seen[g] = true
	}
	for _, g := range groupOrder(c, seen) {
		grs := perGroup[g]
		var shares, mms, cvs []float64
		for _, gr := range grs {
			shares = append(shares, gr.share)
			if !math.IsNaN(gr.maxMin) {
				mms = append(mms, gr.maxMin)
			}
			if !math.IsNaN(gr.cv) {
				cvs = append(cvs, gr.cv)
			}
		}
		lo, hi := stats.MinMax(shares)
		sh.Groups = append(sh.Groups, GroupShare{Group: g, Replicas: len(replicas[g]), Share: Num(stats.Median(shares)),
			ShareMin: Num(lo), ShareMax: Num(hi), MaxMin: Num(stats.Median(mms)), CV: Num(stats.Median(cvs))})
	}
	addrs := sortedKeys(allAddresses(replicas))
	slices.SortStableFunc(addrs, func(x, y string) int {
		return slices.Index(groupOrder(c, seen), groupName(groups, x)) - slices.Index(groupOrder(c, seen), groupName(groups, y))
	})
	for _, addr := range addrs {
		sh.Backends = append(sh.Backends, BackendShare{Address: addr, Group: groupName(groups, addr),
			Share: Num(stats.Median(backendShares[addr])), Picks: backendPicks[addr]})
	}
	for _, o := range loadbalancer.ProbeOutcomes {
		h.ProbeOutcomes = append(h.ProbeOutcomes, Counter{string(o), outcomes[string(o)]})
		delete(outcomes, string(o))
	}
	for _, k := range sortedKeys(outcomes) {
		h.ProbeOutcomes = append(h.ProbeOutcomes, Counter{k, outcomes[k]})
	}
	for _, k := range sortedKeys(removals) {
		h.PoolRemovals = append(h.PoolRemovals, Counter{k, removals[k]})
	}
	h.PoolSize = Num(stats.Median(pools))
	return sh, h, warns
}

func groupName(groups map[string]string, addr string) string {
	if g, ok := groups[addr]; ok {
		return g
	}
	return unknownGroup
}

func allAddresses(replicas map[string]map[string]bool) map[string]bool {
	all := map[string]bool{}
	for _, addrs := range replicas {
		for a := range addrs {
			all[a] = true
		}
	}
	return all
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// statusSummary lists non-200 status codes in a stable order.
func statusSummary(codes map[string]uint64) string {
	var parts []string
	for _, k := range sortedKeys(codes) {
		if k == "200" {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s×%d", k, codes[k]))
	}
	if len(parts) == 0 {
		return ""
	}
	s := "; status "
	for i, p := range parts {
		if i > 0 {
			s += ", "
		}
		s += p
	}
	return s
}

// fmtDuration prints a duration without float noise.
func fmtDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	return d.String()
}
