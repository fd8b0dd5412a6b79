package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/prequalbench/prequalbench/ingress"
	"github.com/prequalbench/prequalbench/ingress/filesource"
	"github.com/prequalbench/prequalbench/ingress/kubesource"
	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

func init() { subcommands = append(subcommands, newIngressCommand) }

// ingressFlags holds the flags of `prequalbench ingress`.
type ingressFlags struct {
	source, routes                               string
	listen, adminListen                          string
	adminTokenFile, addrFile                     string
	defaultAlgorithm                             string
	probesPerQuery, qrif, removePerQ             float64
	delta                                        float64
	poolSize, minProbes                          int
	c3Clients                                    int
	maxAge, idleProbeInterval, latencyMemory     time.Duration
	probeTimeout                                 time.Duration
	probeWorkers, probeQueueSize                 int
	upstreamTimeout, shutdownTimeout             time.Duration
	upstreamReadTimeout, upstreamIdleTimeout     time.Duration
	clientBodyTimeout, shutdownDelay             time.Duration
	clientFirstRequestTimeout, clientIdleTimeout time.Duration
	maxClientConns                               int
	bodyMemoryBudget                             string
	maxBodySize                                  string
	trustedProxies                               []string
	retry, pprof                                 bool
	seed                                         uint64
	logLevel                                     string
	kubeconfig, kubeContext                      string
	namespace, ingressClass                      string
}

func newIngressCommand() *cobra.Command {
	def := loadbalancer.DefaultConfig().Prequal
	f := &ingressFlags{}
	cmd := &cobra.Command{
		Use:   "ingress",
		Short: "Run the ingress: reverse proxy with per-route Prequal or baseline load balancing",
		Long: `Run the bundled ingress. Routes come from Kubernetes (Ingress and
EndpointSlice informers) or from a YAML routes file that is reloaded when it
changes. The admin API (state, algorithm switch, reset, metrics) listens on
its own address. SIGTERM drains in-flight requests and exits 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return runIngress(ctx, f)
		},
	}
	fl := cmd.Flags()
	defSource := "file"
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		defSource = "kube"
	}
	fl.StringVar(&f.source, "source", defSource, "route source: kube or file (default kube inside a cluster, else file)")
	fl.StringVar(&f.routes, "routes", "", "routes YAML file (file source)")
	fl.StringVar(&f.listen, "listen", "0.0.0.0:8080", "proxy listen address")
	fl.StringVar(&f.adminListen, "admin-listen", "127.0.0.1:8081", "admin API listen address")
	fl.StringVar(&f.adminTokenFile, "admin-token-file", "", "file holding the admin bearer token (required when --admin-listen is not loopback)")
	fl.StringVar(&f.addrFile, "addr-file", "", `write {"proxy":"ip:port","admin":"ip:port"} here once both listeners are bound`)
	fl.StringVar(&f.defaultAlgorithm, "default-algorithm", loadbalancer.NamePrequal,
		"algorithm of routes that name none: "+strings.Join(loadbalancer.Names(), ", "))
	fl.Float64Var(&f.probesPerQuery, "prequal-probes-per-query", def.ProbesPerQuery, "Prequal r_probe: probes triggered per query")
	fl.IntVar(&f.poolSize, "prequal-pool-size", def.PoolSize, "Prequal probe pool size")
	fl.DurationVar(&f.maxAge, "prequal-max-age", def.MaxAge, "Prequal probe lifetime")
	fl.Float64Var(&f.qrif, "prequal-qrif", def.QRIF, "Prequal Q_RIF quantile above which a probe is hot")
	fl.Float64Var(&f.removePerQ, "prequal-remove-per-query", def.RemovePerQuery, "Prequal r_remove: probes removed per query")
	fl.Float64Var(&f.delta, "prequal-delta", def.Delta, "Prequal delta of the reuse budget (Eq. 1)")
	fl.DurationVar(&f.idleProbeInterval, "prequal-idle-probe-interval", def.IdleProbeInterval, "Prequal idle probe interval (0 disables)")
	fl.IntVar(&f.minProbes, "prequal-min-probes", def.MinProbes, "Prequal fewest usable probes for an HCL pick")
	fl.DurationVar(&f.latencyMemory, "prequal-latency-memory", def.LatencyMemory, "Prequal: how long a replica's last known latency stands in when its probe reports none (0 disables)")
	fl.IntVar(&f.c3Clients, "c3-clients", loadbalancer.DefaultConfig().C3.Clients,
		"c3's n in q = 1 + os*n + queue: the ingress replicas sharing the backends (the campaign passes its ingress.replicas); a c3{clients=k} variant overrides it")
	fl.DurationVar(&f.probeTimeout, "probe-timeout", 100*time.Millisecond, "timeout of one probe")
	fl.IntVar(&f.probeWorkers, "probe-workers", 16, "probe worker goroutines")
	fl.IntVar(&f.probeQueueSize, "probe-queue-size", 4096, "probe queue capacity (a full queue drops probes)")
	fl.DurationVar(&f.upstreamTimeout, "upstream-timeout", 5*time.Second, "wait for backend response headers before answering 504")
	fl.DurationVar(&f.upstreamReadTimeout, "upstream-read-timeout", 60*time.Second,
		"bound on writing the request to a backend and, separately, on reading its whole response body (nginx proxy_send_timeout, proxy_read_timeout); a stalled body gives the client 502")
	fl.DurationVar(&f.upstreamIdleTimeout, "upstream-idle-timeout", 60*time.Second, "close keep-alive connections to backends idle this long (nginx upstream keepalive_timeout)")
	fl.DurationVar(&f.clientBodyTimeout, "client-body-timeout", 60*time.Second, "bound on reading a whole request, headers and body, before answering 408 (nginx client_header_timeout and client_body_timeout)")
	fl.DurationVar(&f.clientFirstRequestTimeout, "client-first-request-timeout", 10*time.Second,
		"close a new client connection that sends no byte of its first request within this (an idle socket holds a descriptor only this long)")
	fl.DurationVar(&f.clientIdleTimeout, "client-idle-timeout", 120*time.Second, "close a kept-alive client connection that sends no next request within this")
	fl.IntVar(&f.maxClientConns, "max-client-connections", 10000,
		"cap on open client connections; at the cap a new one closes the longest-idle one (none idle: the new one is closed); 0 = no cap")
	fl.StringVar(&f.bodyMemoryBudget, "body-memory-budget", "96Mi",
		"bound on the request and response body bytes held in memory by all requests at once; a body that would overrun it gets 503 (a quantity; at least --max-body-size)")
	fl.StringVar(&f.maxBodySize, "max-body-size", "32Mi", "largest request or response body (held in memory): a larger request gets 413, a larger response 502; a quantity such as 32Mi, 1M or 1048576")
	fl.StringSliceVar(&f.trustedProxies, "trusted-proxies", nil,
		"comma-separated CIDRs (or IPs) of proxies whose X-Forwarded-For and X-Real-IP are kept; from any other peer both are set from the peer's address")
	fl.BoolVar(&f.retry, "retry", false, "also retry idempotent requests whose exchange failed before response headers, not by a timeout (a failed connect is always retried once on another endpoint)")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 10*time.Second, "drain deadline for in-flight requests on SIGTERM")
	defDelay := time.Duration(0)
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		defDelay = 5 * time.Second
	}
	fl.DurationVar(&f.shutdownDelay, "shutdown-delay", defDelay,
		"on SIGTERM, fail readiness and keep serving new connections this long before closing the listener, while load balancers and EndpointSlices catch up (default 5s inside a cluster, else 0)")
	fl.BoolVar(&f.pprof, "pprof", false, "serve /debug/pprof/ on the admin listener")
	fl.Uint64Var(&f.seed, "seed", 0, "seed of the per-route random sources (0 = random)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig path (kube source; default $KUBECONFIG, ~/.kube/config, in-cluster)")
	fl.StringVar(&f.kubeContext, "context", "", "kubeconfig context (kube source)")
	fl.StringVar(&f.namespace, "namespace", "", "watch only this namespace (kube source; default all)")
	fl.StringVar(&f.ingressClass, "ingress-class", "prequal", "ingress class to serve (kube source)")
	return cmd
}

// testAddedDelay is set only at build time, for tests:
//
//	go build -ldflags "-X main.testAddedDelay=3ms" ./cmd/prequalbench
//
// makes an ingress that holds every request that long (ingress.Options.
// TestAddedDelay), a build with a known slowdown for checking the A/B
// report (docs/ab.md). No flag or variable of a normal build reaches it.
var testAddedDelay string

func runIngress(ctx context.Context, f *ingressFlags) error {
	bad := func(format string, args ...any) error {
		return &exitError{code: 2, err: fmt.Errorf("ingress: "+format, args...)}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return bad("--log-level %q: want debug, info, warn or error", f.logLevel)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	if _, err := loadbalancer.Canonical(f.defaultAlgorithm); err != nil {
		return bad("--default-algorithm: %v", err)
	}
	cfg := loadbalancer.DefaultConfig()
	p := &cfg.Prequal
	p.ProbesPerQuery, p.PoolSize, p.MaxAge, p.QRIF = f.probesPerQuery, f.poolSize, f.maxAge, f.qrif
	p.RemovePerQuery, p.Delta, p.IdleProbeInterval, p.MinProbes = f.removePerQ, f.delta, f.idleProbeInterval, f.minProbes
	p.LatencyMemory = f.latencyMemory
	cfg.C3.Clients = f.c3Clients
	if p.RIFWindow <= p.PoolSize {
		p.RIFWindow = 4 * p.PoolSize // keep the documented invariant RIFWindow > PoolSize
	}
	if err := cfg.Validate(); err != nil {
		return bad("--prequal-* and --c3-clients flags: %v", err)
	}
	if f.probeTimeout <= 0 || f.probeWorkers <= 0 || f.probeQueueSize <= 0 || f.upstreamTimeout <= 0 || f.shutdownTimeout <= 0 {
		return bad("--probe-timeout, --probe-workers, --probe-queue-size, --upstream-timeout and --shutdown-timeout must be > 0")
	}
	if f.upstreamReadTimeout <= 0 || f.upstreamIdleTimeout <= 0 || f.clientBodyTimeout <= 0 {
		return bad("--upstream-read-timeout, --upstream-idle-timeout and --client-body-timeout must be > 0")
	}
	if f.clientFirstRequestTimeout <= 0 || f.clientIdleTimeout <= 0 {
		return bad("--client-first-request-timeout %v and --client-idle-timeout %v must be > 0", f.clientFirstRequestTimeout, f.clientIdleTimeout)
	}
	if f.maxClientConns < 0 {
		return bad("--max-client-connections %d: must be >= 0 (0 = no cap)", f.maxClientConns)
	}
	maxConns := f.maxClientConns
	if maxConns == 0 {
		maxConns = -1 // Options: negative is no cap, zero the default
	}
	maxBody, err := parseByteSize(f.maxBodySize)
	if err != nil {
		return bad("--max-body-size %q: %v", f.maxBodySize, err)
	}
	bodyBudget, err := parseByteSize(f.bodyMemoryBudget)
	if err != nil {
		return bad("--body-memory-budget %q: %v", f.bodyMemoryBudget, err)
	}
	if bodyBudget < maxBody {
		return bad("--body-memory-budget %s is below --max-body-size %s: a body of the largest size could never be taken", f.bodyMemoryBudget, f.maxBodySize)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// Body buffers grow by doubling and the old ones are garbage until
		// the next collection: without a soft limit the heap could reach
		// twice the budget and more. The limit makes the collector keep
		// the process near the budget plus a fixed margin.
		debug.SetMemoryLimit(int64(bodyBudget) + memoryMargin)
	}
	if f.shutdownDelay < 0 {
		return bad("--shutdown-delay %v: must be >= 0", f.shutdownDelay)
	}
	trusted, err := parseTrustedProxies(f.trustedProxies)
	if err != nil {
		return bad("--trusted-proxies: %v", err)
	}

	token := ""
	if f.adminTokenFile != "" {
		data, err := os.ReadFile(f.adminTokenFile)
		if err != nil {
			return bad("--admin-token-file: %v", err)
		}
		token = strings.TrimSpace(string(data))
		if token == "" {
			return bad("--admin-token-file %s is empty", f.adminTokenFile)
		}
	}
	loop, err := ingress.IsLoopback(f.adminListen)
	if err != nil {
		return bad("--admin-listen: %v", err)
	}
	if !loop && token == "" {
		return bad("--admin-listen %s is not loopback: --admin-token-file is required", f.adminListen)
	}

	var added time.Duration
	if testAddedDelay != "" {
		if added, err = time.ParseDuration(testAddedDelay); err != nil || added < 0 {
			return bad("this build's test-only added delay %q (-ldflags -X main.testAddedDelay): want a duration such as 3ms", testAddedDelay)
		}
		logger.Warn("test build: every request is delayed on purpose", "added_delay", added)
	}
	ing, err := ingress.New(ingress.Options{
		TestAddedDelay:            added,
		DefaultAlgorithm:          f.defaultAlgorithm,
		Policy:                    cfg,
		UpstreamTimeout:           f.upstreamTimeout,
		UpstreamReadTimeout:       f.upstreamReadTimeout,
		UpstreamIdleTimeout:       f.upstreamIdleTimeout,
		ClientBodyTimeout:         f.clientBodyTimeout,
		ClientFirstRequestTimeout: f.clientFirstRequestTimeout,
		ClientIdleTimeout:         f.clientIdleTimeout,
		MaxClientConns:            maxConns,
		BodyMemoryBudget:          int64(bodyBudget),
		MaxBodySize:               maxBody,
		TrustedProxies:            trusted,
		ProbeTimeout:              f.probeTimeout,
		ProbeWorkers:              f.probeWorkers,
		ProbeQueueSize:            f.probeQueueSize,
		Retry:                     f.retry,
		Logger:                    logger,
		Seed:                      f.seed,
	})
	if err != nil {
		return bad("%v", err)
	}

	var src route.Source
	switch f.source {
	case "file":
		if f.routes == "" {
			return bad("--source file needs --routes FILE")
		}
		src = filesource.New(f.routes, logger)
	case "kube":
		src, err = kubesource.New(kubesource.Options{
			Kubeconfig: f.kubeconfig, Context: f.kubeContext, Namespace: f.namespace,
			IngressClass: f.ingressClass, Logger: logger, OnReconcile: ing.ObserveReconcile,
		})
		if err != nil {
			return err
		}
	default:
		return bad("--source %q: want kube or file", f.source)
	}

	return ingress.Serve(ctx, ing, ingress.ServeConfig{
		Source:          src,
		Listen:          f.listen,
		AdminListen:     f.adminListen,
		AdminToken:      token,
		AddrFile:        f.addrFile,
		Pprof:           f.pprof,
		ShutdownTimeout: f.shutdownTimeout,
		ShutdownDelay:   f.shutdownDelay,
	})
}

// parseTrustedProxies reads CIDRs; a bare IP stands for itself alone.
func parseTrustedProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q: want a CIDR such as 10.0.0.0/8 or an IP address", s)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// parseByteSize reads a positive byte count as a Kubernetes quantity
// ("32Mi", "1M", "1048576"), at most 1 GiB: bodies are held in memory.
// memoryMargin is the memory beyond --body-memory-budget the ingress's
// soft memory limit allows for everything else (routes, pools, buffers of
// idle connections, the runtime, garbage of grown buffers). The limit
// counts the runtime's memory only; the binary's own pages (about 45 MiB
// resident) come on top, so the default budget plus this margin (160 MiB)
// keeps the process's RSS under 256 MB under the body attacks.
const memoryMargin = 64 << 20

func parseByteSize(s string) (int, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, errors.New("want a byte count such as 32Mi, 1M or 1048576")
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 || n > 1<<30 {
		return 0, errors.New("want a whole number of bytes between 1 and 1Gi")
	}
	return int(n), nil
}
