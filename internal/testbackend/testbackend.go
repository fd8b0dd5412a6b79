// Package testbackend builds and runs the Rust workload backend
// (backend/, binary prequal-backend) for tests: Binary finds or builds it,
// Start runs one replica on a free loopback port and stops it at cleanup.
package testbackend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvBinary names the variable that points at a prebuilt backend binary.
const EnvBinary = "PREQUALBENCH_BACKEND_BIN"

const (
	startTimeout = 20 * time.Second
	stopTimeout  = 20 * time.Second
	pollEvery    = 10 * time.Millisecond
)

// build memoises the cargo build for the whole test process.
var build struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of the backend binary: $PREQUALBENCH_BACKEND_BIN if
// set and present, else <repo>/backend/target/release/prequal-backend, built
// with `cargo build --release` once per test process when missing or older
// than its sources. A failed build fails the test.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvBinary); p != "" {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	build.once.Do(func() { build.path, build.err = buildBinary() })
	if build.err != nil {
		t.Fatalf("testbackend: %v", build.err)
	}
	return build.path
}

// CrateDir returns <repo>/backend, located from this source file.
func CrateDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("testbackend: cannot locate own source file")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "..", "backend")
	if _, err := os.Stat(filepath.Join(dir, "Cargo.toml")); err != nil {
		return "", fmt.Errorf("testbackend: backend crate not found: %w", err)
	}
	return filepath.Clean(dir), nil
}

func buildBinary() (string, error) {
	crate, err := CrateDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(crate, "target", "release", "prequal-backend")
	stale, err := outdated(bin, crate)
	if err != nil {
		return "", err
	}
	if !stale {
		return bin, nil
	}
	// cargo takes a lock on target/, so parallel test processes are safe.
	cmd := exec.Command("cargo", "build", "--release", "--quiet")
	cmd.Dir = crate
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("cargo build --release in %s: %v\n%s", crate, err, out.String())
	}
	return bin, nil
}

// outdated reports whether bin is missing or older than Cargo.toml,
// Cargo.lock or any file under src/.
func outdated(bin, crate string) (bool, error) {
	st, err := os.Stat(bin)
	if err != nil {
		return true, nil
	}
	built := st.ModTime()
	newer := false
	for _, f := range []string{"Cargo.toml", "Cargo.lock"} {
		if s, err := os.Stat(filepath.Join(crate, f)); err == nil && s.ModTime().After(built) {
			return true, nil
		}
	}
	err = filepath.WalkDir(filepath.Join(crate, "src"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.ModTime().After(built) {
			newer = true
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("testbackend: scanning backend sources: %w", err)
	}
	return newer, nil
}

// Backend is one running replica.
type Backend struct {
	// Addr is the bound "127.0.0.1:port".
	Addr string
	Cmd  *exec.Cmd

	mu       sync.Mutex
	output   bytes.Buffer
	done     chan struct{}
	waitErr  error
	stopOnce sync.Once
	killed   bool
}

// Stats is the backend's /stats (and POST /reset) answer.
type Stats struct {
	InFlight int    `json:"in_flight"`
	Queued   int    `json:"queued"`
	Served   uint64 `json:"served"`
	Rejected uint64 `json:"rejected"`
	MaxQueue int    `json:"max_queue"`
	Capacity int    `json:"capacity"`
}

// Probe is the backend's /prequal/probe answer; LatencyMS is nil for
// "unknown" (no recent samples).
type Probe struct {
	RIF         int      `json:"rif"`
	LatencyMS   *float64 `json:"latency_median_ms"`
	TimestampMS int64    `json:"timestamp_ms"`
	Samples     int      `json:"samples"`
}

// Stats fetches /stats.
func (b *Backend) Stats() (Stats, error) {
	var s Stats
	return s, b.getJSON(http.MethodGet, "/stats", &s)
}

// Reset posts /reset and returns the counters after it.
func (b *Backend) Reset() (Stats, error) {
	var s Stats
	return s, b.getJSON(http.MethodPost, "/reset", &s)
}

// Probe fetches /prequal/probe.
func (b *Backend) Probe() (Probe, error) {
	var p Probe
	return p, b.getJSON(http.MethodGet, "/prequal/probe", &p)
}

func (b *Backend) getJSON(method, path string, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, b.URL(path), nil)
	if err != nil {
		return fmt.Errorf("testbackend: %s %s: %w", method, path, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("testbackend: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("testbackend: %s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("testbackend: %s %s: status %d: %q", method, path, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("testbackend: %s %s: decoding %q: %w", method, path, data, err)
	}
	return nil
}

// Kill ends the process with SIGKILL (a crashed replica) and waits for it;
// the cleanup registered by Start then expects no clean exit.
func (b *Backend) Kill() {
	b.mu.Lock()
	b.killed = true
	b.mu.Unlock()
	_ = b.Cmd.Process.Kill()
	<-b.done
}

// URL returns "http://<Addr><path>".
func (b *Backend) URL(path string) string { return "http://" + b.Addr + path }

// Output returns what the backend wrote to stdout and stderr so far.
func (b *Backend) Output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.output.String()
}

func (b *Backend) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.output.Write(p)
}

var _ io.Writer = (*Backend)(nil)

// Done is closed when the process has exited.
func (b *Backend) Done() <-chan struct{} { return b.done }

// ExitCode is the process's exit code once Done is closed (-1 if killed by
// a signal or still running).
func (b *Backend) ExitCode() int {
	select {
	case <-b.done:
		return b.Cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// Stop sends SIGTERM and waits for exit (killing after a deadline). It
// returns the exit code; calling it again returns the same code.
func (b *Backend) Stop() (int, error) {
	b.stopOnce.Do(func() {
		select {
		case <-b.done:
			return
		default:
		}
		_ = b.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(stopTimeout):
			_ = b.Cmd.Process.Kill()
			<-b.done
		}
	})
	if b.Cmd.ProcessState == nil {
		return -1, errors.New("testbackend: process state unknown")
	}
	code := b.Cmd.ProcessState.ExitCode()
	if code != 0 {
		return code, fmt.Errorf("testbackend: backend exited with %v; output:\n%s", b.waitErr, b.Output())
	}
	return 0, nil
}

// Start runs one backend on 127.0.0.1:0 with the given extra flags, waits for
// its --addr-file and /healthz, and registers a cleanup that sends SIGTERM,
// waits for exit and fails the test unless the exit code is 0.
func Start(t testing.TB, args ...string) *Backend {
	t.Helper()
	b, err := start(Binary(t), t.TempDir(), args)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		code, err := b.Stop()
		b.mu.Lock()
		killed := b.killed
		b.mu.Unlock()
		if code != 0 && !killed {
			t.Errorf("testbackend: stop %s: %v", b.Addr, err)
		}
	})
	return b
}

func start(bin, dir string, args []string) (*Backend, error) {
	addrFile := filepath.Join(dir, fmt.Sprintf("backend-%d.addr", time.Now().UnixNano()))
	// No shutdown grace unless a test asks (later flags win): Stop would
	// otherwise wait the backend's default grace every time.
	full := append([]string{"--listen", "127.0.0.1:0", "--addr-file", addrFile, "--shutdown-grace", "0"}, args...)
	b := &Backend{done: make(chan struct{})}
	b.Cmd = exec.Command(bin, full...)
	b.Cmd.Stdout, b.Cmd.Stderr = b, b
	// Keep the caller's environment out of the backend's flags.
	b.Cmd.Env = cleanEnv(os.Environ())
	if err := b.Cmd.Start(); err != nil {
		return nil, fmt.Errorf("testbackend: start %s: %w", bin, err)
	}
	go func() {
		b.waitErr = b.Cmd.Wait()
		close(b.done)
	}()
	fail := func(format string, a ...any) (*Backend, error) {
		_ = b.Cmd.Process.Kill()
		<-b.done
		return nil, fmt.Errorf("testbackend: "+format+"; output:\n%s", append(a, b.Output())...)
	}
	deadline := time.Now().Add(startTimeout)
	for b.Addr == "" {
		if data, err := os.ReadFile(addrFile); err == nil && strings.HasSuffix(string(data), "\n") {
			b.Addr = strings.TrimSpace(string(data))
			break
		}
		select {
		case <-b.done:
			return fail("backend %v exited before listening (%v)", full, b.waitErr)
		case <-time.After(pollEvery):
		}
		if time.Now().After(deadline) {
			return fail("backend %v wrote no address within %v", full, startTimeout)
		}
	}
	client := &http.Client{Timeout: time.Second}
	for {
		if healthy(client, b.URL("/healthz")) {
			client.CloseIdleConnections()
			return b, nil
		}
		select {
		case <-b.done:
			return fail("backend at %s exited before /healthz answered (%v)", b.Addr, b.waitErr)
		case <-time.After(pollEvery):
		}
		if time.Now().After(deadline) {
			return fail("backend at %s not healthy within %v", b.Addr, startTimeout)
		}
	}
}

func healthy(c *http.Client, url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// cleanEnv drops the variables the backend reads as configuration, so that
// only the flags given to Start apply.
func cleanEnv(env []string) []string {
	seedVars := map[string]bool{
		"PORT": true, "WORK_MULTIPLIER": true, "IO_BOUND_MODE": true,
		"FAULT_PROBE_MODE": true, "FAULT_TIMEOUT_MS": true, "FAULT_STALE_OFFSET_MS": true,
	}
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if seedVars[name] || strings.HasPrefix(name, "PREQUAL_BACKEND_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}
