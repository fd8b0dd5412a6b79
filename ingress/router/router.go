// Package router matches a request's host and path to a route with the
// semantics of networking.k8s.io/v1 Ingress rules.
//
// Hosts: an exact host beats a wildcard ("*.example.com" matches exactly one
// extra DNS label), which beats the empty host (any host). A port in the
// request's Host is ignored and hosts compare case-insensitively. When no path
// of the most specific matching host matches, the next less specific host is
// tried, so an any-host catch-all still serves requests for a named host.
//
// Paths: Exact matches the whole path; Prefix (and ImplementationSpecific,
// treated as Prefix) matches element-wise on "/" boundaries, so "/api"
// matches "/api" and "/api/x" but not "/apiv2", and a trailing slash on the
// rule is ignored. The longest matching path wins; at equal length Exact
// beats Prefix.
//
// Conflicts (two rules with the same host, path and path type but different
// route keys) are resolved deterministically: the rule whose (Origin, Key)
// sorts first wins, whatever the input order. Losers are reported.
//
// A Router is immutable once built and safe for concurrent use.
package router

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/prequalbench/prequalbench/ingress/route"
)

// Rule is one host/path rule pointing at a value (the route's handle).
type Rule[T any] struct {
	Host     string
	Path     string
	PathType string
	// Key and Origin identify the rule for conflict resolution and reports.
	Key    string
	Origin string
	Value  T
}

// Conflict reports a rule that lost to another rule with the same host, path
// and path type.
type Conflict struct {
	Host, Path, PathType    string
	WinnerKey, WinnerOrigin string
	LoserKey, LoserOrigin   string
}

func (c Conflict) String() string {
	return fmt.Sprintf("router: host %q path %q (%s): route %q from %q wins over route %q from %q",
		c.Host, c.Path, c.PathType, c.WinnerKey, c.WinnerOrigin, c.LoserKey, c.LoserOrigin)
}

// Router is an immutable host/path matcher.
type Router[T any] struct {
	exact    map[string]*paths[T] // lowercase host without port
	wildcard map[string]*paths[T] // suffix including the leading dot: ".example.com"
	any      *paths[T]
}

// paths holds the rules of one host.
type paths[T any] struct {
	exact  map[string]*Rule[T] // full path
	prefix map[string]*Rule[T] // normalized prefix: no trailing slash, "/" for the root
}

// New builds a router. Invalid rules (a path not starting with "/", an
// unknown path type) are skipped and returned as errors; conflicts are
// resolved as described in the package comment and returned.
func New[T any](rules []Rule[T]) (*Router[T], []Conflict, []error) {
	sorted := make([]Rule[T], len(rules))
	copy(sorted, rules)
	// Deterministic order: the winner of a conflict is the first by
	// (Origin, Key), independent of the caller's order.
	slices.SortStableFunc(sorted, func(a, b Rule[T]) int {
		return cmp.Or(cmp.Compare(a.Origin, b.Origin), cmp.Compare(a.Key, b.Key))
	})
	r := &Router[T]{exact: map[string]*paths[T]{}, wildcard: map[string]*paths[T]{}}
	var conflicts []Conflict
	var errs []error
	for i := range sorted {
		rule := &sorted[i]
		host, err := normalizeRuleHost(rule.Host)
		if err != nil {
			errs = append(errs, fmt.Errorf("router: route %q: %w", rule.Key, err))
			continue
		}
		if !strings.HasPrefix(rule.Path, "/") {
			errs = append(errs, fmt.Errorf("router: route %q: path %q must start with \"/\"", rule.Key, rule.Path))
			continue
		}
		var ps *paths[T]
		switch {
		case host == "":
			if r.any == nil {
				r.any = newPaths[T]()
			}
			ps = r.any
		case strings.HasPrefix(host, "*."):
			ps = r.wildcard[host[1:]]
			if ps == nil {
				ps = newPaths[T]()
				r.wildcard[host[1:]] = ps
			}
		default:
			ps = r.exact[host]
			if ps == nil {
				ps = newPaths[T]()
				r.exact[host] = ps
			}
		}
		var m map[string]*Rule[T]
		var p string
		switch rule.PathType {
		case route.PathExact:
			m, p = ps.exact, rule.Path
		case route.PathPrefix, route.PathImplementationSpecific, "":
			m, p = ps.prefix, trimSlash(rule.Path)
		default:
			errs = append(errs, fmt.Errorf("router: route %q: path type %q: want %s, %s or %s",
				rule.Key, rule.PathType, route.PathExact, route.PathPrefix, route.PathImplementationSpecific))
			continue
		}
		if prev, ok := m[p]; ok {
			if prev.Key != rule.Key {
				conflicts = append(conflicts, Conflict{
					Host: rule.Host, Path: rule.Path, PathType: rule.PathType,
					WinnerKey: prev.Key, WinnerOrigin: prev.Origin,
					LoserKey: rule.Key, LoserOrigin: rule.Origin,
				})
			}
			continue
		}
		m[p] = rule
	}
	return r, conflicts, errs
}

func newPaths[T any]() *paths[T] {
	return &paths[T]{exact: map[string]*Rule[T]{}, prefix: map[string]*Rule[T]{}}
}

// normalizeRuleHost lowercases a rule's host and checks the wildcard form.
func normalizeRuleHost(h string) (string, error) {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if strings.Contains(h, "*") {
		if !strings.HasPrefix(h, "*.") || strings.Count(h, "*") != 1 || len(h) < 3 {
			return "", fmt.Errorf("host %q: a wildcard must be the whole first label, as in \"*.example.com\"", h)
		}
	}
	return h, nil
}

// trimSlash removes trailing slashes, keeping "/" for the root.
func trimSlash(p string) string {
	for len(p) > 1 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	return p
}

// Match returns the rule for a request's Host header and URL path.
func (r *Router[T]) Match(host, reqPath string) (*Rule[T], bool) {
	host = RequestHost(host)
	p := cleanPath(reqPath)
	if ps := r.exact[host]; ps != nil {
		if rule := ps.match(p); rule != nil {
			return rule, true
		}
	}
	if i := strings.IndexByte(host, '.'); i > 0 {
		if ps := r.wildcard[host[i:]]; ps != nil {
			if rule := ps.match(p); rule != nil {
				return rule, true
			}
		}
	}
	if r.any != nil {
		if rule := r.any.match(p); rule != nil {
			return rule, true
		}
	}
	return nil, false
}

// match finds the longest matching rule: an exact match has the length of the
// whole path, so it beats every prefix, and prefixes are tried from the
// longest element boundary down to the root.
func (ps *paths[T]) match(p string) *Rule[T] {
	if rule, ok := ps.exact[p]; ok {
		return rule
	}
	if len(ps.prefix) == 0 {
		return nil
	}
	c := trimSlash(p)
	for {
		if rule, ok := ps.prefix[c]; ok {
			return rule
		}
		if c == "/" {
			return nil
		}
		i := strings.LastIndexByte(c, '/')
		if i <= 0 {
			c = "/"
		} else {
			c = c[:i]
		}
	}
}

// RequestHost lowercases a Host header and strips its port and trailing dot.
// It allocates only when the host has upper-case letters.
func RequestHost(h string) string {
	if strings.HasPrefix(h, "[") {
		if i := strings.IndexByte(h, ']'); i > 0 {
			h = h[:i+1]
		}
	} else if i := strings.LastIndexByte(h, ':'); i >= 0 && strings.IndexByte(h, ':') == i {
		h = h[:i]
	}
	h = strings.TrimSuffix(h, ".")
	for i := 0; i < len(h); i++ {
		if c := h[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(h)
		}
	}
	return h
}

// cleanPath resolves "." and ".." elements and duplicate slashes so that a
// request cannot reach a route by path tricks; a trailing slash is kept
// because Exact rules distinguish it. Clean paths are returned unchanged
// without allocating.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	if !needsClean(p) {
		return p
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

func needsClean(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		rest := p[i+1:]
		if strings.HasPrefix(rest, "/") || rest == "." || rest == ".." ||
			strings.HasPrefix(rest, "./") || strings.HasPrefix(rest, "../") {
			return true
		}
	}
	return false
}
