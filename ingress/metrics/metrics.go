// Package metrics defines the ingress's Prometheus series (all prefixed
// "prequal_") in one place, so the dataplane, the dashboards and the campaign
// scraper agree on names and labels.
//
// Counters are updated by the dataplane through pre-resolved children;
// gauges that describe current state (pool occupancy, active endpoints,
// in-flight requests, probe queue depth) are read from a snapshot function
// at scrape time, so the request path never touches them.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Label names.
const (
	LabelRoute     = "route"
	LabelCode      = "code"
	LabelEndpoint  = "endpoint"
	LabelAlgorithm = "algorithm"
	LabelOutcome   = "outcome"
	LabelResult    = "result"
	LabelKind      = "kind"
)

// Reconcile results for Reconciles.
const (
	ReconcileSuccess = "success"
	ReconcileError   = "error"
)

// RouteGauges is the current state of one route.
type RouteGauges struct {
	Route           string
	PoolOccupancy   int
	ActiveEndpoints int
	InFlight        int
}

// Snapshot is the state read at scrape time.
type Snapshot struct {
	ProbeQueueDepth int
	Routes          []RouteGauges
}

// Metrics holds every series of the ingress.
type Metrics struct {
	Requests          *prometheus.CounterVec   // route, code
	RequestDuration   *prometheus.HistogramVec // route
	Selections        *prometheus.CounterVec   // route, endpoint, algorithm
	Fallbacks         *prometheus.CounterVec   // route
	ProbesSent        *prometheus.CounterVec   // route
	ProbeResults      *prometheus.CounterVec   // route, outcome
	ProbeDuration     *prometheus.HistogramVec // route
	NoRoute           prometheus.Counter
	Reconciles        *prometheus.CounterVec // result
	ReconcileDuration prometheus.Histogram
	RouteConflicts    prometheus.Counter
	UpstreamErrors    *prometheus.CounterVec // route, kind
	ClientAborts      *prometheus.CounterVec // route
	OutlierEjections  *prometheus.CounterVec // route, reason
	OutlierReturns    *prometheus.CounterVec // route
	RejectedPaths     prometheus.Counter
	ClientErrors      *prometheus.CounterVec // code
	Panics            prometheus.Counter
	// BodyBudgetRefusals counts answers refused because their body would
	// overrun the body memory budget (requests are in ClientErrors, 503).
	BodyBudgetRefusals prometheus.Counter

	gauges gaugeCollector
}

// New creates the series and registers them on reg. snapshot is called at
// every scrape for the gauges.
func New(reg prometheus.Registerer, snapshot func() Snapshot) (*Metrics, error) {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prequal_requests_total",
			Help: "Proxied requests by route and HTTP status code sent to the client (502/503/504 included).",
		}, []string{LabelRoute, LabelCode}),
		RequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "prequal_request_duration_seconds",
			Help:    "Time from the first pick of an endpoint to the end of the response body, by route (a retried request's covers both attempts).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5 ms .. 16 s
		}, []string{LabelRoute}),
		Selections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prequal_selections_total",
			Help: "Endpoint picks by route, endpoint and algorithm (retries included).",
		}, []string{LabelRoute, LabelEndpoint, LabelAlgorithm}),
		Fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prequal_fallbacks_total",
			Help: "Picks made uniformly at random because too few usable probes were pooled.",
		}, []string{LabelRoute}),
		ProbesSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prequal_probes_sent_total",
			Help: "Probes sent to backends, by route (dropped probes are not sent).",
		}, []string{LabelRoute}),
		ProbeResults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prequal_probe_results_total",
			Help: "Probe outcomes by route: ok, timeout, status, malformed, stale, dropped.",
		}, []string{LabelRoute, LabelOutcome}),
		ProbeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "prequal_probe_duration_seconds",
			Help:    "Probe round-trip time by route, failures included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14), // 0.1 ms .. 0.8 s
		}, []string{LabelRoute}),
		NoRoute: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prequal_no_route_total",
			Help: "Requests answered 404 because no route matched.",
		}),
		Reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prequal_reconciles_total",
			Help: "Route source reconciles by result (success, error).",
		}, []string{LabelResult}),
		ReconcileDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "prequal_reconcile_duration_seconds",
			Help:    "Time a route source took to compute and apply a route set.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10), // 0.1 ms .. 26 s
		}),
		RouteConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prequal_route_conflicts_total",
			Help: "Rules dropped because another route claimed the same host, path and path type.",
		}),
		UpstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prequal_upstream_errors_total",
			Help: "Failed exchanges with backends by route and kind: timeout (no headers in time, 504), failed (connection or exchange, 502), body (the body broke off after the headers).",
		}, []string{LabelRoute, LabelKind}),
		ClientAborts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prequal_client_aborts_total",
			Help: "Requests whose client hung up while they waited for the backend, by route: the backend connection was closed, nothing was answered (counted in prequal_requests_total with code 499, as nginx logs them).",
		}, []string{LabelRoute}),
		OutlierEjections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prequal_outlier_ejections_total",
			Help: "Endpoints ejected by outlier detection, by route and reason: consecutive (failures in a row) or success_rate (an outlier across the route).",
		}, []string{LabelRoute, "reason"}),
		OutlierReturns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prequal_outlier_returns_total",
			Help: "Ejected endpoints returned to their route after their ejection time.",
		}, []string{LabelRoute}),
		RejectedPaths: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prequal_rejected_paths_total",
			Help: "Requests answered 400 because their path had a dot-segment, an empty segment, a backslash, an encoded slash or a #.",
		}),
		ClientErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prequal_client_errors_total",
			Help: "Requests the proxy could not read, by the answer they got: 400 (malformed, or without Host), 408 (stalled) or 413 (body over the limit). No route saw them.",
		}, []string{"code"}),
		Panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prequal_panics_total",
			Help: "Requests whose handling panicked, each answered 502 (the panic is logged with its stack).",
		}),
		BodyBudgetRefusals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prequal_body_budget_refusals_total",
			Help: "Backend answers not taken because their body would overrun --body-memory-budget; the client got 503 (a request body over it is in prequal_client_errors_total{code=\"503\"}).",
		}),
	}
	m.gauges = gaugeCollector{
		snapshot: snapshot,
		pool: prometheus.NewDesc("prequal_pool_occupancy",
			"Probes in the route's pool now.", []string{LabelRoute}, nil),
		active: prometheus.NewDesc("prequal_active_endpoints",
			"Endpoints of the route now.", []string{LabelRoute}, nil),
		inFlight: prometheus.NewDesc("prequal_in_flight",
			"Requests of the route being proxied now.", []string{LabelRoute}, nil),
		queue: prometheus.NewDesc("prequal_probe_queue_depth",
			"Probes waiting for a prober worker.", nil, nil),
	}
	for _, c := range []prometheus.Collector{
		m.Requests, m.RequestDuration, m.Selections, m.Fallbacks, m.ProbesSent, m.ProbeResults,
		m.ProbeDuration, m.NoRoute, m.Reconciles, m.ReconcileDuration, m.RouteConflicts, m.UpstreamErrors, m.ClientAborts, m.RejectedPaths,
		m.ClientErrors, m.Panics, m.BodyBudgetRefusals,
		m.OutlierEjections, m.OutlierReturns, &m.gauges,
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Reconcile results exist from the start so a rate() over them is
	// defined before the first failure.
	m.Reconciles.WithLabelValues(ReconcileSuccess)
	m.Reconciles.WithLabelValues(ReconcileError)
	return m, nil
}

// DeleteRoute drops every per-route series of a route that went away.
func (m *Metrics) DeleteRoute(route string) {
	l := prometheus.Labels{LabelRoute: route}
	m.Requests.DeletePartialMatch(l)
	m.RequestDuration.DeletePartialMatch(l)
	m.Selections.DeletePartialMatch(l)
	m.Fallbacks.DeletePartialMatch(l)
	m.ProbesSent.DeletePartialMatch(l)
	m.ProbeResults.DeletePartialMatch(l)
	m.ProbeDuration.DeletePartialMatch(l)
	m.UpstreamErrors.DeletePartialMatch(l)
	m.ClientAborts.DeletePartialMatch(l)
	m.OutlierEjections.DeletePartialMatch(l)
	m.OutlierReturns.DeletePartialMatch(l)
}

// DeleteEndpoint drops the selection series of an endpoint that left a route.
func (m *Metrics) DeleteEndpoint(route, endpoint string) {
	m.Selections.DeletePartialMatch(prometheus.Labels{LabelRoute: route, LabelEndpoint: endpoint})
}

type gaugeCollector struct {
	snapshot                      func() Snapshot
	pool, active, inFlight, queue *prometheus.Desc
}

var _ prometheus.Collector = (*gaugeCollector)(nil)

func (g *gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.pool
	ch <- g.active
	ch <- g.inFlight
	ch <- g.queue
}

func (g *gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	s := g.snapshot()
	ch <- prometheus.MustNewConstMetric(g.queue, prometheus.GaugeValue, float64(s.ProbeQueueDepth))
	for _, r := range s.Routes {
		ch <- prometheus.MustNewConstMetric(g.pool, prometheus.GaugeValue, float64(r.PoolOccupancy), r.Route)
		ch <- prometheus.MustNewConstMetric(g.active, prometheus.GaugeValue, float64(r.ActiveEndpoints), r.Route)
		ch <- prometheus.MustNewConstMetric(g.inFlight, prometheus.GaugeValue, float64(r.InFlight), r.Route)
	}
}
