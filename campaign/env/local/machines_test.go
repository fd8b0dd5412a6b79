package local

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/artifacts"
)

const machinesScenario = `
name: machines
workload:
  routes:
    - name: work
      backends:
        - name: share
          replicas: 3
          mode: cpu-share
          serviceTime: 5ms
          cpuShare: {share: 0.25, perMachine: 2}
load:
  open:
    - {kind: constant, duration: 1s, rate: 10}
protocol:
  algorithms: [round-robin]
`

// A cpu-share group starts as machines: 3 replicas at 2 per machine are
// two backend processes (2 replicas and 1), each replica its own healthy
// address in the ingress's route, the machine's pid listed once for CPU
// attribution, and a scaling of the group refused.
func TestSetup_CPUShareGroupRunsAsMachines(t *testing.T) {
	e, ctx := setupEnv(t, machinesScenario)
	bs := e.Backends()
	var addrs []string
	for _, b := range bs {
		addrs = append(addrs, b.Address)
	}
	slices.Sort(addrs)
	if len(slices.Compact(slices.Clone(addrs))) != 3 {
		t.Fatalf("backends %v, want 3 distinct addresses", addrs)
	}
	if got := endpoints(t, e); !slices.Equal(got, addrs) {
		t.Errorf("ingress endpoints %v, want %v", got, addrs)
	}
	if pids := e.PIDs().Backends; len(pids) != 2 {
		t.Errorf("backend pids %v, want 2 (one per machine)", pids)
	}
	var procs []Process
	if err := artifacts.ReadJSON(filepath.Join(e.opts.LogDir, ProcessesFile), &procs); err != nil {
		t.Fatal(err)
	}
	perMachine := map[string]int{}
	for _, p := range procs {
		if !strings.HasPrefix(p.Name, "machine-") {
			continue
		}
		perMachine[p.Name] = len(strings.Split(p.Address, ","))
		if !slices.Contains(p.Command, "--replicas") || !slices.Contains(p.Command, "--machine-index") {
			t.Errorf("%s command %q lacks --replicas or --machine-index", p.Name, p.Command)
		}
	}
	if want := map[string]int{"machine-share-0": 2, "machine-share-1": 1}; !maps.Equal(perMachine, want) {
		t.Errorf("machines %v, want %v", perMachine, want)
	}
	if err := e.ScaleGroup(ctx, "share", 4); err == nil || !strings.Contains(err.Error(), "cpu-share") {
		t.Errorf("ScaleGroup = %v, want a refusal naming cpu-share", err)
	}
}
