package local

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/prequalbench/prequalbench/scenario"
)

// ScaleGroup changes the replicas of a backend group. New replicas are
// started, checked healthy, then added to the routes file; removed ones
// (the newest first) leave the routes file, and only once every ingress
// replica's admin state shows them gone are they sent SIGTERM: requests
// they still serve finish, and none arrives after, so a scale-down costs
// no client a failed request.
func (e *Env) ScaleGroup(ctx context.Context, group string, replicas int) error {
	e.scaleMu.Lock()
	defer e.scaleMu.Unlock()
	route, g, ok := e.findGroup(group)
	if !ok {
		return fmt.Errorf("local: scale: no backend group %q in the scenario", group)
	}
	if g.Mode == "cpu-share" {
		return fmt.Errorf("local: scale %s: a cpu-share group's replicas are placed on machines at setup and cannot be scaled", group)
	}
	if replicas < 1 {
		return fmt.Errorf("local: scale %s: replicas %d, want >= 1", group, replicas)
	}
	var cur []backend
	for _, b := range e.backendList() {
		if b.info.Group == group {
			cur = append(cur, b)
		}
	}
	switch {
	case replicas > len(cur):
		return e.scaleUp(ctx, route, g, cur, replicas-len(cur))
	case replicas < len(cur):
		return e.scaleDown(ctx, route, cur[replicas:])
	}
	return nil
}

func (e *Env) findGroup(name string) (string, scenario.BackendGroup, bool) {
	for _, r := range e.opts.Scenario.Workload.Routes {
		for _, g := range r.Backends {
			if g.Name == name {
				return r.Name, g, true
			}
		}
	}
	return "", scenario.BackendGroup{}, false
}

func (e *Env) scaleUp(ctx context.Context, route string, g scenario.BackendGroup, cur []backend, n int) error {
	// Names reuse the lowest free index, so the logs stay one per slot.
	used := map[string]bool{}
	for _, b := range cur {
		used[b.proc.name] = true
	}
	var added []backend
	fail := func(err error) error {
		var ps []*proc
		for _, b := range added {
			ps = append(ps, b.proc)
		}
		_ = stopAll(ps)
		return err
	}
	for i := 0; len(added) < n; i++ {
		name := fmt.Sprintf("backend-%s-%d", g.Name, i)
		if used[name] {
			continue
		}
		e.scaleSeed++
		b, err := e.startBackend(ctx, route, g, name, e.scaleSeed)
		if b.proc != nil {
			added = append(added, b)
		}
		if err != nil {
			return fail(err)
		}
	}
	for _, b := range added {
		if err := e.waitHealthy(ctx, b); err != nil {
			return fail(err)
		}
	}
	e.backendsMu.Lock()
	if e.closed {
		e.backendsMu.Unlock()
		return fail(fmt.Errorf("local: scale %s: the environment was closed", g.Name))
	}
	e.backends = append(e.backends, added...)
	e.backendsMu.Unlock()
	if err := e.writeRoutes(); err != nil {
		return err
	}
	return e.waitIngressEndpoints(ctx, route)
}

func (e *Env) scaleDown(ctx context.Context, route string, victims []backend) error {
	e.backendsMu.Lock()
	e.backends = slices.DeleteFunc(e.backends, func(b backend) bool {
		return slices.ContainsFunc(victims, func(v backend) bool { return v.proc == b.proc })
	})
	e.backendsMu.Unlock()
	var ps []*proc
	for _, v := range victims {
		ps = append(ps, v.proc)
	}
	if err := e.writeRoutes(); err != nil {
		_ = stopAll(ps) // out of the list, so Close would not stop them
		return err
	}
	waitErr := e.waitIngressEndpoints(ctx, route)
	// Stopped even when the ingress did not drop them in time: they are
	// out of the list and nothing else would stop them.
	stopErr := stopAll(ps)
	if waitErr != nil {
		return waitErr
	}
	return stopErr
}

// waitIngressEndpoints polls every ingress replica's admin state until the
// route's policy has exactly the route's current backends.
func (e *Env) waitIngressEndpoints(ctx context.Context, route string) error {
	var want []string
	for _, b := range e.backendList() {
		if b.info.Route == route {
			want = append(want, b.info.Address)
		}
	}
	slices.Sort(want)
	err := poll(ctx, e.opts.ReadyTimeout, func() error {
		for i, in := range e.ingresses {
			st, err := in.admin.State(ctx)
			if err != nil {
				return fmt.Errorf("ingress-%d state: %w", i, err)
			}
			var have []string
			found := false
			for _, r := range st.Routes {
				if r.Key != route {
					continue
				}
				found = true
				for _, ep := range r.Policy.Endpoints {
					have = append(have, ep.Address)
				}
			}
			slices.Sort(have)
			if !found || !slices.Equal(have, want) {
				return fmt.Errorf("ingress-%d route %s has endpoints [%s], want [%s]", i, route, strings.Join(have, " "), strings.Join(want, " "))
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("local: waiting for the ingress to apply the routes file: %w", err)
	}
	return nil
}
