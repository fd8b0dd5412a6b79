package reports

import (
	"fmt"
	"io"
	"math"
	"path"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/scenario"
	"github.com/prequalbench/prequalbench/stats"
)

// plotCaptions names every plot the report can link, in display order.
var plotCaptions = []struct{ file, caption string }{
	{"latency-percentiles.svg", "Latency by percentile (every valid run of each algorithm merged; log-scaled tail). Solid: successes (schema v1: every answer); dashed, for algorithms with failures: the pessimistic view, every request with failures at the timeout"},
	{"p99-over-time.svg", "p99 per second of the measured window (median across valid reps)"},
	{"selection-shares.svg", "Share of picks by backend group (median across valid runs)"},
}

// writeMarkdown renders REPORT.md. Every value is formatted with fixed
// precision and every list comes in a fixed order.
func writeMarkdown(w io.Writer, ds *dataset, a *Analysis, o Options, plots []string) {
	c := &ds.Campaign
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("# %s — campaign %s\n\n", c.Scenario, c.ID)
	writeConclusion(w, ds, a)
	if c.Description != "" {
		p("%s\n\n", strings.TrimSpace(c.Description))
	}
	p("**How to read this.** The conclusion above rests on the primary metric only; every other number is descriptive. "+
		"Each cell is the median across repetitions with its %.0f%% confidence interval in brackets "+
		"(order statistics; marked † when there are too few reps for one, and the bracket is then the min–max range). "+
		"Comparisons give the ratio of medians (latencies) or the difference in percentage points (rates) with a bootstrap %.0f%% interval over runs; "+
		"on the primary metric also a two-sided Mann–Whitney U p-value, Holm-corrected over the primary comparisons. A winner is named only "+
		"when that is significant at α = %.2g and the interval lies wholly outside the minimum effect: ±%s for latencies, "+
		"±%s for the error rate, ±%s of the target for goodput.\n\n",
		o.Confidence*100, o.Confidence*100, o.Alpha, fmtEffect(o.MinEffect), fmtPP(errorRateFloor)[1:], fmtPP(goodputShareFloor)[1:])
	if !ds.v2() {
		p("**Schema v1 artifacts.** These runs predate goodput and validity: throughput counts in-window completions, " +
			"errors included; latency percentiles cover every answer, failed requests included; no run checked its own validity, " +
			"so every finished run is used. Rerun the campaign for goodput, success and pessimistic latency and validity.\n\n")
	}
	writeHeader(w, ds)
	writeProtocol(w, ds)
	writeValidity(w, ds, a)
	p("## Warnings\n\n")
	if len(a.Warnings) == 0 {
		p("None: every run succeeded, was verified after its reset, met its target rate and had no errors.\n\n")
	} else {
		for _, s := range a.Warnings {
			p("- %s\n", s)
		}
		p("\n")
	}
	writeHeadline(w, ds, a)
	writeComparisons(w, a)
	writeSweeps(w, ds, a, plots) // reports/sweep.go: only for campaigns with a sweep
	writeShares(w, a)
	writeHealth(w, a)
	writeFaulty(w, ds, a) // reports/faulty.go: only for scenarios with faulty replicas
	writeImported(w, a)   // only for campaigns with imported (k6) runs
	p("## Plots\n\n")
	if len(plots) == 0 {
		p("No plots: no successful run.\n\n")
	}
	for _, pc := range plotCaptions {
		for _, name := range plots {
			if name == pc.file {
				alt, _, _ := strings.Cut(pc.caption, " (")
				p("%s\n\n![%s](plots/%s)\n\n", pc.caption, alt, name)
			}
		}
	}
	writeAppendix(w, ds, a)
	writeDigests(w, ds.Digests)
}

// mdTable writes one markdown table; columns listed in right are
// right-aligned (numbers), the rest left-aligned.
func mdTable(w io.Writer, header []string, rows [][]string, right ...int) {
	align := make([]tw.Align, len(header))
	for i := range align {
		align[i] = tw.AlignLeft
	}
	for _, i := range right {
		align[i] = tw.AlignRight
	}
	t := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewMarkdown()),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignmentConfig(tw.CellAlignment{PerColumn: align}),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: align}),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
	)
	esc := func(r []string) []string {
		out := make([]string, len(r))
		for i, s := range r {
			out[i] = cell(s)
		}
		return out
	}
	t.Header(esc(header))
	for _, r := range rows {
		if err := t.Append(esc(r)); err != nil {
			panic("reports: table row: " + err.Error()) // only on a column-count bug
		}
	}
	if err := t.Render(); err != nil {
		panic("reports: render table: " + err.Error())
	}
	fmt.Fprintln(w)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format(time.RFC3339)
}

func writeHeader(w io.Writer, ds *dataset) {
	c := &ds.Campaign
	e := c.Environment
	fmt.Fprintf(w, "## Setup\n\n")
	env := e.Name
	if e.Topology != "" {
		env += ", topology " + e.Topology
	}
	env += fmt.Sprintf(", %d ingress replica(s)", e.IngressReplicas)
	host := fmt.Sprintf("%s/%s, %d CPUs", e.OS, e.Arch, e.CPUs)
	if e.CPUModel != "" {
		host += " (" + e.CPUModel + ")"
	}
	if e.MemoryBytes > 0 {
		host += fmt.Sprintf(", %.1f GiB memory", float64(e.MemoryBytes)/(1<<30))
	}
	if e.Kernel != "" {
		host += ", kernel " + e.Kernel
	}
	versions := "prequalbench " + e.Version + ", " + e.GoVersion
	if e.RustVersion != "" {
		versions += ", " + e.RustVersion
	}
	rev := e.GitRevision
	if rev == "" {
		rev = "unknown"
	}
	if e.GitDirty {
		rev += " (uncommitted changes)"
	}
	dates := "started " + fmtTime(c.Started) + ", finished " + fmtTime(c.Finished)
	if c.Finished.IsZero() {
		dates = "started " + fmtTime(c.Started) + ", not finished"
	}
	// The description is printed under the title; the cell keeps the name
	// so the table stays narrow.
	rows := [][]string{
		{"Scenario", c.Scenario},
		{"Schema", fmt.Sprintf("v%d", ds.schema())},
		{"Environment", env},
	}
	if e.Load != nil {
		// Older artifacts have no load path: their report keeps its rows.
		rows = append(rows, []string{"Load", e.Load.Describe()})
	}
	rows = append(rows, [][]string{
		{"Host", host},
		{"Versions", versions},
		{"Git revision", rev},
	}...)
	for _, b := range c.Builds {
		rows = append(rows, []string{"Build (" + b.Role + ")", b.Name + ": " + buildOrigin(b)})
	}
	rows = append(rows, [][]string{
		{"Seed", fmt.Sprintf("%d", c.Seed)},
		{"Dates", dates},
	}...)
	mdTable(w, []string{"", ""}, rows)
	if strings.TrimSpace(c.ScenarioYAML) != "" {
		fence := "```"
		for strings.Contains(c.ScenarioYAML, fence) {
			fence += "`"
		}
		fmt.Fprintf(w, "<details><summary>Resolved scenario (YAML)</summary>\n\n%syaml\n%s\n%s\n\n</details>\n\n",
			fence, strings.TrimRight(c.ScenarioYAML, "\n"), fence)
	}
}

func writeProtocol(w io.Writer, ds *dataset) {
	c := &ds.Campaign
	fmt.Fprintf(w, "## Protocol\n\n")
	fmt.Fprintf(w, "- %d rep(s) of %s, interleaved by the %q rule (seed %d); %d of %d planned runs recorded.\n",
		c.Reps, strings.Join(c.Algorithms, ", "), c.Order, c.Seed, len(ds.Runs), len(c.Plan))
	fmt.Fprintf(w, "- Warmup %s and cooldown %s around each measured window; reset mode %q.\n",
		fmtDuration(c.Warmup), fmtDuration(c.Cooldown), c.ResetMode)
	if len(c.Builds) > 0 {
		fmt.Fprintf(w, "- A/B of builds: before every run the ingress replicas were restarted from that run's build, so no run began on a process the run before it had warmed.\n")
	}
	verified := 0
	for _, r := range ds.Runs {
		if r.Run.ResetVerified {
			verified++
		}
	}
	switch {
	case len(ds.Runs) == 0:
		fmt.Fprintf(w, "- No run was recorded.\n\n")
	case verified == len(ds.Runs):
		// Say what was checked as each environment recorded it: an
		// external ingress's reset hook proves less than the admin API.
		fmt.Fprintf(w, "- Every reset was verified (%d of %d); what was checked, as recorded: %s.\n\n", verified, len(ds.Runs), resetDetails(ds))
	default:
		fmt.Fprintf(w, "- Only %d of %d resets were verified (see Warnings).\n\n", verified, len(ds.Runs))
	}
	if len(ds.Runs) == 0 {
		return
	}
	var rows [][]string
	var reps []int
	byRep := map[int][]string{}
	for _, r := range ds.Runs {
		name := r.Run.Algorithm
		if !r.ok() {
			name += " (failed)"
		}
		if _, ok := byRep[r.Run.Rep]; !ok {
			reps = append(reps, r.Run.Rep)
		}
		byRep[r.Run.Rep] = append(byRep[r.Run.Rep], name)
	}
	for _, rep := range reps {
		rows = append(rows, []string{fmt.Sprintf("%d", rep), strings.Join(byRep[rep], " → ")})
	}
	fmt.Fprintf(w, "Order actually run:\n\n")
	mdTable(w, []string{"rep", "order"}, rows, 0)
}

// ciCell prints "median [lo–hi]" with † for a min–max range.
func ciCell(m MetricResult) string {
	f := formatter(m.Metric)
	if m.N == 0 {
		return "—"
	}
	if m.N == 1 {
		return f(float64(m.Median)) + " (1 run)"
	}
	s := fmt.Sprintf("%s [%s–%s]", f(float64(m.Median)), f(float64(m.Lo)), f(float64(m.Hi)))
	if m.Range {
		s += " †"
	}
	return s
}

func writeHeadline(w io.Writer, ds *dataset, a *Analysis) {
	fmt.Fprintf(w, "## Headline\n\n")
	runsLabel := "valid runs"
	if !ds.v2() {
		runsLabel = "runs"
	}
	header := []string{"algorithm", runsLabel}
	for _, m := range metricsOf(ds) {
		header = append(header, fmt.Sprintf("%s (%s)", m.Label, m.Unit))
	}
	var rows [][]string
	for _, alg := range a.Algorithms {
		runs := fmt.Sprintf("%d", alg.Runs)
		var left []string
		if alg.Invalid > 0 {
			left = append(left, fmt.Sprintf("+%d invalid", alg.Invalid))
		}
		if alg.Failed > 0 {
			left = append(left, fmt.Sprintf("+%d failed", alg.Failed))
		}
		if len(left) > 0 {
			runs += " (" + strings.Join(left, ", ") + ")"
		}
		row := []string{alg.Algorithm, runs}
		for _, m := range alg.Metrics {
			row = append(row, ciCell(m))
		}
		rows = append(rows, row)
	}
	right := []int{1}
	for i := 2; i < len(header); i++ {
		right = append(right, i)
	}
	mdTable(w, header, rows, right...)
	fmt.Fprintf(w, "Median across valid reps [%.0f%% CI]; † = too few reps for a CI, the bracket is the min–max range.", a.Campaign.Confidence*100)
	if ds.v2() {
		if t := targetRate(ds); t > 0 {
			fmt.Fprintf(w, " Goodput: successes (2xx/3xx) per second of the measured window, against a target of %s req/s.", fmtRate(t))
		} else {
			fmt.Fprintf(w, " Goodput: successes (2xx/3xx) per second of the measured window (closed loop: no target).")
		}
		fmt.Fprintf(w, " Error rate: failed requests (4xx, 5xx, timeouts, connection errors) over all sent."+
			" p50–p99.9: latency of successes. Pessimistic: every request, each failure counted at the request timeout.")
	}
	fmt.Fprintf(w, "\n\n")
	if len(a.NotCompared) > 0 && len(a.Comparisons) == 0 {
		fmt.Fprintf(w, "**No ranking: the comparison could not be made.** Too few valid runs remain:\n\n")
		for _, nc := range a.NotCompared {
			fmt.Fprintf(w, "- %s\n", nc.Reason)
		}
		fmt.Fprintln(w)
	}
}

// targetRate is the campaign's open-loop target (the first run's).
func targetRate(ds *dataset) float64 {
	for _, r := range ds.Runs {
		if r.ok() {
			return r.Run.Load.TargetRate
		}
	}
	return 0
}

// resetDetails lists the runs' distinct reset details with their counts.
func resetDetails(ds *dataset) string {
	var details []string
	count := map[string]int{}
	for _, r := range ds.Runs {
		d := strings.TrimSuffix(r.Run.ResetDetail, ".")
		if d == "" {
			d = "no detail recorded"
		}
		if count[d] == 0 {
			details = append(details, d)
		}
		count[d]++
	}
	parts := make([]string, len(details))
	for i, d := range details {
		parts[i] = fmt.Sprintf("%s (%d run(s))", d, count[d])
	}
	return strings.Join(parts, "; ")
}

// writeValidity lists the runs whose own validity check failed.
func writeValidity(w io.Writer, ds *dataset, a *Analysis) {
	fmt.Fprintf(w, "## Validity\n\n")
	if !ds.v2() {
		fmt.Fprintf(w, "Not recorded (schema v1): every finished run is used.\n\n")
		return
	}
	var rows [][]string
	finished := 0
	for _, r := range a.Runs {
		if r.Status != "ok" {
			continue
		}
		finished++
		if !r.Valid {
			reasons := strings.Join(r.Reasons, "; ")
			if reasons == "" {
				reasons = "no reason recorded"
			}
			rows = append(rows, []string{fmt.Sprintf("%d", r.Index), r.Algorithm, reasons})
		}
	}
	var saturated [][]string
	checks := map[string]int{}
	for _, r := range a.Runs {
		if r.Status == "ok" {
			checks[r.HostCheck]++
			if r.Saturation != "" {
				saturated = append(saturated, []string{fmt.Sprintf("%d", r.Index), r.Algorithm, r.Saturation})
			}
		}
	}
	fmt.Fprintf(w, "Each run checks its own measurement: the generator kept its schedule, the connection cap did not queue the load, "+
		"and the host had headroom left by processes outside the campaign (a second without headroom is charged to the campaign's "+
		"own processes, generator, ingress and backends, only when they alone used at least %g%% of the host; otherwise to the processes outside it). Host headroom: %s.\n\n",
		artifacts.HostOwnFloor, hostChecks(checks))
	writeHostNotes(w, a)
	if len(saturated) > 0 {
		fmt.Fprintf(w, "Runs whose own processes exhausted the host (kept: the policy's cost on this host is part of the result):\n\n")
		mdTable(w, []string{"#", "algorithm", "what it used"}, saturated, 0)
	}
	if len(rows) == 0 {
		fmt.Fprintf(w, "Every finished run (%d) passed the checks that ran.\n\n", finished)
		return
	}
	fmt.Fprintf(w, "%d of %d finished runs are **invalid** and left out of the headline, the comparisons, the shares and the plots:\n\n", len(rows), finished)
	mdTable(w, []string{"#", "algorithm", "why"}, rows, 0)
}

// writeHostNotes says, per distinct note, what the host check of the
// finished runs sampled or why it did not run, so a check that did not
// run is never read as one that passed.
func writeHostNotes(w io.Writer, a *Analysis) {
	var notes []string
	runs := map[string][]string{}
	for _, r := range a.Runs {
		if r.Status != "ok" || r.HostCheckNote == "" {
			continue
		}
		if _, ok := runs[r.HostCheckNote]; !ok {
			notes = append(notes, r.HostCheckNote)
		}
		runs[r.HostCheckNote] = append(runs[r.HostCheckNote], fmt.Sprint(r.Index))
	}
	for _, n := range notes {
		fmt.Fprintf(w, "- Host check of run(s) %s: %s.\n", strings.Join(runs[n], ", "), strings.TrimSuffix(n, "."))
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
	}
}

func writeComparisons(w io.Writer, a *Analysis) {
	fmt.Fprintf(w, "## Comparisons against %s\n\n", a.Campaign.Reference)
	for _, nc := range a.NotCompared {
		fmt.Fprintf(w, "- %s.\n", nc.Reason)
	}
	if len(a.NotCompared) > 0 {
		fmt.Fprintln(w)
	}
	if len(a.Comparisons) == 0 {
		if len(a.NotCompared) == 0 {
			fmt.Fprintf(w, "No comparisons: the reference did not run, or it is the only algorithm.\n\n")
		}
		return
	}
	fmt.Fprintf(w, "Ratio = %s's median / the other's; below 1 means %s is lower (better for latency and errors, worse for goodput). "+
		"Rates (error rate; goodput as a share of an open-loop target) are compared by their difference in percentage points, %s minus the other. "+
		"Interval: percentile bootstrap over runs, %d resamples, seeded from the campaign seed; † marks an interval over fewer than %d runs on a side, "+
		"which covers less than its nominal %.0f%%. %s\n\n",
		a.Campaign.Reference, a.Campaign.Reference, a.Campaign.Reference, a.Campaign.Resamples, stats.MinBootstrapRuns, a.Campaign.Confidence*100,
		primaryRule(a))
	last := ""
	for _, cmp := range a.Comparisons {
		if cmp.Algorithm != last {
			if last != "" {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "### %s vs %s\n\n", cmp.Reference, cmp.Algorithm)
			last = cmp.Algorithm
		}
		mark := ""
		if cmp.Primary {
			mark = "**Primary:** "
		}
		fmt.Fprintf(w, "- %s%s\n", mark, cmp.Verdict)
	}
	fmt.Fprintln(w)
}

// primaryRule says how the comparisons above turn into verdicts.
func primaryRule(a *Analysis) string {
	if a.Campaign.PrimaryMetric == scenario.PrimaryNone {
		return "This scenario declares no primary metric: every comparison is descriptive, none is tested, none names a winner."
	}
	return fmt.Sprintf("Only the primary metric (%s) is tested: two-sided Mann–Whitney U over runs, Holm-adjusted over the %d primary comparison(s). "+
		"A verdict names a winner (the better median) only when the adjusted p is below %.2g **and** the interval lies wholly outside the minimum effect; "+
		"significant but inside it is \"no meaningful difference\"; a faster side that fails more requests (by ≥ %s) is never named. "+
		"Every other line is descriptive: its interval, no p-value, no verdict.",
		metricByKey(a.Campaign.PrimaryMetric).Label, countTests(a.Comparisons), a.Campaign.Alpha, fmtPP(errorRateFloor)[1:])
}

func writeShares(w io.Writer, a *Analysis) {
	fmt.Fprintf(w, "## Selection shares\n\n")
	if len(a.Shares) == 0 {
		fmt.Fprintf(w, "No ingress state snapshots: selection shares are unavailable.\n\n")
		return
	}
	fmt.Fprintf(w, "Picks per backend between the state snapshots taken right before and right after each measured window, "+
		"summed over ingress replicas. Share: median across runs [min–max]. Inside each group, max/min is the busiest "+
		"replica's picks over the idlest one's and CV the coefficient of variation (medians across runs): equal replicas "+
		"should sit near 1 and 0; herding onto a few shows as large values.\n\n")
	for _, s := range a.Shares {
		fmt.Fprintf(w, "### %s (%d runs)\n\n", s.Algorithm, s.Runs)
		var rows [][]string
		for _, g := range s.Groups {
			rows = append(rows, []string{g.Group, fmt.Sprintf("%d", g.Replicas),
				fmt.Sprintf("%s [%s–%s]", fmtPct(float64(g.Share)), fmtPct(float64(g.ShareMin)), fmtPct(float64(g.ShareMax))),
				fmtFixed(float64(g.MaxMin), 2), fmtFixed(float64(g.CV), 3)})
		}
		mdTable(w, []string{"group", "replicas", "share of picks", "max/min", "CV"}, rows, 1, 2, 3, 4)
		rows = nil
		for _, b := range s.Backends {
			rows = append(rows, []string{b.Address, b.Group, fmtPct(float64(b.Share)), fmt.Sprintf("%d", b.Picks)})
		}
		fmt.Fprintf(w, "<details><summary>Per backend (%s)</summary>\n\n", s.Algorithm)
		mdTable(w, []string{"backend", "group", "share (median)", "picks (all runs)"}, rows, 2, 3)
		fmt.Fprintf(w, "</details>\n\n")
	}
}

// fmtFixed prints v with exactly prec decimals.
func fmtFixed(v float64, prec int) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case math.IsInf(v, 0):
		return "∞"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

func writeHealth(w io.Writer, a *Analysis) {
	fmt.Fprintf(w, "## Probe and pool health\n\n")
	if len(a.Health) == 0 {
		fmt.Fprintf(w, "No ingress state snapshots: probe and pool counters are unavailable.\n\n")
		return
	}
	// Columns newer than the schema's first reports appear only when some
	// policy counted them, so reports of older artifacts stay as they were.
	var coalesced, reused, slowHeld bool
	for _, h := range a.Health {
		coalesced = coalesced || h.ProbesCoalesced > 0
		reused = reused || h.ReusedPicks > 0
		slowHeld = slowHeld || h.SlowHeld > 0
	}
	fmt.Fprintf(w, "Counter deltas over the measured windows, summed over runs and ingress replicas. Pool size is at the end of "+
		"the window (summed over routes, averaged over replicas; median across runs). Reuse budget is Prequal's b_reuse "+
		"(Eq. 1) in force at the end of the windows, lowest–highest over routes, replicas and runs; superseded answers are probe "+
		"answers dropped because a newer one from the same replica was already taken in.")
	if coalesced {
		fmt.Fprintf(w, " Probes coalesced were owed but not sent: every other target already had a probe in flight.")
	}
	if reused {
		fmt.Fprintf(w, " Reused picks went to a probe already used for a pick (share of picks).")
	}
	if slowHeld {
		fmt.Fprintf(w, " Slow held are answers with no latency that slow memory answered with a replica's remembered, far slower latency (explorations withheld).")
	}
	fmt.Fprintf(w, "\n\n")
	var rows [][]string
	for _, h := range a.Health {
		frac := math.NaN()
		if h.Picks > 0 {
			frac = float64(h.Fallbacks) / float64(h.Picks)
		}
		rows = append(rows, []string{h.Algorithm, fmt.Sprintf("%d", h.Runs), fmt.Sprintf("%d", h.Requests),
			fmt.Sprintf("%d", h.Picks), fmt.Sprintf("%d (%s)", h.Fallbacks, fmtPct(frac)),
			fmt.Sprintf("%d / %d", h.HotPicks, h.ColdPicks), fmt.Sprintf("%d", h.NoEndpoint), fmt.Sprintf("%d", h.UpstreamErrors)})
	}
	mdTable(w, []string{"algorithm", "runs", "requests", "picks", "fallbacks", "hot / cold picks", "503 no endpoint", "502/504 upstream"},
		rows, 1, 2, 3, 4, 5, 6, 7)
	header := []string{"algorithm", "probes planned"}
	for _, c := range a.Health[0].ProbeOutcomes {
		header = append(header, "probe "+c.Name)
	}
	header = append(header, "superseded answers", "reuse budget")
	if coalesced {
		header = append(header, "probes coalesced")
	}
	if reused {
		header = append(header, "reused picks")
	}
	if slowHeld {
		header = append(header, "slow held")
	}
	header = append(header, "pool size", "queue depth (max)", "pool removals")
	rows = nil
	for _, h := range a.Health {
		row := []string{h.Algorithm, fmt.Sprintf("%d", h.ProbesPlanned)}
		for i := range a.Health[0].ProbeOutcomes {
			v := "0"
			if i < len(h.ProbeOutcomes) {
				v = fmt.Sprintf("%d", h.ProbeOutcomes[i].Count)
			}
			row = append(row, v)
		}
		var rem []string
		for _, c := range h.PoolRemovals {
			rem = append(rem, fmt.Sprintf("%s %d", c.Name, c.Count))
		}
		if len(rem) == 0 {
			rem = []string{"none"}
		}
		row = append(row, fmt.Sprintf("%d", h.StaleAnswers), fmtReuseBudget(h.ReuseBudgetMin, h.ReuseBudgetMax))
		if coalesced {
			row = append(row, fmt.Sprintf("%d", h.ProbesCoalesced))
		}
		if reused {
			row = append(row, fmt.Sprintf("%d (%s)", h.ReusedPicks, fmtPct(float64(h.ReusedPicks)/float64(max(h.Picks, 1)))))
		}
		if slowHeld {
			row = append(row, fmt.Sprintf("%d", h.SlowHeld))
		}
		row = append(row, fmtFloat(float64(h.PoolSize)), fmt.Sprintf("%d", h.ProbeQueueDepth), strings.Join(rem, ", "))
		rows = append(rows, row)
	}
	right := []int{}
	for i := 1; i < len(header)-1; i++ {
		right = append(right, i)
	}
	mdTable(w, header, rows, right...)
}

// fmtReuseBudget prints the range of reuse budgets a policy ran with, "—"
// for a policy without one.
func fmtReuseBudget(lo, hi float64) string {
	switch {
	case hi == 0:
		return "—"
	case lo == hi:
		return fmtFixed(lo, 2)
	}
	return fmtFixed(lo, 2) + "–" + fmtFixed(hi, 2)
}

func writeAppendix(w io.Writer, ds *dataset, a *Analysis) {
	fmt.Fprintf(w, "## Per-run appendix\n\n")
	if len(a.Runs) == 0 {
		fmt.Fprintf(w, "No run was recorded.\n")
		return
	}
	var rows [][]string
	for _, r := range a.Runs {
		status := r.Status
		if r.Error != "" {
			status += ": " + r.Error
		}
		if r.Status == "ok" && !r.Valid {
			status = "INVALID"
		}
		reset := "verified"
		if !r.ResetVerified {
			reset = "NOT verified"
		}
		target := "closed"
		if r.Status != "ok" {
			target = "—"
		} else if r.TargetRate > 0 {
			target = fmtRate(r.TargetRate)
		}
		row := []string{fmt.Sprintf("%d", r.Index), fmt.Sprintf("%d", r.Rep), r.Algorithm, status, reset}
		if ds.v2() {
			bound := fmt.Sprintf("%d", r.ConnCapBound)
			if r.Status != "ok" {
				bound = "—"
			}
			row = append(row, fmtRate(float64(r.Goodput)), target, fmtPct(float64(r.ErrorRate)),
				fmtMs(float64(r.P50)), fmtMs(float64(r.P99)), fmtMs(float64(r.P999)), fmtMs(float64(r.PessP99)),
				fmtMs(float64(r.SendLagP99)), fmtMs(float64(r.ConnWait99)), bound, path.Base(r.Dir))
		} else {
			row = append(row, fmtRate(float64(r.Throughput)), target, fmtPct(float64(r.ErrorRate)),
				fmtMs(float64(r.P50)), fmtMs(float64(r.P99)), fmtMs(float64(r.P999)), fmt.Sprintf("%d", r.LateSends), path.Base(r.Dir))
		}
		rows = append(rows, row)
	}
	if ds.v2() {
		fmt.Fprintf(w, "Latencies of successes; pess. = every request with failures at the timeout; send lag = actual minus intended send time; "+
			"conn wait = send to getting a connection; cap bound = requests that waited for a connection because the connection cap was reached.\n\n")
		mdTable(w, []string{"#", "rep", "algorithm", "status", "reset", "goodput req/s", "target req/s", "errors", "p50 ms", "p99 ms",
			"p99.9 ms", "pess. p99 ms", "send lag p99 ms", "conn wait p99 ms", "cap bound", "directory"},
			rows, 0, 1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14)
		return
	}
	mdTable(w, []string{"#", "rep", "algorithm", "status", "reset", "req/s", "target req/s", "errors", "p50 ms", "p99 ms", "p99.9 ms",
		"late sends", "directory"}, rows, 0, 1, 5, 6, 7, 8, 9, 10, 11)
}

// countTests is the size of the Holm family: primary comparisons with a
// p-value whose runs were not all identical.
func countTests(cs []Comparison) int {
	n := 0
	for _, c := range cs {
		if c.Primary && !math.IsNaN(float64(c.P)) && !c.Identical {
			n++
		}
	}
	return n
}

// writeImported lists the runs imported from k6 in a section of their
// own: their numbers are k6's, not this tool's measurement, so they
// stand beside the measured runs, never in the headline, the
// comparisons or a verdict.
func writeImported(w io.Writer, a *Analysis) {
	if len(a.Imported) == 0 {
		return
	}
	fmt.Fprintf(w, "## Imported runs (k6's numbers, not measured by prequalbench)\n\n")
	fmt.Fprintf(w, "%d run(s) imported from k6's summary (`--summary-export` or handleSummary) with `prequalbench k6 import`. They are listed here only: "+
		"**never valid**, not in the headline, the comparisons, the verdicts, the shares or the plots. "+
		"Their numbers are k6's, not this tool's measurement: the percentiles are k6's over every sample, not this tool's HDR histograms "+
		"(there are no histogram files); k6's latency **leaves out DNS lookup and connect time** and is timed from each request's actual send, so **coordinated omission is not corrected** "+
		"(a stalled ingress looks faster than in the measured runs); failures are not split by class; there is no per-second series, "+
		"send lag, CPU or state snapshot, and the reset before k6's run is unknown. Read them beside the measured runs, not against them.\n\n", len(a.Imported))
	var rows [][]string
	for _, r := range a.Imported {
		model := r.Model
		if r.Users > 0 {
			model = fmt.Sprintf("%s, %d users", r.Model, r.Users)
		}
		rows = append(rows, []string{r.Label, r.From, model, fmtFloat(r.WindowSec), fmt.Sprintf("%d", r.Sent), fmt.Sprintf("%d", r.Errors),
			fmtRate(float64(r.Goodput)), fmtPct(float64(r.ErrorRate)), fmtMs(float64(r.P50)), fmtMs(float64(r.P90)),
			fmtMs(float64(r.P99)), fmtMs(float64(r.P999)), fmtMs(float64(r.PessP99)), path.Base(r.Dir)})
	}
	fmt.Fprintf(w, "Window counts and k6's percentiles (with several k6 runners, each runner's run holds its own and the whole test's run none); p50–p99.9 of successes, all p99 of every request (failures at their own duration).\n\n")
	mdTable(w, []string{"label", "from", "model", "window s", "sent", "failed", "goodput req/s", "error rate", "p50 ms (k6)", "p90 ms (k6)",
		"p99 ms (k6)", "p99.9 ms (k6)", "all p99 ms (k6)", "directory"}, rows, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
	fmt.Fprintf(w, "Why each is not valid (its recorded reasons):\n\n")
	for _, r := range a.Imported {
		fmt.Fprintf(w, "- `%s` (%s):\n", r.Dir, cell(r.Label))
		for _, why := range r.Reasons {
			fmt.Fprintf(w, "  - %s\n", why)
		}
	}
	fmt.Fprintln(w)
}
