// Package artifacts defines the on-disk layout of a campaign, the contract
// between the campaign runner that writes it and the reporter that rebuilds
// REPORT.md from it alone:
//
//	results/<campaign-id>/
//	  campaign.json                     Campaign
//	  runs/<NN>-rep<R>-<algorithm>/
//	    run.json                        Run
//	    histogram.hdr                   HDR histogram of latencies (µs), V2 encoding, base64 text
//	    timeseries.csv                  per-second series (see TimeseriesHeader)
//	    state-before.json               admin state per ingress replica before the run ([]adminapi.State)
//	    state-after.json                admin state per ingress replica after the run
//	    logs/                           process logs
//
// Every file is written atomically (temp file, then rename), so an
// interrupted campaign never leaves a half-written artifact behind.
package artifacts

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// File names inside a campaign directory.
const (
	CampaignFile   = "campaign.json"
	RunsDir        = "runs"
	RunFile        = "run.json"
	HistogramFile  = "histogram.hdr"
	TimeseriesFile = "timeseries.csv"
	StateBefore    = "state-before.json"
	StateAfter     = "state-after.json"
	LogsDir        = "logs"
	ReportFile     = "REPORT.md"
	PlotsDir       = "plots"
)

// TimeseriesHeader is the first line of timeseries.csv. second counts from
// the start of the measured window; latencies are in milliseconds.
const TimeseriesHeader = "second,sent,completed,errors,late,p50_ms,p99_ms"

// Run statuses.
const (
	StatusOK     = "ok"
	StatusFailed = "failed"
)

// Campaign is campaign.json: everything needed to know what was run.
type Campaign struct {
	ID          string `json:"id"`
	Scenario    string `json:"scenario"`
	Description string `json:"description"`
	// ScenarioYAML is the resolved scenario (after overrides and
	// --duration-scale), as YAML.
	ScenarioYAML string      `json:"scenario_yaml"`
	Environment  Environment `json:"environment"`
	Seed         uint64      `json:"seed"`
	// Order is the interleaving rule: "shuffle", "rotate" or "sequential".
	Order      string        `json:"order"`
	Algorithms []string      `json:"algorithms"`
	Reps       int           `json:"reps"`
	Warmup     time.Duration `json:"warmup_ns"`
	Cooldown   time.Duration `json:"cooldown_ns"`
	// ResetMode is "admin" or "restart".
	ResetMode string `json:"reset_mode"`
	// Reference is the algorithm the report compares the others against.
	Reference string `json:"reference"`
	// Plan is every run in the order it is (or was) run.
	Plan []PlannedRun `json:"plan"`
	// Backends maps each backend address to its group and route.
	Backends []Backend `json:"backends"`
	Started  time.Time `json:"started"`
	// Finished is zero while the campaign is unfinished.
	Finished time.Time `json:"finished"`
}

// Environment records where and with what a campaign ran.
type Environment struct {
	Name            string `json:"name"` // local, kind, kube
	Topology        string `json:"topology,omitempty"`
	IngressReplicas int    `json:"ingress_replicas"`
	OS              string `json:"os"`
	Arch            string `json:"arch"`
	CPUs            int    `json:"cpus"`
	CPUModel        string `json:"cpu_model,omitempty"`
	MemoryBytes     uint64 `json:"memory_bytes,omitempty"`
	Kernel          string `json:"kernel,omitempty"`
	GoVersion       string `json:"go_version"`
	RustVersion     string `json:"rust_version,omitempty"`
	Version         string `json:"prequalbench_version"`
	GitRevision     string `json:"git_revision,omitempty"`
	GitDirty        bool   `json:"git_dirty"`
}

// PlannedRun is one entry of the interleaved plan.
type PlannedRun struct {
	Index     int    `json:"index"` // 1-based position in the order
	Rep       int    `json:"rep"`   // 1-based repetition
	Algorithm string `json:"algorithm"`
	Dir       string `json:"dir"` // relative to the campaign directory
}

// Backend describes one backend replica.
type Backend struct {
	Address string `json:"address"`
	Group   string `json:"group"`
	Route   string `json:"route"`
}

// Run is run.json: the outcome of one measured run.
type Run struct {
	PlannedRun
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// ResetVerified is true when the reset before the run was checked
	// (empty pools, zero counters, zero in-flight) and held.
	ResetVerified bool          `json:"reset_verified"`
	ResetDetail   string        `json:"reset_detail,omitempty"`
	Started       time.Time     `json:"started"`
	Finished      time.Time     `json:"finished"`
	Warmup        time.Duration `json:"warmup_ns"`
	Load          LoadResult    `json:"load"`
}

// LoadResult summarises the measured window of one run. Percentiles come
// from the exact HDR histogram, never from an estimate.
type LoadResult struct {
	// Model is "open" or "closed".
	Model    string        `json:"model"`
	Duration time.Duration `json:"duration_ns"`
	// TargetRate is the mean offered rate (open loop); 0 for closed loop.
	TargetRate float64 `json:"target_rate"`
	// Users is the number of virtual users (closed loop).
	Users int `json:"users,omitempty"`
	// Sent counts requests sent; Completed those that got any answer or
	// error; Errors those with a transport error or status >= 400.
	Sent      uint64 `json:"sent"`
	Completed uint64 `json:"completed"`
	Errors    uint64 `json:"errors"`
	// AchievedRate is requests completed within the window per second of
	// the window (requests drained after it do not count).
	AchievedRate float64 `json:"achieved_rate"`
	// Dropped counts scheduled open-loop sends never sent because every
	// load worker was stuck for a whole request timeout.
	Dropped uint64 `json:"dropped"`
	// LateSends counts open-loop sends that left more than 1 ms after
	// their intended time.
	LateSends uint64 `json:"late_sends"`
	// StatusCodes counts answers by HTTP status ("0" = transport error).
	StatusCodes map[string]uint64 `json:"status_codes"`
	// Latency percentiles in milliseconds, timed from the intended send.
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
	Mean  float64 `json:"mean_ms"`
	Count int64   `json:"count"`
}

// WriteFileAtomic writes data to path through a temp file and a rename,
// and makes it durable: the file is fsynced before the rename and its
// directory after it (and the parent of every directory it had to
// create), so a crash or power loss leaves either the old file or the
// whole new one, never an empty one.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := MkdirAllSync(dir); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+TempMarker+"*")
	if err != nil {
		return fmt.Errorf("artifacts: %w", err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("artifacts: write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := syncFile(f); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("artifacts: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("artifacts: %w", err)
	}
	return SyncDir(dir)
}

// WriteJSON writes v as indented JSON, atomically.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("artifacts: encode %s: %w", path, err)
	}
	return WriteFileAtomic(path, append(b, '\n'))
}

// ReadJSON reads path into v, naming the file in any error.
func ReadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("artifacts: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("artifacts: %s: %w", path, err)
	}
	return nil
}

// RunDirName is the directory name of a run: "<NN>-rep<R>-<algorithm>".
func RunDirName(index, rep int, algorithm string) string {
	return fmt.Sprintf("%02d-rep%d-%s", index, rep, algorithm)
}
