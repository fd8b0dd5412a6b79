package campaign

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/campaign/hostcpu"
	"github.com/prequalbench/prequalbench/ingress/adminapi"
	"github.com/prequalbench/prequalbench/load"
)

// protocol is the body of one run; it fills run and writes every artifact
// but run.json. The warmup and the measured window are one load without a
// pause; the state snapshots are taken at the window's boundaries while
// the load goes on, so the picks between them are the window's.
func (r *runner) protocol(ctx context.Context, runDir string, run *artifacts.Run) error {
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	r.progress.Phase("reset")
	policy, err := r.switchBuild(ctx, run.Algorithm)
	if err != nil {
		return err
	}
	if err := r.env.SetAlgorithm(ctx, policy); err != nil {
		return err
	}
	v, err := r.env.Reset(ctx, r.c.ResetMode)
	if err != nil {
		return err
	}
	run.ResetVerified, run.ResetDetail = v.Verified, v.Detail

	cfg := r.loadConfig(r.env.LoadTargets(), uint64(run.Index))
	if r.c.Warmup > 0 {
		cfg.Warmup = r.c.Warmup
		if !cfg.Closed() {
			cfg.WarmupRate = r.s.Load.StartRate()
		}
	}
	var (
		before, after         []adminapi.State
		beforeErr, afterErr   error
		startedWin, endedWin  bool
		driver, drivesItsLoad = r.env.(env.LoadDriver)
		churning              *churn
	)
	if c, ok := r.env.(env.LoadChooser); ok && drivesItsLoad && !c.DrivesLoad() {
		drivesItsLoad = false // handed back: the load goes from here
	}
	scaler, err := churnScaler(r.s, r.env)
	if err != nil {
		return err
	}
	cfg.OnWindowStart = func() {
		startedWin = true
		r.progress.Phase("measure")
		before, beforeErr = r.env.Snapshot(ctx)
		if scaler != nil {
			churning = startChurn(ctx, *r.s.Churn, scaler, groupReplicas(r.s, r.s.Churn.Group))
		}
	}
	cfg.OnWindowEnd = func() {
		endedWin = true
		if churning != nil {
			churning.halt() // the window's scalings end with it
		}
		after, afterErr = r.env.Snapshot(ctx)
	}
	cfg.OnSecond = func(load.Second) { r.progress.Second() }
	_, lists := r.env.(env.ProcessLister)
	sampleHost, hostNote := hostCheckPlan(drivesItsLoad, lists)
	cpus := hostCPUs()
	var cpuPlan *env.CPUPlan
	if cs, ok := r.env.(env.CPUSampler); ok {
		// A cluster samples what serves the run itself (its nodes, or
		// this host under kind) and says what it sampled.
		p := cs.PlanCPU(ctx)
		cpuPlan, cfg.SampleCPU, cpus = &p, p.Sample, max(p.CPUs, 1)
		defer p.Stop()
	} else if sampleHost {
		cfg.SampleCPU = r.cpuSampler()
	}
	if cfg.Warmup > 0 {
		r.progress.Phase("warmup")
	}

	var res *load.Result
	var loadErr error
	if drivesItsLoad {
		res, loadErr = driver.RunLoad(ctx, cfg)
	} else {
		res, loadErr = load.Run(ctx, cfg)
	}
	var churnErr error
	if churning != nil {
		churnErr = churning.finish(ctx, runDir)
	}
	switch {
	case loadErr != nil:
		return fmt.Errorf("campaign: load: %w", loadErr)
	case churnErr != nil:
		return churnErr
	case !startedWin || !endedWin:
		return errors.New("campaign: load: the window's boundaries were not signalled (OnWindowStart/OnWindowEnd), so no state snapshots")
	case beforeErr != nil:
		return beforeErr
	case afterErr != nil:
		return afterErr
	}
	if err := artifacts.WriteJSON(filepath.Join(runDir, artifacts.StateBefore), before); err != nil {
		return err
	}
	if err := artifacts.WriteJSON(filepath.Join(runDir, artifacts.StateAfter), after); err != nil {
		return err
	}
	if cr, ok := r.env.(env.ClockReporter); ok && drivesItsLoad {
		run.GeneratorClocks = cr.GeneratorClocks()
	}
	run.Load = res.Summary()
	run.Validity = judge(run.Load, res.Series, r.s.Load.InFlightBound(), r.s.Protocol.HostBound, cpus)
	switch {
	case cpuPlan != nil:
		run.Validity.HostCheckNote = cpuPlan.Note() + unreadSeconds(res.Series, run.Validity.HostCheck)
	case run.Validity.HostCheck == artifacts.HostCheckNotMeasured:
		run.Validity.HostCheckNote = hostNote
	}
	for _, h := range []struct {
		file string
		h    *hdrhistogram.Histogram
	}{
		{artifacts.HistogramFile, res.Histogram},
		{artifacts.PessimisticHistogramFile, res.Pessimistic},
		{artifacts.SendLagHistogramFile, res.SendLag},
		{artifacts.ConnWaitHistogramFile, res.ConnWait},
	} {
		if h.h == nil {
			continue // not measured (a load driver may leave some out)
		}
		b, err := artifacts.EncodeHistogram(h.h)
		if err != nil {
			return err
		}
		if err := artifacts.WriteFileAtomic(filepath.Join(runDir, h.file), b); err != nil {
			return err
		}
	}
	var ts bytes.Buffer
	if err := res.WriteTimeseries(&ts); err != nil {
		return fmt.Errorf("campaign: timeseries: %w", err)
	}
	return artifacts.WriteFileAtomic(filepath.Join(runDir, artifacts.TimeseriesFile), ts.Bytes())
}

// Why a run's host check did not run (Validity.HostCheckNote).
const (
	noteLoadDriven = "the environment drove the load, not this host"
	noteNotListed  = "this environment's processes are not on this host's process list"
)

// unreadSeconds says how few of the window's seconds the check read when
// it judged only some of them, so a check passed on a few readings is not
// taken for one over the whole window.
func unreadSeconds(series []load.Second, check string) string {
	if check == artifacts.HostCheckNotMeasured || len(series) == 0 {
		return ""
	}
	read := 0
	for _, s := range series {
		if s.CPU != nil && !math.IsNaN(s.CPU.HostIdle) {
			read++
		}
	}
	if read == len(series) {
		return ""
	}
	return fmt.Sprintf("; only %d of the window's %d seconds had a reading, the rest went unchecked", read, len(series))
}

// hostCheckPlan says whether a run samples the host's CPU, and if not,
// why. The check must know whose CPU it was: where the environment cannot
// list its processes (anything but local: kind, kube, external), the
// ingress, the backends and a policy's probes would count as outside
// load and drop the runs, so the host is not judged at all.
func hostCheckPlan(drivesItsLoad, listsProcesses bool) (sample bool, note string) {
	switch {
	case drivesItsLoad:
		return false, noteLoadDriven
	case !listsProcesses:
		return false, noteNotListed
	}
	return true, ""
}

// hostCPUs is the number of CPUs the host's idle reading covers: the
// per-CPU lines of /proc/stat, not runtime.NumCPU, which under taskset or
// a cpuset counts only the CPUs this process may use and so would
// overstate the share of the host the campaign's processes took.
func hostCPUs() int {
	if n := hostcpu.HostCPUs(); n > 0 {
		return n
	}
	return runtime.NumCPU()
}

// cpuSampler samples the host, this process (the load generator) and, in
// an environment that lists them, the ingress and backend processes.
func (r *runner) cpuSampler() func() *load.CPU {
	var pids env.PIDs
	if pl, ok := r.env.(env.ProcessLister); ok {
		pids = pl.PIDs()
	}
	s := hostcpu.NewSampler([]int{os.Getpid()}, pids.Ingress, pids.Backends)
	return func() *load.CPU {
		u := s.Sample()
		return &load.CPU{HostIdle: u.HostIdle, Generator: u.Generator, Ingress: u.Ingress, Backends: u.Backends}
	}
}

// loadConfig maps the scenario's load onto the load engine. The
// connection cap is a total over the ingress replicas, split evenly
// between their addresses (load.Config's cap is per address).
func (r *runner) loadConfig(targets []env.Target, runIndex uint64) load.Config {
	l := r.s.Load
	cfg := load.Config{
		Users:       l.Users,
		Duration:    l.Duration.Std(),
		Timeout:     l.Timeout.Std(),
		MaxWorkers:  l.MaxWorkers,
		Connections: l.Connections,
		Seed:        r.c.Seed*1_000_003 + runIndex,
	}
	for _, t := range targets {
		cfg.Targets = append(cfg.Targets, load.Target{URL: t.URL, Host: t.Host, Weight: t.Weight})
	}
	for _, p := range l.Open {
		cfg.Open = append(cfg.Open, load.Phase{
			Kind: p.Kind, Duration: p.Duration.Std(), Rate: p.Rate, From: p.From, To: p.To, Steps: p.Steps,
			High: p.High, Low: p.Low, HighFor: p.HighFor.Std(), LowFor: p.LowFor.Std(),
		})
	}
	addrs := distinctHosts(targets)
	total := l.ConnectionCap()
	cfg.MaxConnections = (total + addrs - 1) / addrs
	return cfg
}

// distinctHosts counts the distinct host:port of the targets (at least 1).
func distinctHosts(targets []env.Target) int {
	seen := map[string]bool{}
	for _, t := range targets {
		seen[hostOf(t.URL)] = true
	}
	return max(len(seen), 1)
}
