// Package campaign runs benchmark campaigns: it turns a scenario into an
// interleaved plan of reps × algorithms, drives an environment through the
// protocol of each run (set the algorithm, reset and verify, warm up,
// snapshot, measure, snapshot, cool down) and writes the artifacts that
// artifacts defines. A failed run is recorded as failed and the
// campaign goes on; an interrupted campaign keeps every finished run and
// can be resumed.
package campaign

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/scenario"
)

// EnvFactory builds the environment for a campaign; dir is the campaign
// directory (process logs go under dir/logs).
type EnvFactory func(dir string, s *scenario.Scenario, seed uint64) (env.Environment, error)

// Options configure Run.
type Options struct {
	// Scenario is the resolved scenario (overrides and scaling applied).
	// Ignored when ResumeDir is set: the campaign's own scenario is used.
	Scenario *scenario.Scenario
	// OutDir is the results directory; the campaign gets OutDir/<id>.
	OutDir string
	// ResumeDir, when set, finishes that campaign instead of starting one.
	ResumeDir string
	// Force lets a resume go on although its environment facts (binary,
	// revision, host) differ from the campaign's; both are recorded.
	Force bool
	// Env builds the environment.
	Env EnvFactory
	// Progress receives progress events; nil shows nothing.
	Progress Progress
	// Warn receives warnings (e.g. about a sequential order); nil discards.
	Warn io.Writer
	// Now is the clock for names and timestamps; default time.Now.
	Now func() time.Time
	// Builds, when set, make an A/B campaign: the scenario's one
	// algorithm runs on both builds (baseline first), interleaved rep by
	// rep like algorithms, each arm labelled "policy@build" and the
	// baseline's arm the reference. The environment must be an
	// env.BuildSwitcher. Ignored on resume (campaign.json has them).
	Builds []artifacts.Build
}

// Result is the outcome of a campaign.
type Result struct {
	Dir      string
	Campaign artifacts.Campaign
	// Runs are the run.json of every finished run, in plan order
	// (including runs finished before a resume).
	Runs []artifacts.Run
}

// ID returns the campaign id: the UTC start time and the scenario name.
func ID(start time.Time, scenarioName string) string {
	return start.UTC().Format("20060102-150405") + "-" + scenarioName
}

// Run runs (or resumes) a campaign and returns its directory and runs.
// It holds the campaign directory's lock (see LockFile) throughout, so a
// second run or resume of the same directory fails with ErrLocked.
// Cancelling ctx stops it between or during runs: finished runs stay, the
// interrupted run leaves nothing behind, campaign.json is written, every
// process is stopped, and Run returns ctx's error. A process of the
// environment that dies (see ProcessWatcher) fails the run in progress
// and stops the campaign with an error saying which process and how.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Warn == nil {
		opts.Warn = io.Discard
	}
	if opts.Progress == nil {
		opts.Progress = nopProgress{}
	}
	c, s, dir, lock, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	defer lock.unlock()
	// We own the directory now: temp files there are a killed session's.
	if _, err := artifacts.RemoveStaleTemp(dir); err != nil {
		return nil, fmt.Errorf("campaign: %w", err)
	}
	if opts.ResumeDir != "" && !c.Finished.IsZero() {
		if runs, ok := allRunsOK(dir, c.Plan); ok {
			// Nothing to run: no fleet started, campaign.json untouched
			// (a session or a new finish time would change the record).
			fmt.Fprintf(opts.Warn, "resume: every run of %s finished ok; nothing to do\n", dir)
			return &Result{Dir: dir, Campaign: *c, Runs: runs}, nil
		}
	}
	res := &Result{Dir: dir}
	write := func() error {
		res.Campaign = *c
		return artifacts.WriteJSON(filepath.Join(dir, artifacts.CampaignFile), c)
	}
	if err := write(); err != nil {
		return nil, err
	}

	e, err := opts.Env(dir, s, c.Seed)
	if err != nil {
		return res, fmt.Errorf("campaign: environment: %w", err)
	}
	defer e.Close()
	if _, err := churnScaler(s, e); err != nil {
		return res, err // said before the setup, not once per run
	}
	if err := e.Setup(ctx); err != nil {
		e.Close()
		return res, fmt.Errorf("campaign: environment setup: %w", err)
	}
	if err := startSession(c, e.Facts(), opts.Now().UTC(), opts.Force, opts.Warn); err != nil {
		return res, err
	}
	// Only now, with the session accepted, may a resume touch the runs.
	done, err := finishedRuns(dir, c.Plan, opts.Warn)
	if err != nil {
		return res, err
	}
	if len(done) < len(c.Plan) {
		c.Finished = time.Time{} // runs to (re)do: unfinished until they are
	}
	c.Backends = mergeBackends(c.Backends, e.Backends())
	if err := write(); err != nil {
		return res, err
	}

	r := &runner{c: c, s: s, dir: dir, env: e, now: opts.Now, progress: opts.Progress, session: len(c.Sessions)}
	opts.Progress.CampaignStart(c, len(done), r.runLength())
	var runErr error
	for _, p := range c.Plan {
		if prev, ok := done[p.Index]; ok {
			res.Runs = append(res.Runs, prev)
			continue
		}
		run, err := r.run(ctx, p)
		if err != nil {
			runErr = err
			break
		}
		res.Runs = append(res.Runs, run)
		opts.Progress.RunEnd(run)
		if r.died != nil {
			// Stop rather than restart: the campaign measures this fleet,
			// and a replacement (new port, cold state) would be another.
			runErr = fmt.Errorf("campaign: stopped at run %d: %w; after fixing the cause, re-run it and the rest with: prequalbench campaign run --resume %s", p.Index, r.died, dir)
			break
		}
	}
	if closeErr := e.Close(); closeErr != nil && runErr == nil {
		fmt.Fprintf(opts.Warn, "campaign: stopping the environment: %v\n", closeErr)
	}
	if runErr == nil {
		c.Finished = opts.Now().UTC()
	}
	if err := write(); err != nil {
		return res, err
	}
	opts.Progress.CampaignEnd()
	return res, runErr
}

// prepare returns the campaign record, its scenario and directory, locked:
// a new campaign from opts.Scenario, or the one in opts.ResumeDir.
func prepare(opts Options) (*artifacts.Campaign, *scenario.Scenario, string, *dirLock, error) {
	if opts.ResumeDir != "" {
		// Checked before locking, which creates the lock file: a mistyped
		// --resume (results/, a home directory) must not leave one there.
		if _, err := os.Stat(filepath.Join(opts.ResumeDir, artifacts.CampaignFile)); err != nil {
			return nil, nil, "", nil, fmt.Errorf("campaign: resume: %s is not a campaign directory (want the directory holding %s): %w", opts.ResumeDir, artifacts.CampaignFile, err)
		}
		lock, err := lockDir(opts.ResumeDir)
		if err != nil {
			return nil, nil, "", nil, err
		}
		c, s, err := readCampaign(opts.ResumeDir)
		if err != nil {
			lock.unlock()
			return nil, nil, "", nil, err
		}
		return c, s, opts.ResumeDir, lock, nil
	}
	s := opts.Scenario
	if s == nil {
		return nil, nil, "", nil, errors.New("campaign: no scenario")
	}
	if errs := s.Validate(); len(errs) > 0 {
		return nil, nil, "", nil, errs
	}
	p := s.Protocol
	arms, reference, err := abArms(p.Algorithms, p.Reference, opts.Builds)
	if err != nil {
		return nil, nil, "", nil, err
	}
	plan, warning, err := Plan(arms, p.Reps, p.Order, p.Seed)
	if err != nil {
		return nil, nil, "", nil, fmt.Errorf("campaign: %w", err)
	}
	if warning != "" {
		fmt.Fprintln(opts.Warn, "warning:", warning)
	}
	warnings := s.Warnings()
	for _, w := range warnings {
		fmt.Fprintln(opts.Warn, "warning:", w)
	}
	y, err := scenario.Marshal(s)
	if err != nil {
		return nil, nil, "", nil, err
	}
	start := opts.Now().UTC()
	c := &artifacts.Campaign{
		SchemaVersion: artifacts.SchemaVersion,
		ID:            ID(start, s.Name),
		Scenario:      s.Name,
		Description:   s.Description,
		ScenarioYAML:  string(y),
		Seed:          p.Seed,
		Order:         p.Order,
		Algorithms:    arms,
		Reps:          p.Reps,
		Warmup:        p.Warmup.Std(),
		Cooldown:      p.Cooldown.Std(),
		ResetMode:     p.Reset,
		Reference:     reference,
		Builds:        opts.Builds,
		PrimaryMetric: p.PrimaryMetric,
		Plan:          plan,
		Warnings:      warnings,
		Started:       start,
	}
	dir, id, lock, err := createCampaignDir(opts.OutDir, c.ID)
	if err != nil {
		return nil, nil, "", nil, err
	}
	c.ID = id
	if err := artifacts.MkdirAllSync(filepath.Join(dir, artifacts.RunsDir)); err != nil {
		lock.unlock()
		return nil, nil, "", nil, fmt.Errorf("campaign: %w", err)
	}
	return c, s, dir, lock, nil
}

// readCampaign reads the campaign.json and the scenario of a campaign to
// resume.
func readCampaign(dir string) (*artifacts.Campaign, *scenario.Scenario, error) {
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(dir, artifacts.CampaignFile), &c); err != nil {
		return nil, nil, fmt.Errorf("campaign: resume: %w", err)
	}
	s, err := scenario.Parse([]byte(c.ScenarioYAML))
	if err != nil {
		return nil, nil, fmt.Errorf("campaign: resume: the recorded scenario: %w", err)
	}
	if len(c.Plan) == 0 {
		return nil, nil, fmt.Errorf("campaign: resume: %s has an empty plan", dir)
	}
	return &c, s, nil
}

// finishedRuns reads the run.json of every planned run and returns the
// runs that finished ok. Every other run is run again: a run directory
// without run.json (interrupted) or with one that cannot be read (cut
// short, corrupt) is removed, and a failed run's directory is moved under
// FailedDir, so its error and logs stay for the post-mortem.
func finishedRuns(dir string, plan []artifacts.PlannedRun, warn io.Writer) (map[int]artifacts.Run, error) {
	done := map[int]artifacts.Run{}
	for _, p := range plan {
		runDir := filepath.Join(dir, p.Dir)
		var r artifacts.Run
		err := artifacts.ReadJSON(filepath.Join(runDir, artifacts.RunFile), &r)
		switch {
		case err == nil && r.Status == artifacts.StatusOK:
			done[p.Index] = r
			continue
		case err == nil:
			kept, err := keepFailedRun(dir, p.Dir)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(warn, "resume: run %d (%s) failed (%s); running it again, the failed attempt is in %s\n", p.Index, p.Dir, r.Error, kept)
			continue
		case errors.Is(err, os.ErrNotExist):
		default:
			fmt.Fprintf(warn, "resume: run %d (%s): unreadable %s (%v); running it again\n", p.Index, p.Dir, artifacts.RunFile, err)
		}
		if err := os.RemoveAll(runDir); err != nil {
			return nil, fmt.Errorf("campaign: %w", err)
		}
	}
	return done, artifacts.SyncDir(filepath.Join(dir, artifacts.RunsDir))
}

// allRunsOK returns the runs of the plan, in its order, when every one
// finished ok; it only reads.
func allRunsOK(dir string, plan []artifacts.PlannedRun) ([]artifacts.Run, bool) {
	runs := make([]artifacts.Run, 0, len(plan))
	for _, p := range plan {
		var r artifacts.Run
		if err := artifacts.ReadJSON(filepath.Join(dir, p.Dir, artifacts.RunFile), &r); err != nil || r.Status != artifacts.StatusOK {
			return nil, false
		}
		runs = append(runs, r)
	}
	return runs, true
}

type runner struct {
	c        *artifacts.Campaign
	s        *scenario.Scenario
	dir      string
	env      env.Environment
	now      func() time.Time
	progress Progress
	// session is this session's 1-based index in Campaign.Sessions.
	session int
	// died is set when a process of the environment died (ProcessWatcher):
	// the run it happened in failed, and the campaign stops.
	died error
}

// runLength is the planned length of one run (warmup + window + cooldown).
func (r *runner) runLength() time.Duration {
	return r.c.Warmup + r.s.Load.MeasuredDuration() + r.c.Cooldown
}

// run carries out one planned run and writes its artifacts. A failure of
// the run is recorded in run.json and returned as a failed Run with a nil
// error; the error is non-nil only when ctx was cancelled (the partial run
// directory is then removed) or run.json cannot be written.
func (r *runner) run(ctx context.Context, p artifacts.PlannedRun) (artifacts.Run, error) {
	runDir := filepath.Join(r.dir, p.Dir)
	run := artifacts.Run{PlannedRun: p, Session: r.session, Started: r.now().UTC(), Warmup: r.c.Warmup, Status: artifacts.StatusOK}
	r.progress.RunStart(p, r.c.Warmup, r.s.Load.MeasuredDuration())
	runCtx, endWatch := r.watch(ctx)
	err := r.protocol(runCtx, runDir, &run)
	died := endWatch(err != nil && ctx.Err() == nil)
	if ctx.Err() != nil {
		os.RemoveAll(runDir)
		return run, ctx.Err()
	}
	if died != nil {
		// The death is the reason, whatever the protocol tripped over.
		r.died, err = died, died
	}
	if err != nil {
		run.Status = artifacts.StatusFailed
		run.Error = err.Error()
	}
	if lc, ok := r.env.(env.LogCollector); ok {
		if err := lc.CollectLogs(filepath.Join(runDir, artifacts.LogsDir)); err != nil && run.Error == "" {
			run.Error = "collecting logs: " + err.Error()
		}
	}
	run.Finished = r.now().UTC()
	// run.json last: its presence marks the run finished (see resume).
	if err := artifacts.WriteJSON(filepath.Join(runDir, artifacts.RunFile), run); err != nil {
		return run, err
	}
	// Cool down after failed runs too: a run that failed under overload
	// may still have load draining from the servers.
	r.progress.Phase("cooldown")
	sleep(ctx, r.c.Cooldown)
	return run, nil
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
