package main

import (
	"context"
	"io"

	"github.com/prequalbench/prequalbench/campaign"
	"github.com/prequalbench/prequalbench/campaign/env"
	simenv "github.com/prequalbench/prequalbench/campaign/env/sim"
	"github.com/prequalbench/prequalbench/campaign/scenario"
)

// --env sim: the testbed in virtual time (campaign/env/sim).
func init() {
	campaignEnvs[simenv.Name] = func(context.Context, *campaignRunFlags, io.Writer) (campaign.EnvFactory, error) {
		return func(_ string, s *scenario.Scenario, seed uint64) (env.Environment, error) {
			return simenv.New(s, seed)
		}, nil
	}
}
