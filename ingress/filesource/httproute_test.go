package filesource

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/ingress/router"
)

const httpRoutesFile = `
services:
  - {name: fast, port: 8080, endpoints: ["127.0.0.1:4001", "127.0.0.1:4002"]}
  - {name: slow, port: 8080, endpoints: ["127.0.0.1:4003"]}
httpRoutes:
  - apiVersion: gateway.networking.k8s.io/v1
    kind: HTTPRoute
    metadata:
      name: work
      annotations: {prequalbench.dev/load-balance: rr}
    spec:
      hostnames: [bench.local]
      rules:
        - matches: [{path: {type: PathPrefix, value: /work}}]
          backendRefs:
            - {name: fast, port: 8080, weight: 9}
            - {name: slow, port: 8080, weight: 1}
        - matches: [{path: {value: /work}, headers: [{name: x-pin, value: slow}]}]
          backendRefs: [{name: slow, port: 8080}]
`

// TestParse_HTTPRoutes: HTTPRoutes in the routes file map onto the same
// route model as from a cluster: weights, header matches, the policy
// annotation, route keys named after the Services.
func TestParse_HTTPRoutes(t *testing.T) {
	specs, err := Parse([]byte(httpRoutesFile), "routes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	origin := "routes.yaml HTTPRoute default/work"
	want := []route.Spec{
		{Key: "fast", Host: "bench.local", Path: "/work", PathType: route.PathPrefix, Algorithm: "round-robin",
			Endpoints: []string{"127.0.0.1:4001", "127.0.0.1:4002"}, Origin: origin, Weight: 9},
		{Key: "slow", Host: "bench.local", Path: "/work", PathType: route.PathPrefix, Algorithm: "round-robin",
			Endpoints: []string{"127.0.0.1:4003"}, Origin: origin, Weight: 1},
		{Key: "slow", Host: "bench.local", Path: "/work", PathType: route.PathPrefix, Algorithm: "round-robin",
			Endpoints: []string{"127.0.0.1:4003"}, Origin: origin, Weight: 1, Precedence: 1,
			Headers: []route.HeaderMatch{{Name: "x-pin", Type: route.HeaderExact, Value: "slow"}}},
	}
	if d := cmp.Diff(want, specs); d != "" {
		t.Fatalf("specs (-want +got):\n%s", d)
	}
}

// TestParse_HTTPRouteHeaderNamesFold: of header matches whose names differ
// only in case the first counts, as the Gateway API says, rather than the
// router refusing the rule the route's status calls Accepted.
func TestParse_HTTPRouteHeaderNamesFold(t *testing.T) {
	specs, err := Parse([]byte(`
services: [{name: a, port: 80, endpoints: ["127.0.0.1:4001"]}]
httpRoutes:
  - apiVersion: gateway.networking.k8s.io/v1
    kind: HTTPRoute
    metadata: {name: r}
    spec:
      rules:
        - matches: [{headers: [{name: X-Env, value: canary}, {name: x-env, value: prod}]}]
          backendRefs: [{name: a, port: 80}]
`), "routes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []route.HeaderMatch{{Name: "X-Env", Type: route.HeaderExact, Value: "canary"}}
	if len(specs) != 1 || !cmp.Equal(specs[0].Headers, want) {
		t.Fatalf("specs %+v, want one with headers %+v", specs, want)
	}
}

// TestParse_HTTPRouteHeaderPrecedence: a request that meets the header
// matches of two HTTPRoutes at one path goes to the older route, as the
// Gateway API orders them, whatever their names or header names.
func TestParse_HTTPRouteHeaderPrecedence(t *testing.T) {
	specs, err := Parse([]byte(`
services:
  - {name: old, port: 80, endpoints: ["127.0.0.1:4001"]}
  - {name: new, port: 80, endpoints: ["127.0.0.1:4002"]}
httpRoutes:
  - apiVersion: gateway.networking.k8s.io/v1
    kind: HTTPRoute
    metadata: {name: a-new, creationTimestamp: "2026-02-01T00:00:00Z"}
    spec:
      rules:
        - matches: [{path: {value: /api}, headers: [{name: x-a, value: "1"}]}]
          backendRefs: [{name: new, port: 80}]
  - apiVersion: gateway.networking.k8s.io/v1
    kind: HTTPRoute
    metadata: {name: z-old, creationTimestamp: "2026-01-01T00:00:00Z"}
    spec:
      rules:
        - matches: [{path: {value: /api}, headers: [{name: x-z, value: "1"}]}]
          backendRefs: [{name: old, port: 80}]
`), "routes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules []router.Rule[string]
	for _, s := range specs {
		rules = append(rules, router.Rule[string]{Host: s.Host, Path: s.Path, PathType: s.PathType, Key: s.Key,
			Origin: s.Origin, Headers: s.Headers, Weight: s.Weight, Precedence: s.Precedence, Value: s.Key})
	}
	r, _, errs := router.New(rules)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got, ok := r.MatchHeaders("h", "/api", headers{"x-a": "1", "x-z": "1"})
	if !ok || got.Value != "old" {
		t.Fatalf("both header matches met: matched %v, want the older route's backend \"old\" (specs %+v)", got, specs)
	}
}

// TestParse_HTTPRouteWildcardHostname: an HTTPRoute's "*.example.com"
// takes hosts of any depth under it, as the Gateway API's hostnames do.
func TestParse_HTTPRouteWildcardHostname(t *testing.T) {
	specs, err := Parse([]byte(`
services: [{name: a, port: 80, endpoints: ["127.0.0.1:4001"]}]
httpRoutes:
  - apiVersion: gateway.networking.k8s.io/v1
    kind: HTTPRoute
    metadata: {name: r}
    spec:
      hostnames: ["*.example.com"]
      rules: [{backendRefs: [{name: a, port: 80}]}]
`), "routes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules []router.Rule[string]
	for _, s := range specs {
		rules = append(rules, router.Rule[string]{Host: s.Host, Path: s.Path, PathType: s.PathType, Key: s.Key,
			Origin: s.Origin, Weight: s.Weight, AnyDepth: s.AnyDepth, Value: s.Key})
	}
	r, _, errs := router.New(rules)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got, ok := r.Match("a.b.example.com", "/"); !ok || got.Value != "a" {
		t.Fatalf("a.b.example.com: matched %v, want route a (specs %+v)", got, specs)
	}
}

type headers map[string]string

func (h headers) Get(name string) (string, bool) { v, ok := h[strings.ToLower(name)]; return v, ok }

// TestParse_HTTPRoutesErrors: what a cluster would report as a status
// condition that is not True rejects the file, naming the route.
func TestParse_HTTPRoutesErrors(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"missing service", `
httpRoutes:
  - {apiVersion: gateway.networking.k8s.io/v1, kind: HTTPRoute, metadata: {name: r},
     spec: {rules: [{backendRefs: [{name: nope, port: 80}]}]}}`, "HTTPRoute default/r: ResolvedRefs False (BackendNotFound)"},
		{"filter", `
services: [{name: a, port: 80, endpoints: []}]
httpRoutes:
  - {apiVersion: gateway.networking.k8s.io/v1, kind: HTTPRoute, metadata: {name: r},
     spec: {rules: [{filters: [{type: RequestHeaderModifier}], backendRefs: [{name: a, port: 80}]}]}}`, "Accepted False (UnsupportedValue): spec.rules[0].filters"},
		{"regular expression", `
services: [{name: a, port: 80, endpoints: []}]
httpRoutes:
  - {apiVersion: gateway.networking.k8s.io/v1, kind: HTTPRoute, metadata: {name: r},
     spec: {rules: [{matches: [{headers: [{type: RegularExpression, name: x-v, value: "v(1"}]}], backendRefs: [{name: a, port: 80}]}]}}`,
			"Accepted False (UnsupportedValue): spec.rules[0].matches[0].headers: header \"x-v\": regular expression"},
		{"kind", `
httpRoutes:
  - {apiVersion: networking.k8s.io/v1, kind: Ingress, metadata: {name: r}}`, `httpRoutes[0]: apiVersion "networking.k8s.io/v1" kind "Ingress"`},
		{"bad service", `
services: [{name: a, port: 0, endpoints: ["x"]}]
httpRoutes: []`, "services[0].port"},
		{"services alone", `
routes: []
services: [{name: a, port: 80, endpoints: []}]`, "there are no httpRoutes"},
	} {
		_, err := Parse([]byte(tc.doc), "routes.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
