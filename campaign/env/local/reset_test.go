package local

import (
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/scenario"
)

const probeFaultScenario = `
name: probe-faults
workload:
  routes:
    - name: work
      backends:
        - name: healthy
          replicas: 1
          serviceTime: 5ms
        - name: malformed-probe
          replicas: 1
          serviceTime: 5ms
          probeFault: malformed
        - name: probe-500
          replicas: 1
          serviceTime: 5ms
          probeFault: "500"
load:
  open:
    - {kind: constant, duration: 1s, rate: 10}
protocol:
  algorithms: [prequal]
`

// A replica whose probe fails on purpose (c8-faults) cannot show a clean
// probe after a reset; its /reset counters are the check, so the reset
// still verifies. A healthy replica's probe is still checked.
func TestReset_VerifiesAFleetWithProbeFaults(t *testing.T) {
	e, ctx := setupEnv(t, probeFaultScenario)
	if err := e.SetAlgorithm(ctx, "prequal"); err != nil {
		t.Fatal(err)
	}
	v, err := e.Reset(ctx, scenario.ResetAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Verified {
		t.Fatalf("reset not verified: %s", v.Detail)
	}
	if !strings.Contains(v.Detail, "3 backends") {
		t.Fatalf("detail %q does not count the 3 backends", v.Detail)
	}
}
