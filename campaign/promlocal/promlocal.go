// Package promlocal runs a local Prometheus for the duration of a campaign:
// it scrapes the ingress replicas' admin ports on 127.0.0.1, evaluates the
// project's recording and alert rules, and keeps its data directory next to
// the campaign's artifacts so a run can be looked at afterwards:
//
//	DIR/prometheus/prometheus.yml   the configuration used
//	DIR/prometheus/rules/*.yml      the rules from dashboards/
//	DIR/prometheus/data/            the TSDB (open it again with --storage.tsdb.path)
//	DIR/prometheus/prometheus.log   Prometheus's own log
//
// The binary is "prometheus" from PATH (Debian's prometheus package), or
// the path in $PREQUALBENCH_PROMETHEUS.
package promlocal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prequalbench/prequalbench/dashboards"
)

// ErrNotFound is returned by Start when no Prometheus binary is available;
// callers go on without it.
var ErrNotFound = errors.New("promlocal: prometheus binary not found (install Debian's prometheus package or set $PREQUALBENCH_PROMETHEUS)")

// Options tune Start. The zero value is usable.
type Options struct {
	// Binary is the prometheus executable; default $PREQUALBENCH_PROMETHEUS
	// or "prometheus" from PATH.
	Binary string
	// ScrapeInterval defaults to 2s (a run lasts tens of seconds).
	ScrapeInterval time.Duration
	// ReadyTimeout bounds the wait for /-/ready; default 30s.
	ReadyTimeout time.Duration
}

// Instance is a running Prometheus.
type Instance struct {
	// URL is its web address, http://127.0.0.1:PORT.
	URL string
	// Dir is DIR/prometheus.
	Dir  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // exit status, valid after done is closed
	log  *os.File
}

// Start runs Prometheus scraping targets ("host:port" of each ingress
// admin listener) until stop is called or ctx ends, and waits until it is
// ready. It is the small form of StartInstance.
func Start(ctx context.Context, dir string, targets []string) (stop func() error, err error) {
	in, err := StartInstance(ctx, dir, targets, Options{})
	if err != nil {
		return nil, err
	}
	return in.Stop, nil
}

// StartInstance is Start with options, returning the instance (for its URL).
func StartInstance(ctx context.Context, dir string, targets []string, opts Options) (*Instance, error) {
	if len(targets) == 0 {
		return nil, errors.New("promlocal: targets: want at least one host:port")
	}
	for _, t := range targets {
		host, port, err := net.SplitHostPort(t)
		if err != nil || port == "" {
			return nil, fmt.Errorf("promlocal: target %q: want host:port", t)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, fmt.Errorf("promlocal: target %q: want a loopback address (the local environment listens on 127.0.0.1)", t)
		}
	}
	bin, err := binary(opts.Binary)
	if err != nil {
		return nil, err
	}
	if opts.ScrapeInterval <= 0 {
		opts.ScrapeInterval = 2 * time.Second
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	root := filepath.Join(dir, "prometheus")
	if err := writeConfig(root, targets, opts.ScrapeInterval); err != nil {
		return nil, err
	}
	// A free port can be taken between our probe and Prometheus's bind;
	// try a few times before giving up.
	var lastErr error
	for range 3 {
		in, err := launch(ctx, bin, root, opts)
		if err == nil {
			return in, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func binary(explicit string) (string, error) {
	name := explicit
	if name == "" {
		name = os.Getenv("PREQUALBENCH_PROMETHEUS")
	}
	if name == "" {
		name = "prometheus"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", ErrNotFound
	}
	return p, nil
}

// Config renders prometheus.yml for targets; the rules are read from
// rules/*.yml next to it.
func Config(targets []string, interval time.Duration) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by prequalbench (campaign/promlocal).\n")
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  evaluation_interval: %s\n", interval, interval)
	fmt.Fprintf(&b, "rule_files:\n  - rules/*.yml\n")
	fmt.Fprintf(&b, "scrape_configs:\n  - job_name: prequal-ingress\n    static_configs:\n      - targets:\n")
	for _, t := range targets {
		fmt.Fprintf(&b, "          - %q\n", t)
	}
	return []byte(b.String())
}

func writeConfig(root string, targets []string, interval time.Duration) error {
	rules, err := dashboards.Rules()
	if err != nil {
		return fmt.Errorf("promlocal: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(root, "rules"), 0o755); err != nil {
		return fmt.Errorf("promlocal: %w", err)
	}
	if err := os.WriteFile(filepath.Join(root, "prometheus.yml"), Config(targets, interval), 0o644); err != nil {
		return fmt.Errorf("promlocal: %w", err)
	}
	for _, r := range rules {
		if err := os.WriteFile(filepath.Join(root, "rules", r.Name), r.Data, 0o644); err != nil {
			return fmt.Errorf("promlocal: %w", err)
		}
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("promlocal: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func launch(ctx context.Context, bin, root string, opts Options) (*Instance, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(root, "prometheus.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("promlocal: %w", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin,
		"--config.file="+filepath.Join(root, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(root, "data"),
		"--storage.tsdb.retention.time=3650d",
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	cmd.Dir = root
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("promlocal: start %s: %w", bin, err)
	}
	in := &Instance{URL: "http://" + addr, Dir: root, cmd: cmd, done: make(chan struct{}), log: logf}
	go func() {
		in.err = cmd.Wait()
		logf.Close()
		close(in.done)
	}()
	// Stop with the campaign's context too.
	go func() {
		select {
		case <-ctx.Done():
			in.Stop()
		case <-in.done:
		}
	}()
	if err := in.waitReady(ctx, opts.ReadyTimeout); err != nil {
		in.Stop()
		return nil, err
	}
	return in, nil
}

func (in *Instance) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get(in.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-in.done:
			return fmt.Errorf("promlocal: prometheus exited before it was ready (%v); see %s", in.err, filepath.Join(in.Dir, "prometheus.log"))
		case <-deadline.C:
			return fmt.Errorf("promlocal: prometheus not ready after %s; see %s", timeout, filepath.Join(in.Dir, "prometheus.log"))
		case <-ctx.Done():
			return fmt.Errorf("promlocal: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// Stop ends Prometheus gracefully (SIGTERM, so it closes its TSDB cleanly),
// killing it if it has not exited after 15 s. It is safe to call twice.
func (in *Instance) Stop() error {
	select {
	case <-in.done:
		return nil
	default:
	}
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.done:
	case <-time.After(15 * time.Second):
		_ = in.cmd.Process.Kill()
		<-in.done
		return errors.New("promlocal: prometheus did not stop within 15s; killed")
	}
	var ee *exec.ExitError
	if in.err == nil || (errors.As(in.err, &ee) && !ee.Exited()) {
		return nil // exit 0, or ended by our signal
	}
	return fmt.Errorf("promlocal: prometheus: %w", in.err)
}
