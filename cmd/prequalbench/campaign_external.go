package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/prequalbench/prequalbench/campaign"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/campaign/env/external"
	"github.com/prequalbench/prequalbench/campaign/env/local"
	"github.com/prequalbench/prequalbench/scenario"
)

func init() {
	campaignEnvs[external.Name] = externalEnv
}

// externalEnv builds the external environment from --external FILE. A
// resumed campaign needs the file again: it names hooks and addresses
// that campaign.json does not record.
func externalEnv(_ context.Context, f *campaignRunFlags, _ io.Writer) (campaign.EnvFactory, error) {
	if f.external == "" {
		return nil, badInput(errors.New("--env external needs --external FILE (the ingress URL(s), hooks and backends; see examples/external/)"))
	}
	cfg, err := external.Load(f.external)
	if err != nil {
		return nil, badInput(err)
	}
	cwd, _ := os.Getwd()
	repo, _ := local.FindRepo(cwd)
	return func(dir string, s *scenario.Scenario, _ uint64) (env.Environment, error) {
		return external.New(external.Options{Scenario: s, Config: cfg, LogDir: filepath.Join(dir, "logs"), RepoDir: repo})
	}, nil
}
