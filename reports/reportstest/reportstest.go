// Package reportstest writes synthetic campaign directories that follow the
// artifacts contract (real HDR encodings, time series, ingress snapshots),
// so the reporter and the CLI can be tested without running a campaign.
// Everything is derived from the Spec's seed: equal specs give equal bytes.
package reportstest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/ingress/adminapi"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

// Profile shapes one algorithm's synthetic runs.
type Profile struct {
	// MedianMs is the body's median latency; TailMs the latency of the tail
	// fraction TailFrac of requests.
	MedianMs, TailMs, TailFrac float64
	// SlowShare is the fraction of picks sent to the slow group.
	SlowShare float64
	// Herd concentrates the fast group's picks on its first replicas
	// (0 = even).
	Herd float64
	// ErrorRate is the fraction of requests that fail (5xx); FastFail says
	// they fail at once (an instant 503), otherwise they fail at the body's
	// latency. Failures are not in the success histogram (schema v2).
	ErrorRate float64
	FastFail  bool
	// ErrorReps, when set, limits ErrorRate to the runs of these reps
	// (1-based); the other runs fail nothing.
	ErrorReps []int
	// RateFactor scales the achieved rate against the target (default 1).
	RateFactor float64
	// Probes is true for algorithms that probe (prequal).
	Probes bool
}

// Spec describes a synthetic campaign.
type Spec struct {
	ID, Scenario string
	Seed         uint64
	Reps         int
	Algorithms   []string
	Profiles     map[string]Profile
	// Fast and Slow are the replica counts of the two backend groups.
	Fast, Slow      int
	IngressReplicas int
	// Requests per run in the histogram; Seconds of time series.
	Requests, Seconds int
	TargetRate        float64
	// FailRuns and UnverifiedRuns hold plan indexes (1-based).
	FailRuns, UnverifiedRuns []int
	// InvalidRuns maps plan indexes to the reasons their runs are invalid.
	InvalidRuns map[int][]string
	// SendLagP99Ms maps plan indexes to a send-lag p99 (default 0.8 ms);
	// ConnCapBound to a count of requests the connection cap held back.
	SendLagP99Ms map[int]float64
	ConnCapBound map[int]uint64
	// SchemaV1 writes artifacts of schema v1 (before goodput and validity):
	// no schema_version, latencies of every answer, the v1 time series.
	SchemaV1 bool
	// Sweep is recorded as the scenario's protocol.sweep; its variants
	// must be among Algorithms (with a Profile each).
	Sweep []string
	// ScenarioPolicyQRIF, when > 0, is recorded as the scenario's
	// ingress.policy.qrif.
	ScenarioPolicyQRIF float64
	// Warnings are recorded as the campaign's (the scenario's own).
	Warnings []string
	// SaturatedRuns maps plan indexes to the saturation sentence of runs
	// whose own processes exhausted the host (valid runs).
	SaturatedRuns map[int]string
	// HostUnchecked records every run's host check as not measured (as
	// the simulator's runs are).
	HostUnchecked bool
	// HostCheckNote is recorded on every run (what the host check
	// sampled, or why it did not run).
	HostCheckNote string
	// ResetDetail is recorded on every verified run (what its reset
	// checked).
	ResetDetail string
	// PrimaryMetric is recorded as the campaign's (empty: the report's
	// default).
	PrimaryMetric string
	// Builds make an A/B campaign: recorded as the campaign's, and the
	// first algorithm (the baseline's arm) is the reference.
	Builds []artifacts.Build
}

// TimeoutMs is the request timeout the fixture's pessimistic view counts
// failures at.
const TimeoutMs = 10000

// Default returns a 2-algorithm, n-rep heterogeneous campaign in which
// prequal has a much shorter tail than round-robin.
func Default(reps int) Spec {
	return Spec{
		ID: "20260101T000000Z-fixture", Scenario: "fixture-hetero", Seed: 42, Reps: reps,
		Algorithms: []string{"prequal", "round-robin"},
		Profiles: map[string]Profile{
			"prequal":     {MedianMs: 20, TailMs: 60, TailFrac: 0.03, SlowShare: 0.2, Herd: 0.3, Probes: true},
			"round-robin": {MedianMs: 22, TailMs: 400, TailFrac: 0.03, SlowShare: 1.0 / 3},
		},
		Fast: 4, Slow: 2, IngressReplicas: 2, Requests: 3000, Seconds: 20, TargetRate: 150,
	}
}

// Write creates the campaign directory dir from s.
func Write(dir string, s Spec) error {
	rng := rand.New(rand.NewPCG(s.Seed, 0x5eed))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := artifacts.Campaign{
		SchemaVersion: artifacts.SchemaVersion,
		ID:            s.ID, Scenario: s.Scenario, Description: "Synthetic fixture: " + fmt.Sprint(s.Fast) + " fast and " + fmt.Sprint(s.Slow) + " slow replicas.",
		ScenarioYAML: "name: " + s.Scenario + "\nload:\n  model: open\n  rate: " + fmt.Sprint(s.TargetRate) + "\n" + sweepYAML(s.Sweep) + policyYAML(s.ScenarioPolicyQRIF),
		Environment: artifacts.Environment{
			Name: "local", IngressReplicas: s.IngressReplicas, OS: "linux", Arch: "amd64", CPUs: 2,
			CPUModel: "Fixture CPU", MemoryBytes: 8 << 30, Kernel: "6.1.0", GoVersion: "go1.26.8", RustVersion: "rustc 1.95.0",
			Version: "v0.0.0-fixture", GitRevision: "0123456789abcdef0123456789abcdef01234567",
		},
		Seed: s.Seed, Order: "shuffle", Algorithms: s.Algorithms, Reps: s.Reps,
		Warmup: 5 * time.Second, Cooldown: time.Second, ResetMode: "admin", Reference: "prequal",
		Started: base, Warnings: s.Warnings, PrimaryMetric: s.PrimaryMetric, Builds: s.Builds,
	}
	if len(s.Builds) > 0 {
		c.Reference = s.Algorithms[0]
	}
	for i := 0; i < s.Fast; i++ {
		c.Backends = append(c.Backends, artifacts.Backend{Address: fmt.Sprintf("127.0.0.1:%d", 9001+i), Group: "fast", Route: "bench"})
	}
	for i := 0; i < s.Slow; i++ {
		c.Backends = append(c.Backends, artifacts.Backend{Address: fmt.Sprintf("127.0.0.1:%d", 9101+i), Group: "slow", Route: "bench"})
	}
	idx := 0
	for rep := 1; rep <= s.Reps; rep++ {
		order := append([]string(nil), s.Algorithms...)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, alg := range order {
			idx++
			c.Plan = append(c.Plan, artifacts.PlannedRun{Index: idx, Rep: rep, Algorithm: alg,
				Dir: filepath.ToSlash(filepath.Join(artifacts.RunsDir, artifacts.RunDirName(idx, rep, alg)))})
		}
	}
	for _, p := range c.Plan {
		if err := writeRun(dir, s, c, p, rng, base); err != nil {
			return err
		}
	}
	c.Finished = base.Add(time.Duration(len(c.Plan)) * time.Minute)
	if s.SchemaV1 {
		c.SchemaVersion = 0
	}
	return writeJSON(filepath.Join(dir, artifacts.CampaignFile), c)
}

// sweepYAML is the protocol block that records sweeps; empty without any,
// so fixtures without a sweep keep their bytes.
func policyYAML(qrif float64) string {
	if qrif <= 0 {
		return ""
	}
	return fmt.Sprintf("ingress:\n  policy:\n    qrif: %v\n", qrif)
}

func sweepYAML(sweeps []string) string {
	if len(sweeps) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("protocol:\n  sweep:\n")
	for _, sw := range sweeps {
		fmt.Fprintf(&b, "    - %q\n", sw)
	}
	return b.String()
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func writeRun(dir string, s Spec, c artifacts.Campaign, p artifacts.PlannedRun, rng *rand.Rand, base time.Time) error {
	prof := s.Profiles[p.Algorithm]
	if prof.RateFactor == 0 {
		prof.RateFactor = 1
	}
	runDir := filepath.Join(dir, filepath.FromSlash(p.Dir))
	start := base.Add(time.Duration(p.Index) * time.Minute)
	run := artifacts.Run{PlannedRun: p, Status: artifacts.StatusOK, ResetVerified: !contains(s.UnverifiedRuns, p.Index),
		Started: start, Finished: start.Add(time.Duration(s.Seconds)*time.Second + 5*time.Second), Warmup: 5 * time.Second}
	run.ResetDetail = s.ResetDetail
	if !run.ResetVerified {
		run.ResetDetail = "pool not empty after reset (3 probes left)"
	}
	if contains(s.FailRuns, p.Index) {
		run.Status, run.Error = artifacts.StatusFailed, "ingress exited during warmup"
		return writeJSON(filepath.Join(runDir, artifacts.RunFile), run)
	}
	jitter := 1 + 0.04*rng.NormFloat64()
	if len(prof.ErrorReps) > 0 && !contains(prof.ErrorReps, p.Rep) {
		prof.ErrorRate = 0
	}
	h, pess := artifacts.NewHistogram(), artifacts.NewHistogram()
	var errs uint64
	secP99 := make([][]float64, s.Seconds)
	record := func(h *hdrhistogram.Histogram, ms float64) error {
		if err := h.RecordValue(int64(ms * 1000)); err != nil {
			return fmt.Errorf("reportstest: %w", err)
		}
		return nil
	}
	for i := 0; i < s.Requests; i++ {
		var ms float64
		if rng.Float64() < prof.TailFrac {
			ms = prof.TailMs * jitter * (1 + 0.2*rng.Float64())
		} else {
			ms = prof.MedianMs * jitter * math.Exp(0.3*rng.NormFloat64())
		}
		failed := rng.Float64() < prof.ErrorRate
		if failed && prof.FastFail {
			ms = 0.2
		}
		sec := i * s.Seconds / s.Requests
		switch {
		case s.SchemaV1:
			// v1: one histogram of every answer, failures included.
			if err := record(h, ms); err != nil {
				return err
			}
			secP99[sec] = append(secP99[sec], ms)
		case failed:
			if err := record(pess, TimeoutMs); err != nil {
				return err
			}
		default:
			if err := record(h, ms); err != nil {
				return err
			}
			if err := record(pess, ms); err != nil {
				return err
			}
			secP99[sec] = append(secP99[sec], ms)
		}
		if failed {
			errs++
		}
	}
	if err := writeHist(filepath.Join(runDir, artifacts.HistogramFile), h); err != nil {
		return err
	}
	sent := uint64(s.Requests)
	dur := time.Duration(s.Seconds) * time.Second
	run.Load = artifacts.LoadResult{
		Model: "open", Duration: dur, TargetRate: s.TargetRate, Sent: sent, Completed: sent, Errors: errs,
		AchievedRate: math.Round(s.TargetRate*prof.RateFactor*10) / 10, StatusCodes: map[string]uint64{"200": sent - errs},
		P50: artifacts.Millis(h.ValueAtQuantile(50)), P90: artifacts.Millis(h.ValueAtQuantile(90)),
		P99: artifacts.Millis(h.ValueAtQuantile(99)), P999: artifacts.Millis(h.ValueAtQuantile(99.9)),
		Max: artifacts.Millis(h.Max()), Mean: h.Mean() / 1000, Count: h.TotalCount(),
	}
	if errs > 0 {
		run.Load.StatusCodes["503"] = errs
	}
	if !s.SchemaV1 {
		if err := fillV2(&run, s, p, h, pess, rng, prof.RateFactor); err != nil {
			return err
		}
		if err := writeHist(filepath.Join(runDir, artifacts.PessimisticHistogramFile), pess); err != nil {
			return err
		}
		// Send lag and connection wait: artifacts the report does not
		// decode, which its digests still cover.
		lag := artifacts.NewHistogram()
		for i := int64(1); i <= 100; i++ {
			_ = lag.RecordValue(100 + i*10)
		}
		for _, name := range []string{artifacts.SendLagHistogramFile, artifacts.ConnWaitHistogramFile} {
			if err := writeHist(filepath.Join(runDir, name), lag); err != nil {
				return err
			}
		}
	}
	if err := writeJSON(filepath.Join(runDir, artifacts.RunFile), run); err != nil {
		return err
	}
	var ts strings.Builder
	header := artifacts.TimeseriesHeader
	if s.SchemaV1 {
		header = artifacts.TimeseriesHeaderV1
	}
	ts.WriteString(header + "\n")
	per := uint64(s.Requests / s.Seconds)
	for sec, xs := range secP99 {
		h1 := artifacts.NewHistogram()
		for _, x := range xs {
			_ = h1.RecordValue(int64(x * 1000))
		}
		fmt.Fprintf(&ts, "%d,%d,%d,%d,%d,%.3f,%.3f", sec, per, len(xs), 0, 0,
			artifacts.Millis(h1.ValueAtQuantile(50)), artifacts.Millis(h1.ValueAtQuantile(99)))
		if !s.SchemaV1 {
			fmt.Fprintf(&ts, ",%.1f,%.1f,%.1f,%.1f", 60.0, 12.5, 30.0, 20.0)
		}
		ts.WriteString("\n")
	}
	if err := writeFile(filepath.Join(runDir, artifacts.TimeseriesFile), []byte(ts.String())); err != nil {
		return err
	}
	before, after := snapshots(s, c, p.Algorithm, prof, sent, rng)
	if err := writeJSON(filepath.Join(runDir, artifacts.StateBefore), before); err != nil {
		return err
	}
	return writeJSON(filepath.Join(runDir, artifacts.StateAfter), after)
}

// snapshots returns per-replica admin states before and after the window.
// The before snapshot holds warmup counts so the reporter must subtract.
func snapshots(s Spec, c artifacts.Campaign, alg string, prof Profile, total uint64, rng *rand.Rand) (before, after []adminapi.State) {
	weights := make([]float64, len(c.Backends))
	var fastW float64
	for i, b := range c.Backends {
		if b.Group == "fast" {
			weights[i] = math.Exp(-prof.Herd*float64(i)) * (1 + 0.05*rng.Float64())
			fastW += weights[i]
		}
	}
	for i, b := range c.Backends {
		if b.Group == "fast" {
			weights[i] = weights[i] / fastW * (1 - prof.SlowShare)
		} else {
			weights[i] = prof.SlowShare / float64(s.Slow)
		}
	}
	for r := 0; r < s.IngressReplicas; r++ {
		mk := func(window bool) adminapi.State {
			var eps []loadbalancer.EndpointStats
			var picks uint64
			for i, b := range c.Backends {
				n := uint64(10 * (i + 1)) // warmup picks
				if window {
					n += uint64(math.Round(weights[i] * float64(total) / float64(s.IngressReplicas)))
				}
				picks += n
				eps = append(eps, loadbalancer.EndpointStats{Address: b.Address, Picks: n})
			}
			st := loadbalancer.Stats{Algorithm: alg, Endpoints: eps, Picks: picks, ProbeOutcomes: map[loadbalancer.ProbeOutcome]uint64{}}
			if prof.Probes {
				st.ProbesPlanned = picks * 3
				st.ProbeOutcomes[loadbalancer.ProbeOK] = picks*3 - picks/100
				st.ProbeOutcomes[loadbalancer.ProbeTimeout] = picks / 100
				st.HotPicks, st.ColdPicks = picks/10, picks-picks/10-picks/200
				st.Fallbacks = picks / 200
				st.PoolSize = 12 + r
				// Replicas in different regimes of Eq. 1, and a few stale
				// answers and slow-held ones.
				st.ReuseBudget = 1 + float64(r)/2
				st.StaleAnswers = picks / 1000
				st.SlowHeld = picks / 500
				st.PoolRemovals = map[string]uint64{"reuse": picks, "age": picks / 50}
			}
			return adminapi.State{Routes: []adminapi.RouteState{{Key: "bench", Host: "bench.local", Path: "/", PathType: "Prefix",
				Algorithm: alg, Requests: picks, Policy: st}}}
		}
		before = append(before, mk(false))
		after = append(after, mk(true))
	}
	return before, after
}

// writeFile writes a fixture file without fsync: a test's temporary
// directory need not survive a crash, and fsyncing every fixture file made
// the reporter's tests wait on the disk. The reporter's own writes (the
// code under test) keep their fsync.
func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// writeJSON is artifacts.WriteJSON's encoding without its fsync.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("reportstest: encode %s: %w", path, err)
	}
	return writeFile(path, append(b, '\n'))
}

func writeHist(path string, h *hdrhistogram.Histogram) error {
	enc, err := artifacts.EncodeHistogram(h)
	if err != nil {
		return err
	}
	return writeFile(path, enc)
}

// fillV2 sets run.json's schema v2 fields from the two histograms.
func fillV2(run *artifacts.Run, s Spec, p artifacts.PlannedRun, h, pess *hdrhistogram.Histogram, rng *rand.Rand, rateFactor float64) error {
	l := &run.Load
	l.Succeeded = uint64(h.TotalCount())
	l.Failed5xx = l.Errors
	l.Goodput = math.Round(float64(l.Succeeded)/float64(s.Seconds)*rateFactor*10) / 10
	l.ErrorRate = float64(l.Errors) / float64(l.Sent)
	l.Success = percentiles(h)
	l.Pessimistic = percentiles(pess)
	lag := 0.8
	if v, ok := s.SendLagP99Ms[p.Index]; ok {
		lag = v
	}
	l.SendLag = artifacts.Percentiles{P50: 0.2, P90: lag / 2, P99: lag, P999: lag * 1.5, Max: lag * 2, Mean: 0.3, Count: int64(l.Sent)}
	l.ConnWait = artifacts.Percentiles{P50: 0.05, P90: 0.1, P99: 0.2 + 0.01*rng.Float64(), P999: 0.5, Max: 1, Mean: 0.06, Count: int64(l.Sent)}
	l.ConnCap = 256
	l.ConnCapBound = s.ConnCapBound[p.Index]
	if l.ConnCapBound > 0 {
		l.ConnWait.P99, l.ConnWait.P999, l.ConnWait.Max = 40, 120, 300
	}
	check := artifacts.HostCheckPassed
	if s.HostUnchecked {
		check = artifacts.HostCheckNotMeasured
	}
	run.Validity = artifacts.Validity{Valid: true, HostCheck: check, HostCheckNote: s.HostCheckNote}
	if sat, ok := s.SaturatedRuns[p.Index]; ok {
		run.Validity.HostCheck, run.Validity.Saturation = artifacts.HostCheckSaturated, sat
	}
	if reasons, ok := s.InvalidRuns[p.Index]; ok {
		run.Validity.Valid, run.Validity.Reasons = false, reasons
		if strings.Contains(strings.Join(reasons, " "), "host idle") {
			run.Validity.HostCheck = artifacts.HostCheckOutside
		}
	}
	return nil
}

func percentiles(h *hdrhistogram.Histogram) artifacts.Percentiles {
	return artifacts.Percentiles{P50: artifacts.Millis(h.ValueAtQuantile(50)), P90: artifacts.Millis(h.ValueAtQuantile(90)),
		P99: artifacts.Millis(h.ValueAtQuantile(99)), P999: artifacts.Millis(h.ValueAtQuantile(99.9)),
		Max: artifacts.Millis(h.Max()), Mean: h.Mean() / 1000, Count: h.TotalCount()}
}
