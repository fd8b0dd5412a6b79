package main

import (
	"errors"
	"testing"

	"github.com/prequalbench/prequalbench/campaign"
	"github.com/prequalbench/prequalbench/campaign/env"
)

// watchedEnv is an environment whose process has died.
type watchedEnv struct {
	env.Environment
	died chan struct{}
}

func (w *watchedEnv) Died() <-chan struct{} { return w.died }
func (w *watchedEnv) Exited() error         { return errors.New("backend-fast-0 exited") }

// The Prometheus wrapper must not hide a dead process from the runner.
func TestPromEnv_PassesTheProcessWatchThrough(t *testing.T) {
	inner := &watchedEnv{died: make(chan struct{})}
	close(inner.died)
	var e env.Environment = &promEnv{Environment: inner}
	w, ok := e.(campaign.ProcessWatcher)
	if !ok {
		t.Fatal("promEnv is not a ProcessWatcher")
	}
	select {
	case <-w.Died():
	default:
		t.Error("Died not passed through")
	}
	if err := w.Exited(); err == nil || err.Error() != "backend-fast-0 exited" {
		t.Errorf("Exited = %v, want the wrapped environment's", err)
	}
	// Over an environment without processes, nothing ever dies.
	if w := (&promEnv{}); w.Died() != nil || w.Exited() != nil {
		t.Error("promEnv over an environment without a watch reports a death")
	}
}
