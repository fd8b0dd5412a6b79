package reports

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/stats"
)

// CompareFile is the comparison Compare writes into the new campaign.
const CompareFile = "COMPARE.md"

// MetricChange is one metric of one algorithm, old campaign against new.
type MetricChange struct {
	Algorithm string `json:"algorithm"`
	Metric    string `json:"metric"`
	OldMedian Num    `json:"old_median"`
	NewMedian Num    `json:"new_median"`
	// Ratio is new / old.
	Ratio     Num  `json:"ratio"`
	P         Num  `json:"p"`
	Gated     bool `json:"gated"`
	Regressed bool `json:"regressed"`
	// Undetectable marks a gated metric whose run counts cannot reach
	// p < alpha: a regression there could not have been detected.
	Undetectable bool   `json:"undetectable"`
	Verdict      string `json:"verdict"`
}

// CompareResult is the outcome of Compare.
type CompareResult struct {
	// Regressed is true when a gated metric regressed significantly.
	Regressed bool
	// Gated counts the gated metrics compared; Tested those gated by a
	// p-value (latencies and the rate; the error rate is gated by its
	// rise); Undetectable those whose run counts could not reach alpha.
	Gated, Tested, Undetectable int
	// HostDiffers lists what differs between the two campaigns' hosts
	// (machine, kernel, day): then no difference can be put on the code.
	HostDiffers []string
}

// Summary is the one-line outcome for a terminal.
func (r CompareResult) Summary() string {
	switch {
	case r.Regressed:
		return "regressed" + r.hostCaveat()
	case r.Gated == 0:
		return "nothing compared"
	case r.Tested > 0 && r.Undetectable == r.Tested:
		return "cannot detect a latency or rate regression (too few runs); error rates did not regress"
	case r.Undetectable > 0:
		return fmt.Sprintf("no significant regression; %d of %d latency and rate metrics could not have shown one (too few runs)", r.Undetectable, r.Tested)
	}
	return "no significant regression" + r.hostCaveat()
}

func (r CompareResult) hostCaveat() string {
	if len(r.HostDiffers) == 0 {
		return ""
	}
	return " (" + strings.Join(r.HostDiffers, ", ") + " differ: the code cannot be separated from the host; for a code change run an A/B in one campaign, docs/ab.md)"
}

// hostDifferences lists what differs between the hosts and days of two
// campaigns (the host only when both recorded it). The same code moved 1.16x at p99.9 between two days on the
// same kind of machine (issue 32): any of these can move the numbers
// more than a threshold.
func hostDifferences(nc, oc *artifacts.Campaign) []string {
	ne, oe := nc.Environment, oc.Environment
	var out []string
	if ne.HostID != "" && oe.HostID != "" && ne.HostID != oe.HostID {
		out = append(out, "host")
	}
	if ne.CPUModel != oe.CPUModel || ne.CPUs != oe.CPUs || ne.MemoryBytes != oe.MemoryBytes || ne.OS != oe.OS || ne.Arch != oe.Arch {
		out = append(out, "machine")
	}
	if ne.Kernel != oe.Kernel {
		out = append(out, "kernel")
	}
	if !nc.Started.IsZero() && !oc.Started.IsZero() && nc.Started.UTC().Format(time.DateOnly) != oc.Started.UTC().Format(time.DateOnly) {
		out = append(out, "date")
	}
	return out
}

// Compare compares the campaign in newDir against the one in oldDir (same
// scenario and environment; another topology or load path is noted),
// writes newDir/COMPARE.md and reports whether any gated metric
// regressed: a latency (p50, p99, p99.9) worse by more than the threshold
// with p < alpha, throughput lower by more than the threshold with
// p < alpha, or an error rate above old × (1 + threshold) and at least
// 0.1 percentage points higher.
func Compare(newDir, oldDir string, opts Options) (CompareResult, error) {
	var res CompareResult
	o, err := opts.withDefaults()
	if err != nil {
		return res, err
	}
	nds, err := load(newDir)
	if err != nil {
		return res, err
	}
	ods, err := load(oldDir)
	if err != nil {
		return res, err
	}
	if nv, ov := nds.schema(), ods.schema(); nv != ov {
		return res, badInput("reports: compare: field schema_version differs: %s has %d, %s has %d; "+
			"v1 latencies cover every answer and v1 throughput counts completions, so the two do not measure the same quantities "+
			"(rerun the older campaign with this prequalbench)", newDir, nv, oldDir, ov)
	}
	if nds.Campaign.Scenario != ods.Campaign.Scenario {
		return res, badInput("reports: compare: %s ran scenario %q but %s ran %q: only campaigns of the same scenario compare",
			newDir, nds.Campaign.Scenario, oldDir, ods.Campaign.Scenario)
	}
	ne, oe := nds.Campaign.Environment, ods.Campaign.Environment
	if ne.Name != "" && oe.Name != "" && ne.Name != oe.Name {
		return res, badInput("reports: compare: %s ran in environment %q but %s ran in %q: only campaigns of the same environment compare "+
			"(loopback processes, a kind cluster, a real cluster and an external ingress measure different systems); "+
			"compare against a baseline from environment %q", newDir, ne.Name, oldDir, oe.Name, ne.Name)
	}
	changes, notes := compareDatasets(nds, ods, o)
	notes = append(environmentNotes(ne, oe), notes...)
	res.HostDiffers = hostDifferences(&nds.Campaign, &ods.Campaign)
	for _, c := range changes {
		res.Regressed = res.Regressed || c.Regressed
		if c.Gated {
			res.Gated++
		}
		if c.Gated && c.Metric != "error_rate" {
			res.Tested++
		}
		if c.Undetectable {
			res.Undetectable++
		}
	}
	var buf bytes.Buffer
	writeCompare(&buf, nds, ods, changes, notes, res, o)
	if err := artifacts.WriteFileAtomic(filepath.Join(newDir, CompareFile), buf.Bytes()); err != nil {
		return res, fmt.Errorf("reports: compare: %w", err)
	}
	return res, nil
}

// environmentNotes says how two campaigns of the same environment still
// ran differently: another topology, or another load path (generators
// inside the cluster skip the hop from the campaign's machine that the
// CLI path's latencies include).
func environmentNotes(ne, oe artifacts.Environment) []string {
	var notes []string
	if (ne.Name == "") != (oe.Name == "") {
		notes = append(notes, fmt.Sprintf("only one campaign records its environment (new %s, baseline %s): they may not have measured the same system",
			orNone(ne.Name), orNone(oe.Name)))
	}
	if ne.Topology != oe.Topology {
		notes = append(notes, fmt.Sprintf("the topologies differ (new %s, baseline %s): read the comparison with care", orNone(ne.Topology), orNone(oe.Topology)))
	}
	switch nk, ok := ne.Load.Kind(), oe.Load.Kind(); {
	case nk == ok:
	case nk == "" || ok == "":
		notes = append(notes, fmt.Sprintf("only one campaign records its load path (new %s, baseline %s): they may have sent the load differently",
			orNone(ne.Load.Describe()), orNone(oe.Load.Describe())))
	default:
		notes = append(notes, fmt.Sprintf("the load paths differ: new %s; baseline %s. In-cluster generators skip the hop from the campaign's machine "+
			"(NodePort, LoadBalancer, port-forward) that the other path's latencies include, and their number changes how the load is spread: "+
			"differences may come from the path, not the ingress", ne.Load.Describe(), oe.Load.Describe()))
	}
	return notes
}

func orNone(s string) string {
	if s == "" {
		return "none recorded"
	}
	return s
}

// okValues returns each algorithm's per-run values of every metric over
// its finished, valid runs.
func okValues(ds *dataset) map[string]map[string][]float64 {
	out := map[string]map[string][]float64{}
	for _, r := range ds.Runs {
		if !counted(ds, r) {
			continue
		}
		m := measure(r)
		if out[r.Run.Algorithm] == nil {
			out[r.Run.Algorithm] = map[string][]float64{}
		}
		for _, mt := range metricsOf(ds) {
			out[r.Run.Algorithm][mt.Key] = append(out[r.Run.Algorithm][mt.Key], mt.get(m))
		}
	}
	return out
}

func compareDatasets(nds, ods *dataset, o Options) ([]MetricChange, []string) {
	nv, ov := okValues(nds), okValues(ods)
	var changes []MetricChange
	var notes []string
	if nds.Campaign.ScenarioYAML != ods.Campaign.ScenarioYAML {
		notes = append(notes, "the resolved scenarios differ (overrides or --duration-scale): read the comparison with care")
	}
	for _, alg := range algorithms(nds) {
		if ov[alg] == nil || nv[alg] == nil {
			notes = append(notes, fmt.Sprintf("%s has valid runs in only one of the two campaigns: not compared", alg))
			continue
		}
		for _, m := range metricsOf(nds) {
			if !m.Tested {
				continue
			}
			changes = append(changes, compareMetric(alg, m, ov[alg][m.Key], nv[alg][m.Key], o))
		}
	}
	for _, alg := range algorithms(ods) {
		if !slices.Contains(algorithms(nds), alg) {
			notes = append(notes, fmt.Sprintf("%s ran only in the old campaign: not compared", alg))
		}
	}
	return changes, notes
}

func compareMetric(alg string, m metric, old, cur []float64, o Options) MetricChange {
	om, nm := stats.Median(old), stats.Median(cur)
	u := stats.MannWhitneyU(old, cur, o.Alpha)
	c := MetricChange{Algorithm: alg, Metric: m.Key, OldMedian: Num(om), NewMedian: Num(nm), Ratio: Num(stats.Ratio(nm, om)), P: Num(u.P)}
	sig := !math.IsNaN(u.P) && u.P < o.Alpha
	r := float64(c.Ratio)
	worse := (m.LowerBetter && r > 1+o.Threshold) || (!m.LowerBetter && r < 1-o.Threshold)
	better := (m.LowerBetter && r < 1-o.Threshold) || (!m.LowerBetter && r > 1+o.Threshold)
	switch m.Key {
	case "p50_ms", "p99_ms", "p999_ms", "throughput_rps", "goodput_rps":
		c.Gated = true
		c.Regressed = worse && sig
		c.Undetectable = !(u.MinP < o.Alpha)
	case "error_rate":
		c.Gated = true
		c.Regressed = nm > om*(1+o.Threshold) && nm-om >= errorRateFloor
	}
	switch {
	case c.Regressed:
		c.Verdict = "REGRESSED"
	case m.Key == "error_rate" && nm > om && nm-om >= errorRateFloor:
		c.Verdict = "higher, within threshold"
	case m.Key == "error_rate":
		c.Verdict = "ok"
	case !sig && !(u.MinP < o.Alpha):
		c.Verdict = fmt.Sprintf("cannot detect (%d vs %d runs: smallest possible p %s)", len(old), len(cur), fmtP(u.MinP))
	case !sig:
		c.Verdict = "~ (not significant)"
	case worse:
		c.Verdict = "worse (not gated)"
	case better:
		c.Verdict = "improved"
	default:
		c.Verdict = "within threshold"
	}
	return c
}

func writeCompare(buf *bytes.Buffer, nds, ods *dataset, changes []MetricChange, notes []string, res CompareResult, o Options) {
	p := func(format string, args ...any) { fmt.Fprintf(buf, format, args...) }
	p("# %s — campaign %s compared with %s\n\n", nds.Campaign.Scenario, nds.Campaign.ID, ods.Campaign.ID)
	rate := "goodput"
	if !nds.v2() {
		rate = "throughput"
	}
	p("Each row compares the median across valid runs of the old campaign with the new one; p is a two-sided "+
		"Mann–Whitney U test over runs (not corrected for the number of rows: the threshold guards against small changes). "+
		"A metric regresses when p50, p99 or p99.9 got more than %.0f%% worse, or %s "+
		"fell more than %.0f%%, with p < %.2g; or when the error rate rose more than %.0f%% and by at least %.1f percentage points. "+
		"\"cannot detect\" means the run counts cannot give p < %.2g, so a regression there would have passed unseen.\n\n",
		o.Threshold*100, rate, o.Threshold*100, o.Alpha, o.Threshold*100, errorRateFloor*100, o.Alpha)
	var regs []string
	for _, c := range changes {
		if c.Regressed {
			regs = append(regs, c.Algorithm+" "+metricByKey(c.Metric).Label)
		}
	}
	switch {
	case len(regs) > 0:
		p("**Verdict: regressed** (%d): %s.\n\n", len(regs), joinComma(regs))
	case res.Tested > 0 && res.Undetectable == res.Tested:
		p("**Verdict: cannot detect a regression** of latency or rate: no such metric has enough runs on both sides to reach p < %.2g "+
			"(error rates, gated by their rise, did not regress).\n\n", o.Alpha)
	case res.Undetectable > 0:
		p("**Verdict: no significant regression** among the metrics that could show one; %d of %d latency and rate metrics could not (too few runs).\n\n",
			res.Undetectable, res.Tested)
	default:
		p("**Verdict: no significant regression.**\n\n")
	}
	if len(res.HostDiffers) > 0 {
		p("**Cannot separate code from host.** The two campaigns differ in %s (%s). The same code has moved more than the threshold "+
			"between two days on the same kind of machine, so a difference below may be the host's, not the code's. "+
			"To compare two builds, run both in one campaign, interleaved on one host: `campaign run --baseline-ref REF` (docs/ab.md).\n\n",
			joinComma(res.HostDiffers), hostPair(nds.Campaign, ods.Campaign))
	}
	for _, n := range notes {
		p("- %s\n", n)
	}
	if len(notes) > 0 {
		p("\n")
	}
	var rows [][]string
	for _, c := range changes {
		m := metricByKey(c.Metric)
		f := formatter(c.Metric)
		label := fmt.Sprintf("%s (%s)", m.Label, m.Unit)
		if c.Metric == "error_rate" {
			label = m.Label
		}
		rows = append(rows, []string{c.Algorithm, label, f(float64(c.OldMedian)), f(float64(c.NewMedian)),
			fmtRatio(float64(c.Ratio)), fmtP(float64(c.P)), c.Verdict})
	}
	if len(rows) == 0 {
		p("Nothing to compare: no algorithm has valid runs in both campaigns.\n")
		return
	}
	mdTable(buf, []string{"algorithm", "metric", "old", "new", "new/old", "p", "verdict"}, rows, 2, 3, 4, 5)
}

func joinComma(xs []string) string {
	var b bytes.Buffer
	for i, x := range xs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(x)
	}
	return b.String()
}

// hostPair says where and when each campaign ran.
func hostPair(nc, oc artifacts.Campaign) string {
	say := func(c artifacts.Campaign) string {
		e := c.Environment
		return fmt.Sprintf("%s, %d CPUs (%s), kernel %s, %s", c.ID, e.CPUs, orNone(e.CPUModel), orNone(e.Kernel), c.Started.UTC().Format(time.DateOnly))
	}
	return "new " + say(nc) + "; baseline " + say(oc)
}
