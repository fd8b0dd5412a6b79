package reports_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/reports"
	"github.com/prequalbench/prequalbench/reports/reportstest"
)

// regressedSpec is the default campaign with prequal's tail twice as slow
// and a different seed, so everything else differs only by noise.
func regressedSpec(reps int) reportstest.Spec {
	s := reportstest.Default(reps)
	s.Seed = 43
	s.ID = "20260102T000000Z-fixture"
	p := s.Profiles["prequal"]
	p.TailMs *= 2
	s.Profiles = map[string]reportstest.Profile{"prequal": p, "round-robin": s.Profiles["round-robin"]}
	return s
}

func TestCompare_PlantedP99RegressionFails(t *testing.T) {
	t.Parallel()
	old := fixture(t, reportstest.Default(4))
	cur := fixture(t, regressedSpec(4))
	res, err := reports.Compare(cur, old, reports.Options{})
	regressed := res.Regressed
	if err != nil {
		t.Fatal(err)
	}
	if !regressed {
		t.Fatal("p99 ×2 over 4 reps was not flagged as a regression")
	}
	b, err := os.ReadFile(filepath.Join(cur, reports.CompareFile))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	if !strings.Contains(md, "**Verdict: regressed**") || !strings.Contains(md, "prequal p99") {
		t.Errorf("COMPARE.md does not name the regression:\n%s", md)
	}
	// round-robin did not change: none of its rows may regress.
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| round-robin") && strings.Contains(line, "REGRESSED") {
			t.Errorf("round-robin flagged: %s", line)
		}
	}
}

func TestCompare_IdenticalCampaignsPass(t *testing.T) {
	t.Parallel()
	dir := fixture(t, reportstest.Default(4))
	res, err := reports.Compare(dir, dir, reports.Options{})
	regressed := res.Regressed
	if err != nil || regressed {
		t.Fatalf("identical campaigns: regressed %v, err %v", regressed, err)
	}
}

func TestCompare_RegressionWithinThresholdOrTooFewRepsPasses(t *testing.T) {
	t.Parallel()
	old := fixture(t, reportstest.Default(4))
	cur := fixture(t, regressedSpec(4))
	// A 150% threshold tolerates the doubling.
	if res, err := reports.Compare(cur, old, reports.Options{Threshold: 1.5}); err != nil || res.Regressed {
		t.Errorf("threshold 1.5: regressed %v, err %v", res.Regressed, err)
	}
	// With 3 reps per side p >= 0.1: never significant.
	old3, cur3 := fixture(t, reportstest.Default(3)), fixture(t, regressedSpec(3))
	if res, err := reports.Compare(cur3, old3, reports.Options{}); err != nil || res.Regressed {
		t.Errorf("3 reps: regressed %v, err %v", res.Regressed, err)
	}
}

func TestCompare_ErrorRateRiseFails(t *testing.T) {
	t.Parallel()
	old := fixture(t, reportstest.Default(4))
	s := reportstest.Default(4)
	p := s.Profiles["round-robin"]
	p.ErrorRate = 0.05
	s.Profiles["round-robin"] = p
	res, err := reports.Compare(fixture(t, s), old, reports.Options{})
	regressed := res.Regressed
	if err != nil || !regressed {
		t.Errorf("error rate 0 → 5%%: regressed %v, err %v", res.Regressed, err)
	}
}

func TestCompare_DifferentScenariosRefused(t *testing.T) {
	t.Parallel()
	s := reportstest.Default(4)
	s.Scenario = "other"
	_, err := reports.Compare(fixture(t, s), fixture(t, reportstest.Default(4)), reports.Options{})
	if err == nil || !reports.IsBadInput(err) || !strings.Contains(err.Error(), "same scenario") {
		t.Errorf("err = %v, want a bad-input error about the scenario", err)
	}
}

func TestCompare_DifferentSchemaVersionsRefused(t *testing.T) {
	t.Parallel()
	old := reportstest.Default(4)
	old.SchemaV1 = true
	_, err := reports.Compare(fixture(t, reportstest.Default(4)), fixture(t, old), reports.Options{})
	if err == nil || !reports.IsBadInput(err) || !strings.Contains(err.Error(), "schema_version differs") {
		t.Errorf("err = %v, want a bad-input error naming schema_version", err)
	}
}

func TestCompare_TooFewRunsSayCannotDetect(t *testing.T) {
	t.Parallel()
	old, cur := fixture(t, reportstest.Default(3)), fixture(t, regressedSpec(3))
	res, err := reports.Compare(cur, old, reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The error rate is gated by its rise, not by p: only the 8 latency and
	// goodput rows are undetectable.
	if res.Regressed || res.Tested != 8 || res.Undetectable != 8 {
		t.Errorf("result %+v, want every p-gated metric undetectable", res)
	}
	b, err := os.ReadFile(filepath.Join(cur, reports.CompareFile))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	if !strings.Contains(md, "cannot detect (3 vs 3 runs") || !strings.Contains(md, "**Verdict: cannot detect a regression**") {
		t.Errorf("COMPARE.md:\n%s", md)
	}
}

// A baseline from another environment is refused, naming both (the
// nightly's kind campaign against the local baseline compared loopback
// processes with a cluster); the same environment on another topology or
// load path compares, with a note saying so.
func TestCompare_EnvironmentMustMatch(t *testing.T) {
	t.Parallel()
	old := fixture(t, reportstest.Default(4))
	cur := fixture(t, regressedSpec(4))
	setEnvironment(t, cur, func(e *artifacts.Environment) { e.Name = "kind"; e.Topology = "e-b" })
	_, err := reports.Compare(cur, old, reports.Options{})
	if err == nil || !reports.IsBadInput(err) || !strings.Contains(err.Error(), `environment "kind"`) || !strings.Contains(err.Error(), `ran in "local"`) {
		t.Fatalf("kind against a local baseline: %v, want bad input naming both environments", err)
	}
	if _, err := os.Stat(filepath.Join(cur, reports.CompareFile)); err == nil {
		t.Error("a refused comparison wrote COMPARE.md")
	}

	setEnvironment(t, old, func(e *artifacts.Environment) {
		e.Name, e.Topology = "kind", "e-a"
		e.Load = &artifacts.LoadPath{Path: artifacts.LoadFromCLI, URLs: []string{"http://127.0.0.1:31080"}, Via: "kind's proxy NodePort 31080 published on 127.0.0.1"}
	})
	setEnvironment(t, cur, func(e *artifacts.Environment) {
		e.Load = &artifacts.LoadPath{Path: artifacts.LoadFromGenerators, Generators: 1, URLs: []string{"http://prequal-ingress.prequalbench-system.svc:8080"}}
	})
	if _, err := reports.Compare(cur, old, reports.Options{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(cur, reports.CompareFile))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{
		"- the topologies differ (new e-b, baseline e-a)",
		"- the load paths differ: new from 1 in-cluster generator Job(s) to http://prequal-ingress.prequalbench-system.svc:8080; baseline from the machine running the campaign to http://127.0.0.1:31080",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("COMPARE.md lacks %q:\n%s", want, md)
		}
	}
	// Same environment, topology and path: no such note.
	setEnvironment(t, cur, func(e *artifacts.Environment) { e.Topology, e.Load = "e-a", old2load() })
	if _, err := reports.Compare(cur, old, reports.Options{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(cur, reports.CompareFile)); strings.Contains(string(b), "differ (new") || strings.Contains(string(b), "load paths differ") {
		t.Errorf("notes for campaigns that ran alike:\n%s", b)
	}
	// A side without an environment name is noted, not taken as the same.
	setEnvironment(t, old, func(e *artifacts.Environment) { e.Name = "" })
	if _, err := reports.Compare(cur, old, reports.Options{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(cur, reports.CompareFile)); !strings.Contains(string(b), "only one campaign records its environment (new kind, baseline none recorded)") {
		t.Errorf("COMPARE.md lacks the note on the unnamed environment:\n%s", b)
	}
}

func old2load() *artifacts.LoadPath {
	return &artifacts.LoadPath{Path: artifacts.LoadFromCLI, URLs: []string{"http://127.0.0.1:31080"}}
}

// Two campaigns of another kernel or day cannot tell code from host:
// COMPARE.md says so first and names what differs, and so does the
// terminal summary; two campaigns of one host and day carry no such
// caveat.
func TestCompare_SaysWhenHostOrDateDiffer(t *testing.T) {
	t.Parallel()
	old := fixture(t, reportstest.Default(4))
	cur := fixture(t, regressedSpec(4))
	res, err := reports.Compare(cur, old, reports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(cur, reports.CompareFile)); len(res.HostDiffers) > 0 || strings.Contains(string(b), "Cannot separate code from host") {
		t.Fatalf("same host and day: differs %v\n%s", res.HostDiffers, b)
	}
	p := filepath.Join(cur, artifacts.CampaignFile)
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(p, &c); err != nil {
		t.Fatal(err)
	}
	// Another host of the same machine type, kernel and day (another CI
	// runner): the host alone is named.
	setEnv := func(dir string, f func(c *artifacts.Campaign)) {
		p := filepath.Join(dir, artifacts.CampaignFile)
		var c artifacts.Campaign
		if err := artifacts.ReadJSON(p, &c); err != nil {
			t.Fatal(err)
		}
		f(&c)
		if err := artifacts.WriteJSON(p, c); err != nil {
			t.Fatal(err)
		}
	}
	setEnv(old, func(c *artifacts.Campaign) { c.Environment.HostID = "aaaaaaaaaaaa" })
	setEnv(cur, func(c *artifacts.Campaign) { c.Environment.HostID = "bbbbbbbbbbbb" })
	if res, err = reports.Compare(cur, old, reports.Options{}); err != nil || !slices.Equal(res.HostDiffers, []string{"host"}) {
		t.Errorf("another host: differs %v (%v), want [host]", res.HostDiffers, err)
	}
	setEnv(cur, func(c *artifacts.Campaign) { c.Environment.HostID = "aaaaaaaaaaaa" })
	c.Environment.Kernel = "6.8.0"
	c.Environment.HostID = "aaaaaaaaaaaa"
	c.Started = c.Started.Add(26 * time.Hour)
	if err := artifacts.WriteJSON(p, c); err != nil {
		t.Fatal(err)
	}
	if res, err = reports.Compare(cur, old, reports.Options{}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(cur, reports.CompareFile))
	if want := "**Cannot separate code from host.** The two campaigns differ in kernel, date"; !strings.Contains(string(b), want) {
		t.Errorf("COMPARE.md lacks %q:\n%s", want, b)
	}
	if s := res.Summary(); !strings.Contains(s, "kernel, date differ: the code cannot be separated from the host") {
		t.Errorf("summary %q does not say the host differs", s)
	}
}
