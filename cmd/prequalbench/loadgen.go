package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prequalbench/prequalbench/campaign"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/campaign/env/kube"
	"github.com/prequalbench/prequalbench/cluster/deploy"
	"github.com/prequalbench/prequalbench/load"
	"github.com/prequalbench/prequalbench/load/remote"
	"github.com/prequalbench/prequalbench/scenario"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newLoadgenCommand) }

// newLoadgenCommand is the in-cluster load generator: the campaign runs
// it as the pods of a generator Job and reads its report from the log.
func newLoadgenCommand() *cobra.Command {
	var spec, clockAddr string
	c := &cobra.Command{
		Use:    "loadgen",
		Short:  "Run one shard of a run's load and print its accounting to the log in checksummed chunks (the campaign's in-cluster generators)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if spec == "" {
				spec = os.Getenv("PREQUALBENCH_LOADGEN_SPEC")
			}
			var s remote.Spec
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
			// The clock endpoint the campaign measures this pod's clock
			// offset by, through the API server's pod proxy; without it
			// the offset goes unmeasured and the campaign records why.
			if ln, err := net.Listen("tcp", clockAddr); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "loadgen: clock endpoint: %v\n", err)
			} else {
				srv := &http.Server{Handler: remote.ClockHandler(time.Now), ReadHeaderTimeout: 5 * time.Second}
				go func() { _ = srv.Serve(ln) }()
				defer srv.Close()
				if clockListening != nil {
					clockListening(ln.Addr().String())
				}
			}
			rep := remote.Report{Shard: s.Shard, Shards: s.Shards}
			res, err := runShard(cmd, s)
			if err == nil {
				rep.Result, err = remote.Encode(res)
			}
			if err != nil {
				rep.Error = err.Error()
			}
			if werr := remote.WriteReport(out, rep); werr != nil {
				return werr
			}
			return err
		},
	}
	c.Flags().StringVar(&spec, "spec", "", "the shard to run as JSON, or @FILE (default $PREQUALBENCH_LOADGEN_SPEC)")
	c.Flags().StringVar(&clockAddr, "clock-addr", fmt.Sprintf(":%d", remote.ClockPort), "where to serve this generator's clock ("+remote.ClockPath+") for the campaign's offset measurement")
	return c
}

// clockListening, when set (tests), is told the clock endpoint's address.
var clockListening func(addr string)

// runShard waits for the common start time, then runs the shard.
func runShard(cmd *cobra.Command, s remote.Spec) (*load.Result, error) {
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

// init wraps the kind and kube environments (registered by cluster.go,
// whose init runs first) so their load comes from generator Jobs inside
// the cluster: --generators N, else the scenario's load.generators, else
// 1 on kind and 0 (from this machine) on kube.
func init() {
	for _, name := range []string{"kind", "kube"} {
		mk := campaignEnvs[name]
		if mk == nil {
			continue
		}
		campaignEnvs[name] = func(ctx context.Context, f *campaignRunFlags, msg io.Writer) (campaign.EnvFactory, error) {
			if f.generators < 0 || f.generators > scenario.MaxGenerators {
				return nil, badInput(fmt.Errorf("--generators: got %d, want 0 to %d", f.generators, scenario.MaxGenerators))
			}
			if f.generatorLead != 0 && (f.generatorLead < time.Second || f.generatorLead > 30*time.Minute) {
				return nil, badInput(fmt.Errorf("--generator-lead: got %v, want 1s to 30m", f.generatorLead))
			}
			placement, err := generatorPlacement(f)
			if err != nil {
				return nil, badInput(err)
			}
			factory, err := mk(ctx, f, msg)
			if err != nil {
				return nil, err
			}
			return func(dir string, s *scenario.Scenario, seed uint64) (env.Environment, error) {
				e, err := factory(dir, s, seed)
				if err != nil {
					return e, err
				}
				n := generatorCount(name, f, s)
				if n == 0 {
					return e, nil
				}
				k, ok := e.(*kube.Env)
				if !ok {
					return e, fmt.Errorf("--generators: the %s environment is not a cluster environment", name)
				}
				return k.InClusterLoad(n, f.generatorLead, placement), nil
			}, nil
		}
	}
}

// generatorCount is the number of generator Jobs a campaign on envName
// runs with: --generators when given, else the scenario's.
func generatorCount(envName string, f *campaignRunFlags, s *scenario.Scenario) int {
	if f.generatorsSet {
		return f.generators
	}
	return s.Load.GeneratorsFor(envName)
}

// generatorPlacement is the generators' placement from the flags.
func generatorPlacement(f *campaignRunFlags) (deploy.LoadgenPlacement, error) {
	p := deploy.LoadgenPlacement{NodeSelector: f.generatorNodeSelector, OnePerNode: f.generatorOnePerNode, AvoidBackends: f.generatorAvoidBackend}
	for _, s := range f.generatorTolerations {
		t, err := deploy.ParseToleration(s)
		if err != nil {
			return p, err
		}
		p.Tolerations = append(p.Tolerations, t)
	}
	return p, p.Validate()
}
