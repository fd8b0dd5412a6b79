// Package artifacts defines the on-disk layout of a campaign, the contract
// between the campaign runner that writes it and the reporter that rebuilds
// REPORT.md from it alone:
//
//	results/<campaign-id>/
//	  campaign.json                     Campaign
//	  runs/<NN>-rep<R>-<algorithm>/
//	    run.json                        Run
//	    histogram.hdr                   HDR histogram of success latencies (µs), V2 encoding, base64 text
//	    histogram-pessimistic.hdr       every request, failures counted at the timeout (µs)
//	    histogram-sendlag.hdr           send lag: actual minus intended send time (µs)
//	    histogram-connwait.hdr          connection wait: send to got-connection (µs)
//	    timeseries.csv                  per-second series (see TimeseriesHeader)
//	    state-before.json               admin state per ingress replica before the run ([]adminapi.State)
//	    state-after.json                admin state per ingress replica after the run
//	    logs/                           process logs
//	  failed/<NN>-rep<R>-<algorithm>.<n>/  a failed attempt of a run that --resume ran again
//	  logs/                             every process's whole log, processes.json
//	  tmp/                              the local env's address files while it runs
//	  .lock                             flocked by the process running the campaign (holds its pid)
//
// Every file is written atomically and durably (temp file, fsync, rename,
// fsync of the directory), so a crash or power loss never leaves a
// half-written or empty artifact behind. The campaign runner removes the
// temp files a killed writer left (RemoveStaleTemp) when it next takes
// the lock.
package artifacts

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names inside a campaign directory.
const (
	CampaignFile  = "campaign.json"
	RunsDir       = "runs"
	RunFile       = "run.json"
	HistogramFile = "histogram.hdr"
	// Schema v2 histograms, same encoding as HistogramFile.
	PessimisticHistogramFile = "histogram-pessimistic.hdr"
	SendLagHistogramFile     = "histogram-sendlag.hdr"
	ConnWaitHistogramFile    = "histogram-connwait.hdr"
	TimeseriesFile           = "timeseries.csv"
	StateBefore              = "state-before.json"
	StateAfter               = "state-after.json"
	LogsDir                  = "logs"
	ReportFile               = "REPORT.md"
	PlotsDir                 = "plots"
)

// SchemaVersion is the version of run.json and campaign.json this code
// writes. Version 2 added honest load accounting (successes and failures by
// class, goodput, success and pessimistic latency), generator fidelity
// (send lag, connection wait, connection cap), run validity and the host
// CPU columns of timeseries.csv. Campaign.SchemaVersion 0 means version 1.
const SchemaVersion = 2

// TimeseriesHeader is the first line of timeseries.csv (schema v2). second
// counts from the start of the measured window; sent, succeeded, errors and
// late count the sends and answers of that second; latencies are in
// milliseconds and cover the successes of that second; the CPU columns are
// percentages (host idle of all CPUs; the others of one CPU, so 150 means
// one and a half cores) and are empty when not measurable (e.g. in the kube
// environment, or for a process the environment does not run).
const TimeseriesHeader = "second,sent,succeeded,errors,late,p50_ms,p99_ms,host_idle_pct,gen_cpu_pct,ingress_cpu_pct,backend_cpu_pct"

// TimeseriesHeaderV1 is the header of schema v1's timeseries.csv, where
// completed counted every answer, errors included.
const TimeseriesHeaderV1 = "second,sent,completed,errors,late,p50_ms,p99_ms"

// Run statuses.
const (
	StatusOK     = "ok"
	StatusFailed = "failed"
)

// Campaign is campaign.json: everything needed to know what was run.
type Campaign struct {
	// SchemaVersion is SchemaVersion when written by this code; 0 (absent)
	// in artifacts of schema v1.
	SchemaVersion int    `json:"schema_version"`
	ID            string `json:"id"`
	Scenario      string `json:"scenario"`
	Description   string `json:"description"`
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
	// PrimaryMetric is the scenario's metric for verdicts (empty in older
	// campaigns: the report's default).
	PrimaryMetric string `json:"primary_metric,omitempty"`
	// Plan is every run in the order it is (or was) run.
	Plan []PlannedRun `json:"plan"`
	// Backends maps each backend address to its group and route.
	Backends []Backend `json:"backends"`
	Started  time.Time `json:"started"`
	// Finished is zero while the campaign is unfinished.
	Finished time.Time `json:"finished"`
	// Warnings are the scenario's own (scenario.Scenario.Warnings): what
	// in it makes the comparison misleading without being an error. The
	// report lists them.
	Warnings []string `json:"warnings,omitempty"`
	// Sessions are the run and every resume that got its environment up,
	// in order; Environment is the first one's. A resume whose facts
	// differ is refused unless forced, and then recorded here.
	Sessions []Session `json:"sessions,omitempty"`
	// Builds, in an A/B campaign, are the two builds of the ingress that
	// ran the one policy, the baseline first; every algorithm of the
	// campaign is then an arm "policy@build" (ArmLabel), and the
	// reference is the baseline's arm. Empty in a campaign of one build.
	Builds []Build `json:"builds,omitempty"`
}

// Build is one build of the ingress in an A/B campaign.
type Build struct {
	// Name labels the build in every table: the short commit when
	// known, else the binary's file name.
	Name string `json:"name"`
	// Role is BuildBaseline or BuildCandidate.
	Role string `json:"role"`
	// IngressBin is the prequalbench binary run as the ingress.
	IngressBin    string `json:"ingress_bin"`
	IngressSHA256 string `json:"ingress_sha256,omitempty"`
	// Ref is the git ref asked for (--baseline-ref), Revision the commit
	// it resolved to or the binary reports; either may be empty.
	Ref      string `json:"ref,omitempty"`
	Revision string `json:"revision,omitempty"`
}

// Roles of the builds of an A/B campaign.
const (
	BuildBaseline  = "baseline"
	BuildCandidate = "candidate"
)

// ArmLabel is the algorithm label of a policy run on a build.
func ArmLabel(policy, build string) string { return policy + "@" + build }

// SplitArm splits an A/B arm label into its policy and build; a plain
// algorithm has no build.
func SplitArm(label string) (policy, build string) {
	if i := strings.LastIndex(label, "@"); i >= 0 {
		return label[:i], label[i+1:]
	}
	return label, ""
}

// Environment records where and with what a campaign ran.
type Environment struct {
	Name            string `json:"name"` // local, kind, kube
	Topology        string `json:"topology,omitempty"`
	IngressReplicas int    `json:"ingress_replicas"`
	OS              string `json:"os"`
	Arch            string `json:"arch"`
	CPUs            int    `json:"cpus"`
	// HostID is a short hash of the host's name: two campaigns on
	// different hosts are told apart without publishing the name.
	HostID      string `json:"host_id,omitempty"`
	CPUModel    string `json:"cpu_model,omitempty"`
	MemoryBytes uint64 `json:"memory_bytes,omitempty"`
	Kernel      string `json:"kernel,omitempty"`
	GoVersion   string `json:"go_version"`
	RustVersion string `json:"rust_version,omitempty"`
	Version     string `json:"prequalbench_version"`
	GitRevision string `json:"git_revision,omitempty"`
	GitDirty    bool   `json:"git_dirty"`
	// SHA-256 of the binaries the environment ran (local env), so a
	// rebuild from a dirty tree is told apart from the original.
	IngressSHA256 string `json:"ingress_sha256,omitempty"`
	BackendSHA256 string `json:"backend_sha256,omitempty"`
	// Load says how the load reached the ingress; nil in artifacts that
	// predate it and for the simulator (no network).
	Load *LoadPath `json:"load,omitempty"`
}

// Load paths (LoadPath.Path).
const (
	// LoadFromCLI: the campaign's own process sent the load, from the
	// machine it runs on.
	LoadFromCLI = "cli"
	// LoadFromGenerators: generator Jobs inside the cluster sent it.
	LoadFromGenerators = "generators"
)

// LoadPath is how a campaign's load reached the ingress.
type LoadPath struct {
	// Path is LoadFromCLI or LoadFromGenerators.
	Path string `json:"path"`
	// Generators is the number of generator Jobs (LoadFromGenerators).
	Generators int `json:"generators,omitempty"`
	// MaxClockSkewMS is the bound on a generator's clock offset: a run
	// whose measured offset less half the round trip exceeds it is
	// refused, one whose measurement was too coarse to show it within
	// records that (GeneratorClock.Unresolved); each run's measured
	// offsets are in its run.json (GeneratorClocks).
	MaxClockSkewMS float64 `json:"max_clock_skew_ms,omitempty"`
	// URLs are the base URLs the load was sent to: the ingress Service's
	// in-cluster URL for generators; from the CLI machine the published
	// NodePort, LoadBalancer or --proxy-url address, or the loopback
	// replicas.
	URLs []string `json:"urls,omitempty"`
	// Via says how those URLs reach the ingress ("kind's NodePort
	// published on 127.0.0.1", "LoadBalancer Service ...", ...).
	Via string `json:"via,omitempty"`
	// Warnings say what departs from the path asked for, e.g. in-cluster
	// generators forbidden by RBAC and the CLI machine used instead.
	Warnings []string `json:"warnings,omitempty"`
}

// Kind is the path in a word, for comparisons: "cli" or "generators:N";
// empty for a nil path.
func (l *LoadPath) Kind() string {
	switch {
	case l == nil:
		return ""
	case l.Path == LoadFromGenerators:
		return fmt.Sprintf("%s:%d", l.Path, l.Generators)
	}
	return l.Path
}

// Describe is the path in a sentence, for reports and progress lines.
func (l *LoadPath) Describe() string {
	if l == nil {
		return ""
	}
	var s string
	switch l.Path {
	case LoadFromGenerators:
		s = fmt.Sprintf("from %d in-cluster generator Job(s) to %s", l.Generators, strings.Join(l.URLs, ", "))
	default:
		s = "from the machine running the campaign to " + strings.Join(l.URLs, ", ")
	}
	if l.Via != "" {
		s += " (" + l.Via + ")"
	}
	return s
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
	// Session is the 1-based index in Campaign.Sessions of the session
	// that ran it (0 in artifacts older than sessions).
	Session int `json:"session,omitempty"`
	// ResetVerified is true when the reset before the run was checked
	// (empty pools, zero counters, zero in-flight) and held.
	ResetVerified bool          `json:"reset_verified"`
	ResetDetail   string        `json:"reset_detail,omitempty"`
	Started       time.Time     `json:"started"`
	Finished      time.Time     `json:"finished"`
	Warmup        time.Duration `json:"warmup_ns"`
	Load          LoadResult    `json:"load"`
	// Validity says whether the run measured the system rather than the
	// host or the load generator (schema v2; absent in v1 artifacts, where
	// it reads as invalid with no reasons: check the schema version).
	Validity Validity `json:"validity"`
	// GeneratorClocks are the in-cluster generators' clock offsets
	// against the campaign's, measured before the run's start (empty when
	// the load came from the campaign's own process).
	GeneratorClocks []GeneratorClock `json:"generator_clocks,omitempty"`
	// Imported names the tool whose numbers the run holds (ImportedK6)
	// when this tool did not measure it: such a run has only run.json (no
	// histogram files, series or snapshots), lies outside the plan (index
	// 0), is never valid, and a report lists it apart, never in its
	// statistics. Empty for a measured run.
	Imported string `json:"imported,omitempty"`
}

// GeneratorClock is one in-cluster generator's clock against the
// campaign's, measured NTP-style through the API server's pod proxy: the
// true offset lies within OffsetMS ± RoundTripMS/2.
type GeneratorClock struct {
	Shard int    `json:"shard"`
	Pod   string `json:"pod"`
	Node  string `json:"node,omitempty"`
	// OffsetMS is the generator's clock minus the campaign's.
	OffsetMS    float64 `json:"offset_ms"`
	RoundTripMS float64 `json:"round_trip_ms"`
	// Error says why the offset was not measured.
	Error string `json:"error,omitempty"`
	// Unresolved says why a measured offset could not be shown within
	// the campaign's bound (LoadPath.MaxClockSkewMS) although it may be:
	// the round trip was too slow to tell.
	Unresolved string `json:"unresolved,omitempty"`
}

// ImportedK6 is Run.Imported for a run imported from a k6 summary
// (`prequalbench k6 import`).
const ImportedK6 = "k6"

// Validity is the run's own check of its measurement. Reasons are short
// human sentences, e.g. "host idle below 10% for 7 s of the window" or
// "send-lag p99 38 ms > max(5 ms, 1% of p50)".
type Validity struct {
	Valid   bool     `json:"valid"`
	Reasons []string `json:"reasons,omitempty"`
	// HostCheck is the outcome of the host-headroom check (HostCheck*);
	// empty in artifacts older than the field.
	HostCheck string `json:"host_check,omitempty"`
	// HostCheckNote says why the host check did not run when it was
	// not checked (e.g. the environment's processes are not on this
	// host's process list), and on a cluster what it sampled and from
	// where (this host's /proc/stat under kind, the kubelets' summary
	// or the metrics API) and what could not be read.
	HostCheckNote string `json:"host_check_note,omitempty"`
	// Saturation says how much of the host the campaign's own processes
	// used when they, not an outside process, left it without headroom:
	// the run stays valid, and the report says this policy cannot serve
	// this load on this host.
	Saturation string `json:"saturation,omitempty"`
}

// HostOwnFloor is the share of the host (percent of all CPUs) the
// campaign's own processes must take in a second without headroom for
// that second to be charged to them: their share alone would leave less
// than 10% idle. Below it, the processes outside the campaign are what
// pushed idle under 10%, and the second counts against the run.
const HostOwnFloor = 90.0

// Outcomes of a run's host-headroom check.
const (
	// HostCheckPassed: the host had headroom.
	HostCheckPassed = "passed"
	// HostCheckOutside: processes outside the campaign took the host; the
	// run is invalid.
	HostCheckOutside = "outside interference"
	// HostCheckSaturated: the campaign's own processes exhausted the
	// host; the run is valid, see Saturation.
	HostCheckSaturated = "saturated by the campaign's own processes"
	// HostCheckUnattributed: the host had no headroom and whose CPU it
	// was could not be read (a cluster whose pods' CPU is unreadable);
	// the run is invalid.
	HostCheckUnattributed = "no headroom, unattributed"
	// HostCheckNotMeasured: no host CPU reading (simulator, an
	// environment whose processes this host cannot list, import).
	HostCheckNotMeasured = "not checked"
	// HostCheckSkipped: a host-bound scenario, which saturates the host
	// by design.
	HostCheckSkipped = "skipped (host-bound scenario)"
)

// Percentiles summarise one histogram, in milliseconds.
type Percentiles struct {
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
	Mean  float64 `json:"mean_ms"`
	Count int64   `json:"count"`
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

	// Schema v2 accounting. Every count below is of requests whose
	// INTENDED send time lies inside the measured window (warmup sends are
	// not counted, however late they were answered). Succeeded counts
	// 2xx/3xx answers; the failures are by class: 4xx, 5xx, timeouts
	// (no answer within the request timeout) and connection errors (any
	// other transport failure). Outstanding counts requests sent in the
	// window still unanswered when the run stopped waiting.
	Succeeded   uint64 `json:"succeeded"`
	Failed4xx   uint64 `json:"failed_4xx"`
	Failed5xx   uint64 `json:"failed_5xx"`
	Timeouts    uint64 `json:"timeouts"`
	ConnErrors  uint64 `json:"conn_errors"`
	Outstanding uint64 `json:"outstanding"`
	// Goodput is Succeeded per second of the window: the headline rate.
	Goodput float64 `json:"goodput"`
	// ErrorRate is (Failed4xx+Failed5xx+Timeouts+ConnErrors) / Sent.
	ErrorRate float64 `json:"error_rate"`
	// Clamped counts latencies recorded at the histogram's ceiling
	// (HistogramHighest) because they were longer.
	Clamped uint64 `json:"clamped"`
	// Success is the latency of successes (the headline, equal to the
	// top-level percentiles); Pessimistic covers every request with each
	// failure counted at the request timeout.
	Success     Percentiles `json:"success"`
	Pessimistic Percentiles `json:"pessimistic"`
	// SendLag is actual minus intended send time; ConnWait the time from
	// the send to getting a connection (httptrace GotConn).
	SendLag  Percentiles `json:"send_lag"`
	ConnWait Percentiles `json:"conn_wait"`
	// ConnCap is the cap on load-generator connections in force, in total
	// over all ingress replicas (0 = none); ConnCapBound counts requests
	// that waited more than 1 ms for a connection while every connection
	// allowed by the cap was busy.
	ConnCap      int    `json:"conn_cap"`
	ConnCapBound uint64 `json:"conn_cap_bound"`

	// Latency percentiles in milliseconds, timed from the intended send.
	// From schema v2 on they are the latency of successes (= Success); in
	// v1 they covered every answer, errors included.
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

// RunDirName is the directory name of a run: "<NN>-rep<R>-<algorithm>",
// the algorithm as a slug that is safe in a path and a shell:
// prequal{probes=2,qrif=0.6} becomes prequal_probes-2_qrif-0.6 (run.json
// keeps the name itself). A plain name is its own slug, so existing
// campaigns keep their directory names.
func RunDirName(index, rep int, algorithm string) string {
	return fmt.Sprintf("%02d-rep%d-%s", index, rep, algorithmSlug(algorithm))
}

func algorithmSlug(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r == '}':
		case r == '=':
			b.WriteByte('-')
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			b.WriteRune(r)
		default: // '{', ',', '/', spaces and anything else
			b.WriteByte('_')
		}
	}
	return b.String()
}
