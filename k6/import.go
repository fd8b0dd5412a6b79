package k6

import (
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/scenario"
)

// Approximations says, in every imported run, what k6's summary cannot
// carry that a run of this tool measures.
var Approximations = []string{
	"imported from k6: percentiles are k6's, over every sample of the window (its Trend keeps them all and interpolates), not this tool's HDR histograms: there are no histogram files",
	"imported from k6: latency is k6's http_req_duration, which leaves out DNS lookup, connection and TLS set-up (http_req_blocked, http_req_connecting): a request that waited for a new connection looks faster than here",
	"imported from k6: latency is timed from each request's actual send, not its intended one (coordinated omission not corrected)",
	"imported from k6: failures are not split by class (4xx, 5xx, timeout, connection) and there are no status codes",
	"imported from k6: no per-second series, send lag, connection wait or CPU; the pessimistic latency is k6's latency of every request, failures at their own duration rather than the timeout",
}

// Result is an import: the whole test's load accounting and, when it
// came from several runners, each runner's.
type Result struct {
	// Total sums the runners' counts exactly. With several runners it has
	// no percentiles: k6's summaries cannot be merged into the whole
	// test's, so each runner's stay in Runners.
	Total   artifacts.LoadResult
	Reasons []string
	// Runners are the runners' own accounting (counts, their share of the
	// rates, their percentiles), in the order given; empty for one runner.
	Runners []Runner
}

// Runner is one runner's part of an import of several.
type Runner struct {
	Name string
	Load artifacts.LoadResult
}

// part is what one summary says of the window.
type part struct {
	sent, failed uint64
	// dropped is the window's drops when droppedKnown, else the test's.
	dropped      uint64
	droppedKnown bool
	// warmupSent and warmupDropped are the requests outside the window
	// (the warmup's) and the drops k6 counted in the warmup executor.
	warmupSent, warmupDropped uint64
	// busy is the time the window's requests took in all
	// (http_req_duration{phase:window} avg × count), warmupBusy the
	// other requests' (http_req_duration's less the window's).
	busy, warmupBusy time.Duration
	success, all     artifacts.Percentiles
}

// maxCount bounds a count: float64 holds every integer up to 2^53.
const maxCount = 1 << 53

func windowPart(sum *Summary, ex []Executor) (part, error) {
	win := "{phase:" + PhaseWindow + "}"
	need := func(metric, field string) (float64, error) {
		m, ok := sum.Metrics[metric]
		if !ok {
			return 0, fmt.Errorf("k6: %s has no %s: was it written by the script `prequalbench k6 export` wrote, run with --summary-export or handleSummary?", sum.Name, metric)
		}
		v, ok := m[field]
		if !ok {
			return 0, fmt.Errorf("k6: %s: %s has no %q: the script's options (summaryTrendStats, thresholds) were changed; run it as exported", sum.Name, metric, field)
		}
		return v, nil
	}
	// count is a counter's or rate's number of samples: k6 writes whole
	// numbers from 0 up.
	count := func(metric, field string, required bool) (uint64, error) {
		v, err := need(metric, field)
		if err != nil {
			if required {
				return 0, err
			}
			return 0, nil
		}
		if math.IsNaN(v) || v < 0 || v > maxCount || v != math.Trunc(v) {
			return 0, fmt.Errorf("k6: %s: %s %s is %v: want a whole number of samples, from 0 to 2^53", sum.Name, metric, field, v)
		}
		return uint64(v), nil
	}
	var p part
	var err error
	if p.sent, err = count("http_reqs"+win, "count", true); err != nil {
		return p, err
	}
	if p.failed, err = count("http_req_failed"+win, "passes", true); err != nil {
		return p, err
	}
	fails, err := count("http_req_failed"+win, "fails", true)
	if err != nil {
		return p, err
	}
	if p.sent == 0 {
		return p, fmt.Errorf("k6: %s is empty: http_reqs%s count is 0, k6 sent no request in the measured window", sum.Name, win)
	}
	// k6 records every request once in http_reqs, http_req_failed and
	// http_req_duration, with the same tags: their counts agree in any
	// summary k6 wrote.
	if p.failed+fails != p.sent {
		return p, fmt.Errorf("k6: %s: http_req_failed%s passes + fails = %d, but http_reqs%s count = %d: k6 counts every request in both; not one run's summary",
			sum.Name, win, p.failed+fails, win, p.sent)
	}
	all, err := count("http_reqs", "count", true)
	if err != nil {
		return p, err
	}
	if all < p.sent {
		return p, fmt.Errorf("k6: %s: http_reqs count %d is less than http_reqs%s count %d: not one run's summary", sum.Name, all, win, p.sent)
	}
	p.warmupSent = all - p.sent
	if p.dropped, err = count("dropped_iterations", "count", false); err != nil {
		return p, err
	}
	if d := DroppedWarmup(ex); d == "" {
		p.droppedKnown = true // no warmup: every drop is the window's
	} else if _, ok := sum.Metrics[d]; ok {
		if p.warmupDropped, err = count(d, "count", true); err != nil {
			return p, err
		}
		if p.warmupDropped > p.dropped {
			return p, fmt.Errorf("k6: %s: %s count %d is more than dropped_iterations count %d: not one run's summary", sum.Name, d, p.warmupDropped, p.dropped)
		}
		p.dropped -= p.warmupDropped
		p.droppedKnown = true
	}
	for _, t := range []struct {
		metric string
		count  uint64
		into   *artifacts.Percentiles
	}{{"http_req_duration" + win, p.sent, &p.all}, {"http_req_duration{phase:" + PhaseWindow + ",expected_response:true}", fails, &p.success}} {
		for _, stat := range TrendStats {
			v, err := need(t.metric, stat)
			if err != nil {
				return p, err
			}
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return p, fmt.Errorf("k6: %s: %s %s is %v: want milliseconds from 0 up", sum.Name, t.metric, stat, v)
			}
		}
		if n := sum.Metrics[t.metric]["count"]; n != float64(t.count) {
			return p, fmt.Errorf("k6: %s: %s count is %v, but the window's requests of that kind (http_req_failed%s) are %d: k6 times every request it counts; not one run's summary",
				sum.Name, t.metric, n, win, t.count)
		}
		*t.into = trend(sum.Metrics[t.metric])
	}
	p.busy = time.Duration(p.all.Mean * float64(p.sent) * float64(time.Millisecond))
	for _, stat := range []string{"avg", "count"} {
		if v, err := need("http_req_duration", stat); err != nil {
			return p, err
		} else if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return p, fmt.Errorf("k6: %s: http_req_duration %s is %v: want a number from 0 up", sum.Name, stat, v)
		}
	}
	if n := sum.Metrics["http_req_duration"]["count"]; n != float64(all) {
		return p, fmt.Errorf("k6: %s: http_req_duration count is %v, but http_reqs count is %d: k6 times every request it counts; not one run's summary", sum.Name, n, all)
	}
	allBusy := time.Duration(sum.Metrics["http_req_duration"]["avg"] * float64(all) * float64(time.Millisecond))
	// The averages are rounded as written: allow a thousandth.
	if p.warmupBusy = allBusy - p.busy; p.warmupBusy < -allBusy/1000-time.Millisecond {
		return p, fmt.Errorf("k6: %s: http_req_duration avg × count (%v) is less than http_req_duration%s's (%v): the window's requests are some of all; not one run's summary",
			sum.Name, allBusy.Round(time.Millisecond), win, p.busy.Round(time.Millisecond))
	}
	p.warmupBusy = max(p.warmupBusy, 0)
	return p, nil
}

// checkTestRun refuses a summary whose test ran other than the
// scenario's warmup and window: k6 runs every executor its whole
// duration, then up to the graceful stop (the request timeout, no more
// than its longest iteration) for the last requests.
func checkTestRun(sum *Summary, s *scenario.Scenario, planned time.Duration) error {
	ran := sum.TestRun()
	if ran <= 0 {
		return fmt.Errorf("k6: %s: the test ran 0 s: every counter is 0 (and there is no state.testRunDurationMs), so the test's length cannot be read", sum.Name)
	}
	lo, hi := planned-planned/100, planned+tailOf(sum, s)+time.Second
	if ran >= lo && ran <= hi {
		return nil
	}
	why := "another scenario or --duration-scale"
	if ran < lo {
		why += ", or k6 was stopped early"
	}
	return fmt.Errorf("k6: %s: the test ran %v, %.2fx scenario %s's warmup and window (%v at the --duration-scale given): "+
		"the summary is of %s; import with --scenario and --duration-scale as exported",
		sum.Name, ran.Round(time.Millisecond), ran.Seconds()/planned.Seconds(), s.Name, planned, why)
}

// routeCounts adds sum's window requests to each of s's routes (the
// script tags each request with its route) into into, refusing a
// summary without a route of s or whose routes do not hold its window.
func routeCounts(sum *Summary, s *scenario.Scenario, sent uint64, into []uint64) error {
	var n uint64
	for i, r := range s.Workload.Routes {
		m := RouteMetric(r.Name)
		v, ok := sum.Metrics[m]["count"]
		if !ok {
			return fmt.Errorf("k6: %s has no %s: the summary is of another --scenario (its routes), or of a script exported before requests were counted by route", sum.Name, m)
		}
		if math.IsNaN(v) || v < 0 || v > maxCount || v != math.Trunc(v) {
			return fmt.Errorf("k6: %s: %s count is %v: want a whole number of samples, from 0 to 2^53", sum.Name, m, v)
		}
		into[i] += uint64(v)
		n += uint64(v)
	}
	if n != sent {
		return fmt.Errorf("k6: %s: the window's requests by route (%s...) add up to %d, but http_reqs{phase:%s} count is %d: "+
			"the summary is of another --scenario, with other routes", sum.Name, RouteMetric(s.Workload.Routes[0].Name), n, PhaseWindow, sent)
	}
	return nil
}

// checkRouteShares refuses a window whose routes' requests are not
// drawn by s's weights: the script picks each request's route at
// random by weight, so route i's count is binomial(sent, share i); a
// count more than 6 standard deviations (and 2 requests) off is
// another scenario's mix, not chance.
func checkRouteShares(s *scenario.Scenario, counts []uint64, sent uint64) error {
	var total float64
	for _, r := range s.Workload.Routes {
		total += r.Weight
	}
	n := float64(sent)
	for i, r := range s.Workload.Routes {
		p := r.Weight / total
		want, sd := n*p, math.Sqrt(n*p*(1-p))
		if got := float64(counts[i]); math.Abs(got-want) > 6*sd+2 {
			return fmt.Errorf("k6: %s counts %d of the window's %d requests (%.1f%%), but scenario %s weighs route %s at %.1f%%: "+
				"the summaries are of another --scenario, with other route weights",
				RouteMetric(r.Name), counts[i], sent, 100*got/n, s.Name, r.Name, 100*p)
		}
	}
	return nil
}

// tailOf bounds how long the last iterations ran past the end of the
// last executor: up to the graceful stop (the request timeout), and no
// longer than the test's longest iteration.
func tailOf(sum *Summary, s *scenario.Scenario) time.Duration {
	tail := s.Load.Timeout.Std()
	if it, ok := sum.Metrics["iteration_duration"]["max"]; ok && it >= 0 {
		tail = min(tail, time.Duration(it*float64(time.Millisecond)))
	}
	return tail
}

// checkClosedWindow refuses a closed loop's window whose requests took
// more time than its users could spend in it: each of the scenario's
// users runs one request per iteration, back to back, for the window and
// then finishes its last one (at most tail), so the window's requests
// take at most users × (window + tail) in all, and the warmup's at
// most users × (warmup + tail). A summary of a longer window or warmup
// (a smaller --duration-scale or another scenario given) or of more
// users takes more.
func checkClosedWindow(s *scenario.Scenario, total part, tail time.Duration) error {
	window := s.Load.MeasuredDuration()
	// The warmup's users likewise spend at most warmup + tail on its
	// requests: a summary of a longer warmup than s's took more.
	if w, perUser := warmupOf(s), total.warmupBusy/time.Duration(s.Load.Users); perUser > w+w/100+tail+10*time.Millisecond {
		return fmt.Errorf("k6: http_req_duration less http_req_duration{phase:window}: the warmup's %d requests took %v in all, %v for each of scenario %s's %d users, "+
			"more than its %v warmup (and the last requests' %v) holds: the summaries are of a longer warmup or more users; "+
			"import with --scenario and --duration-scale as exported",
			total.warmupSent, total.warmupBusy.Round(time.Millisecond), perUser.Round(time.Millisecond), s.Name, s.Load.Users, w, tail.Round(time.Millisecond))
	}
	perUser := total.busy / time.Duration(s.Load.Users)
	if limit := window + window/100 + tail + 10*time.Millisecond; perUser > limit {
		return fmt.Errorf("k6: http_req_duration{phase:window}: its %d requests took %v in all (avg × count), %v for each of scenario %s's %d users, "+
			"more than its %v window (and the last requests' %v) holds: the summaries are of a longer window or more users; "+
			"import with --scenario and --duration-scale as exported",
			total.sent, total.busy.Round(time.Millisecond), perUser.Round(time.Millisecond), s.Name, s.Load.Users, window, tail.Round(time.Millisecond))
	}
	return nil
}

// checkWarmupOffered refuses an open loop whose requests outside the
// window (sent and dropped in the warmup) are not the ones the warmup
// executor offers: a summary of another warmup, or of a scenario with
// none, has other windows than the one given.
func checkWarmupOffered(s *scenario.Scenario, ex []Executor, total part, runners int) error {
	offered := OfferedIn(ex, PhaseWarmup)
	tol := max(2, offered/100) + float64(2*runners)
	got := float64(total.warmupSent + total.warmupDropped)
	if got >= offered-tol && got <= offered+tol {
		return nil
	}
	return fmt.Errorf("k6: http_reqs counts %d requests outside the window (and dropped_iterations %d in the warmup) over %d summaries, but scenario %s's %v warmup offers %.0f: "+
		"the summaries are of another --scenario or --duration-scale",
		total.warmupSent, total.warmupDropped, runners, s.Name, warmupOf(s), offered)
}

// Offered is the number of iterations (one request each) the exported
// executors of the measured window start: k6's arrival-rate executors
// start exactly their rate's integral. Zero for a closed loop.
func Offered(ex []Executor) float64 { return OfferedIn(ex, PhaseWindow) }

// OfferedIn is the number of iterations the executors of a phase
// (PhaseWarmup or PhaseWindow) start.
func OfferedIn(ex []Executor, phase string) float64 {
	var n float64
	for _, e := range ex {
		if e.Tags["phase"] != phase {
			continue
		}
		unit, _ := time.ParseDuration(e.TimeUnit)
		d, _ := time.ParseDuration(e.Duration)
		switch e.Executor {
		case "constant-arrival-rate":
			n += float64(e.Rate) / unit.Seconds() * d.Seconds()
		case "ramping-arrival-rate":
			r := float64(e.StartRate)
			for _, st := range e.Stages {
				sd, _ := time.ParseDuration(st.Duration)
				n += (r + float64(st.Target)) / 2 / unit.Seconds() * sd.Seconds()
				r = float64(st.Target)
			}
		}
	}
	return n
}

// Import reads the summaries of one run of the script Export wrote for
// s (s scaled by the same --duration-scale): one summary, or one per
// runner when k6's --execution-segment split the load over several. s
// gives the measured window's length and the load model (open, or
// closed with its users). A summary that does not fit s is refused
// with the field that does not: a test that ran longer or shorter than
// s's warmup and window (another --duration-scale or scenario), an open
// loop whose window or warmup holds other than s's requests (another
// scenario, or every runner running the whole load), requests by route
// that do not follow s's route weights, a closed loop whose window's
// or warmup's requests took longer than its users could spend, counts k6
// could not have written, the same summary twice, an empty window, a 0 s
// test.
// The reasons list every approximation; the caller records them in the
// run's validity, which is therefore never valid.
func Import(s *scenario.Scenario, sums []*Summary) (Result, error) {
	if s == nil {
		return Result{}, errors.New("k6: --scenario is required: the summary does not say how long the measured window was")
	}
	if len(sums) == 0 {
		return Result{}, errors.New("k6: no summary to import")
	}
	ex := Executors(s)
	window := s.Load.MeasuredDuration()
	warmup := warmupOf(s)
	base := artifacts.LoadResult{Model: "open", Duration: window, StatusCodes: map[string]uint64{}}
	if s.Load.Users > 0 {
		base.Model, base.Users = "closed", s.Load.Users
	}
	var parts []part
	total := part{droppedKnown: true}
	tail := time.Duration(0)
	routes := make([]uint64, len(s.Workload.Routes))
	for i, sum := range sums {
		p, err := windowPart(sum, ex)
		if err != nil {
			return Result{}, err
		}
		if err := routeCounts(sum, s, p.sent, routes); err != nil {
			return Result{}, err
		}
		if err := checkTestRun(sum, s, warmup+window); err != nil {
			return Result{}, err
		}
		for j, q := range parts {
			// Two runners never time their requests identically: the
			// same summary given twice would pass for two halves.
			if q == p && sums[j].TestRun() == sum.TestRun() {
				return Result{}, fmt.Errorf("k6: %s and %s are the same run's summary (the same window counts, percentiles and test length): give each runner's summary once", sums[j].Name, sum.Name)
			}
		}
		parts = append(parts, p)
		total.sent += p.sent
		total.failed += p.failed
		total.dropped += p.dropped
		total.droppedKnown = total.droppedKnown && p.droppedKnown
		total.warmupSent += p.warmupSent
		total.warmupDropped += p.warmupDropped
		total.busy += p.busy
		total.warmupBusy += p.warmupBusy
		tail = max(tail, tailOf(sums[i], s))
	}
	if err := checkRouteShares(s, routes, total.sent); err != nil {
		return Result{}, err
	}
	if s.Load.Users == 0 {
		if err := checkOffered(s, ex, total, len(sums)); err != nil {
			return Result{}, err
		}
		if err := checkWarmupOffered(s, ex, total, len(sums)); err != nil {
			return Result{}, err
		}
	} else if err := checkClosedWindow(s, total, tail); err != nil {
		return Result{}, err
	}
	res := Result{Reasons: append([]string(nil), Approximations...)}
	if total.dropped > 0 {
		where := "in the window"
		if !total.droppedKnown {
			where = "over the whole test (warmup included: the script predates the warmup's own count)"
		}
		res.Reasons = append(res.Reasons, fmt.Sprintf("imported from k6: %d iterations dropped (k6 ran out of VUs), %s", total.dropped, where))
	}
	if len(sums) == 1 {
		total.success, total.all = parts[0].success, parts[0].all
		res.Total = account(base, total)
		return res, nil
	}
	res.Total = account(base, total)
	for i, p := range parts {
		res.Runners = append(res.Runners, Runner{Name: sums[i].Name, Load: account(base, p)})
	}
	return res, nil
}

// checkOffered refuses an open loop's window whose requests (sent and
// dropped) are not the ones the executors offer, within k6's rounding of
// each executor's schedule.
func checkOffered(s *scenario.Scenario, ex []Executor, total part, runners int) error {
	offered := Offered(ex)
	tol := max(2, offered/100) + float64(2*len(ex)*runners)
	got := float64(total.sent + total.dropped)
	lo, hi := got, got
	if !total.droppedKnown { // the drops may all be the warmup's
		lo = float64(total.sent)
	}
	if hi >= offered-tol && lo <= offered+tol {
		return nil
	}
	return fmt.Errorf("k6: http_reqs{phase:window} counts %d requests (and %d dropped) over %d summaries, %.2fx the %.0f scenario %s offers in its window: "+
		"the summaries are of another --scenario or --duration-scale, or of runners that each ran the whole load (split it with k6's --execution-segment)",
		total.sent, total.dropped, runners, got/offered, offered, s.Name)
}

// account turns a part into a LoadResult over base's window and model.
func account(base artifacts.LoadResult, p part) artifacts.LoadResult {
	l := base
	l.StatusCodes = map[string]uint64{}
	l.Sent, l.Completed, l.Errors, l.Dropped = p.sent, p.sent, p.failed, p.dropped
	l.Succeeded = p.sent - min(p.failed, p.sent)
	l.Success, l.Pessimistic = p.success, p.all
	secs := l.Duration.Seconds()
	l.AchievedRate, l.Goodput = float64(l.Sent)/secs, float64(l.Succeeded)/secs
	l.ErrorRate = float64(l.Errors) / float64(l.Sent)
	q := l.Success
	l.P50, l.P90, l.P99, l.P999, l.Max, l.Mean, l.Count = q.P50, q.P90, q.P99, q.P999, q.Max, q.Mean, q.Count
	return l
}

// trend maps a k6 trend (milliseconds) onto Percentiles.
func trend(m map[string]float64) artifacts.Percentiles {
	return artifacts.Percentiles{
		P50: m["med"], P90: m["p(90)"], P99: m["p(99)"], P999: m["p(99.9)"],
		Max: m["max"], Mean: m["avg"], Count: int64(m["count"]),
	}
}

// ResetDetail is an imported run's reset detail: nothing is known of
// the reset before k6's run. Imports written before Run.Imported existed
// are recognised by it.
const ResetDetail = "imported from k6: reset unknown"

// Run wraps an import as a run.json: status ok, marked imported
// (artifacts.ImportedK6), never valid, the approximations as the
// validity's reasons, so a report lists it in its own section and never
// takes its estimates for a measurement. Its directory,
// runs/k6-ALGORITHM, is outside any campaign's plan (index 0), so it
// never takes a planned run's place.
func Run(algorithm string, l artifacts.LoadResult, reasons []string) artifacts.Run {
	return artifacts.Run{
		PlannedRun: artifacts.PlannedRun{Algorithm: algorithm, Dir: path.Join(artifacts.RunsDir, "k6-"+slug(algorithm))},
		Status:     artifacts.StatusOK, ResetDetail: ResetDetail, Load: l,
		Validity: artifacts.Validity{Valid: false, Reasons: reasons},
		Imported: artifacts.ImportedK6,
	}
}

// Runs are the run.json files of an import: the whole test's
// (runs/k6-ALGORITHM) and, for several runners, each runner's
// (runs/k6-ALGORITHM-runnerI, labelled "ALGORITHM (k6 runner I of N)"),
// every one saying which it is: the whole test's counts with no
// percentiles, or one runner's share with its own percentiles.
func (r Result) Runs(algorithm string) []artifacts.Run {
	total := Run(algorithm, r.Total, r.Reasons)
	if len(r.Runners) == 0 {
		return []artifacts.Run{total}
	}
	n := len(r.Runners)
	total.Validity.Reasons = append(slices.Clone(r.Reasons), fmt.Sprintf("imported from k6: counts summed exactly over %d runners; "+
		"no percentiles, since k6's summaries cannot be merged: each runner's are in %s-runner1 to -runner%d", n, path.Base(total.Dir), n))
	runs := []artifacts.Run{total}
	for i, rn := range r.Runners {
		run := Run(fmt.Sprintf("%s (k6 runner %d of %d)", algorithm, i+1, n), rn.Load, append(slices.Clone(r.Reasons),
			fmt.Sprintf("imported from k6: runner %d of %d (%s) only: its share of the load and rates, its own percentiles; the whole test's counts are in %s",
				i+1, n, rn.Name, path.Base(total.Dir))))
		run.Dir = fmt.Sprintf("%s-runner%d", total.Dir, i+1)
		runs = append(runs, run)
	}
	return runs
}

// slug keeps a label's letters, digits, '.', '-' and '_' (others become
// '_'), so any label makes one path element.
func slug(label string) string {
	b := []byte(label)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || (c == '.' && i > 0)) {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}
