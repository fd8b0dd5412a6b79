package env

import (
	"context"

	"github.com/prequalbench/prequalbench/load"
)

// CPUSampler is implemented by environments whose CPU this host cannot
// attribute from its own process list (kind, kube): they say themselves
// what serves a run and sample it. The runner asks once per run, after
// Reset, and uses the plan instead of sampling this host's processes.
type CPUSampler interface {
	PlanCPU(ctx context.Context) CPUPlan
}

// CPUPlan is how one run's host-headroom check is fed.
type CPUPlan struct {
	// Sample is load.Config.SampleCPU: one reading per call, the first
	// a baseline; it must return at once (the load engine's clock calls
	// it). Nil when nothing can be sampled: the check does not run.
	Sample func() *load.CPU
	// CPUs is what the group readings (Generator, Ingress, Backends,
	// percent of one CPU) are shares of: the host's CPU count, or 1 when
	// they are already percent of the sampled machine.
	CPUs int
	// Note says what was sampled and from where, or why nothing was;
	// asked after the load, so it can name what failed during it.
	Note func() string
	// Stop ends any sampling in the background; asked after the load.
	Stop func()
}
