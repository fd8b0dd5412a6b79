package reports

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/ingress/adminapi"
)

// dataset is everything read from one campaign directory.
type dataset struct {
	Dir      string
	Campaign artifacts.Campaign
	// Runs in plan order (by Index); planned runs without run.json are
	// left out and warned about.
	Runs []*runData
	// Imported are the runs outside the plan whose run.json is marked
	// imported (artifacts.Run.Imported, e.g. `prequalbench k6 import`),
	// by directory: only their run.json is read, and they never enter
	// the statistics.
	Imported []*runData
	Warnings []string
	// Digests are every artifact file's, for the report's last section.
	Digests []fileDigest
}

// runData is one run's artifacts.
type runData struct {
	Run  artifacts.Run
	Dir  string // relative to the campaign directory
	Hist *hdrhistogram.Histogram
	// Pess is the pessimistic histogram (every request, failures at the
	// timeout); nil when the run has none (schema v1).
	Pess *hdrhistogram.Histogram
	// Series is nil when timeseries.csv is missing.
	Series []point
	// Before and After are nil when the snapshots are missing.
	Before, After []adminapi.State
}

func (r *runData) ok() bool { return r.Run.Status == artifacts.StatusOK }

// point is one row of timeseries.csv.
type point struct {
	Second int
	// Answered is the second's successes (schema v2) or answers of any
	// kind (v1): the requests its percentiles cover.
	Sent, Answered, Errs, Late uint64
	P50, P99                   float64
}

// schema returns the campaign's schema version (1 for artifacts that
// predate the field).
func (ds *dataset) schema() int { return max(1, ds.Campaign.SchemaVersion) }

// v2 reports whether the artifacts carry goodput, success and pessimistic
// latency, generator fidelity and validity.
func (ds *dataset) v2() bool { return ds.schema() >= 2 }

// errBadInput marks errors in the campaign directory itself (missing or
// malformed campaign.json, an unreadable run), as opposed to a report that
// differs or regresses.
var errBadInput = errors.New("bad input")

func badInput(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errBadInput}, a...)...)
}

// IsBadInput reports whether err comes from unusable artifacts or arguments
// (the CLI maps it to exit code 2).
func IsBadInput(err error) bool { return errors.Is(err, errBadInput) }

// load reads a campaign directory.
func load(dir string) (*dataset, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, badInput("reports: campaign directory %s: %v", dir, err)
	}
	if !st.IsDir() {
		return nil, badInput("reports: %s is not a directory (want a campaign directory holding %s)", dir, artifacts.CampaignFile)
	}
	ds := &dataset{Dir: dir}
	if err := readJSONStrict(filepath.Join(dir, artifacts.CampaignFile), &ds.Campaign); err != nil {
		return nil, err
	}
	if ds.Digests, err = artifactDigests(dir); err != nil {
		return nil, err
	}
	c := &ds.Campaign
	if c.SchemaVersion > artifacts.SchemaVersion || c.SchemaVersion < 0 {
		return nil, badInput("reports: %s: field schema_version is %d, this prequalbench reads 1 to %d (a newer prequalbench wrote it)",
			filepath.Join(dir, artifacts.CampaignFile), c.SchemaVersion, artifacts.SchemaVersion)
	}
	if c.Scenario == "" {
		return nil, badInput("reports: %s: field scenario is empty, want the scenario name", filepath.Join(dir, artifacts.CampaignFile))
	}
	if len(c.Algorithms) == 0 {
		return nil, badInput("reports: %s: field algorithms is empty, want at least one algorithm", filepath.Join(dir, artifacts.CampaignFile))
	}
	plan := slices.Clone(c.Plan)
	slices.SortStableFunc(plan, func(a, b artifacts.PlannedRun) int { return a.Index - b.Index })
	inPlan := map[string]bool{}
	for _, p := range plan {
		inPlan[filepath.Clean(p.Dir)] = true
		rd, err := loadRun(dir, p)
		if err != nil {
			return nil, err
		}
		if rd == nil {
			ds.Warnings = append(ds.Warnings, fmt.Sprintf("planned run %s has no %s (campaign unfinished or interrupted)", p.Dir, artifacts.RunFile))
			continue
		}
		if rd.Run.Imported != "" {
			// Put in the plan by hand: still an import, not a measurement.
			ds.Warnings = append(ds.Warnings, fmt.Sprintf("planned run %s was imported from %s, not measured: it is listed with the imported runs only", rd.Dir, rd.Run.Imported))
			ds.Imported = append(ds.Imported, rd)
			continue
		}
		ds.Runs = append(ds.Runs, rd)
	}
	// Run directories outside the plan are imported runs, listed apart,
	// or reported, not silently used. os.ReadDir sorts by name.
	entries, err := os.ReadDir(filepath.Join(dir, artifacts.RunsDir))
	if err == nil {
		for _, e := range entries {
			rel := filepath.Join(artifacts.RunsDir, e.Name())
			if !e.IsDir() || inPlan[rel] {
				continue
			}
			rd, err := loadImported(dir, rel)
			if err != nil {
				return nil, err
			}
			if rd == nil {
				ds.Warnings = append(ds.Warnings, fmt.Sprintf("run directory %s is not in the campaign plan and was ignored", rel))
				continue
			}
			ds.Imported = append(ds.Imported, rd)
		}
	}
	return ds, nil
}

// legacyK6ResetDetail marked k6 imports written before Run.Imported
// (k6.ResetDetail).
const legacyK6ResetDetail = "imported from k6: reset unknown"

// imported reports whether r was imported (Run.Imported, or the first
// k6 imports' reset detail, which it then fills in).
func imported(r *artifacts.Run) bool {
	if r.Imported == "" && r.ResetDetail == legacyK6ResetDetail {
		r.Imported = artifacts.ImportedK6
	}
	return r.Imported != ""
}

// loadImported reads the run.json of a directory outside the plan and
// returns it when it is an imported run (artifacts.Run.Imported, or the
// first k6 imports' reset detail); nil, nil for anything else. Only
// run.json is read: an import has no histograms, series or snapshots.
func loadImported(dir, rel string) (*runData, error) {
	runPath := filepath.Join(dir, rel, artifacts.RunFile)
	b, err := os.ReadFile(runPath)
	if err != nil {
		return nil, nil // no run.json: not an import
	}
	var r artifacts.Run
	if json.Unmarshal(b, &r) != nil || !imported(&r) {
		return nil, nil
	}
	if r.Status != artifacts.StatusOK {
		return nil, badInput("reports: %s: imported run with status %q, want %q", runPath, r.Status, artifacts.StatusOK)
	}
	// Whatever the file says, an import is not a measurement.
	r.Validity.Valid = false
	return &runData{Run: r, Dir: filepath.ToSlash(rel)}, nil
}

// loadRun reads one planned run; it returns nil, nil when run.json is absent.
func loadRun(dir string, p artifacts.PlannedRun) (*runData, error) {
	rel := filepath.Clean(p.Dir)
	if rel == "." || rel == "" || filepath.IsAbs(rel) || strings.HasPrefix(rel, "..") {
		return nil, badInput("reports: plan entry %d: field dir %q, want a path inside the campaign directory", p.Index, p.Dir)
	}
	runDir := filepath.Join(dir, rel)
	runPath := filepath.Join(runDir, artifacts.RunFile)
	if _, err := os.Stat(runPath); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	rd := &runData{Dir: filepath.ToSlash(rel)}
	if err := readJSONStrict(runPath, &rd.Run); err != nil {
		return nil, err
	}
	if rd.Run.Algorithm == "" {
		rd.Run.PlannedRun = p
	}
	if rd.Run.Status != artifacts.StatusOK && rd.Run.Status != artifacts.StatusFailed {
		return nil, badInput("reports: %s: field status %q, want %q or %q", runPath, rd.Run.Status, artifacts.StatusOK, artifacts.StatusFailed)
	}
	if imported(&rd.Run) {
		rd.Run.Validity.Valid = false
		return rd, nil // run.json only: no histogram, series or snapshots
	}
	if !rd.ok() {
		return rd, nil
	}
	histPath := filepath.Join(runDir, artifacts.HistogramFile)
	b, err := os.ReadFile(histPath)
	if err != nil {
		return nil, badInput("reports: run %s: %v", rd.Dir, err)
	}
	h, err := artifacts.DecodeHistogram(bytes.TrimSpace(b))
	if err != nil {
		return nil, badInput("reports: %s: %v", histPath, err)
	}
	rd.Hist = h
	pessPath := filepath.Join(runDir, artifacts.PessimisticHistogramFile)
	if b, err := os.ReadFile(pessPath); err == nil {
		if rd.Pess, err = artifacts.DecodeHistogram(bytes.TrimSpace(b)); err != nil {
			return nil, badInput("reports: %s: %v", pessPath, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, badInput("reports: run %s: %v", rd.Dir, err)
	}
	if rd.Series, err = readSeries(filepath.Join(runDir, artifacts.TimeseriesFile)); err != nil {
		return nil, err
	}
	if rd.Before, err = readStates(filepath.Join(runDir, artifacts.StateBefore)); err != nil {
		return nil, err
	}
	if rd.After, err = readStates(filepath.Join(runDir, artifacts.StateAfter)); err != nil {
		return nil, err
	}
	return rd, nil
}

// readJSONStrict decodes path into v, rejecting unknown trailing data.
func readJSONStrict(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return badInput("reports: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return badInput("reports: %s: %v", path, err)
	}
	return nil
}

// readStates reads a state snapshot; a missing file gives nil.
func readStates(path string) ([]adminapi.State, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var s []adminapi.State
	if err := readJSONStrict(path, &s); err != nil {
		return nil, err
	}
	if s == nil {
		s = []adminapi.State{}
	}
	return s, nil
}

// readSeries parses timeseries.csv; a missing file gives nil. The header
// says which layout the file has (v1 or v2, whatever the campaign's schema,
// since the series describes itself); v2's CPU columns may be empty (not
// measurable).
func readSeries(path string) ([]point, error) {
	var header string
	nfields := 0
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, badInput("reports: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	line := 0
	pts := []point{}
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if line == 1 {
			if text != artifacts.TimeseriesHeader && text != artifacts.TimeseriesHeaderV1 {
				return nil, badInput("reports: %s:1: header %q, want %q (or schema v1's %q)", path, text,
					artifacts.TimeseriesHeader, artifacts.TimeseriesHeaderV1)
			}
			header, nfields = text, len(strings.Split(text, ","))
			continue
		}
		if text == "" {
			continue
		}
		fields := strings.Split(text, ",")
		if len(fields) != nfields {
			return nil, badInput("reports: %s:%d: %d fields, want %d (%s)", path, line, len(fields), nfields, header)
		}
		var p point
		var errs []error
		atoi := func(s string) uint64 {
			v, err := strconv.ParseUint(s, 10, 64)
			errs = append(errs, err)
			return v
		}
		atof := func(s string) float64 {
			v, err := strconv.ParseFloat(s, 64)
			errs = append(errs, err)
			return v
		}
		p.Second = int(atoi(fields[0]))
		p.Sent, p.Answered, p.Errs, p.Late = atoi(fields[1]), atoi(fields[2]), atoi(fields[3]), atoi(fields[4])
		p.P50, p.P99 = atof(fields[5]), atof(fields[6])
		for _, cpu := range fields[7:] {
			if cpu != "" {
				atof(cpu)
			}
		}
		if err := errors.Join(errs...); err != nil {
			return nil, badInput("reports: %s:%d: %v", path, line, err)
		}
		pts = append(pts, p)
	}
	if err := sc.Err(); err != nil {
		return nil, badInput("reports: %s: %v", path, err)
	}
	if line == 0 {
		return nil, badInput("reports: %s: empty, want the header %q", path, artifacts.TimeseriesHeader)
	}
	return pts, nil
}
