package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/artifacts"
)

// A scenario with a simulation block is for --env sim only; a real
// environment refuses it before starting anything.
func TestCampaignRun_RealEnvRejectsSimulationBlock(t *testing.T) {
	_, err := campaignCLI(t, "campaign", "run", "--env", "local", "--scenario", "sim-three-speeds-90", "--out", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "--env sim") {
		t.Fatalf("error = %v, want one pointing to --env sim", err)
	}
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 {
		t.Errorf("exit code %d, want 2", exitCode(err))
	}
}

const simScenario = `
name: tiny-sim
workload:
  routes:
    - name: work
      host: bench.local
      backends:
        - name: fast
          replicas: 3
          serviceTime: 20ms
          distribution: normal
          concurrency: 2
        - name: slow
          replicas: 3
          serviceTime: 20ms
          distribution: normal
          slow: 2
          concurrency: 2
load:
  open:
    - kind: constant
      duration: 3s
      rate: 300
protocol:
  algorithms: [prequal, least-request]
  reps: 2
  warmup: 1s
  cooldown: 0s
ingress:
  replicas: 4
simulation:
  networkDelay: 100us
`

// TestCampaignRun_SimTwiceSameBytes: a simulated campaign writes the
// artifacts and the report of a real one, and a second campaign with the
// same seed measures the same bytes: everything but the wall-clock dates
// (and the campaign id made from the start time) is identical.
func TestCampaignRun_SimTwiceSameBytes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tiny-sim.yaml")
	if err := os.WriteFile(file, []byte(simScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func() string {
		out := t.TempDir()
		if _, err := campaignCLI(t, "campaign", "run", "--env", "sim", "--scenario", file, "--out", out); err != nil {
			t.Fatal(err)
		}
		dirs, err := filepath.Glob(filepath.Join(out, "*-tiny-sim"))
		if err != nil || len(dirs) != 1 {
			t.Fatalf("campaign dirs %v, %v", dirs, err)
		}
		return dirs[0]
	}
	a, b := run(), run()
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(a, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	if c.Environment.Name != "sim" || !strings.Contains(c.Environment.Topology, "100µs") || len(c.Backends) != 6 {
		t.Errorf("campaign.json environment %+v, %d backends", c.Environment, len(c.Backends))
	}
	if _, err := os.Stat(filepath.Join(a, "REPORT.md")); err != nil {
		t.Errorf("no report: %v", err)
	}
	files := 0
	err := filepath.WalkDir(filepath.Join(a, artifacts.RunsDir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(a, p)
		x, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		y, err := os.ReadFile(filepath.Join(b, rel))
		if err != nil {
			return err
		}
		if filepath.Base(p) == artifacts.RunFile {
			x, y = withoutDates(t, x), withoutDates(t, y)
		}
		files++
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two campaigns with one seed", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 4*8 {
		t.Errorf("%d run files compared, want 8 per run", files)
	}
}

// withoutDates drops run.json's wall-clock fields.
func withoutDates(t *testing.T, b []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "started")
	delete(m, "finished")
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
