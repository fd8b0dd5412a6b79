// Package adminapi is the wire contract of the ingress's admin API: the JSON
// types of /routes, /admin/state, /admin/algorithm and /admin/reset, and a
// small client the campaign runner uses to drive and verify the ingress.
package adminapi

import (
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

// State is the answer of GET /admin/state and POST /admin/reset.
type State struct {
	// Routes in a stable order (by route key).
	Routes []RouteState `json:"routes"`
	// ProbeQueueDepth is the number of probes waiting for a worker.
	ProbeQueueDepth int `json:"probe_queue_depth"`
}

// RouteState is one route's configuration and counters.
type RouteState struct {
	// Key identifies the route: for the file source the route's name, for
	// the Kubernetes source "namespace/service:port".
	Key       string `json:"key"`
	Host      string `json:"host"`
	Path      string `json:"path"`
	PathType  string `json:"path_type"`
	Algorithm string `json:"algorithm"`
	// Requests counts requests routed here since the last reset.
	Requests uint64 `json:"requests"`
	// NoEndpoint counts 503 answers for lack of endpoints since the last reset.
	NoEndpoint uint64 `json:"no_endpoint"`
	// UpstreamErrors counts 502 and 504 answers since the last reset.
	UpstreamErrors uint64 `json:"upstream_errors"`
	// ClientAborts counts requests whose client hung up before the answer
	// (499, not an upstream error) since the last reset; left out at 0, so
	// states of runs without any read as before.
	ClientAborts uint64 `json:"client_aborts,omitempty"`
	// Policy holds the policy's counters (picks per endpoint, fallbacks,
	// probe outcomes, pool size).
	Policy loadbalancer.Stats `json:"policy"`
	// Outliers is the route's outlier ejection state.
	Outliers OutlierState `json:"outliers"`
}

// OutlierState is a route's outlier ejection: the endpoints ejected now
// and the counters since the last reset.
type OutlierState struct {
	// Ejected lists the endpoints ejected now, in the route's order.
	Ejected []EjectedEndpoint `json:"ejected"`
	// Ejections counts ejections by reason: "consecutive" (failures in a
	// row) and "success_rate" (an outlier across the route).
	Ejections map[string]uint64 `json:"ejections"`
	// Returns counts ejected endpoints returned after their time.
	Returns uint64 `json:"returns"`
}

// EjectedEndpoint is one ejected endpoint.
type EjectedEndpoint struct {
	Address string    `json:"address"`
	Reason  string    `json:"reason"`
	Until   time.Time `json:"until"`
	// Streak is its ejections in a row; each doubles the time.
	Streak int `json:"streak"`
}

// Route is one entry of GET /routes.
type Route struct {
	Key       string   `json:"key"`
	Host      string   `json:"host"`
	Path      string   `json:"path"`
	PathType  string   `json:"path_type"`
	Algorithm string   `json:"algorithm"`
	Endpoints []string `json:"endpoints"`
}

// AlgorithmRequest is the body of POST /admin/algorithm. An empty Route means
// every route.
type AlgorithmRequest struct {
	Route     string `json:"route,omitempty"`
	Algorithm string `json:"algorithm"`
}

// ResetRequest is the body of POST /admin/reset (optional). An empty Route
// means every route.
type ResetRequest struct {
	Route string `json:"route,omitempty"`
}

// Error is the JSON body of every 4xx/5xx answer of the admin API.
type Error struct {
	Error string `json:"error"`
}
