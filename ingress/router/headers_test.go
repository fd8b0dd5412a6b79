package router

import (
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/ingress/route"
)

// hdrs is a request's header fields for MatchHeaders.
type hdrs map[string]string

func (h hdrs) Get(name string) (string, bool) {
	v, ok := h[strings.ToLower(name)]
	return v, ok
}

// TestRouter_Headers: at one host and path, the rule with more header
// conditions is tried first, and a request that matches none of them falls
// through to a shorter path.
func TestRouter_Headers(t *testing.T) {
	r, conflicts, errs := New(rules(
		Rule[string]{Key: "root", Path: "/", PathType: route.PathPrefix},
		Rule[string]{Key: "plain", Path: "/api", PathType: route.PathPrefix},
		Rule[string]{Key: "canary", Path: "/api", PathType: route.PathPrefix,
			Headers: []route.HeaderMatch{{Name: "X-Canary", Value: "yes"}}},
		Rule[string]{Key: "canary-eu", Path: "/api", PathType: route.PathPrefix,
			Headers: []route.HeaderMatch{{Name: "x-canary", Value: "yes"}, {Name: "X-Region", Type: route.HeaderRegularExpression, Value: "eu-.*"}}},
		Rule[string]{Key: "only-header", Path: "/h", PathType: route.PathExact,
			Headers: []route.HeaderMatch{{Name: "X-Tenant", Value: "a"}}},
	))
	if len(conflicts) != 0 || len(errs) != 0 {
		t.Fatalf("conflicts %v errs %v", conflicts, errs)
	}
	tests := []struct {
		path string
		h    hdrs
		want string
	}{
		{"/api/x", nil, "plain"},
		{"/api/x", hdrs{"x-canary": "yes"}, "canary"},
		{"/api/x", hdrs{"x-canary": "YES"}, "plain"}, // values compare exactly
		{"/api/x", hdrs{"x-canary": "yes", "x-region": "eu-west"}, "canary-eu"},
		{"/api/x", hdrs{"x-canary": "yes", "x-region": "us-eu-1"}, "canary"}, // the expression matches the whole value
		{"/h", hdrs{"x-tenant": "a"}, "only-header"},
		{"/h", hdrs{"x-tenant": "b"}, "root"}, // falls through to the shorter path
		{"/h", nil, "root"},
	}
	for _, tt := range tests {
		var h Headers
		if tt.h != nil {
			h = tt.h
		}
		got, ok := r.MatchHeaders("bench.local", tt.path, h)
		if !ok || got.Value != tt.want {
			t.Errorf("MatchHeaders(%q, %v) = %v, want %q", tt.path, tt.h, got, tt.want)
		}
	}
	if got, _ := r.Match("bench.local", "/h"); got.Value != "root" {
		t.Errorf("Match without headers takes a header rule: %q", got.Value)
	}
}

func TestRouter_HeaderErrors(t *testing.T) {
	_, _, errs := New(rules(
		Rule[string]{Key: "re", Path: "/a", Headers: []route.HeaderMatch{{Name: "X", Type: route.HeaderRegularExpression, Value: "("}}},
		Rule[string]{Key: "type", Path: "/b", Headers: []route.HeaderMatch{{Name: "X", Type: "Prefix", Value: "v"}}},
		Rule[string]{Key: "dup", Path: "/c", Headers: []route.HeaderMatch{{Name: "X", Value: "1"}, {Name: "x", Value: "2"}}},
		Rule[string]{Key: "neg", Path: "/d", Weight: -1},
	))
	if len(errs) != 4 {
		t.Fatalf("want 4 errors, got %v", errs)
	}
}

// TestRouter_WeightedSplit: rules of one origin sharing host, path and
// headers with weights form a split that hands out each rule exactly its
// weight over every window of sum-of-weights requests, interleaved.
func TestRouter_WeightedSplit(t *testing.T) {
	r, conflicts, errs := New(rules(
		Rule[string]{Key: "a", Origin: "HTTPRoute ns/r", Path: "/w", Weight: 3},
		Rule[string]{Key: "b", Origin: "HTTPRoute ns/r", Path: "/w", Weight: 1},
		Rule[string]{Key: "c", Origin: "HTTPRoute ns/r", Path: "/w", Weight: 6},
		// Another origin on the same rule conflicts and loses.
		Rule[string]{Key: "z", Origin: "HTTPRoute ns/s", Path: "/w", Weight: 1},
	))
	if len(errs) != 0 || len(conflicts) != 1 || conflicts[0].LoserKey != "z" {
		t.Fatalf("conflicts %v errs %v", conflicts, errs)
	}
	for window := 0; window < 3; window++ {
		counts := map[string]int{}
		longestRun, run, last := 0, 0, ""
		for range 10 {
			got, ok := r.Match("h", "/w/x")
			if !ok {
				t.Fatal("no match")
			}
			counts[got.Value]++
			if got.Value == last {
				run++
			} else {
				run, last = 1, got.Value
			}
			longestRun = max(longestRun, run)
		}
		if counts["a"] != 3 || counts["b"] != 1 || counts["c"] != 6 {
			t.Fatalf("window %d: counts %v, want a:3 b:1 c:6", window, counts)
		}
		if longestRun > 2 {
			t.Errorf("window %d: %d requests in a row to one rule; the split should interleave", window, longestRun)
		}
	}
}

// TestRouter_UnweightedConflict: without weights, two keys on one rule of
// one origin still conflict (Ingress behaviour).
func TestRouter_UnweightedConflict(t *testing.T) {
	_, conflicts, _ := New(rules(
		Rule[string]{Key: "a", Origin: "o", Path: "/w"},
		Rule[string]{Key: "b", Origin: "o", Path: "/w"},
	))
	if len(conflicts) != 1 {
		t.Fatalf("conflicts %v", conflicts)
	}
}

// TestRouter_HeaderPrecedence: two header condition sets of one size that
// a request both meets go by Precedence (the older HTTPRoute, the earlier
// rule), not by how their conditions sort.
func TestRouter_HeaderPrecedence(t *testing.T) {
	both := hdrs{"x-a": "1", "x-b": "1"}
	for _, tc := range []struct {
		precA, precB int
		want         string
	}{{0, 1, "a"}, {1, 0, "b"}} {
		r, _, errs := New(rules(
			Rule[string]{Key: "b", Origin: "HTTPRoute ns/b", Path: "/", PathType: route.PathPrefix, Precedence: tc.precB,
				Headers: []route.HeaderMatch{{Name: "X-B", Value: "1"}}},
			Rule[string]{Key: "a", Origin: "HTTPRoute ns/a", Path: "/", PathType: route.PathPrefix, Precedence: tc.precA,
				Headers: []route.HeaderMatch{{Name: "X-A", Value: "1"}}},
		))
		if len(errs) != 0 {
			t.Fatal(errs)
		}
		if got, ok := r.MatchHeaders("h", "/x", both); !ok || got.Value != tc.want {
			t.Errorf("precedence a=%d b=%d: matched %v, want %q", tc.precA, tc.precB, got, tc.want)
		}
	}
}

// TestRouter_AnyDepthWildcard: an AnyDepth wildcard (the Gateway API's)
// takes any number of labels, the most specific suffix first; an Ingress
// wildcard still takes one label, and neither takes the bare domain.
func TestRouter_AnyDepthWildcard(t *testing.T) {
	r, _, errs := New(rules(
		Rule[string]{Key: "deep", Host: "*.example.com", Path: "/", PathType: route.PathPrefix, AnyDepth: true},
		Rule[string]{Key: "deeper", Host: "*.b.example.com", Path: "/", PathType: route.PathPrefix, AnyDepth: true},
		Rule[string]{Key: "one", Host: "*.example.org", Path: "/", PathType: route.PathPrefix},
	))
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	for _, tc := range []struct{ host, want string }{
		{"a.example.com", "deep"},
		{"a.c.example.com", "deep"},
		{"x.y.b.example.com", "deeper"},
		{"b.example.com", "deep"},
		{"example.com", ""},
		{"a.example.org", "one"},
		{"a.b.example.org", ""},
	} {
		got, ok := r.Match(tc.host, "/")
		if tc.want == "" {
			if ok {
				t.Errorf("%s matched %q, want no match", tc.host, got.Value)
			}
			continue
		}
		if !ok || got.Value != tc.want {
			t.Errorf("%s: matched %v, want %q", tc.host, got, tc.want)
		}
	}
}
