package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// stopGrace is how long a process has to exit after SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// proc is one child process in its own process group, its output appended
// to a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when Wait returns
	err  error         // Wait's result, valid after done

	// stopping is set before stop signals the process, so an exit after
	// it is ours and any other exit is a death (see Env.Exited).
	stopping atomic.Bool
	stopOnce sync.Once
}

// startProc starts bin with args in a new process group (so a Ctrl-C in
// the terminal reaches only us, and we stop the children in order), stdout and stderr
// appended to logPath. The process is not tied to ctx: it lives until stop.
func startProc(name, logPath, bin string, args ...string) (*proc, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	fmt.Fprintf(log, "# %s: %s %q\n", time.Now().UTC().Format(time.RFC3339), bin, args)
	cmd := exec.Command(bin, args...)
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("local: start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signalGroup signals the child's whole process group (sysProcAttr made
// the child its leader), so anything it started stops too. Until the child
// is reaped its pid, and so the group id, cannot be reused.
func (p *proc) signalGroup(sig syscall.Signal) {
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		_ = p.cmd.Process.Signal(sig) // no group (should not happen): the child alone
	}
}

// stop sends SIGTERM, then SIGKILL after stopGrace, and waits for the
// process. It is idempotent. Signals go through os.Process, which never
// signals a pid that has been reaped (and might be reused).
func (p *proc) stop() error {
	p.stopping.Store(true)
	p.stopOnce.Do(func() {
		if !p.exited() {
			p.signalGroup(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(stopGrace):
				p.signalGroup(syscall.SIGKILL)
				<-p.done
			}
		}
		p.log.Close()
	})
	return nil
}

// stopAll stops the processes concurrently, so a slow one does not delay
// the others' SIGTERM.
func stopAll(ps []*proc) error {
	var wg sync.WaitGroup
	errs := make([]error, len(ps))
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.stop()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// deathError describes an exit nobody asked for; call it after done.
func (p *proc) deathError() error {
	how := "exit status 0"
	if p.err != nil {
		how = p.err.Error()
	}
	return fmt.Errorf("local: %s (pid %d) exited unexpectedly (%s); see %s", p.name, p.pid(), how, p.log.Name())
}

// waitFile polls for path to exist with content, failing early when the
// process exits.
func waitFile(ctx context.Context, p *proc, path string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return b, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("local: %s exited before listening (%v); see %s", p.name, p.err, p.log.Name())
		case <-ctx.Done():
			return nil, fmt.Errorf("local: %s did not write %s within %s: %w", p.name, path, timeout, ctx.Err())
		case <-tick.C:
		}
	}
}
