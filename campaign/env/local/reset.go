package local

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/ingress/adminapi"
	"github.com/prequalbench/prequalbench/scenario"
)

// backendProbe is the backend's /prequal/probe answer.
type backendProbe struct {
	RIF     int      `json:"rif"`
	Latency *float64 `json:"latency_median_ms"`
	Samples int      `json:"samples"`
}

// Reset waits for the previous run's requests to drain, resets the
// backends (latency history and counters), then the ingress (admin reset
// or restart), and verifies all of it: zero in flight and zero counters
// on every backend, a probe that reports no history, and an ingress state
// whose pools and counters are empty.
func (e *Env) Reset(ctx context.Context, mode string) (env.Verification, error) {
	var problems []string
	if err := poll(ctx, e.opts.DrainTimeout, func() error { return e.drained(ctx) }); err != nil {
		if ctx.Err() != nil {
			return env.Verification{}, ctx.Err()
		}
		problems = append(problems, "did not drain: "+err.Error())
	}
	for _, b := range e.backendList() {
		st, err := env.CallBackend(ctx, e.client, http.MethodPost, b.info.Address, "/reset")
		if err != nil {
			return env.Verification{}, fmt.Errorf("local: reset backend %s: %w", b.info.Address, err)
		}
		if !st.Clean() {
			problems = append(problems, fmt.Sprintf("backend %s after reset: %+v", b.info.Address, st))
		}
		if b.probeFault != "" && b.probeFault != "none" {
			// Its probe answers wrongly on purpose (times out, 500,
			// malformed, stale): /reset's counters above are the check.
			continue
		}
		body, err := e.get(ctx, "http://"+b.info.Address+"/prequal/probe")
		if err != nil {
			problems = append(problems, fmt.Sprintf("backend %s probe: %v", b.info.Address, err))
			continue
		}
		var pr backendProbe
		if err := json.Unmarshal(body, &pr); err != nil {
			problems = append(problems, fmt.Sprintf("backend %s probe: bad answer %q", b.info.Address, body))
			continue
		}
		if pr.RIF != 0 || pr.Latency != nil || pr.Samples != 0 {
			problems = append(problems, fmt.Sprintf("backend %s probe after reset: rif %d, samples %d, latency known %v", b.info.Address, pr.RIF, pr.Samples, pr.Latency != nil))
		}
	}
	switch mode {
	case scenario.ResetAdmin:
		for i, in := range e.ingresses {
			st, err := in.admin.Reset(ctx, "")
			if err != nil {
				return env.Verification{}, fmt.Errorf("local: ingress-%d: reset: %w", i, err)
			}
			if err := st.VerifyReset(); err != nil {
				problems = append(problems, fmt.Sprintf("ingress-%d: %v", i, err))
			}
		}
	case scenario.ResetRestart:
		if err := e.restartIngress(ctx); err != nil {
			return env.Verification{}, err
		}
		for i, in := range e.ingresses {
			st, err := in.admin.State(ctx)
			if err != nil {
				return env.Verification{}, fmt.Errorf("local: ingress-%d: state: %w", i, err)
			}
			if err := verifyFresh(st); err != nil {
				problems = append(problems, fmt.Sprintf("ingress-%d after restart: %v", i, err))
			}
		}
	default:
		return env.Verification{}, fmt.Errorf("local: reset mode %q, allowed: %s, %s", mode, scenario.ResetAdmin, scenario.ResetRestart)
	}
	if len(problems) > 0 {
		return env.Verification{Verified: false, Detail: strings.Join(problems, "; ")}, nil
	}
	return env.Verification{Verified: true, Detail: fmt.Sprintf("%s reset: %d backends and %d ingress replicas clean", mode, len(e.backends), len(e.ingresses))}, nil
}

// verifyFresh checks a just-started ingress: no request routed yet and
// nothing in flight. Its pools may already hold idle probes, which are
// fresh by construction.
func verifyFresh(st adminapi.State) error {
	for _, r := range st.Routes {
		if r.Requests != 0 || r.Policy.Picks != 0 {
			return fmt.Errorf("route %s: %d requests, %d picks", r.Key, r.Requests, r.Policy.Picks)
		}
		for _, ep := range r.Policy.Endpoints {
			if ep.InFlight != 0 {
				return fmt.Errorf("route %s: %s has %d in flight", r.Key, ep.Address, ep.InFlight)
			}
		}
	}
	return nil
}

// drained returns nil when no request is in flight or queued anywhere.
func (e *Env) drained(ctx context.Context) error {
	for _, b := range e.backendList() {
		st, err := env.CallBackend(ctx, e.client, http.MethodGet, b.info.Address, "/stats")
		if err != nil {
			return fmt.Errorf("backend %s stats: %w", b.info.Address, err)
		}
		if st.InFlight != 0 || st.Queued != 0 {
			return fmt.Errorf("backend %s: %d in flight, %d queued", b.info.Address, st.InFlight, st.Queued)
		}
	}
	for i, in := range e.ingresses {
		st, err := in.admin.State(ctx)
		if err != nil {
			return fmt.Errorf("ingress-%d state: %w", i, err)
		}
		for _, r := range st.Routes {
			for _, ep := range r.Policy.Endpoints {
				if ep.InFlight != 0 {
					return fmt.Errorf("ingress-%d route %s: %s has %d in flight", i, r.Key, ep.Address, ep.InFlight)
				}
			}
		}
	}
	return nil
}

// restartIngress stops every ingress replica and starts fresh ones (new
// ports) with the current algorithm.
func (e *Env) restartIngress(ctx context.Context) error {
	old := make([]*proc, len(e.ingresses))
	for i, in := range e.ingresses {
		old[i] = in.proc
	}
	if err := stopAll(old); err != nil {
		return err
	}
	for i := range e.ingresses {
		in, err := e.startIngress(ctx, i)
		if err != nil {
			return err
		}
		e.ingresses[i] = in
	}
	return nil
}

// SetBuild runs the build's ingress binary from now on: every replica is
// stopped and started again from it, on every call (env.BuildSwitcher).
// The backends stay: an A/B compares builds of the ingress.
func (e *Env) SetBuild(ctx context.Context, b artifacts.Build) error {
	if _, err := os.Stat(b.IngressBin); err != nil {
		return fmt.Errorf("local: the %s build %s: %w", b.Role, b.Name, err)
	}
	e.opts.IngressBin = b.IngressBin
	return e.restartIngress(ctx)
}
