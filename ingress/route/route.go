// Package route is the contract between route sources (the Kubernetes
// informers, the routes file) and the dataplane: a source computes the full
// set of routes and hands it to a Sink whenever anything changes.
package route

import "context"

// Path types, as in networking.k8s.io/v1.
const (
	PathExact                  = "Exact"
	PathPrefix                 = "Prefix"
	PathImplementationSpecific = "ImplementationSpecific" // matched as Prefix
)

// Spec is one host/path rule and the backend pool it sends traffic to.
type Spec struct {
	// Key names the backend pool. Several rules may share one key (one
	// Kubernetes service port behind two paths); they then share one policy
	// instance, its probe pool and its counters. The Kubernetes source uses
	// "namespace/service:port"; the file source the route's name.
	Key string `json:"key"`
	// Host is the exact host, a wildcard "*.example.com", or "" for any.
	Host string `json:"host"`
	// Path starts with "/".
	Path     string `json:"path"`
	PathType string `json:"path_type"`
	// Algorithm is the policy name; "" means the ingress's default.
	Algorithm string `json:"algorithm"`
	// Endpoints are the ready backend addresses ("ip:port").
	Endpoints []string `json:"endpoints"`
	// Origin says where the rule came from ("namespace/ingress-name",
	// "HTTPRoute namespace/name" or the routes file), for conflict reports.
	Origin string `json:"origin,omitempty"`
	// Headers must all match for the rule to apply (an HTTPRoute's header
	// matches). At one host and path, the rule with more headers is tried
	// first; a request that matches none falls through to shorter paths.
	Headers []HeaderMatch `json:"headers,omitempty"`
	// Weight, when above 0, makes rules of one Origin with the same host,
	// path, path type and headers one weighted split (an HTTPRoute rule's
	// backendRefs): each request goes to one of their pools in proportion
	// to the weights. 0 is an unsplit rule, as Ingress paths are.
	Weight int32 `json:"weight,omitempty"`
	// Status, when not 0, is the HTTP status the ingress answers for every
	// request this rule takes, forwarding nothing: 500 for an HTTPRoute
	// backendRef that cannot be resolved (or a rule left without any
	// backend), as the Gateway API asks. Endpoints are then empty.
	Status int `json:"status,omitempty"`
	// Precedence orders rules at one host and path with as many header
	// matches, lower first: the Gateway API gives the oldest HTTPRoute,
	// then the first rule in it, the request both would match. Rules of
	// equal precedence go by their header conditions, for determinism.
	Precedence int `json:"precedence,omitempty"`
	// AnyDepth makes a wildcard Host a suffix match of any number of
	// labels, as the Gateway API's hostnames are ("*.example.com" takes
	// a.b.example.com); without it a wildcard covers one label, as an
	// Ingress's does.
	AnyDepth bool `json:"any_depth,omitempty"`
}

// Header match types, as in gateway.networking.k8s.io/v1 HTTPHeaderMatch.
const (
	HeaderExact             = "Exact"
	HeaderRegularExpression = "RegularExpression" // Go RE2 syntax, matching the whole value
)

// HeaderMatch is one request header condition. Names compare
// case-insensitively; only the first field of a name is considered.
type HeaderMatch struct {
	Name  string `json:"name"`
	Type  string `json:"type,omitempty"` // default Exact
	Value string `json:"value"`
}

// Sink receives the complete route set; each call replaces the previous one.
// Implementations must be safe for concurrent use and must not keep specs
// (the slice may be reused by the source).
type Sink interface {
	Update(specs []Spec)
}

// Source produces route sets until its context ends.
type Source interface {
	// Run feeds sink until ctx is done. It returns nil on a clean stop.
	Run(ctx context.Context, sink Sink) error
	// Synced reports whether the source has delivered its first complete
	// route set (for /readyz).
	Synced() bool
}
