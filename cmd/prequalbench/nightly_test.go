package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The nightly's compare step may fail only while there is no kind
// baseline: its continue-on-error is an expression on the very baseline
// directory the step compares against (it was unconditionally true, so
// a regression could never fail the job).
func TestNightly_CompareContinuesOnErrorOnlyWithoutBaseline(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", ".github", "workflows", "nightly.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]struct {
			Steps []struct {
				Name            string `json:"name"`
				Run             string `json:"run"`
				ContinueOnError any    `json:"continue-on-error"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, job := range wf.Jobs {
		for _, s := range job.Steps {
			if !strings.Contains(s.Run, "--compare") {
				if s.ContinueOnError != nil {
					t.Errorf("step %q: continue-on-error %v", s.Name, s.ContinueOnError)
				}
				continue
			}
			found = true
			m := regexp.MustCompile(`--compare (\S+)`).FindStringSubmatch(s.Run)
			if m == nil {
				t.Fatalf("step %q: no baseline directory after --compare", s.Name)
			}
			base := strings.TrimSuffix(m[1], "/")
			want := "${{ hashFiles('" + base + "/campaign.json') == '' }}"
			if s.ContinueOnError != want {
				t.Errorf("step %q: continue-on-error %#v, want %s", s.Name, s.ContinueOnError, want)
			}
			if !strings.Contains(s.Run, "[ ! -f "+base+"/campaign.json ]") {
				t.Errorf("step %q does not check for %s/campaign.json itself", s.Name, base)
			}
			if !strings.HasPrefix(base, "baselines/kind-") {
				t.Errorf("the nightly (kind) compares against %s, not a kind baseline", base)
			}
		}
	}
	if !found {
		t.Fatal("no compare step in the nightly")
	}
}
