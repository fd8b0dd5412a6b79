package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/campaign"
	"github.com/prequalbench/prequalbench/scenario"
	"github.com/prequalbench/prequalbench/stats"
	"sigs.k8s.io/yaml"
)

type workflow struct {
	Permissions map[string]string `json:"permissions"`
	Jobs        map[string]struct {
		Steps []struct {
			Name            string         `json:"name"`
			Uses            string         `json:"uses"`
			With            map[string]any `json:"with"`
			Run             string         `json:"run"`
			ContinueOnError any            `json:"continue-on-error"`
		} `json:"steps"`
	} `json:"jobs"`
}

// The nightly judges code by an A/B in one campaign (issue 32): a job
// builds the baseline from history, runs it against HEAD in the local
// env, at reps that can name a real regression, and gates on the
// report; nothing in it may continue on error.
func TestNightly_GatesOnAnABInOneCampaign(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "nightly.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf workflow
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatal(err)
	}
	if wf.Permissions["actions"] != "read" {
		t.Errorf("permissions %v: the last passing nightly is found with actions: read", wf.Permissions)
	}
	gated := false
	for name, job := range wf.Jobs {
		campaign, gate, history := -1, -1, false
		for i, s := range job.Steps {
			if s.ContinueOnError != nil {
				t.Errorf("job %s, step %q: continue-on-error %v", name, s.Name, s.ContinueOnError)
			}
			if strings.HasPrefix(s.Uses, "actions/checkout") && s.With["fetch-depth"] == float64(0) {
				history = true
			}
			if strings.Contains(s.Run, "campaign run") && strings.Contains(s.Run, "--baseline-ref") {
				campaign = i
				if !strings.Contains(s.Run, "--env local") {
					t.Errorf("job %s: the A/B does not say --env local", name)
				}
				checkNightlyReps(t, root, s.Run)
			}
			if strings.Contains(s.Run, "report") && strings.Contains(s.Run, "--gate") {
				gate = i
			}
		}
		if campaign < 0 {
			continue
		}
		gated = true
		if gate < campaign {
			t.Errorf("job %s: no report --gate step after the A/B campaign", name)
		}
		if !history {
			t.Errorf("job %s: the baseline ref is built from history, but checkout has no fetch-depth: 0", name)
		}
	}
	if !gated {
		t.Fatal("no job of the nightly runs campaign run --baseline-ref")
	}
}

// checkNightlyReps: the nightly's runs per build can reach p < 0.05 at
// all, and at a 5% run-to-run spread they name a 20% regression in at
// least 80% of nights.
func checkNightlyReps(t *testing.T, root, run string) {
	t.Helper()
	m := regexp.MustCompile(`--scenario (\S+)`).FindStringSubmatch(run)
	if m == nil {
		t.Fatal("the A/B names no --scenario")
	}
	s, err := scenario.Lookup(filepath.Join(root, m[1]))
	if err != nil {
		t.Fatal(err)
	}
	n := s.Protocol.Reps
	if r := regexp.MustCompile(`--reps (\d+)`).FindStringSubmatch(run); r != nil {
		t.Fatalf("the nightly overrides --reps %s; keep the reps in the scenario file", r[1])
	}
	if stats.MinP(n, n) >= 0.05 {
		t.Fatalf("%d runs per build cannot reach p < 0.05", n)
	}
	// Each build runs first in exactly half of the reps: a penalty on the
	// first run of a rep then falls on both alike, where a seeded shuffle
	// gave one build the first slot in 5 of 8 reps.
	plan, _, err := campaign.Plan([]string{"prequal@base", "prequal@cand"}, n, s.Protocol.Order, s.Protocol.Seed)
	if err != nil {
		t.Fatal(err)
	}
	first := 0
	for i := 0; i < len(plan); i += 2 {
		if plan[i].Algorithm == "prequal@base" {
			first++
		}
	}
	if n%2 != 0 || 2*first != n {
		t.Errorf("order %s, %d reps: the baseline runs first in %d reps, want exactly half (an even number of reps, order rotate)", s.Protocol.Order, n, first)
	}
	d := stats.DetectableChange(stats.PowerSpec{N: n, CV: 0.05, Threshold: 0.05, MinEffect: 0.05, Confidence: 0.95, Power: 0.8, Seed: 1})
	if d > 0.20 {
		t.Errorf("%d runs per build detect %.0f%% at a 5%% spread, want a 20%% regression caught", n, 100*d)
	}
}
