package campaign

import "context"

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

// watch returns the context of one run, cancelled as soon as a process of
// the environment dies (at once if one died before the run), and a
// function that ends the watch and returns the death, if any.
func (r *runner) watch(ctx context.Context) (context.Context, func() error) {
	w, ok := r.env.(ProcessWatcher)
	if !ok {
		return ctx, func() error { return nil }
	}
	runCtx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-w.Died():
			cancel()
		case <-runCtx.Done():
		}
	}()
	return runCtx, func() error {
		cancel()
		return w.Exited()
	}
}
