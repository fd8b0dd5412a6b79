package campaign

import (
	"fmt"
	"testing"

	"github.com/prequalbench/prequalbench/campaign/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/campaign/scenario"
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
