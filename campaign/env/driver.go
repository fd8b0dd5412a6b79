package env

import (
	"context"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/load"
)

// LoadDriver is implemented by environments that carry the load
// themselves (the simulator, in virtual time) instead of receiving HTTP
// from the runner's load engine. The runner calls RunLoad where it would
// call load.Run, with the same Config: the warmup and the window in one
// continuous schedule (cfg.Warmup, cfg.WarmupRate), and the boundary
// callbacks cfg.OnWindowStart and cfg.OnWindowEnd, which RunLoad must
// call once each, in that order, at the window's boundaries (the runner
// snapshots the ingress state in them).
type LoadDriver interface {
	RunLoad(ctx context.Context, cfg load.Config) (*load.Result, error)
}

// LoadChooser is implemented by a LoadDriver that may hand the load back
// to the runner's engine (in-cluster generators on a cluster that does
// not allow them): the runner calls RunLoad only while DrivesLoad
// reports true, and asks after Setup.
type LoadChooser interface {
	DrivesLoad() bool
}

// PIDs are the operating-system processes of an environment that runs on
// this host, for CPU accounting.
type PIDs struct {
	// Ingress lists one pid per ingress replica, in replica order.
	Ingress []int
	// Backends lists every backend process.
	Backends []int
}

// ProcessLister is implemented by environments whose processes run on
// this host and can be watched through /proc. The runner asks once per
// run, after Reset (a restart changes the pids).
type ProcessLister interface {
	PIDs() PIDs
}

// ClockReporter is implemented by a LoadDriver whose generators run on
// other machines: the clock offsets it measured for its last RunLoad,
// which the runner records in run.json.
type ClockReporter interface {
	GeneratorClocks() []artifacts.GeneratorClock
}
