// Package ingress is the dataplane: it matches requests to routes, picks an
// endpoint with the route's load-balancing policy, proxies the request over
// a shared pool of keep-alive backend connections (the HTTP/1.1 data plane
// is the ingress's own, in internal/h1: see the README for what it does
// not carry), reports how it went back to the policy, carries out
// the policy's probe plans and exposes its state on an admin API.
//
// Concurrency: the route table is an immutable value swapped atomically by
// Update, so the request path takes no global lock. Each route (pool key)
// has one mutex, held only around policy calls. Ingress.mu serializes the
// writers (Update, SetAlgorithm); it is never taken on the request path and
// is always taken before a route's mutex.
package ingress

import (
	"context"
	"errors"
	"fmt"
	"github.com/prequalbench/prequalbench/ingress/internal/h1"
	"hash/fnv"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/prequalbench/prequalbench/ingress/metrics"
	"github.com/prequalbench/prequalbench/ingress/prober"
	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/ingress/router"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

// Options configure an Ingress. Zero fields take the documented defaults.
type Options struct {
	// DefaultAlgorithm is used by routes that name none; default "prequal".
	DefaultAlgorithm string
	// Policy holds the policies' parameters; the zero value means
	// loadbalancer.DefaultConfig().
	Policy loadbalancer.Config
	// DialContext dials backends for both the proxy and the
	// prober; nil means a net.Dialer with a 2 s timeout.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// UpstreamTimeout is the longest wait for a backend's response headers,
	// from the end of the request, before answering 504; default 5 s.
	UpstreamTimeout time.Duration
	// UpstreamReadTimeout bounds writing the request to a backend and,
	// separately, reading the response body (nginx's proxy_send_timeout
	// and proxy_read_timeout; the body is read whole, so here the bound is
	// on all of it): a backend that sends headers and then stalls is cut
	// off after it and the client gets 502. Default 60 s.
	UpstreamReadTimeout time.Duration
	// UpstreamIdleTimeout closes keep-alive connections to backends that
	// were idle this long (nginx's upstream keepalive_timeout); default 60 s.
	UpstreamIdleTimeout time.Duration
	// ClientBodyTimeout bounds reading a client's request, headers and body,
	// from its first byte (nginx's client_header_timeout and
	// client_body_timeout together); the client gets 408. Default 60 s.
	ClientBodyTimeout time.Duration
	// ClientFirstRequestTimeout bounds the wait for a new client
	// connection's first byte (nginx's client_header_timeout for the first
	// request); default 10 s. ClientIdleTimeout bounds the wait for a kept
	// connection's next request; default 120 s.
	ClientFirstRequestTimeout, ClientIdleTimeout time.Duration
	// MaxClientConns caps open client connections; at the cap a new one
	// sheds the longest-idle one, or is closed when none is idle. Default
	// 10,000; negative: no cap.
	MaxClientConns int
	// BodyMemoryBudget bounds the request and answer body bytes held in
	// memory by all exchanges at once; a body that would overrun it gets
	// 503. Default 96 MiB (at least MaxBodySize).
	BodyMemoryBudget int64
	// MaxBodySize caps request and response bodies, which the data plane
	// holds in memory: a larger request gets 413, a larger response 502.
	// Default 32 MiB.
	MaxBodySize int
	// TrustedProxies are the peers whose X-Forwarded-For chain and X-Real-IP
	// are passed on; from any other peer both are replaced by the peer's
	// address. Empty trusts nobody.
	TrustedProxies []netip.Prefix
	// ProbeTimeout bounds one probe; default 100 ms.
	ProbeTimeout time.Duration
	// ProbeStaleAfter is the largest accepted skew between a backend's probe
	// timestamp and the local clock; default 5 s.
	ProbeStaleAfter time.Duration
	// ProbeWorkers and ProbeQueueSize size the prober; defaults 16 and 4096.
	ProbeWorkers   int
	ProbeQueueSize int
	// Retry widens the retry on a different endpoint: without it only a
	// request whose connection could not be made (nothing was sent) is
	// retried; with it also an idempotent request whose exchange failed
	// before response headers (reset, EOF).
	Retry bool
	// Outlier configures outlier ejection; zero fields take the defaults
	// of OutlierConfig.
	Outlier OutlierConfig
	// Registry receives the metrics; nil means a new registry that also
	// carries the Go and process collectors.
	Registry *prometheus.Registry
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Seed seeds the per-route random sources; 0 means random.
	Seed uint64
	// TestAddedDelay, test only, holds every proxied request this long
	// before it is routed: a build with a known slowdown, for checking
	// that an A/B campaign names it (see docs/ab.md). No flag sets it;
	// only a build with -ldflags does (cmd/prequalbench).
	TestAddedDelay time.Duration
}

// ErrUnknownRoute is returned for a route key the ingress does not have.
var ErrUnknownRoute = errors.New("ingress: unknown route")

// Ingress is the dataplane. It implements http.Handler (the proxy) and
// route.Sink.
type Ingress struct {
	opts      Options
	log       *slog.Logger
	reg       *prometheus.Registry
	metrics   *metrics.Metrics
	prober    *prober.Prober
	upstreams *upstreams
	errLog    *log.Logger
	failLog   logLimiter // upstream errors
	panicLog  logLimiter // panics on the request path
	seed      uint64
	// bodies bounds the body bytes of all exchanges in memory at once.
	bodies *h1.BodyBudget

	table  atomic.Pointer[table]
	synced atomic.Bool
	// probing: some route's policy probes; probingChanged tells Run.
	probing        atomic.Bool
	probingChanged chan struct{}

	mu          sync.Mutex        // serializes writers; see the package comment
	overrides   map[string]string // admin algorithm per route key
	overrideAll string            // admin algorithm for every route
}

var (
	_ route.Sink = (*Ingress)(nil)
)

// table is one immutable route set.
type table struct {
	router *router.Router[*routeState]
	routes []*routeState // sorted by key
	byKey  map[string]*routeState
}

// New builds an Ingress with no routes; feed it with Update and start its
// prober with Run.
func New(opts Options) (*Ingress, error) {
	if opts.DefaultAlgorithm == "" {
		opts.DefaultAlgorithm = loadbalancer.NamePrequal
	}
	algo, err := loadbalancer.Canonical(opts.DefaultAlgorithm)
	if err != nil {
		return nil, fmt.Errorf("ingress: default algorithm: %w", err)
	}
	opts.DefaultAlgorithm = algo
	if opts.Policy == (loadbalancer.Config{}) {
		opts.Policy = loadbalancer.DefaultConfig()
	}
	if err := opts.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("ingress: policy config: %w", err)
	}
	if opts.UpstreamTimeout == 0 {
		opts.UpstreamTimeout = 5 * time.Second
	}
	if opts.UpstreamReadTimeout == 0 {
		opts.UpstreamReadTimeout = 60 * time.Second
	}
	if opts.UpstreamIdleTimeout == 0 {
		opts.UpstreamIdleTimeout = 60 * time.Second
	}
	if opts.MaxBodySize == 0 {
		opts.MaxBodySize = 32 << 20
	}
	if opts.ClientBodyTimeout == 0 {
		opts.ClientBodyTimeout = 60 * time.Second
	}
	if opts.ClientFirstRequestTimeout == 0 {
		opts.ClientFirstRequestTimeout = 10 * time.Second
	}
	if opts.ClientIdleTimeout == 0 {
		opts.ClientIdleTimeout = 120 * time.Second
	}
	if opts.MaxClientConns == 0 {
		opts.MaxClientConns = 10000
	}
	if opts.BodyMemoryBudget == 0 {
		opts.BodyMemoryBudget = max(96<<20, int64(opts.MaxBodySize))
	}
	if opts.BodyMemoryBudget < int64(opts.MaxBodySize) {
		return nil, fmt.Errorf("ingress: BodyMemoryBudget %d is below MaxBodySize %d: a body of the largest size could never be taken", opts.BodyMemoryBudget, opts.MaxBodySize)
	}
	if opts.ProbeTimeout == 0 {
		opts.ProbeTimeout = 100 * time.Millisecond
	}
	if opts.ProbeWorkers == 0 {
		opts.ProbeWorkers = 16
	}
	if opts.ProbeQueueSize == 0 {
		opts.ProbeQueueSize = 4096
	}
	if opts.UpstreamTimeout < 0 || opts.UpstreamReadTimeout < 0 || opts.UpstreamIdleTimeout < 0 ||
		opts.ClientBodyTimeout < 0 || opts.ClientFirstRequestTimeout < 0 || opts.ClientIdleTimeout < 0 || opts.ProbeTimeout < 0 || opts.ProbeStaleAfter < 0 ||
		opts.ProbeWorkers < 0 || opts.ProbeQueueSize < 0 || opts.MaxBodySize < 0 {
		return nil, fmt.Errorf("ingress: UpstreamTimeout, UpstreamReadTimeout, UpstreamIdleTimeout, ClientBodyTimeout, ClientFirstRequestTimeout, ClientIdleTimeout, ProbeTimeout, ProbeStaleAfter, ProbeWorkers, ProbeQueueSize and MaxBodySize must not be negative")
	}
	if opts.Outlier, err = opts.Outlier.withDefaults(); err != nil {
		return nil, fmt.Errorf("ingress: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.DialContext == nil {
		opts.DialContext = (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	i := &Ingress{
		opts:      opts,
		log:       opts.Logger,
		reg:       opts.Registry,
		seed:      opts.Seed,
		overrides: map[string]string{},
		errLog:    log.New(io.Discard, "", 0),
		bodies:    h1.NewBodyBudget(opts.BodyMemoryBudget),

		probingChanged: make(chan struct{}, 1),
	}
	if i.seed == 0 {
		i.seed = rand.Uint64()
	}
	if i.reg == nil {
		i.reg = prometheus.NewRegistry()
		i.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	i.metrics, err = metrics.New(i.reg, i.gaugeSnapshot)
	if err != nil {
		return nil, fmt.Errorf("ingress: metrics: %w", err)
	}
	i.prober, err = prober.New(prober.Config{
		Workers: opts.ProbeWorkers, QueueSize: opts.ProbeQueueSize, Timeout: opts.ProbeTimeout,
		StaleAfter: opts.ProbeStaleAfter, DialContext: opts.DialContext,
	})
	if err != nil {
		return nil, fmt.Errorf("ingress: %w", err)
	}
	i.upstreams = newUpstreams(opts)
	empty, _, _ := router.New[*routeState](nil)
	i.table.Store(&table{router: empty, byKey: map[string]*routeState{}})
	return i, nil
}

// Registry is the registry holding the ingress's metrics.
func (i *Ingress) Registry() *prometheus.Registry { return i.reg }

// Synced reports whether Update has been called at least once.
func (i *Ingress) Synced() bool { return i.synced.Load() }

// ObserveReconcile records one reconcile of a route source ("success" or
// "error") and how long it took. Route sources find it by type assertion.
func (i *Ingress) ObserveReconcile(result string, d time.Duration) {
	i.metrics.Reconciles.WithLabelValues(result).Inc()
	i.metrics.ReconcileDuration.Observe(d.Seconds())
}

// Update replaces the route set. Pools (policies, probe pools, counters) of
// route keys that stay are kept and get the new endpoints; keys that go are
// dropped with their metrics.
func (i *Ingress) Update(specs []route.Spec) {
	now := time.Now()
	i.mu.Lock()
	defer i.mu.Unlock()
	old := i.table.Load()

	sorted := slices.Clone(specs)
	slices.SortStableFunc(sorted, func(a, b route.Spec) int {
		if a.Key != b.Key {
			return compareStrings(a.Key, b.Key)
		}
		if a.Origin != b.Origin {
			return compareStrings(a.Origin, b.Origin)
		}
		if a.Host != b.Host {
			return compareStrings(a.Host, b.Host)
		}
		return compareStrings(a.Path, b.Path)
	})

	t := &table{byKey: map[string]*routeState{}}
	var rules []router.Rule[*routeState]
	for _, s := range sorted {
		rs := t.byKey[s.Key]
		if rs == nil {
			rs = old.byKey[s.Key]
			if rs == nil {
				rs = i.newRoute(s.Key)
			}
			t.byKey[s.Key] = rs
			t.routes = append(t.routes, rs)
			rs.mu.Lock()
			rs.host, rs.path, rs.pathType, rs.specAlgo = s.Host, s.Path, s.PathType, s.Algorithm
			rs.nextEndpoints = rs.nextEndpoints[:0]
			rs.mu.Unlock()
			rs.fixedStatus.Store(int32(s.Status))
		}
		rs.mu.Lock()
		if rs.specAlgo == "" {
			rs.specAlgo = s.Algorithm
		}
		for _, ep := range s.Endpoints {
			if !slices.Contains(rs.nextEndpoints, ep) {
				rs.nextEndpoints = append(rs.nextEndpoints, ep)
			}
		}
		rs.mu.Unlock()
		rules = append(rules, router.Rule[*routeState]{
			Host: s.Host, Path: s.Path, PathType: s.PathType, Key: s.Key, Origin: s.Origin, Value: rs,
			Headers: s.Headers, Weight: s.Weight, Precedence: s.Precedence,
			AnyDepth: s.AnyDepth,
		})
	}
	for _, rs := range t.routes {
		i.applyLocked(rs, now)
	}
	r, conflicts, errs := router.New(rules)
	for _, c := range conflicts {
		i.metrics.RouteConflicts.Inc()
		i.log.Warn("route conflict", "detail", c.String())
	}
	for _, err := range errs {
		i.log.Error("invalid route rule skipped", "err", err)
	}
	t.router = r
	i.table.Store(t)
	for _, rs := range old.routes {
		if t.byKey[rs.key] == nil {
			i.metrics.DeleteRoute(rs.key)
		}
	}
	// Close the connections to backends that no route names any more.
	named := map[string]bool{}
	for _, rs := range t.routes {
		for _, ep := range rs.endpoints {
			named[ep] = true
		}
	}
	i.upstreams.forget(func(addr string) bool { return named[addr] })
	i.noteProbingLocked()
	i.synced.Store(true)
}

// noteProbingLocked records whether any route's policy probes and tells
// Run when that changed, so the idle-probe ticker runs only then (an
// ingress of baseline policies is not woken 40 times a second for
// nothing). i.mu is held.
func (i *Ingress) noteProbingLocked() {
	probing := false
	for _, rs := range i.table.Load().routes {
		rs.mu.Lock()
		probing = probing || rs.usesProbes
		rs.mu.Unlock()
	}
	if i.probing.Swap(probing) != probing {
		select {
		case i.probingChanged <- struct{}{}:
		default: // Run has a change to read already
		}
	}
}

// applyLocked brings a route's policy in line with its endpoints and its
// effective algorithm. i.mu is held.
func (i *Ingress) applyLocked(rs *routeState, now time.Time) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	algo := i.effectiveAlgorithmLocked(rs.key, rs.specAlgo)
	if rs.policy == nil || rs.algo != algo {
		p, err := loadbalancer.New(algo, i.opts.Policy)
		if err != nil {
			// The algorithm was validated; only a broken registry gets here.
			i.log.Error("policy construction failed; keeping the previous policy", "route", rs.key, "algorithm", algo, "err", err)
			if rs.policy != nil {
				return
			}
			p, _ = loadbalancer.New(i.opts.DefaultAlgorithm, i.opts.Policy)
			algo = i.opts.DefaultAlgorithm
		}
		// rs.endpoints is replaced, never modified, so the policy may keep it.
		rs.endpoints = slices.Clone(rs.nextEndpoints)
		p.SetEndpoints(now, rs.endpoints)
		rs.policy, rs.algo = p, algo
		rs.usesProbes = loadbalancer.UsesProbes(algo)
		i.warnReuseLocked(rs)
		i.resolveSelectionsLocked(rs)
		rs.outliers.setEndpoints(rs.endpoints)
		rs.applyEjectionsLocked(rs.outliers.active(nil), false) // a new policy knows none
		return
	}
	if !slices.Equal(rs.endpoints, rs.nextEndpoints) {
		rs.endpoints = slices.Clone(rs.nextEndpoints)
		rs.policy.SetEndpoints(now, rs.endpoints)
		i.resolveSelectionsLocked(rs)
		rs.outliers.setEndpoints(rs.endpoints)
		rs.applyEjectionsLocked(rs.outliers.active(nil), false) // re-added endpoints start clean in the policy
		i.warnReuseLocked(rs)
	}
}

// warnReuseLocked logs, once each time it changes, that a Prequal route's
// fleet is too small for Eq. 1 to give a finite reuse budget (see
// loadbalancer.PrequalConfig.ReuseWarning): the operator then knows the
// policy runs at b_reuse = 1 rather than the paper's formula.
func (i *Ingress) warnReuseLocked(rs *routeState) {
	w := ""
	if base, _, err := loadbalancer.SplitVariant(rs.algo); err == nil && base == loadbalancer.NamePrequal {
		if cfg, err := loadbalancer.ConfigFor(rs.algo, i.opts.Policy); err == nil {
			w = cfg.Prequal.ReuseWarning(len(rs.endpoints))
		}
	}
	if w != "" && w != rs.reuseWarning {
		i.log.Warn("prequal reuse budget outside Eq. 1", "route", rs.key, "detail", w)
	}
	rs.reuseWarning = w
}

// effectiveAlgorithmLocked: an admin choice for the route, else an admin
// choice for all routes, else the route's own, else the default. A route's
// own name that is unknown falls back to the default (and is logged).
func (i *Ingress) effectiveAlgorithmLocked(key, specAlgo string) string {
	if a := i.overrides[key]; a != "" {
		return a
	}
	if i.overrideAll != "" {
		return i.overrideAll
	}
	if specAlgo != "" {
		a, err := loadbalancer.Canonical(specAlgo)
		if err == nil {
			return a
		}
		i.log.Error("route names an unknown algorithm; using the default", "route", key, "err", err, "default", i.opts.DefaultAlgorithm)
	}
	return i.opts.DefaultAlgorithm
}

// resolveSelectionsLocked caches the selection counters of the current
// endpoints and algorithm, and drops series of endpoints that left.
func (i *Ingress) resolveSelectionsLocked(rs *routeState) {
	next := make(map[string]prometheus.Counter, len(rs.endpoints))
	for _, ep := range rs.endpoints {
		next[ep] = i.metrics.Selections.WithLabelValues(rs.key, ep, rs.algo)
	}
	for ep := range rs.selections {
		if _, ok := next[ep]; !ok {
			i.metrics.DeleteEndpoint(rs.key, ep)
		}
	}
	rs.selections = next
}

// SetAlgorithm switches one route (key) or every route (key "") to algo. The
// choice outlives route updates until the process ends. Requests in flight
// finish on the policy that picked them.
func (i *Ingress) SetAlgorithm(key, algo string) error {
	canon, err := loadbalancer.Canonical(algo)
	if err != nil {
		return err
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	t := i.table.Load()
	if key == "" {
		i.overrideAll = canon
		clear(i.overrides)
	} else {
		if t.byKey[key] == nil {
			return fmt.Errorf("%w %q", ErrUnknownRoute, key)
		}
		i.overrides[key] = canon
	}
	now := time.Now()
	for _, rs := range t.routes {
		if key == "" || rs.key == key {
			i.applyLocked(rs, now)
		}
	}
	i.noteProbingLocked()
	return nil
}

func (i *Ingress) newRoute(key string) *routeState {
	h := fnv.New64a()
	_, _ = io.WriteString(h, key)
	rs := &routeState{
		key:                key,
		ing:                i,
		rng:                rand.New(rand.NewPCG(i.seed, h.Sum64())),
		duration:           i.metrics.RequestDuration.WithLabelValues(key),
		fallbacks:          i.metrics.Fallbacks.WithLabelValues(key),
		probesSent:         i.metrics.ProbesSent.WithLabelValues(key),
		probeLatency:       i.metrics.ProbeDuration.WithLabelValues(key),
		probeResults:       map[loadbalancer.ProbeOutcome]prometheus.Counter{},
		upstreamErrorKinds: map[string]prometheus.Counter{},
		outliers:           newOutliers(i.opts.Outlier),
		ejectionMetrics:    map[string]prometheus.Counter{},
		returnsMetric:      i.metrics.OutlierReturns.WithLabelValues(key),
		clientAbortsMetric: i.metrics.ClientAborts.WithLabelValues(key),
	}
	for _, reason := range []string{ejectConsecutive, ejectSuccessRate} {
		rs.ejectionMetrics[reason] = i.metrics.OutlierEjections.WithLabelValues(key, reason)
	}
	for _, kind := range []string{upstreamTimeout, upstreamFailed, upstreamBody} {
		rs.upstreamErrorKinds[kind] = i.metrics.UpstreamErrors.WithLabelValues(key, kind)
	}
	for _, o := range loadbalancer.ProbeOutcomes {
		rs.probeResults[o] = i.metrics.ProbeResults.WithLabelValues(key, string(o))
	}
	return rs
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Run starts the prober workers, the idle-probe ticker and the sweep of idle
// backend connections; it returns when ctx ends.
func (i *Ingress) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		i.prober.Run(ctx)
	}()
	// The idle ticker asks every route whose policy probes for the probes
	// it owes without traffic (Prequal's minimum probe rate, the polling
	// of wrr and yarp-po2c), whatever the policy. It runs only while some
	// route's policy probes.
	period := loadbalancer.IdleProbeTick(i.opts.Policy)
	probeTick := time.NewTicker(period)
	defer probeTick.Stop()
	if !i.probing.Load() {
		probeTick.Stop()
	}
	// Connections are also checked when taken, so the sweep only bounds
	// how long an unused one stays open past its idle timeout.
	sweep := time.NewTicker(max(i.opts.UpstreamIdleTimeout/4, 5*time.Millisecond))
	defer sweep.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case now := <-probeTick.C:
			for _, rs := range i.table.Load().routes {
				rs.idleProbes(now)
			}
		case <-i.probingChanged:
			if i.probing.Load() {
				probeTick.Reset(period)
			} else {
				probeTick.Stop()
			}
		case now := <-sweep.C:
			i.upstreams.closeIdle(now, false)
		}
	}
	<-done
	i.upstreams.closeIdle(time.Now(), true)
	return nil
}
