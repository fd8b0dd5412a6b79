package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/ingress/adminapi"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

const faultyScenario = `name: f
workload:
  routes:
    - name: work
      backends:
        - {name: healthy, replicas: 2}
        - {name: ff, replicas: 1, workFault: fail_fast}
        - {name: pt, replicas: 1, probeFault: timeout}
`

// snapshot builds one ingress's state with per-endpoint picks and errors.
func snapshot(picks, errs [4]uint64, aversions, ejections, returns uint64) adminapi.State {
	addrs := []string{"h0:80", "h1:80", "ff0:80", "pt0:80"}
	st := loadbalancer.Stats{Aversions: aversions}
	for i, a := range addrs {
		st.Endpoints = append(st.Endpoints, loadbalancer.EndpointStats{Address: a, Picks: picks[i], Errors: errs[i]})
	}
	return adminapi.State{Routes: []adminapi.RouteState{{
		Key: "work", Policy: st,
		Outliers: adminapi.OutlierState{Ejections: map[string]uint64{"consecutive": ejections}, Returns: returns},
	}}}
}

func faultyDataset(scenarioYAML string) (*dataset, *Analysis) {
	c := artifacts.Campaign{ScenarioYAML: scenarioYAML, Algorithms: []string{"round-robin"}, Backends: []artifacts.Backend{
		{Address: "h0:80", Group: "healthy"}, {Address: "h1:80", Group: "healthy"},
		{Address: "ff0:80", Group: "ff"}, {Address: "pt0:80", Group: "pt"},
	}}
	run := func(idx int, valid bool) *runData {
		r := &runData{
			Before: []adminapi.State{snapshot([4]uint64{10, 10, 10, 10}, [4]uint64{0, 0, 5, 0}, 3, 1, 1)},
			After:  []adminapi.State{snapshot([4]uint64{110, 110, 12, 110}, [4]uint64{0, 0, 7, 0}, 53, 3, 2)},
		}
		r.Run.Index, r.Run.Algorithm, r.Run.Status = idx, "round-robin", artifacts.StatusOK
		r.Run.Load.Sent, r.Run.Load.Errors = 1000, 4
		return r
	}
	ds := &dataset{Campaign: c, Runs: []*runData{run(1, true), run(2, false)}}
	a := &Analysis{Runs: []RunRow{
		{Index: 1, Algorithm: "round-robin", Status: artifacts.StatusOK, Valid: true},
		{Index: 2, Algorithm: "round-robin", Status: artifacts.StatusOK, Valid: false},
	}}
	return ds, a
}

// The section lists each faulty replica's share and failures, the client
// error rate, aversions, ejections and returns, from the valid runs' window
// deltas (the invalid run 2 is left out).
func TestWriteFaulty_SharesErrorsAndCounters(t *testing.T) {
	t.Parallel()
	ds, a := faultyDataset(faultyScenario)
	var b bytes.Buffer
	writeFaulty(&b, ds, a)
	out := b.String()
	for _, want := range []string{
		"## Faulty replicas",
		"ff (work fail_fast)", "pt (probe timeout)",
		"fair share 1/4 = 25",
		// window: picks 100, 100, 2, 100 of 302; ff failed 2.
		"| round-robin |    1 |", "0.66% (2)", "33.11% (0)",
		"0.40%", // 4 of 1000 sent
		"|        50 |         2 |       1 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("section lacks %q:\n%s", want, out)
		}
	}
}

func TestWriteFaulty_NoSectionWithoutFaults(t *testing.T) {
	t.Parallel()
	ds, a := faultyDataset("name: f\nworkload:\n  routes:\n    - name: work\n      backends:\n        - {name: healthy, replicas: 4}\n")
	var b bytes.Buffer
	writeFaulty(&b, ds, a)
	if b.Len() != 0 {
		t.Fatalf("section written for a scenario without faults:\n%s", b.String())
	}
}
