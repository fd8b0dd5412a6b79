package campaign

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/scenario"
)

// ChurnFile, in a run directory of a scenario with a churn block, lists
// the scalings: the group's replicas at the window's start, each step
// during the window, and the scaling back to the scenario's count after it.
const ChurnFile = "churn.csv"

// churnScaler returns the environment's Scaler when the scenario churns,
// nil when it does not, and an error when the environment cannot scale.
func churnScaler(s *scenario.Scenario, e env.Environment) (env.Scaler, error) {
	if s.Churn == nil {
		return nil, nil
	}
	sc, ok := e.(env.Scaler)
	if !ok {
		return nil, fmt.Errorf("campaign: scenario %s has a churn block (scaling group %s), but this environment cannot scale backend groups; run it with --env local, kind or kube", s.Name, s.Churn.Group)
	}
	return sc, nil
}

// churnEvent is one row of ChurnFile.
type churnEvent struct {
	phase    string // start, step or restore
	at       time.Duration
	replicas int
	took     time.Duration
	err      error
}

// churn scales a group on the churn block's schedule from the window's
// start until halt; steps run one at a time, each Every after the
// window's start, and the first failure ends the churn.
type churn struct {
	c      scenario.Churn
	scaler env.Scaler
	start  int // the group's replicas in the scenario
	t0     time.Time
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	events []churnEvent
	err    error
}

func startChurn(ctx context.Context, c scenario.Churn, scaler env.Scaler, start int) *churn {
	ch := &churn{c: c, scaler: scaler, start: start, t0: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	ch.events = append(ch.events, churnEvent{phase: "start", replicas: start})
	go ch.loop(ctx)
	return ch
}

func (ch *churn) loop(ctx context.Context) {
	defer close(ch.done)
	every := ch.c.Every.Std()
	t := time.NewTimer(every)
	defer t.Stop()
	cur, up := ch.start, true
	for step := 1; ; step++ {
		select {
		case <-ch.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var next int
		next, up = ch.c.Next(cur, up)
		ev := ch.scale(ctx, "step", next)
		if ev.err != nil {
			ch.err = fmt.Errorf("campaign: churn step %d (%s to %d replicas): %w", step, ch.c.Group, next, ev.err)
			return
		}
		cur = next
		t.Reset(max(time.Until(ch.t0.Add(time.Duration(step+1)*every)), 0))
	}
}

func (ch *churn) scale(ctx context.Context, phase string, replicas int) churnEvent {
	began := time.Now()
	err := ch.scaler.ScaleGroup(ctx, ch.c.Group, replicas)
	ev := churnEvent{phase: phase, at: began.Sub(ch.t0), replicas: replicas, took: time.Since(began), err: err}
	ch.events = append(ch.events, ev)
	return ev
}

// halt stops the schedule and waits for a step under way to finish.
func (ch *churn) halt() {
	ch.once.Do(func() { close(ch.stop) })
	<-ch.done
}

// finish halts, scales the group back to the scenario's count (so the
// next run starts from the same fleet) and writes ChurnFile. It returns
// the first failure: a step's, the scaling back's or the write's.
func (ch *churn) finish(ctx context.Context, runDir string) error {
	ch.halt()
	ev := ch.scale(ctx, "restore", ch.start)
	var buf bytes.Buffer
	buf.WriteString("phase,at_s,group,replicas,took_ms,error\n")
	for _, e := range ch.events {
		msg := ""
		if e.err != nil {
			msg = fmt.Sprintf("%q", e.err.Error())
		}
		fmt.Fprintf(&buf, "%s,%.3f,%s,%d,%.1f,%s\n", e.phase, e.at.Seconds(), ch.c.Group, e.replicas, float64(e.took.Microseconds())/1000, msg)
	}
	werr := artifacts.WriteFileAtomic(filepath.Join(runDir, ChurnFile), buf.Bytes())
	var rerr error
	if ev.err != nil {
		rerr = fmt.Errorf("campaign: churn: scaling %s back to %d replicas: %w", ch.c.Group, ch.start, ev.err)
	}
	return errors.Join(ch.err, rerr, werr)
}

// groupReplicas is the scenario's replica count of a group.
func groupReplicas(s *scenario.Scenario, group string) int {
	for _, r := range s.Workload.Routes {
		for _, g := range r.Backends {
			if g.Name == group {
				return g.Replicas
			}
		}
	}
	return 0
}
