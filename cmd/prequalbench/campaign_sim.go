package main

import (
	"context"
	"io"
	"os"

	"github.com/prequalbench/prequalbench/campaign"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/campaign/env/local"
	simenv "github.com/prequalbench/prequalbench/campaign/env/sim"
	"github.com/prequalbench/prequalbench/scenario"
)

// --env sim: the testbed in virtual time (campaign/env/sim).
func init() {
	campaignEnvs[simenv.Name] = func(context.Context, *campaignRunFlags, io.Writer) (campaign.EnvFactory, error) {
		// The source tree, for the git revision in campaign.json; a
		// simulation needs nothing else from it.
		repo := ""
		if cwd, err := os.Getwd(); err == nil {
			repo, _ = local.FindRepo(cwd)
		}
		return func(_ string, s *scenario.Scenario, seed uint64) (env.Environment, error) {
			return simenv.New(s, seed, repo)
		}, nil
	}
}
