package scenario

import (
	"strings"
	"testing"
)

func TestSimulation_DefaultsOnlyWhenPresent(t *testing.T) {
	s, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if s.Simulation != nil || s.RealEnvError("local") != nil {
		t.Fatalf("a scenario without the block got %+v", s.Simulation)
	}
	s, err = Parse([]byte(minimal + "simulation:\n  networkDelay: 1ms\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Simulation{NetworkDelay: "1ms", NetworkJitter: "100µs", CPURoundTime: "250ns"}
	if *s.Simulation != want {
		t.Errorf("simulation = %+v, want %+v", *s.Simulation, want)
	}
	err = s.RealEnvError("local")
	if err == nil || !strings.Contains(err.Error(), "--env sim") || !strings.Contains(err.Error(), "--env local") {
		t.Errorf("RealEnvError = %v, want a pointer to --env sim", err)
	}
}

func TestSimulation_BadValuesNameTheField(t *testing.T) {
	for field, yaml := range map[string]string{
		"simulation.networkDelay":  "simulation:\n  networkDelay: soon\n",
		"simulation.networkJitter": "simulation:\n  networkJitter: -1ms\n",
		"simulation.cpuRoundTime":  "simulation:\n  cpuRoundTime: 0s\n",
		"simulation.bogus":         "simulation:\n  bogus: 1\n",
	} {
		_, err := Parse([]byte(minimal + yaml))
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%q: error %v, want one naming %s", yaml, err, field)
		}
	}
}

// TestRealEnvError_CPUShareIsSimAndLocal: the clusters refuse a
// cpu-share group by its field (their manifests deploy one replica per
// pod, not a machine per process); local and sim take it.
func TestRealEnvError_CPUShareIsSimAndLocal(t *testing.T) {
	s, err := Catalogue("paper-fig7-90-small")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RealEnvError("local"); err != nil {
		t.Errorf("RealEnvError(local) = %v, want nil: the backend serves cpu-share", err)
	}
	err = s.RealEnvError("kind")
	if err == nil || !strings.Contains(err.Error(), "workload.routes[0].backends[0].mode: cpu-share runs with --env sim or --env local") {
		t.Errorf("RealEnvError(kind) = %v, want one naming the cpu-share group", err)
	}
	if s.Simulation != nil {
		t.Errorf("the small twin has a simulation block; it must stay runnable in local")
	}
}
