package local

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/internal/testbackend"
	"github.com/prequalbench/prequalbench/scenario"
)

func TestFindRepo_WalksUpToTheModule(t *testing.T) {
	wd, _ := os.Getwd()
	repo, err := FindRepo(wd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(repo, "campaign", "env", "local")); err != nil {
		t.Errorf("FindRepo = %s, not the repository root", repo)
	}
	if _, err := FindRepo(t.TempDir()); err == nil || !strings.Contains(err.Error(), "--backend-bin") {
		t.Errorf("outside the tree: %v, want an error suggesting --backend-bin", err)
	}
}

func TestBackendBinary_ExplicitMustExist(t *testing.T) {
	if _, err := BackendBinary(context.Background(), "", filepath.Join(t.TempDir(), "nope"), nil); err == nil {
		t.Error("a missing --backend-bin was accepted")
	}
}

// A started backend writes its address, and stop ends it with SIGTERM:
// the process is gone afterwards.
func TestProc_StartWaitStop(t *testing.T) {
	bin := testbackend.Binary(t)
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "addr")
	p, err := startProc("backend", filepath.Join(dir, "b.log"), bin, "--listen", "127.0.0.1:0", "--addr-file", addrFile)
	if err != nil {
		t.Fatal(err)
	}
	b, err := waitFile(context.Background(), p, addrFile, 30*time.Second)
	if err != nil {
		p.stop()
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "127.0.0.1:") {
		t.Errorf("address %q", b)
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	if !p.exited() {
		t.Fatal("stop returned with the process running")
	}
	// Wait reaped it, so a live pid would be a reuse by another program.
	if cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.pid()), "cmdline")); err == nil && strings.HasPrefix(string(cmdline), bin) {
		t.Error("backend still running after stop")
	}
	if err := p.stop(); err != nil {
		t.Errorf("second stop: %v", err)
	}
}

// A process that dies before listening makes waitFile fail fast, naming
// the log to read.
func TestWaitFile_ProcessExitsEarly(t *testing.T) {
	bin := testbackend.Binary(t)
	dir := t.TempDir()
	p, err := startProc("backend", filepath.Join(dir, "b.log"), bin, "--mode", "nonsense")
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	_, err = waitFile(context.Background(), p, filepath.Join(dir, "addr"), time.Minute)
	if err == nil || !strings.Contains(err.Error(), "b.log") {
		t.Errorf("waitFile = %v, want an early exit error naming the log", err)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "b.log"))
	if !strings.Contains(string(log), "--mode") {
		t.Errorf("the log lacks the backend's complaint:\n%s", log)
	}
}

func TestCollectLogs_CopiesOnlyWhatIsNew(t *testing.T) {
	logDir := t.TempDir()
	s, err := scenario.Catalogue("quickstart")
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	e, err := New(Options{Scenario: s, BackendBin: self, IngressBin: self, LogDir: logDir})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(logDir, "x.log")
	if err := os.WriteFile(path, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run1, run2 := t.TempDir(), t.TempDir()
	if err := e.CollectLogs(run1); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("two\n")
	f.Close()
	if err := e.CollectLogs(run2); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(run1, "x.log")); string(b) != "one\n" {
		t.Errorf("run 1 log %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(run2, "x.log")); string(b) != "two\n" {
		t.Errorf("run 2 log %q", b)
	}
}
