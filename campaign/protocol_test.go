package campaign

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/scenario"
)

// The connection cap is a total over the ingress replicas: 4 replicas get
// a quarter each, so 1- and 4-replica scenarios queue alike.
func TestLoadConfig_ConnectionCapIsATotal(t *testing.T) {
	s := &scenario.Scenario{Load: scenario.Load{Open: []scenario.Phase{{Kind: scenario.PhaseConstant, Rate: 440, Duration: "10s"}}, Timeout: "10s"}}
	r := &runner{c: &artifacts.Campaign{}, s: s}
	for _, replicas := range []int{1, 4} {
		var targets []env.Target
		for i := range replicas {
			// Two routes per replica: the same address twice.
			for _, host := range []string{"a", "b"} {
				targets = append(targets, env.Target{URL: fmt.Sprintf("http://127.0.0.1:%d/work", 8000+i), Host: host, Weight: 1})
			}
		}
		cfg := r.loadConfig(targets, 1)
		if got := cfg.MaxConnections * replicas; got != 4400 {
			t.Errorf("%d replicas: %d per replica, %d in total; want 4400 in total (440/s × 10 s)", replicas, cfg.MaxConnections, got)
		}
	}
}

// A new campaign says which schema its artifacts follow, and each run
// says whether it is valid.
func TestRun_RecordsSchemaVersionAndValidity(t *testing.T) {
	fe := newFakeEnv(t)
	res, err := runWith(t, context.Background(), fe, Options{Scenario: tinyScenario(t), OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(res.Dir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	if c.SchemaVersion != artifacts.SchemaVersion {
		t.Errorf("campaign.json schema_version %d, want %d", c.SchemaVersion, artifacts.SchemaVersion)
	}
	for _, r := range res.Runs {
		// The fake server answers at once; only a saturated host could
		// make a run invalid, and then it must say why.
		if !r.Validity.Valid && len(r.Validity.Reasons) == 0 {
			t.Errorf("run %d invalid without a reason", r.Index)
		}
		if r.Load.Goodput <= 0 || r.Load.Success.Count == 0 || r.Load.ConnCap != 400 {
			t.Errorf("run %d: goodput %v, success count %d, conn cap %d; want goodput, successes and a cap of 40/s × 10 s = 400", r.Index, r.Load.Goodput, r.Load.Success.Count, r.Load.ConnCap)
		}
	}
}
