package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// exitError carries a specific exit code (for example 1 for "report --check
// found a difference", 2 for bad input).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "prequalbench",
		Short: "Settle, with evidence, when Prequal load balancing beats the classic policies",
		Long: `prequalbench runs a Kubernetes ingress whose backend choice is Prequal
(probing for requests-in-flight and latency, hot-cold lexicographic selection,
NSDI '24) or a baseline policy, drives interleaved benchmark campaigns against
it, and turns the raw artifacts into reproducible reports.

Start with:
  prequalbench campaign run --scenario quickstart`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCommand())
	for _, add := range subcommands {
		root.AddCommand(add())
	}
	return root
}

// subcommands is filled by the init functions of the files that define the
// other commands, so each command lives in its own file.
var subcommands []func() *cobra.Command
