package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/k6"
	"github.com/prequalbench/prequalbench/loadbalancer"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newK6Command) }

// newK6Command bridges to k6 through files only: no k6 code is linked
// (go.k6.io/k6 is AGPL).
func newK6Command() *cobra.Command {
	c := &cobra.Command{
		Use:   "k6",
		Short: "Export a scenario's load as a k6 script; import k6 summaries as runs (k6's numbers, clearly marked)",
	}
	c.AddCommand(newK6ExportCommand(), newK6ImportCommand())
	return c
}

// k6ExportLong is the help of both spellings of the export.
const k6ExportLong = `Write a k6 script reproducing a scenario's load: the warmup and each open-loop
phase as a k6 scenario (constant-arrival-rate, ramping-arrival-rate with
instant jumps for steps and bursts; constant-vus for a closed loop), back to
back, requests picked by route weight with the route's Host header and
tagged with its name (tag "route"). k6 refuses a constant executor under
1 s, so a --duration-scale that makes one shorter is refused here, with
the smallest scale that works. Run the script with:
  k6 run --summary-export summary.json -e BASE_URL=http://INGRESS script.js
(or keep what handleSummary() is given as JSON; for N runners add k6's
--execution-segment) and import the summary with:
  prequalbench k6 import summary.json --algorithm LABEL --scenario SCENARIO [--duration-scale F]`

// k6ExportFlags are the export's flags, shared by both spellings.
type k6ExportFlags struct {
	base, out string
	scale     float64
}

func (f *k6ExportFlags) bind(c *cobra.Command) {
	c.Flags().StringVar(&f.base, "base-url", "http://127.0.0.1:31080", "default target of the script ($BASE_URL overrides it)")
	c.Flags().StringVarP(&f.out, "output", "o", "-", "script file (- for stdout)")
	c.Flags().Float64Var(&f.scale, "duration-scale", 1, "multiply every duration by this (give the import the same)")
}

// export writes the k6 script of scenario name.
func (f *k6ExportFlags) export(cmd *cobra.Command, name string) error {
	s, err := lookupScaled(name, f.scale)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if f.out != "" && f.out != "-" {
		file, err := os.Create(f.out)
		if err != nil {
			return err
		}
		defer file.Close()
		w = file
	}
	err = k6.Export(w, s, f.base)
	var short *k6.ShortExecutorError
	if errors.As(err, &short) {
		return badInput(fmt.Errorf("%w (--duration-scale %g or more)", err, math.Ceil(100*f.scale*float64(k6.MinExecutorDuration)/float64(short.Duration)-1e-9)/100))
	}
	return err
}

func newK6ExportCommand() *cobra.Command {
	var f k6ExportFlags
	c := &cobra.Command{
		Use:   "export SCENARIO",
		Short: "Write a k6 script with the scenario's phases, routes, weights, Host headers and timeout (also: campaign export --k6)",
		Long:  k6ExportLong,
		Args:  cobra.ExactArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return f.export(cmd, args[0]) },
	}
	f.bind(c)
	return c
}

// newCampaignExportCommand is `campaign export --k6 SCENARIO`, the
// issue's spelling of `k6 export SCENARIO`.
func newCampaignExportCommand() *cobra.Command {
	var f k6ExportFlags
	var scen string
	c := &cobra.Command{
		Use:   "export --k6 SCENARIO",
		Short: "Export a scenario's load for another load generator: --k6 writes a k6 script (as `k6 export`)",
		Long:  k6ExportLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if scen == "" {
				return badInput(errors.New("campaign export: --k6 SCENARIO is required (k6 is the one export format)"))
			}
			return f.export(cmd, scen)
		},
	}
	c.Flags().StringVar(&scen, "k6", "", "scenario (catalogue name or YAML file) to export as a k6 script")
	f.bind(c)
	return c
}

func newK6ImportCommand() *cobra.Command {
	var algorithm, scen, out string
	var scale float64
	c := &cobra.Command{
		Use:   "import SUMMARY.json [SUMMARY.json...]",
		Short: "Read k6's summary of an exported script into run.json files (never valid: k6's numbers, not this tool's)",
		Long: `Read what k6 wrote at the end of a run of a script from "k6 export": its
--summary-export JSON, or the data object handleSummary() is given, as JSON.
Give one summary, or one per runner when k6's --execution-segment split the
load over several: their counts are summed exactly, and each runner's
percentiles are kept in a run of its own (runs/k6-LABEL-runnerI), since k6's
summaries cannot be merged; the whole test's run then has none.

--scenario (with the --duration-scale the script was exported with) gives
the measured window's length and the load model. A summary that does not
fit it is refused, naming what does not: a test that ran longer or shorter
than the scenario's warmup and window, an open loop whose window or warmup
holds other than the scenario's requests, requests by route that do not
follow its route weights, a closed loop whose window's or warmup's requests
took longer than its users could spend, counts k6 could not have written, the same
summary given twice, an empty window, a test of 0 s.

The runs are never valid, and their validity reasons say why: latency is
k6's http_req_duration, timed from the actual send (coordinated omission not
corrected) and leaving out DNS and connect time; failures are not split by
class; there are no histograms or per-second series.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := loadbalancer.Canonical(algorithm)
			if err != nil {
				a = algorithm // another ingress's name: kept as given
			}
			s, err := lookupScaled(scen, scale)
			if err != nil {
				return err
			}
			var sums []*k6.Summary
			for _, name := range args {
				f, err := os.Open(name)
				if err != nil {
					return badInput(err)
				}
				sum, err := k6.ParseSummary(filepath.Base(name), f)
				f.Close()
				if err != nil {
					return badInput(err)
				}
				sums = append(sums, sum)
			}
			res, err := k6.Import(s, sums)
			if err != nil {
				return badInput(err)
			}
			runs := res.Runs(a)
			if out != "" {
				for _, run := range runs {
					file := filepath.Join(out, filepath.FromSlash(run.Dir), artifacts.RunFile)
					if _, err := os.Stat(file); err == nil {
						return badInput(fmt.Errorf("%s exists: remove it to import again", file))
					}
				}
				for _, run := range runs {
					dir := filepath.Join(out, filepath.FromSlash(run.Dir))
					if err := os.MkdirAll(dir, 0o755); err != nil {
						return err
					}
					if err := artifacts.WriteJSON(filepath.Join(dir, artifacts.RunFile), run); err != nil {
						return err
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", filepath.Join(dir, artifacts.RunFile))
				}
			}
			for _, run := range runs {
				l := run.Load
				p := "no percentiles (each runner's are in its own run)"
				if l.Success.Count > 0 {
					p = fmt.Sprintf("p50 %.1f ms, p99 %.1f ms", l.P50, l.P99)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "k6 import (%s): %d sent, %d failed, goodput %.1f/s over %v, %s (k6's numbers, not measured here)\n",
					run.Algorithm, l.Sent, l.Errors, l.Goodput, l.Duration, p)
			}
			for _, r := range runs[0].Validity.Reasons {
				fmt.Fprintln(cmd.OutOrStdout(), "  -", r)
			}
			if out == "" {
				e := json.NewEncoder(cmd.OutOrStdout())
				e.SetIndent("", "  ")
				for _, run := range runs {
					if err := e.Encode(run); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
	c.Flags().StringVar(&algorithm, "algorithm", "", "what ran under the k6 load (an algorithm name, or any label)")
	c.Flags().StringVar(&scen, "scenario", "", "the exported scenario (catalogue name or YAML file), for the measured window's length and the load model")
	c.Flags().Float64Var(&scale, "duration-scale", 1, "the --duration-scale the script was exported with")
	c.Flags().StringVar(&out, "out", "", "write runs/k6-ALGORITHM/run.json (and one per runner) under this directory, e.g. a campaign's, whose report then lists them in their own section, outside every statistic (default: print them)")
	_ = c.MarkFlagRequired("algorithm")
	_ = c.MarkFlagRequired("scenario")
	return c
}
