package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/k6"
	"github.com/prequalbench/prequalbench/loadbalancer"
	"github.com/prequalbench/prequalbench/scenario"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newK6Command) }

// newK6Command bridges to k6 through files only: no k6 code is linked
// (go.k6.io/k6 is AGPL).
func newK6Command() *cobra.Command {
	c := &cobra.Command{
		Use:   "k6",
		Short: "Export a scenario's load as a k6 script; import a k6 summary as a run (estimates, clearly marked)",
	}
	c.AddCommand(newK6ExportCommand(), newK6ImportCommand())
	return c
}

// k6ExportLong is the help of both spellings of the export.
const k6ExportLong = `Write a k6 script reproducing a scenario's load: the warmup and each open-loop
phase as a k6 scenario (constant-arrival-rate, ramping-arrival-rate with
instant jumps for steps and bursts; constant-vus for a closed loop), back to
back, requests picked by route weight with the route's Host header. Run it
with: k6 run --summary-export summary.json -e BASE_URL=http://INGRESS script.js
and import the summary with: prequalbench k6 import summary.json --algorithm
LABEL --scenario SCENARIO [--duration-scale F].`

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
	return k6.Export(w, s, f.base)
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
		Use:   "import SUMMARY.json",
		Short: "Read k6's --summary-export of an exported script into a run.json (never valid: k6 gives estimates)",
		Long: `Read the --summary-export JSON of a script written by "campaign export --k6"
(or "k6 export") into this tool's run accounting (run.json). What k6's
summary cannot carry is said in
the run's validity reasons, and the run is never valid: percentiles are
k6's trend estimates (no HDR histogram), latency runs from the actual send
(coordinated omission not corrected), failures are not split by class.
--scenario (with the --duration-scale the script was exported with) gives
the measured window's length and the load model, open or closed with its
users; without it the window is k6's whole test time. A summary whose test
ran far longer or shorter than that scenario's warmup and window is
refused.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := loadbalancer.Canonical(algorithm)
			if err != nil {
				a = algorithm // another ingress's name: kept as given
			}
			var s *scenario.Scenario
			switch {
			case scen != "":
				if s, err = lookupScaled(scen, scale); err != nil {
					return err
				}
			case cmd.Flags().Changed("duration-scale"):
				return badInput(errors.New("--duration-scale: only with --scenario (the scenario the script was exported from)"))
			}
			f, err := os.Open(args[0])
			if err != nil {
				return badInput(err)
			}
			defer f.Close()
			l, reasons, err := k6.Import(f, s)
			if err != nil {
				return badInput(err)
			}
			run := k6.Run(a, l, reasons)
			if out != "" {
				dir := filepath.Join(out, filepath.FromSlash(run.Dir))
				file := filepath.Join(dir, artifacts.RunFile)
				if _, err := os.Stat(file); err == nil {
					return badInput(fmt.Errorf("%s exists: remove it to import again", file))
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
				if err := artifacts.WriteJSON(file, run); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", filepath.Join(dir, artifacts.RunFile))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "k6 import (%s): %d sent, %d failed, goodput %.1f/s, p50 %.1f ms, p99 %.1f ms (k6 estimates)\n",
				a, l.Sent, l.Errors, l.Goodput, l.P50, l.P99)
			for _, r := range reasons {
				fmt.Fprintln(cmd.OutOrStdout(), "  -", r)
			}
			if out == "" {
				e := json.NewEncoder(cmd.OutOrStdout())
				e.SetIndent("", "  ")
				return e.Encode(run)
			}
			return nil
		},
	}
	c.Flags().StringVar(&algorithm, "algorithm", "", "what ran under the k6 load (an algorithm name, or any label)")
	c.Flags().StringVar(&scen, "scenario", "", "the exported scenario, for the measured window's length and the load model")
	c.Flags().Float64Var(&scale, "duration-scale", 1, "the --duration-scale the script was exported with")
	c.Flags().StringVar(&out, "out", "", "write runs/k6-ALGORITHM/run.json under this directory, e.g. a campaign's, whose report then lists it in its own section of k6 estimates, outside every statistic (default: print it)")
	_ = c.MarkFlagRequired("algorithm")
	return c
}
