package local

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/campaign/scenario"
	"github.com/prequalbench/prequalbench/internal/testbackend"
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
	s, err := scenario.Parse([]byte(probeFaultScenario))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{Scenario: s, BackendBin: testbackend.Binary(t), IngressBin: ingressBinary(t), LogDir: t.TempDir(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.Setup(ctx); err != nil {
		t.Fatal(err)
	}
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
