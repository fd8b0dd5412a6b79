// Package reports turns a campaign directory's raw artifacts into REPORT.md
// and SVG plots, byte for byte reproducibly: the same artifacts give the
// same bytes. It also checks a committed report against its artifacts,
// compares two campaigns for regressions and exports the aggregated
// numbers as JSON. The statistics live in package stats, free of I/O.
package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

// DefaultReference is the algorithm others are compared against when
// neither the options nor the campaign name one.
const DefaultReference = "prequal"

// DefaultAlpha is the significance level when Options.Alpha is 0.
const DefaultAlpha = 0.05

// Options tune the statistics. The zero value means the defaults.
type Options struct {
	// Reference overrides the campaign's reference algorithm.
	Reference string
	// Confidence of every interval (default 0.95).
	Confidence float64
	// Alpha is the significance level of the U test (default 0.05).
	Alpha float64
	// Resamples is the bootstrap size (default 10000).
	Resamples int
	// Threshold is the relative change --compare tolerates (default 0.10).
	Threshold float64
	// MinEffect is the smallest relative difference a verdict calls
	// meaningful (default 0.05): a ratio's bootstrap interval must lie
	// wholly outside [1-MinEffect, 1+MinEffect].
	MinEffect float64
}

func (o Options) withDefaults() (Options, error) {
	if o.Confidence == 0 {
		o.Confidence = 0.95
	}
	if o.Alpha == 0 {
		o.Alpha = DefaultAlpha
	}
	if o.Resamples == 0 {
		o.Resamples = 10000
	}
	if o.Threshold == 0 {
		o.Threshold = 0.10
	}
	if o.MinEffect == 0 {
		o.MinEffect = 0.05
	}
	switch {
	case !(o.Confidence > 0 && o.Confidence < 1):
		return o, badInput("reports: confidence %v, want a value in (0, 1)", o.Confidence)
	case !(o.Alpha > 0 && o.Alpha < 1):
		return o, badInput("reports: alpha %v, want a value in (0, 1)", o.Alpha)
	case o.Resamples < 0 || o.Resamples > 1_000_000:
		return o, badInput("reports: resamples %d, want 1 to 1000000", o.Resamples)
	case !(o.MinEffect > 0 && o.MinEffect < 1):
		return o, badInput("reports: min-effect %v, want a fraction in (0, 1) such as 0.05 for ±5%%", o.MinEffect)
	case !(o.Threshold > 0 && o.Threshold < 10):
		return o, badInput("reports: threshold %v, want a positive fraction such as 0.1 for 10%%", o.Threshold)
	}
	return o, nil
}

func (o Options) reference(c *artifacts.Campaign) string {
	switch {
	case o.Reference != "":
		// "rr" or a variant's other spelling names the campaign's
		// canonical algorithm.
		if cn, err := loadbalancer.Canonical(o.Reference); err == nil && slices.Contains(c.Algorithms, cn) {
			return cn
		}
		return o.Reference
	case c.Reference != "":
		return c.Reference
	}
	return DefaultReference
}

// Render builds the report of the campaign in dir in memory: the map holds
// REPORT.md and plots/*.svg by slash-separated path relative to dir.
func Render(dir string, opts Options) (map[string][]byte, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ds, err := load(dir)
	if err != nil {
		return nil, err
	}
	a := analyze(ds, o)
	plots, err := renderPlots(ds, a)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	var names []string
	for name, b := range plots {
		files[artifacts.PlotsDir+"/"+name] = b
		names = append(names, name)
	}
	slices.Sort(names)
	var md bytes.Buffer
	writeMarkdown(&md, ds, a, o, names)
	files[artifacts.ReportFile] = md.Bytes()
	return files, nil
}

// Build writes DIR/REPORT.md and DIR/plots/*.svg from the artifacts in dir,
// removing plots a previous build left that this one no longer makes.
func Build(dir string, opts Options) error {
	files, err := Render(dir, opts)
	if err != nil {
		return err
	}
	for _, name := range sortedKeys(files) {
		if err := artifacts.WriteFileAtomic(filepath.Join(dir, filepath.FromSlash(name)), files[name]); err != nil {
			return fmt.Errorf("reports: %w", err)
		}
	}
	stale, err := filepath.Glob(filepath.Join(dir, artifacts.PlotsDir, "*.svg"))
	if err != nil {
		return fmt.Errorf("reports: %w", err)
	}
	for _, p := range stale {
		if _, ok := files[artifacts.PlotsDir+"/"+filepath.Base(p)]; !ok {
			if err := os.Remove(p); err != nil {
				return fmt.Errorf("reports: remove stale plot: %w", err)
			}
		}
	}
	return nil
}

// CheckError lists the files that differ from what the artifacts give.
type CheckError struct {
	Differ  []string // present on disk and in the rebuild, different bytes
	Missing []string // in the rebuild, absent on disk
	Stray   []string // plots on disk the rebuild does not make
	// Artifacts lists the artifact files whose digest differs from the
	// one REPORT.md recorded: edited, added or removed since the build.
	Artifacts []string
}

func (e *CheckError) Error() string {
	var parts []string
	if len(e.Differ) > 0 {
		parts = append(parts, "differs from the artifacts: "+strings.Join(e.Differ, ", "))
	}
	if len(e.Missing) > 0 {
		parts = append(parts, "missing: "+strings.Join(e.Missing, ", "))
	}
	if len(e.Stray) > 0 {
		parts = append(parts, "not made by the artifacts: "+strings.Join(e.Stray, ", "))
	}
	if len(e.Artifacts) > 0 {
		parts = append(parts, "artifacts changed since the report was built: "+strings.Join(e.Artifacts, ", "))
	}
	return "reports: check: " + strings.Join(parts, "; ") + " (run `prequalbench report DIR` to rebuild)"
}

// Check rebuilds the report in memory and compares it with REPORT.md and
// plots/*.svg on disk. It returns a *CheckError naming each differing,
// missing or stray file, or another error when the rebuild itself fails.
func Check(dir string, opts Options) error {
	files, err := Render(dir, opts)
	if err != nil {
		return err
	}
	ce := &CheckError{}
	for _, name := range sortedKeys(files) {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		switch {
		case os.IsNotExist(err):
			ce.Missing = append(ce.Missing, name)
		case err != nil:
			return fmt.Errorf("reports: check: %w", err)
		case !bytes.Equal(b, files[name]):
			ce.Differ = append(ce.Differ, name)
			if name == artifacts.ReportFile {
				ce.Artifacts = changedArtifacts(b, files[name])
			}
		}
	}
	onDisk, err := filepath.Glob(filepath.Join(dir, artifacts.PlotsDir, "*.svg"))
	if err != nil {
		return fmt.Errorf("reports: check: %w", err)
	}
	slices.Sort(onDisk)
	for _, p := range onDisk {
		name := artifacts.PlotsDir + "/" + filepath.Base(p)
		if _, ok := files[name]; !ok {
			ce.Stray = append(ce.Stray, name)
		}
	}
	if len(ce.Differ)+len(ce.Missing)+len(ce.Stray) > 0 {
		return ce
	}
	return nil
}

// Analyze returns the aggregated numbers of the campaign in dir.
func Analyze(dir string, opts Options) (*Analysis, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ds, err := load(dir)
	if err != nil {
		return nil, err
	}
	return analyze(ds, o), nil
}

// WriteJSON prints the aggregated numbers of the campaign in dir as
// indented JSON with a stable field order.
func WriteJSON(w io.Writer, dir string, opts Options) error {
	a, err := Analyze(dir, opts)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return fmt.Errorf("reports: encode json: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
