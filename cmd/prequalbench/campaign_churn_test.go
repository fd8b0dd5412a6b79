package main

import (
	"os"
	"strings"
	"testing"
)

// The simulator cannot scale: a churn scenario is refused before any
// campaign directory is made.
func TestCampaignRun_SimRefusesChurn(t *testing.T) {
	out := t.TempDir()
	_, err := campaignCLI(t, "campaign", "run", "--env", "sim", "--scenario", "c7-churn", "--out", out)
	if err == nil || !strings.Contains(err.Error(), "churn") || !strings.Contains(err.Error(), "--env local") {
		t.Fatalf("err = %v, want a refusal naming the churn block and the envs that can", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("a campaign directory was made: %v", entries)
	}
}
