package campaign

import (
	"context"
	"time"
)

// ProcessWatcher is implemented by environments that run processes that
// can die under a campaign (the local environment). The runner checks it
// before and during every run.
type ProcessWatcher interface {
	// Died is closed when a process exits without the environment having
	// stopped it.
	Died() <-chan struct{}
	// Exited says which process died and how; nil while none has.
	Exited() error
}

// deathGrace is how long a failed run waits for a death to be recorded: a
// killed backend resets its connections (failing the run at once) a moment
// before its exit is reaped, and the death, not the reset, is the reason.
const deathGrace = time.Second

// watch returns the context of one run, cancelled as soon as a process of
// the environment dies (at once if one died before the run), and a
// function that ends the watch and returns the death, if any. Told that the
// run failed, it first waits up to deathGrace for a death to show.
func (r *runner) watch(ctx context.Context) (context.Context, func(failed bool) error) {
	w, ok := r.env.(ProcessWatcher)
	if !ok {
		return ctx, func(bool) error { return nil }
	}
	runCtx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-w.Died():
			cancel()
		case <-runCtx.Done():
		}
	}()
	return runCtx, func(failed bool) error {
		cancel()
		if failed {
			t := time.NewTimer(deathGrace)
			defer t.Stop()
			select {
			case <-w.Died():
			case <-t.C:
			}
		}
		return w.Exited()
	}
}
