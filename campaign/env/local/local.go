// Package local is the default campaign environment: backend replicas and
// ingress replicas as processes on 127.0.0.1, each on a port it chooses
// itself, with their logs in the campaign directory. Close stops every
// process it started (SIGTERM to the process group, SIGKILL after a grace
// period).
package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/ingress/adminapi"
	"github.com/prequalbench/prequalbench/manifests"
	"github.com/prequalbench/prequalbench/scenario"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// ProcessesFile, in the log directory, lists every process the environment
// started (name, pid, command line), so tests and people can check that
// none is left behind.
const ProcessesFile = "processes.json"

// Options configure the local environment.
type Options struct {
	Scenario *scenario.Scenario
	// BackendBin is the prequal-backend binary.
	BackendBin string
	// IngressBin is the prequalbench binary (run as "IngressBin ingress ...").
	IngressBin string
	// LogDir receives one log per process, the routes file and
	// ProcessesFile.
	LogDir string
	// RepoDir is the source tree, for the git revision in Facts.
	RepoDir string
	// Algorithm is the ingress's algorithm until the first SetAlgorithm.
	Algorithm string
	Seed      uint64
	// ReadyTimeout bounds the wait for a process to listen and be ready;
	// default 30s.
	ReadyTimeout time.Duration
	// DrainTimeout bounds the wait, before a reset, for requests still in
	// flight from the previous run; default 30s.
	DrainTimeout time.Duration
	// TempDir holds the processes' address files. The campaign passes a
	// directory inside the campaign directory, which it owns exclusively
	// (locked), so Setup empties it first: whatever is there was left by
	// a killed session. Empty means a fresh directory under os.TempDir.
	TempDir string
}

// Process is one entry of ProcessesFile.
type Process struct {
	Name    string   `json:"name"`
	PID     int      `json:"pid"`
	Command []string `json:"command"`
	Address string   `json:"address,omitempty"`
}

// Env is the local environment.
type Env struct {
	opts   Options
	tmp    string
	client *http.Client

	backends    []backend
	ingresses   []*ingress
	algorithm   string
	processes   []Process
	logOffsets  map[string]int64
	closeOnce   sync.Once
	closeErr    error
	routesFile  string
	ingressArgs []string

	// backendsMu guards backends and closed against a ScaleGroup running
	// beside the runner's calls and Close; scaleMu serialises scalings.
	backendsMu sync.Mutex
	closed     bool
	scaleMu    sync.Mutex
	scaleSeed  uint64

	// died is closed at the first process exit nobody asked for; death
	// says which (see Exited).
	died      chan struct{}
	deathOnce sync.Once
	deathMu   sync.Mutex
	death     error
}

var (
	_ env.Environment   = (*Env)(nil)
	_ env.LogCollector  = (*Env)(nil)
	_ env.Scaler        = (*Env)(nil)
	_ env.BuildSwitcher = (*Env)(nil)
)

type backend struct {
	info artifacts.Backend
	proc *proc
	// probeFault is the group's configured probe fault ("" or "none" for
	// none): such a replica's probe cannot show a clean reset.
	probeFault string
}

type ingress struct {
	proc      *proc
	proxy     string // ip:port
	adminAddr string // ip:port
	admin     *adminapi.Client
}

// AdminAddrs returns the admin listener ("ip:port") of every ingress
// replica, for a local Prometheus to scrape. A restart reset moves them.
func (e *Env) AdminAddrs() []string {
	addrs := make([]string, len(e.ingresses))
	for i, in := range e.ingresses {
		addrs[i] = in.adminAddr
	}
	return addrs
}

// New returns an environment that Setup will start. Nothing runs yet.
func New(opts Options) (*Env, error) {
	if opts.Scenario == nil {
		return nil, errors.New("local: no scenario")
	}
	for _, b := range []struct{ flag, path string }{{"backend binary", opts.BackendBin}, {"ingress binary", opts.IngressBin}} {
		if _, err := os.Stat(b.path); err != nil {
			return nil, fmt.Errorf("local: %s: %w", b.flag, err)
		}
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = 30 * time.Second
	}
	if opts.Algorithm == "" {
		opts.Algorithm = opts.Scenario.Protocol.Algorithms[0]
	}
	return &Env{
		opts:       opts,
		algorithm:  opts.Algorithm,
		logOffsets: map[string]int64{},
		client:     &http.Client{Timeout: 5 * time.Second},
		died:       make(chan struct{}),
	}, nil
}

// Setup starts every backend replica, writes the routes file, starts the
// ingress replicas and waits until all are ready.
func (e *Env) Setup(ctx context.Context) error {
	tmp, err := e.makeTempDir()
	if err != nil {
		return fmt.Errorf("local: temp dir: %w", err)
	}
	e.tmp = tmp
	if err := os.MkdirAll(e.opts.LogDir, 0o755); err != nil {
		return fmt.Errorf("local: %w", err)
	}
	// A resumed campaign shares the log directory: keep the earlier
	// sessions' process list, and cut run logs from where they end.
	_ = artifacts.ReadJSON(filepath.Join(e.opts.LogDir, ProcessesFile), &e.processes)
	if entries, err := os.ReadDir(e.opts.LogDir); err == nil {
		for _, ent := range entries {
			if info, err := ent.Info(); err == nil && strings.HasSuffix(ent.Name(), ".log") {
				e.logOffsets[filepath.Join(e.opts.LogDir, ent.Name())] = info.Size()
			}
		}
	}
	seed := e.opts.Seed
	for _, r := range e.opts.Scenario.Workload.Routes {
		for _, g := range r.Backends {
			if g.Mode == "cpu-share" {
				bs, err := e.startMachines(ctx, r.Name, g, &seed)
				e.backends = append(e.backends, bs...)
				if err != nil {
					return err
				}
				continue
			}
			for i := range g.Replicas {
				seed++
				b, err := e.startBackend(ctx, r.Name, g, fmt.Sprintf("backend-%s-%d", g.Name, i), seed)
				if b.proc != nil {
					e.backends = append(e.backends, b)
				}
				if err != nil {
					return err
				}
			}
		}
	}
	e.scaleSeed = seed
	for _, b := range e.backends {
		if err := e.waitHealthy(ctx, b); err != nil {
			return err
		}
	}
	e.routesFile = filepath.Join(e.opts.LogDir, "routes.yaml")
	if err := e.writeRoutes(); err != nil {
		return err
	}
	e.ingressArgs = e.opts.Scenario.Ingress.Args()
	for i := range e.opts.Scenario.Ingress.Replicas {
		in, err := e.startIngress(ctx, i)
		if err != nil {
			return err
		}
		e.ingresses = append(e.ingresses, in)
	}
	return nil
}

// startBackend starts one replica of group g of route and waits for its
// address (not its health). A returned backend with a proc must be stopped
// by the caller, also on error.
func (e *Env) startBackend(ctx context.Context, route string, g scenario.BackendGroup, name string, seed uint64) (backend, error) {
	addrFile := filepath.Join(e.tmp, name+".addr")
	os.Remove(addrFile) // a replica started again under this name must not read the old address
	// No shutdown grace: it covers a load balancer's endpoint propagation,
	// and here the ingress has dropped a replica before it is stopped (or
	// stops with it).
	args := backendArgs(g, addrFile, seed)
	p, err := e.start(name, e.opts.BackendBin, args)
	if err != nil {
		return backend{proc: p}, err
	}
	b, err := waitFile(ctx, p, addrFile, e.opts.ReadyTimeout)
	if err != nil {
		return backend{proc: p}, err
	}
	addr := strings.TrimSpace(string(b))
	e.setAddress(name, addr)
	return backend{info: artifacts.Backend{Address: addr, Group: g.Name, Route: route}, proc: p, probeFault: g.ProbeFault}, nil
}

// backendArgs are a backend process's flags: the group's, on a port of
// its own choosing, its address written to addrFile.
func backendArgs(g scenario.BackendGroup, addrFile string, seed uint64) []string {
	return append([]string{"--listen", "127.0.0.1:0", "--addr-file", addrFile, "--seed", strconv.FormatUint(seed, 10), "--shutdown-grace", "0"}, g.Args()...)
}

// startMachines starts cpu-share group g as its machines: one backend
// process per machine hosting perMachine replicas (the last machine the
// rest), each replica on its own port, so replicas on one machine share
// its CPU and antagonist as in the simulator. The returned backends, one
// per replica, share their machine's proc; the caller keeps them, also on
// error, so Close stops what was started.
func (e *Env) startMachines(ctx context.Context, route string, g scenario.BackendGroup, seed *uint64) ([]backend, error) {
	per := g.CPUShare.PerMachine
	machines := (g.Replicas + per - 1) / per
	var out []backend
	for m := range machines {
		n := min(per, g.Replicas-m*per)
		name := fmt.Sprintf("machine-%s-%d", g.Name, m)
		addrFile := filepath.Join(e.tmp, name+".addr")
		os.Remove(addrFile)
		*seed++
		args := append(backendArgs(g, addrFile, *seed), "--replicas", strconv.Itoa(n), "--machine-index", strconv.Itoa(m), "--machines", strconv.Itoa(machines))
		p, err := e.start(name, e.opts.BackendBin, args)
		if err != nil {
			if p != nil { // started, but not recorded: Close must still stop it
				out = append(out, backend{proc: p})
			}
			return out, err
		}
		b, err := waitFile(ctx, p, addrFile, e.opts.ReadyTimeout)
		if err != nil {
			return append(out, backend{proc: p}), err
		}
		addrs := strings.Fields(string(b))
		if len(addrs) != n {
			return append(out, backend{proc: p}), fmt.Errorf("local: %s wrote %d addresses to %s, want %d (one per replica); see %s", name, len(addrs), addrFile, n, p.log.Name())
		}
		e.setAddress(name, strings.Join(addrs, ","))
		for _, a := range addrs {
			out = append(out, backend{info: artifacts.Backend{Address: a, Group: g.Name, Route: route}, proc: p, probeFault: g.ProbeFault})
		}
	}
	return out, nil
}

// routeFile is one route of the ingress's routes file.
type routeFile struct {
	Name      string   `json:"name"`
	Host      string   `json:"host,omitempty"`
	Path      string   `json:"path"`
	PathType  string   `json:"pathType"`
	Endpoints []string `json:"endpoints"`
}

// serviceFile is one Service of the routes file's HTTPRoutes.
type serviceFile struct {
	Name      string   `json:"name"`
	Port      int32    `json:"port"`
	Endpoints []string `json:"endpoints"`
}

// writeRoutes writes the routes file from the current backends,
// atomically (a rename), so the ingress's file source reloads it whole.
// With ingress.routing: gateway the routes are the HTTPRoutes the kind
// environment applies, each route's backends listed as its Service.
func (e *Env) writeRoutes() error {
	bs := e.backendList()
	if e.opts.Scenario.Ingress.UsesGateway() {
		return e.writeHTTPRoutes(bs)
	}
	var routes []routeFile
	for _, r := range e.opts.Scenario.Workload.Routes {
		rf := routeFile{Name: r.Name, Host: r.Host, Path: r.Path, PathType: r.PathType, Endpoints: []string{}}
		for _, b := range bs {
			if b.info.Route == r.Name {
				rf.Endpoints = append(rf.Endpoints, b.info.Address)
			}
		}
		routes = append(routes, rf)
	}
	doc, err := yaml.Marshal(map[string]any{"routes": routes})
	if err != nil {
		return fmt.Errorf("local: routes file: %w", err)
	}
	return artifacts.WriteFileAtomic(e.routesFile, doc)
}

func (e *Env) writeHTTPRoutes(bs []backend) error {
	s := e.opts.Scenario
	var svcs []serviceFile
	var hrs []map[string]any
	for _, r := range s.Workload.Routes {
		sf := serviceFile{Name: r.Name, Port: manifests.BackendPort, Endpoints: []string{}}
		for _, b := range bs {
			if b.info.Route == r.Name {
				sf.Endpoints = append(sf.Endpoints, b.info.Address)
			}
		}
		svcs = append(svcs, sf)
		// The algorithm is the admin API's (SetAlgorithm), as for routes.
		u := manifests.HTTPRoute(s, r, "", "")
		unstructured.RemoveNestedField(u.Object, "spec", "parentRefs") // the file's Gateway is implicit
		hrs = append(hrs, u.Object)
	}
	doc, err := yaml.Marshal(map[string]any{"services": svcs, "httpRoutes": hrs})
	if err != nil {
		return fmt.Errorf("local: routes file: %w", err)
	}
	return artifacts.WriteFileAtomic(e.routesFile, doc)
}

// backendList is a copy of the current backends.
func (e *Env) backendList() []backend {
	e.backendsMu.Lock()
	defer e.backendsMu.Unlock()
	return append([]backend(nil), e.backends...)
}

// makeTempDir returns an empty directory for the address files.
func (e *Env) makeTempDir() (string, error) {
	if e.opts.TempDir == "" {
		return os.MkdirTemp("", "prequalbench-local-")
	}
	if err := os.RemoveAll(e.opts.TempDir); err != nil {
		return "", err
	}
	return e.opts.TempDir, os.MkdirAll(e.opts.TempDir, 0o755)
}

func (e *Env) start(name, bin string, args []string) (*proc, error) {
	p, err := startProc(name, filepath.Join(e.opts.LogDir, name+".log"), bin, args...)
	if err != nil {
		return nil, err
	}
	go e.watch(p)
	e.processes = append(e.processes, Process{Name: name, PID: p.pid(), Command: append([]string{bin}, args...)})
	if err := artifacts.WriteJSON(filepath.Join(e.opts.LogDir, ProcessesFile), e.processes); err != nil {
		return p, err
	}
	return p, nil
}

func (e *Env) setAddress(name, addr string) {
	for i := len(e.processes) - 1; i >= 0; i-- {
		if e.processes[i].Name == name {
			e.processes[i].Address = addr
			_ = artifacts.WriteJSON(filepath.Join(e.opts.LogDir, ProcessesFile), e.processes)
			return
		}
	}
}

func (e *Env) startIngress(ctx context.Context, i int) (*ingress, error) {
	name := fmt.Sprintf("ingress-%d", i)
	addrFile := filepath.Join(e.tmp, name+".addr")
	os.Remove(addrFile) // a restart must not read the previous address
	args := ingressArgv(e.routesFile, addrFile, e.algorithm, e.opts.Seed+uint64(1000+i), e.ingressArgs)
	p, err := e.start(name, e.opts.IngressBin, args)
	if p != nil && err != nil {
		_ = p.stop()
	}
	if err != nil {
		return nil, err
	}
	in, err := e.readyIngress(ctx, name, p, addrFile)
	if err != nil {
		// Not in e.ingresses yet, so Close would not stop it: a Ctrl-C
		// during a restart's wait left the new ingress running.
		_ = p.stop()
		return nil, err
	}
	return in, nil
}

// readyIngress waits for a started ingress to write its addresses and to
// answer ready.
func (e *Env) readyIngress(ctx context.Context, name string, p *proc, addrFile string) (*ingress, error) {
	b, err := waitFile(ctx, p, addrFile, e.opts.ReadyTimeout)
	if err != nil {
		return nil, err
	}
	var addrs struct {
		Proxy string `json:"proxy"`
		Admin string `json:"admin"`
	}
	if err := json.Unmarshal(b, &addrs); err != nil || addrs.Proxy == "" || addrs.Admin == "" {
		return nil, fmt.Errorf("local: %s wrote a bad address file %q, want {\"proxy\":..., \"admin\":...}", name, b)
	}
	e.setAddress(name, addrs.Proxy)
	in := &ingress{proc: p, proxy: addrs.Proxy, adminAddr: addrs.Admin, admin: adminapi.NewClient("http://"+addrs.Admin, "")}
	if err := poll(ctx, e.opts.ReadyTimeout, func() error {
		if p.exited() {
			return errExited
		}
		return in.admin.Ready(ctx)
	}); err != nil {
		return nil, fmt.Errorf("local: %s not ready: %w; see %s", name, err, p.log.Name())
	}
	return in, nil
}

var errExited = errors.New("process exited")

// watch records p's exit as a death unless stop asked for it.
func (e *Env) watch(p *proc) {
	<-p.done
	if p.stopping.Load() {
		return
	}
	e.deathOnce.Do(func() {
		e.deathMu.Lock()
		e.death = p.deathError()
		e.deathMu.Unlock()
		close(e.died)
	})
}

// Died is closed when a backend or ingress process exits without having
// been stopped (crash, OOM kill, kill -9), during Setup or any run.
func (e *Env) Died() <-chan struct{} { return e.died }

// Exited names the first process that died, how and where its log is;
// nil while every process the environment started is running or was
// stopped on purpose.
func (e *Env) Exited() error {
	e.deathMu.Lock()
	defer e.deathMu.Unlock()
	return e.death
}

// poll calls f every 20 ms until it returns nil, errExited, or timeout.
func poll(ctx context.Context, timeout time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil || errors.Is(err, errExited) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func (e *Env) waitHealthy(ctx context.Context, b backend) error {
	err := poll(ctx, e.opts.ReadyTimeout, func() error {
		if b.proc.exited() {
			return errExited
		}
		_, err := e.get(ctx, "http://"+b.info.Address+"/healthz")
		return err
	})
	if err != nil {
		return fmt.Errorf("local: %s not healthy: %w; see %s", b.proc.name, err, b.proc.log.Name())
	}
	return nil
}

// Backends lists every backend replica.
func (e *Env) Backends() []artifacts.Backend {
	bs := e.backendList()
	out := make([]artifacts.Backend, len(bs))
	for i, b := range bs {
		out[i] = b.info
	}
	return out
}

// LoadTargets returns one target per ingress replica and route, with the
// route's weight split evenly over the replicas.
func (e *Env) LoadTargets() []env.Target {
	var ts []env.Target
	n := float64(len(e.ingresses))
	for _, in := range e.ingresses {
		for _, r := range e.opts.Scenario.Workload.Routes {
			ts = append(ts, env.Target{
				URL:    fmt.Sprintf("http://%s%s?iterations=%d", in.proxy, r.Path, r.Iterations),
				Host:   r.Host,
				Weight: r.Weight / n,
				Route:  r.Name,
			})
		}
	}
	return ts
}

// SetAlgorithm switches every route of every ingress replica. It first
// waits (up to DrainTimeout) for the previous run's requests to finish, so
// no request picked by one policy completes under the next; Reset reports
// a drain that did not happen.
func (e *Env) SetAlgorithm(ctx context.Context, algorithm string) error {
	_ = poll(ctx, e.opts.DrainTimeout, func() error { return e.drained(ctx) })
	for i, in := range e.ingresses {
		if err := in.admin.SetAlgorithm(ctx, "", algorithm); err != nil {
			return fmt.Errorf("local: ingress-%d: set algorithm %s: %w", i, algorithm, err)
		}
	}
	e.algorithm = algorithm
	return nil
}

// Snapshot returns /admin/state of every ingress replica.
func (e *Env) Snapshot(ctx context.Context) ([]adminapi.State, error) {
	out := make([]adminapi.State, len(e.ingresses))
	for i, in := range e.ingresses {
		st, err := in.admin.State(ctx)
		if err != nil {
			return nil, fmt.Errorf("local: ingress-%d: state: %w", i, err)
		}
		out[i] = st
	}
	return out, nil
}

// Facts describes the host and the local environment.
func (e *Env) Facts() artifacts.Environment {
	f := env.HostFacts(e.opts.RepoDir)
	f.Name = "local"
	f.IngressReplicas = e.opts.Scenario.Ingress.Replicas
	f.IngressSHA256 = fileSHA256(e.opts.IngressBin)
	f.BackendSHA256 = fileSHA256(e.opts.BackendBin)
	var urls []string
	for _, in := range e.ingresses {
		urls = append(urls, "http://"+in.proxy)
	}
	f.Load = &artifacts.LoadPath{Path: artifacts.LoadFromCLI, URLs: urls, Via: "loopback, spread over the ingress replicas"}
	return f
}

// fileSHA256 is the hex SHA-256 of a file, empty when it cannot be read.
func fileSHA256(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Close stops every process (concurrently) and removes the temp files.
func (e *Env) Close() error {
	e.closeOnce.Do(func() {
		var ps []*proc
		for _, in := range e.ingresses {
			ps = append(ps, in.proc)
		}
		e.backendsMu.Lock()
		e.closed = true
		for _, b := range e.backends {
			ps = append(ps, b.proc)
		}
		e.backendsMu.Unlock()
		e.closeErr = stopAll(ps)
		if e.tmp != "" {
			os.RemoveAll(e.tmp)
		}
	})
	return e.closeErr
}

// CollectLogs copies what every process logged since the last call into dir.
func (e *Env) CollectLogs(dir string) error {
	entries, err := os.ReadDir(e.opts.LogDir)
	if err != nil {
		return fmt.Errorf("local: %w", err)
	}
	for _, ent := range entries {
		name := ent.Name()
		if !strings.HasSuffix(name, ".log") {
			continue
		}
		if err := e.copyTail(filepath.Join(e.opts.LogDir, name), filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

func (e *Env) copyTail(src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("local: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(e.logOffsets[src], io.SeekStart); err != nil {
		return fmt.Errorf("local: %w", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("local: %w", err)
	}
	e.logOffsets[src] += int64(len(b))
	return artifacts.WriteFileAtomic(dst, b)
}

func (e *Env) get(ctx context.Context, url string) ([]byte, error) {
	return env.Call(ctx, e.client, http.MethodGet, url)
}
