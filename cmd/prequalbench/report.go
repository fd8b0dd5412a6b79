package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/reports"
)

func init() { subcommands = append(subcommands, newReportCommand) }

// reportFlags holds the report command's flags.
type reportFlags struct {
	check      bool
	compare    string
	threshold  float64
	reference  string
	output     string
	confidence float64
	resamples  int
	minEffect  float64
	gate       bool
}

func newReportCommand() *cobra.Command {
	f := &reportFlags{}
	cmd := &cobra.Command{
		Use:   "report DIR",
		Short: "Rebuild REPORT.md and plots from a campaign's artifacts, check them, or compare two campaigns",
		Long: `report reads a campaign directory (campaign.json, runs/*/...) and writes
DIR/REPORT.md and DIR/plots/*.svg. The same artifacts always give the same bytes.

  report DIR                   write REPORT.md and plots
  report DIR --check           exit 1 when REPORT.md or a plot differs from the artifacts
  report NEW --compare OLD     write NEW/COMPARE.md; exit 1 on a significant regression
                               (exit 0 but "cannot detect" when too few runs could show one;
                               campaigns of different schema_version are refused)
  report DIR -o json           print the aggregated numbers as JSON
  report DIR --gate            an A/B campaign (campaign run --baseline-*): write REPORT.md;
                               exit 1 when the candidate build is named worse on the
                               primary metric (significant, beyond the minimum effect)
                               or the builds could not be compared (too few valid runs)

Exit codes: 0 ok, 1 check failed or regression, 2 bad input.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &exitError{2, fmt.Errorf("report: want exactly one campaign directory, got %d arguments", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return runReport(cmd, args[0], f) },
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.check, "check", false, "exit 1 when REPORT.md or a plot differs from what the artifacts give")
	fl.StringVar(&f.compare, "compare", "", "compare with the campaign in this directory (same scenario) and write COMPARE.md")
	fl.Float64Var(&f.threshold, "threshold", 0.10, "relative change --compare tolerates before calling a significant change a regression")
	fl.StringVar(&f.reference, "reference", "", "algorithm the others are compared against (default: the campaign's, else prequal)")
	fl.StringVarP(&f.output, "output", "o", "markdown", "output: markdown (write REPORT.md and plots) or json (print the numbers)")
	fl.Float64Var(&f.confidence, "confidence", 0.95, "confidence level of every interval")
	fl.IntVar(&f.resamples, "resamples", 10000, "bootstrap resamples for the ratio intervals")
	fl.BoolVar(&f.gate, "gate", false, "A/B campaign: exit 1 when the candidate build is named worse than the baseline on the primary metric")
	fl.Float64Var(&f.minEffect, "min-effect", 0.05, "smallest relative difference a verdict calls meaningful: the ratio's interval must lie wholly outside 1 ± this")
	return cmd
}

func runReport(cmd *cobra.Command, dir string, f *reportFlags) error {
	opts := reports.Options{Reference: f.reference, Threshold: f.threshold, Confidence: f.confidence, Resamples: f.resamples, MinEffect: f.minEffect}
	switch {
	case f.output != "markdown" && f.output != "json":
		return &exitError{2, fmt.Errorf("report: -o %q, want markdown or json", f.output)}
	case f.gate && (f.check || f.compare != "" || f.output == "json"):
		return &exitError{2, errors.New("report: --gate judges one A/B campaign; drop --check, --compare and -o json")}
	case f.check && f.compare != "":
		return &exitError{2, errors.New("report: --check and --compare exclude each other")}
	case f.output == "json" && (f.check || f.compare != ""):
		return &exitError{2, errors.New("report: -o json prints the numbers of one campaign; drop --check or --compare")}
	case !(f.minEffect > 0 && f.minEffect < 1):
		return &exitError{2, fmt.Errorf("report: --min-effect %v, want a fraction in (0, 1) such as 0.05 for ±5%%", f.minEffect)}
	case f.resamples <= 0:
		return &exitError{2, fmt.Errorf("report: --resamples %d, want a positive count", f.resamples)}
	}
	out := cmd.OutOrStdout()
	switch {
	case f.output == "json":
		return classify(reports.WriteJSON(out, dir, opts))
	case f.check:
		if err := reports.Check(dir, opts); err != nil {
			return classify(err)
		}
		fmt.Fprintf(out, "%s and plots match the artifacts in %s\n", artifacts.ReportFile, dir)
		return nil
	case f.compare != "":
		res, err := reports.Compare(dir, f.compare, opts)
		if err != nil {
			return classify(err)
		}
		path := filepath.Join(dir, reports.CompareFile)
		if res.Regressed {
			return &exitError{1, fmt.Errorf("report: %s regressed against %s (see %s)", dir, f.compare, path)}
		}
		fmt.Fprintf(out, "%s; wrote %s\n", res.Summary(), path)
		return nil
	}
	if err := reports.Build(dir, opts); err != nil {
		return classify(err)
	}
	fmt.Fprintf(out, "wrote %s\n", filepath.Join(dir, artifacts.ReportFile))
	if f.gate {
		return gate(out, dir, opts)
	}
	return nil
}

// gate fails (exit 1) when the A/B campaign in dir named its candidate
// build worse than its baseline; a campaign of one build is bad input.
func gate(out io.Writer, dir string, opts reports.Options) error {
	a, err := reports.Analyze(dir, opts)
	if err != nil {
		return classify(err)
	}
	g := reports.GateOf(a)
	plain := strings.ReplaceAll(g.Sentence, "**", "")
	switch {
	case !g.AB:
		return &exitError{2, fmt.Errorf("report: --gate: %s is not an A/B campaign of two builds (run it with campaign run --baseline-bin or --baseline-ref)", dir)}
	case !g.Judged:
		// A gate that passes what it could not measure can never fail.
		return &exitError{1, fmt.Errorf("report: --gate: the builds could not be compared: %s (see the Validity section of REPORT.md)", plain)}
	case g.Worse:
		return &exitError{1, fmt.Errorf("report: --gate: %s", plain)}
	}
	fmt.Fprintf(out, "gate passed: %s\n", plain)
	return nil
}

// classify maps reporter errors to exit codes: 2 for bad input, 1 otherwise.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if reports.IsBadInput(err) {
		return &exitError{2, err}
	}
	return &exitError{1, err}
}
