package external

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/ingress/adminapi"
	"github.com/prequalbench/prequalbench/loadbalancer"
	"github.com/prequalbench/prequalbench/scenario"
)

// Name is the environment's name in campaign.json.
const Name = "external"

// Options configure an Env.
type Options struct {
	Scenario *scenario.Scenario
	Config   *Config
	// LogDir receives hooks.log (every hook's command and output).
	LogDir string
	// RepoDir is the source tree, for the git revision in Facts.
	RepoDir string
	// DrainTimeout bounds the wait for the backends to have nothing in
	// flight before a reset; default 30s.
	DrainTimeout time.Duration
}

// Env implements env.Environment for an ingress run by someone else.
type Env struct {
	opts      Options
	cfg       *Config
	client    *http.Client
	backends  []artifacts.Backend
	algorithm string
	logMu     sync.Mutex
}

var _ env.Environment = (*Env)(nil)

// New checks the options; Setup checks that everything answers.
func New(o Options) (*Env, error) {
	if o.Scenario == nil || o.Config == nil {
		return nil, errors.New("external: Scenario and Config are required")
	}
	if err := o.Config.CheckScenario(o.Scenario); err != nil {
		return nil, err
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 30 * time.Second
	}
	e := &Env{opts: o, cfg: o.Config, client: &http.Client{Timeout: 5 * time.Second}}
	i := 0
	for _, r := range o.Scenario.Workload.Routes {
		for _, g := range r.Backends {
			for range g.Replicas {
				if i < len(o.Config.Backends) {
					e.backends = append(e.backends, artifacts.Backend{Address: o.Config.Backends[i], Group: g.Name, Route: r.Name})
				}
				i++
			}
		}
	}
	return e, nil
}

// Setup checks that every proxy answers HTTP and every backend's /stats
// answers; it starts nothing.
func (e *Env) Setup(ctx context.Context) error {
	if e.opts.LogDir != "" {
		if err := os.MkdirAll(e.opts.LogDir, 0o755); err != nil {
			return fmt.Errorf("external: %w", err)
		}
	}
	for _, p := range e.proxyList() {
		if err := e.reachable(ctx, p); err != nil {
			return fmt.Errorf("external: proxy %s: %w", p, err)
		}
	}
	for _, b := range e.backends {
		if _, err := e.stats(ctx, b.Address); err != nil {
			return fmt.Errorf("external: backend %s: %w (backends must be prequalbench backends; leave them out otherwise)", b.Address, err)
		}
	}
	return nil
}

func (e *Env) proxyList() []string {
	seen := map[string]bool{}
	var ps []string
	for _, a := range e.opts.Scenario.Protocol.Algorithms {
		if p := e.proxyOf(a); !seen[p] {
			seen[p] = true
			ps = append(ps, p)
		}
	}
	return ps
}

// reachable polls base until it answers any HTTP status (a proxy may
// answer 404 at /), for up to 30 s.
func (e *Env) reachable(ctx context.Context, base string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/", nil)
		if err != nil {
			return err
		}
		resp, err := e.client.Do(req)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("not answering: %v", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Backends lists the backends given in the config, with their groups.
func (e *Env) Backends() []artifacts.Backend { return append([]artifacts.Backend(nil), e.backends...) }

// proxy is the base URL the current algorithm's load goes to.
func (e *Env) proxy() string { return e.proxyOf(e.algorithm) }

// proxyOf is the algorithm's own ingress, else the default proxy.
func (e *Env) proxyOf(algorithm string) string {
	if p, ok := e.cfg.Proxies[algorithm]; ok {
		return strings.TrimSuffix(p, "/")
	}
	return strings.TrimSuffix(e.cfg.Proxy, "/")
}

// LoadTargets returns one target per route at the current proxy.
func (e *Env) LoadTargets() []env.Target {
	var ts []env.Target
	for _, r := range e.opts.Scenario.Workload.Routes {
		host := r.Host
		if e.cfg.Host != "" {
			host = e.cfg.Host
		}
		ts = append(ts, env.Target{
			URL:    fmt.Sprintf("%s%s?iterations=%d", e.proxy(), r.Path, r.Iterations),
			Host:   host,
			Weight: r.Weight,
			Route:  r.Name,
		})
	}
	return ts
}

// SetAlgorithm waits for the previous run to drain, then selects the
// algorithm's ingress or runs the setAlgorithm hook.
func (e *Env) SetAlgorithm(ctx context.Context, algorithm string) error {
	_ = e.drain(ctx)
	e.algorithm = algorithm
	if e.cfg.SetAlgorithm == "" {
		return nil
	}
	if err := e.hook(ctx, "setAlgorithm", e.cfg.SetAlgorithm); err != nil {
		return err
	}
	return e.settle(ctx)
}

// Reset runs the reset hook, then resets and verifies the backends. The
// run counts as verified only when a reset hook ran and succeeded and
// every backend given is clean: nothing here can look inside the
// ingress, so the hook's exit status is the ingress's only evidence.
func (e *Env) Reset(ctx context.Context, mode string) (env.Verification, error) {
	var problems []string
	if err := e.drain(ctx); err != nil {
		if ctx.Err() != nil {
			return env.Verification{}, ctx.Err()
		}
		problems = append(problems, "did not drain: "+err.Error())
	}
	if e.cfg.Reset == "" {
		problems = append(problems, "no reset hook: the ingress was not reset (unverified)")
	} else {
		if err := e.hook(ctx, "reset", e.cfg.Reset); err != nil {
			return env.Verification{}, err
		}
		if err := e.settle(ctx); err != nil {
			return env.Verification{}, err
		}
	}
	if len(e.backends) == 0 {
		problems = append(problems, "no backend addresses: backends not reset")
	}
	for _, b := range e.backends {
		st, err := env.CallBackend(ctx, e.client, http.MethodPost, b.Address, "/reset")
		if err != nil {
			return env.Verification{}, fmt.Errorf("external: reset backend %s: %w", b.Address, err)
		}
		if !st.Clean() {
			problems = append(problems, fmt.Sprintf("backend %s after reset: %+v", b.Address, st))
		}
	}
	if len(problems) > 0 {
		return env.Verification{Detail: strings.Join(problems, "; ")}, nil
	}
	return env.Verification{Verified: true, Detail: fmt.Sprintf("external: the reset hook exited 0 (the ingress's own state is not visible here: its pools and counters were not checked); %d prequalbench backends reset and clean (zero counters, nothing in flight)", len(e.backends))}, nil
}

// Snapshot builds one ingress state from the backends' counters: per
// route, each backend's picks are the requests it served or rejected
// (requests still in flight at the snapshot are not counted). Without
// backend addresses it is an empty state (the report has no shares).
func (e *Env) Snapshot(ctx context.Context) ([]adminapi.State, error) {
	var st adminapi.State
	for _, r := range e.opts.Scenario.Workload.Routes {
		rs := adminapi.RouteState{Key: r.Name, Host: r.Host, Path: r.Path, PathType: r.PathType, Algorithm: e.algorithm,
			Policy: loadbalancer.Stats{Algorithm: e.algorithm, Endpoints: []loadbalancer.EndpointStats{}}}
		found := false
		for _, b := range e.backends {
			if b.Route != r.Name {
				continue
			}
			found = true
			s, err := e.stats(ctx, b.Address)
			if err != nil {
				return nil, fmt.Errorf("external: backend %s: %w", b.Address, err)
			}
			picks := s.Served + s.Rejected
			rs.Policy.Endpoints = append(rs.Policy.Endpoints, loadbalancer.EndpointStats{Address: b.Address, Picks: picks, InFlight: s.InFlight + s.Queued})
			rs.Policy.Picks += picks
			rs.Requests += picks
		}
		if found {
			st.Routes = append(st.Routes, rs)
		}
	}
	return []adminapi.State{st}, nil
}

// Facts describes the host and what runs under each algorithm's name.
func (e *Env) Facts() artifacts.Environment {
	f := env.HostFacts(e.opts.RepoDir)
	f.Name = Name
	f.IngressReplicas = 1
	f.Topology = e.topology()
	var urls []string
	for _, a := range e.opts.Scenario.Protocol.Algorithms {
		if u := e.proxyOf(a); !slices.Contains(urls, u) {
			urls = append(urls, u)
		}
	}
	f.Load = &artifacts.LoadPath{Path: artifacts.LoadFromCLI, URLs: urls, Via: "the external config's proxy URLs"}
	return f
}

// topology is one line saying what ran: where each algorithm's load went,
// what it really is, and what was not verifiable.
func (e *Env) topology() string {
	var parts []string
	for _, a := range e.opts.Scenario.Protocol.Algorithms {
		s := fmt.Sprintf("%s at %s", a, e.proxyOf(a))
		if d := e.cfg.Describe[a]; d != "" {
			s += " (" + d + ")"
		}
		parts = append(parts, s)
	}
	t := "external ingress: " + strings.Join(parts, "; ")
	if e.cfg.Reset == "" {
		t += "; no reset hook (runs not reset-verified)"
	}
	if len(e.backends) == 0 {
		t += "; no backend addresses (no selection shares)"
	} else {
		t += "; selection shares from the backends' served counters"
	}
	return t
}

// Close does nothing: the ingress and the backends are not ours.
func (e *Env) Close() error { return nil }

func (e *Env) stats(ctx context.Context, addr string) (env.BackendStats, error) {
	return env.CallBackend(ctx, e.client, http.MethodGet, addr, "/stats")
}

// drain waits (up to DrainTimeout) until no backend has a request in
// flight or queued; without backends there is nothing to ask.
func (e *Env) drain(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.opts.DrainTimeout)
	defer cancel()
	for {
		err := e.drained(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (e *Env) drained(ctx context.Context) error {
	for _, b := range e.backends {
		st, err := e.stats(ctx, b.Address)
		if err != nil {
			return fmt.Errorf("backend %s: %w", b.Address, err)
		}
		if st.InFlight != 0 || st.Queued != 0 {
			return fmt.Errorf("backend %s: %d in flight, %d queued", b.Address, st.InFlight, st.Queued)
		}
	}
	return nil
}

func (e *Env) settle(ctx context.Context) error {
	if e.cfg.settle <= 0 {
		return nil
	}
	t := time.NewTimer(e.cfg.settle)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// hookWaitDelay bounds the wait for a hook's output pipes once the shell
// has exited: a child it left behind (or one that left the hook's process
// group with setsid) may still hold them, and must not hold up the run.
const hookWaitDelay = 500 * time.Millisecond

// hook runs a shell command in the config file's directory with
// {algorithm} substituted, the algorithm and proxy in its environment,
// bounded by the hook timeout; its output goes to hooks.log and, on
// failure, into the error. The hook runs in its own process group, and a
// hook that overruns its timeout (or whose run is cancelled) is killed
// with the whole group: the shell and every child it started, so none
// of them goes on switching or resetting the ingress during the next
// run.
func (e *Env) hook(ctx context.Context, name, command string) error {
	hctx, cancel := context.WithTimeout(ctx, e.cfg.hookTimeout)
	defer cancel()
	line, err := substitute(command, e.algorithm)
	if err != nil {
		return fmt.Errorf("external: %s hook: %w", name, err)
	}
	cmd := exec.CommandContext(hctx, "sh", "-c", line)
	cmd.Dir = e.cfg.dir
	cmd.Env = append(os.Environ(), "PREQUALBENCH_ALGORITHM="+e.algorithm, "PREQUALBENCH_PROXY="+e.proxy())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = hookProcAttr()
	cmd.Cancel = func() error { return killGroup(cmd.Process) }
	cmd.WaitDelay = hookWaitDelay
	err = cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success() {
		// The hook succeeded but left a child holding its output: the
		// child is stopped with the group (it must not act during the
		// run), and the hook counts as done.
		_ = killGroup(cmd.Process)
		out.WriteString("\n(a child the hook left running held its output past " + hookWaitDelay.String() + " and was stopped)\n")
		err = nil
	}
	e.log(fmt.Sprintf("%s %s: %s\n%s", time.Now().UTC().Format(time.RFC3339Nano), name, line, out.String()))
	if err != nil {
		tail := strings.TrimSpace(out.String())
		if len(tail) > 500 {
			tail = "..." + tail[len(tail)-500:]
		}
		if ctx.Err() == nil && errors.Is(hctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("timed out after %v (hookTimeout), killed with its children", e.cfg.hookTimeout)
		}
		return fmt.Errorf("external: %s hook %q for %s: %v: %s", name, line, e.algorithm, err, tail)
	}
	return nil
}

// Placeholder is replaced by the algorithm's name in a hook's line.
const Placeholder = "{algorithm}"

// substitute puts the algorithm's name into a hook's shell line. Outside
// quotes the name goes in single-quoted: a variant's braces and commas
// (prequal{probes=3,remove=1}) are brace-expanded into two words by
// shells that do it (bash as sh, as on macOS). Inside the hook's own
// quotes it goes in as is, since nothing a name may hold is special
// there. A name with any other character (quotes, $, spaces) is refused
// rather than quoted: names are canonical algorithm names.
func substitute(line, name string) (string, error) {
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.{}=,+:", r)
		if !ok {
			return "", fmt.Errorf("algorithm %q: only letters, digits and - _ . { } = , + : may go into a hook's line", name)
		}
	}
	var b strings.Builder
	var quote byte // 0, '\'' or '"'
	for i := 0; i < len(line); i++ {
		c := line[i]
		if quote != '\'' && c == '\\' && i+1 < len(line) {
			b.WriteByte(c)
			b.WriteByte(line[i+1])
			i++
			continue
		}
		if strings.HasPrefix(line[i:], Placeholder) {
			if quote == 0 {
				b.WriteString("'" + name + "'")
			} else {
				b.WriteString(name)
			}
			i += len(Placeholder) - 1
			continue
		}
		switch {
		case quote == 0 && (c == '\'' || c == '"'):
			quote = c
		case quote != 0 && c == quote:
			quote = 0
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

func (e *Env) log(s string) {
	if e.opts.LogDir == "" {
		return
	}
	e.logMu.Lock()
	defer e.logMu.Unlock()
	f, err := os.OpenFile(filepath.Join(e.opts.LogDir, "hooks.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(s)
}
