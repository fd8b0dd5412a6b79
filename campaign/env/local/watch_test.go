package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/internal/testbackend"
	"github.com/prequalbench/prequalbench/scenario"
)

func newTestEnv(t *testing.T, bin string) *Env {
	t.Helper()
	s, err := scenario.Catalogue("quickstart")
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{Scenario: s, BackendBin: bin, IngressBin: bin, LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A process stopped by the environment is not a death; one killed from
// outside is, and Exited names it, how it ended and its log.
func TestEnv_DetectsAProcessThatDies(t *testing.T) {
	bin := testbackend.Binary(t)
	e := newTestEnv(t, bin)
	defer e.Close()
	args := []string{"--listen", "127.0.0.1:0", "--shutdown-grace", "0"}
	stopped, err := e.start("backend-a-0", bin, args)
	if err != nil {
		t.Fatal(err)
	}
	victim, err := e.start("backend-b-0", bin, args)
	if err != nil {
		t.Fatal(err)
	}
	if err := stopped.stop(); err != nil {
		t.Fatal(err)
	}
	if err := e.Exited(); err != nil {
		t.Fatalf("a process the environment stopped counts as dead: %v", err)
	}
	if err := syscall.Kill(victim.pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.Died():
	case <-time.After(time.Minute):
		t.Fatal("Died not closed a minute after kill -9")
	}
	err = e.Exited()
	if err == nil || !strings.Contains(err.Error(), "backend-b-0") || !strings.Contains(err.Error(), "signal: killed") || !strings.Contains(err.Error(), "backend-b-0.log") {
		t.Errorf("Exited = %v, want the process, how it ended and its log", err)
	}
}

// With a TempDir, Setup's temp files live there, what a killed session
// left there is removed first, and Close removes the directory.
func TestEnv_TempDirIsEmptiedAndRemoved(t *testing.T) {
	e := newTestEnv(t, testbackend.Binary(t))
	e.opts.TempDir = filepath.Join(t.TempDir(), "tmp")
	stale := filepath.Join(e.opts.TempDir, "backend-fast-0.addr")
	if err := os.MkdirAll(e.opts.TempDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("127.0.0.1:1"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := e.makeTempDir()
	if err != nil {
		t.Fatal(err)
	}
	if dir != e.opts.TempDir {
		t.Errorf("temp dir %s, want %s", dir, e.opts.TempDir)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale address file kept (%v): a restarted process could read the dead one's address", err)
	}
	e.tmp = dir
	e.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Close left %s (%v)", dir, err)
	}
}

// An ingress that fails to get ready (here: interrupted while it starts) is
// stopped, not left running: it is not among the ingresses Close stops yet.
func TestEnv_IngressThatFailsToStartIsStopped(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "never-ready")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t, bin)
	defer e.Close()
	e.tmp, e.routesFile = dir, filepath.Join(dir, "routes.yaml")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // as a Ctrl-C during the wait for its address
	if _, err := e.startIngress(ctx, 0); err == nil {
		t.Fatal("startIngress succeeded with a canceled context")
	}
	if len(e.processes) != 1 {
		t.Fatalf("%d processes started, want 1", len(e.processes))
	}
	if err := syscall.Kill(e.processes[0].PID, 0); err != syscall.ESRCH {
		t.Fatalf("the ingress that never got ready (pid %d) is still there: kill 0 = %v", e.processes[0].PID, err)
	}
}
