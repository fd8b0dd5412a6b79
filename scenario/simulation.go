package scenario

import "fmt"

// Simulation holds the knobs of the simulated environment (--env sim) that
// a real testbed does not have. Real environments reject a scenario with
// this block (RealEnvError); the simulator uses these defaults without it.
type Simulation struct {
	// NetworkDelay is the fixed part of the one-way delay between an
	// ingress replica and a backend replica; default 50µs.
	NetworkDelay Duration `json:"networkDelay,omitempty"`
	// NetworkJitter is the width of the uniform random part added to it;
	// default 100µs (so 50–150 µs one way, a loopback-like hop).
	NetworkJitter Duration `json:"networkJitter,omitempty"`
	// CPURoundTime is the service time of one hash round of a cpu-mode
	// backend; default 250ns (an assumption: measure the real host's).
	CPURoundTime Duration `json:"cpuRoundTime,omitempty"`
}

// DefaultSimulation is the simulation block a scenario without one gets
// from the simulator.
func DefaultSimulation() Simulation {
	s := Simulation{}
	s.applyDefaults()
	return s
}

func (s *Simulation) applyDefaults() {
	if s.NetworkDelay == "" {
		s.NetworkDelay = "50µs"
	}
	if s.NetworkJitter == "" {
		s.NetworkJitter = "100µs"
	}
	if s.CPURoundTime == "" {
		s.CPURoundTime = "250ns"
	}
}

func (v *validator) simulation(s *Simulation) {
	if s == nil {
		return
	}
	v.duration("simulation.networkDelay", s.NetworkDelay, false, true)
	v.duration("simulation.networkJitter", s.NetworkJitter, false, true)
	v.duration("simulation.cpuRoundTime", s.CPURoundTime, true, true)
}

// RealEnvError is the error a real environment (local, kind, kube,
// external) gives a scenario it cannot run, nil otherwise: a simulation
// block (a model only the simulator has), or a cpu-share group outside
// --env local (a machine's replicas share one backend process, which only
// local starts; the cluster manifests deploy a replica per pod).
func (s *Scenario) RealEnvError(env string) error {
	for i, r := range s.Workload.Routes {
		for j, g := range r.Backends {
			if g.Mode == "cpu-share" && env != "local" {
				return fmt.Errorf("scenario %s: workload.routes[%d].backends[%d].mode: cpu-share runs with --env sim or --env local (one backend process per machine, which only local starts), not --env %s", s.Name, i, j, env)
			}
		}
	}
	if s.Simulation == nil {
		return nil
	}
	return fmt.Errorf("scenario %s: the simulation block only applies to --env sim, not --env %s; remove it or run with --env sim", s.Name, env)
}
