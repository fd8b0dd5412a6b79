package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/prequalbench/prequalbench/campaign/load"
	"github.com/prequalbench/prequalbench/campaign/loadgen"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newLoadgenCommand) }

// newLoadgenCommand is the in-cluster load generator: the campaign runs
// it as the pods of a generator Job and reads its report from the log.
func newLoadgenCommand() *cobra.Command {
	var spec string
	c := &cobra.Command{
		Use:    "loadgen",
		Short:  "Run one shard of a run's load and print its accounting as one JSON line (the campaign's in-cluster generators)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if spec == "" {
				spec = os.Getenv("PREQUALBENCH_LOADGEN_SPEC")
			}
			var s loadgen.Spec
			if strings.HasPrefix(spec, "@") {
				b, err := os.ReadFile(spec[1:])
				if err != nil {
					return badInput(err)
				}
				spec = string(b)
			}
			if err := json.Unmarshal([]byte(spec), &s); err != nil {
				return badInput(fmt.Errorf("--spec: %w", err))
			}
			out := cmd.OutOrStdout()
			rep := loadgen.Report{Shard: s.Shard, Shards: s.Shards}
			res, err := runShard(cmd, s)
			if err == nil {
				rep.Result, err = loadgen.Encode(res)
			}
			if err != nil {
				rep.Error = err.Error()
			}
			if werr := loadgen.WriteReport(out, rep); werr != nil {
				return werr
			}
			return err
		},
	}
	c.Flags().StringVar(&spec, "spec", "", "the shard to run as JSON, or @FILE (default $PREQUALBENCH_LOADGEN_SPEC)")
	return c
}

// runShard waits for the common start time, then runs the shard.
func runShard(cmd *cobra.Command, s loadgen.Spec) (*load.Result, error) {
	cfg := s.Config()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if wait := time.Until(s.StartAt); wait > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "loadgen: shard %d of %d starts in %v\n", s.Shard, s.Shards, wait.Round(time.Millisecond))
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-cmd.Context().Done():
			return nil, cmd.Context().Err()
		case <-t.C:
		}
	} else if !s.StartAt.IsZero() && -wait > time.Second {
		// Late by more than a second: its seconds would not line up.
		return nil, errors.New("loadgen: started " + (-wait).Round(time.Millisecond).String() + " after the common start time")
	}
	return load.Run(cmd.Context(), cfg)
}
