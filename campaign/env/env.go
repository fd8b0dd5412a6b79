// Package env is the seam between the campaign runner and the place a
// campaign runs: local processes, a kind cluster or an existing cluster. The
// runner drives every environment through Environment and never asks which
// one it has.
package env

import (
	"context"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/ingress/adminapi"
)

// Environment brings up the ingress and the backends of a scenario and
// lets the runner drive them. Methods other than Close are called from one
// goroutine, in this order: Setup once, then per run SetAlgorithm, Reset,
// Snapshot, (load through LoadTargets), Snapshot; Close at the end, also
// after a failed Setup.
type Environment interface {
	// Setup starts or deploys everything and waits until the ingress
	// replicas are ready and every backend is healthy.
	Setup(ctx context.Context) error

	// Backends lists every backend replica with its group and route.
	Backends() []artifacts.Backend

	// LoadTargets are the addresses the load generator sends to: one per
	// ingress replica and route, with the route's Host and weight. The
	// runner spreads the load over them; it asks again after each Reset,
	// since a restart may move the ingress.
	LoadTargets() []Target

	// SetAlgorithm switches every route of every ingress replica to the
	// (canonical) algorithm.
	SetAlgorithm(ctx context.Context, algorithm string) error

	// Reset brings the ingress and the backends back to a clean state and
	// verifies it: empty probe pools, zero counters, zero requests in
	// flight. mode is scenario.ResetAdmin or scenario.ResetRestart.
	// A reset that ran but could not be verified returns Verified false
	// and a Detail saying what did not hold; err is for failures to reset.
	Reset(ctx context.Context, mode string) (Verification, error)

	// Snapshot returns the admin state of every ingress replica, in
	// replica order.
	Snapshot(ctx context.Context) ([]adminapi.State, error)

	// Facts describes the environment and the host for campaign.json.
	Facts() artifacts.Environment

	// Close stops or removes everything Setup started. It is safe to call
	// more than once and after a cancelled context.
	Close() error
}

// LogCollector is implemented by environments whose process logs can be
// cut per run: CollectLogs copies what each process logged since the
// previous call into dir.
type LogCollector interface {
	CollectLogs(dir string) error
}

// Target is one place to send load.
type Target struct {
	// URL of a request, e.g. http://127.0.0.1:41234/work?iterations=1000.
	URL string
	// Host is the Host header (the route's host), empty for none.
	Host string
	// Weight is the target's share of the load (relative).
	Weight float64
	// Route is the route key, for labels.
	Route string
}

// Verification is the outcome of a reset check.
type Verification struct {
	Verified bool
	Detail   string
}

// BuildSwitcher is implemented by environments that can run more than one
// build of the ingress in a campaign (an A/B of two builds). SetBuild
// stops every ingress replica and starts it again from the build's
// binary, on every call, so each run begins on a fresh process whatever
// ran before; the runner calls it before SetAlgorithm and Reset.
type BuildSwitcher interface {
	SetBuild(ctx context.Context, b artifacts.Build) error
}
