package main

import (
	"errors"
	"strings"
	"testing"
)

// A scenario with a simulation block is for --env sim only; a real
// environment refuses it before starting anything.
func TestCampaignRun_RealEnvRejectsSimulationBlock(t *testing.T) {
	_, err := campaignCLI(t, "campaign", "run", "--env", "local", "--scenario", "sim-paper-90", "--out", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "--env sim") {
		t.Fatalf("error = %v, want one pointing to --env sim", err)
	}
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 {
		t.Errorf("exit code %d, want 2", exitCode(err))
	}
}
