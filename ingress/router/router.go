// Package router matches a request's host and path to a route with the
// semantics of networking.k8s.io/v1 Ingress rules.
//
// Hosts: an exact host beats a wildcard ("*.example.com" matches exactly one
// extra DNS label; with AnyDepth, an HTTPRoute's, any number of them, the
// longest suffix first), which beats the empty host (any host). A port in the
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
// Headers (an HTTPRoute's header matches): several rules may share a host,
// path and path type when their header conditions differ; the one with more
// conditions is tried first (at equal counts, the lower Precedence), and a
// request that matches none of them falls through to shorter paths and less
// specific hosts.
//
// Weighted splits: rules with Weight above 0 that share Origin, host, path,
// path type and headers form one split; Match hands out their rules in
// proportion to the weights, interleaved, exactly over every window of
// sum-of-weights requests.
//
// Conflicts (two rules with the same host, path, path type and headers but
// different route keys, not one split) are resolved deterministically: the
// rule whose (Origin, Key) sorts first wins, whatever the input order.
// Losers are reported.
//
// A Router is immutable once built and safe for concurrent use.
package router

import (
	"cmp"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"

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
	// Headers must all match; Weight > 0 joins a weighted split (see the
	// package comment).
	Headers []route.HeaderMatch
	Weight  int32
	// Precedence breaks ties between header condition sets of equal size
	// at one host and path: lower is tried first (route.Spec.Precedence).
	Precedence int
	// AnyDepth: a wildcard Host matches any number of labels in place of
	// its "*" (route.Spec.AnyDepth), not one.
	AnyDepth bool
	Value    T
}

// Headers gives a request's header values by name (case-insensitive),
// the first field of that name.
type Headers interface {
	Get(name string) (string, bool)
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
	deep     map[string]*paths[T] // the same, for AnyDepth wildcards
	any      *paths[T]
}

// paths holds the rules of one host.
type paths[T any] struct {
	exact  map[string]*slot[T] // full path
	prefix map[string]*slot[T] // normalized prefix: no trailing slash, "/" for the root
}

// slot holds the rules of one host and path: one group per distinct header
// condition set, the group with most conditions first.
type slot[T any] struct {
	groups []*group[T]
}

// group is the rules of one slot with one header condition set: a single
// rule, or a weighted split.
type group[T any] struct {
	headerKey  string
	precedence int // the lowest of its rules'
	headers    []headerCond
	rules      []*Rule[T]
	cum        []uint64 // cumulative weights of rules, for a split
	next       atomic.Uint64
}

type headerCond struct {
	name  string
	value string
	re    *regexp.Regexp // nil for Exact
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
	r := &Router[T]{exact: map[string]*paths[T]{}, wildcard: map[string]*paths[T]{}, deep: map[string]*paths[T]{}}
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
			wm := r.wildcard
			if rule.AnyDepth {
				wm = r.deep
			}
			ps = wm[host[1:]]
			if ps == nil {
				ps = newPaths[T]()
				wm[host[1:]] = ps
			}
		default:
			ps = r.exact[host]
			if ps == nil {
				ps = newPaths[T]()
				r.exact[host] = ps
			}
		}
		var m map[string]*slot[T]
		var p string
		switch rule.PathType {
		case route.PathExact:
			m, p = ps.exact, rule.Path
		case route.PathPrefix, route.PathImplementationSpecific, "":
			m, p = ps.prefix, trimSlash(collapseSlashes(rule.Path))
		default:
			errs = append(errs, fmt.Errorf("router: route %q: path type %q: want %s, %s or %s",
				rule.Key, rule.PathType, route.PathExact, route.PathPrefix, route.PathImplementationSpecific))
			continue
		}
		conds, hkey, err := compileHeaders(rule.Headers)
		if err != nil {
			errs = append(errs, fmt.Errorf("router: route %q: %w", rule.Key, err))
			continue
		}
		if rule.Weight < 0 {
			errs = append(errs, fmt.Errorf("router: route %q: weight %d must not be negative", rule.Key, rule.Weight))
			continue
		}
		sl := m[p]
		if sl == nil {
			sl = &slot[T]{}
			m[p] = sl
		}
		var g *group[T]
		for _, x := range sl.groups {
			if x.headerKey == hkey {
				g = x
				break
			}
		}
		if g == nil {
			sl.groups = append(sl.groups, &group[T]{headerKey: hkey, headers: conds, rules: []*Rule[T]{rule},
				precedence: rule.Precedence})
			continue
		}
		prev := g.rules[0]
		if rule.Weight > 0 && prev.Weight > 0 && prev.Origin == rule.Origin &&
			!slices.ContainsFunc(g.rules, func(x *Rule[T]) bool { return x.Key == rule.Key }) {
			g.rules = append(g.rules, rule)
			g.precedence = min(g.precedence, rule.Precedence)
			continue
		}
		if !slices.ContainsFunc(g.rules, func(x *Rule[T]) bool { return x.Key == rule.Key }) {
			conflicts = append(conflicts, Conflict{
				Host: rule.Host, Path: rule.Path, PathType: rule.PathType,
				WinnerKey: prev.Key, WinnerOrigin: prev.Origin,
				LoserKey: rule.Key, LoserOrigin: rule.Origin,
			})
		}
	}
	r.finish()
	return r, conflicts, errs
}

// finish orders each slot's groups (most header conditions first, then
// by precedence, then by header key for determinism) and sums the weights of splits.
func (r *Router[T]) finish() {
	each := func(ps *paths[T]) {
		for _, m := range []map[string]*slot[T]{ps.exact, ps.prefix} {
			for _, sl := range m {
				slices.SortStableFunc(sl.groups, func(a, b *group[T]) int {
					return cmp.Or(cmp.Compare(len(b.headers), len(a.headers)), cmp.Compare(a.precedence, b.precedence),
						cmp.Compare(a.headerKey, b.headerKey))
				})
				for _, g := range sl.groups {
					if len(g.rules) > 1 {
						var sum uint64
						for _, rule := range g.rules {
							sum += uint64(rule.Weight)
							g.cum = append(g.cum, sum)
						}
					}
				}
			}
		}
	}
	if r.any != nil {
		each(r.any)
	}
	for _, ps := range r.exact {
		each(ps)
	}
	for _, ps := range r.wildcard {
		each(ps)
	}
	for _, ps := range r.deep {
		each(ps)
	}
}

// CheckHeaders reports what New would refuse in a rule's header matches
// (an empty or repeated name, an unknown type, a regular expression that
// does not compile), so a source can say so before serving the rule.
func CheckHeaders(hs []route.HeaderMatch) error {
	_, _, err := compileHeaders(hs)
	return err
}

// compileHeaders checks a rule's header conditions and returns them with a
// canonical key (sorted, names lower-cased) that identifies the set.
func compileHeaders(hs []route.HeaderMatch) ([]headerCond, string, error) {
	if len(hs) == 0 {
		return nil, "", nil
	}
	conds := make([]headerCond, 0, len(hs))
	seen := map[string]bool{}
	for _, h := range hs {
		name := strings.ToLower(h.Name)
		if name == "" || strings.ContainsAny(name, " \t:") {
			return nil, "", fmt.Errorf("header name %q: want a field name", h.Name)
		}
		if seen[name] {
			return nil, "", fmt.Errorf("header %q is matched twice", h.Name)
		}
		seen[name] = true
		c := headerCond{name: name, value: h.Value}
		switch h.Type {
		case route.HeaderExact, "":
		case route.HeaderRegularExpression:
			re, err := regexp.Compile("^(?:" + h.Value + ")$")
			if err != nil {
				return nil, "", fmt.Errorf("header %q: regular expression: %w", h.Name, err)
			}
			c.re = re
		default:
			return nil, "", fmt.Errorf("header %q: match type %q: want %s or %s", h.Name, h.Type, route.HeaderExact, route.HeaderRegularExpression)
		}
		conds = append(conds, c)
	}
	slices.SortFunc(conds, func(a, b headerCond) int { return cmp.Compare(a.name, b.name) })
	var key strings.Builder
	for _, c := range conds {
		kind := "="
		if c.re != nil {
			kind = "~"
		}
		fmt.Fprintf(&key, "%q%s%q;", c.name, kind, c.value)
	}
	return conds, key.String(), nil
}

func newPaths[T any]() *paths[T] {
	return &paths[T]{exact: map[string]*slot[T]{}, prefix: map[string]*slot[T]{}}
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
// collapseSlashes drops a prefix path's empty elements ("//ab/" is
// "/ab/"): requests are matched on their cleaned path, whose elements are
// never empty, so a rule's empty element could match nothing.
func collapseSlashes(p string) string {
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	return p
}

func trimSlash(p string) string {
	for len(p) > 1 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	return p
}

// Match returns the rule for a request's Host header and URL path; rules
// with header conditions never match.
func (r *Router[T]) Match(host, reqPath string) (*Rule[T], bool) {
	return r.MatchHeaders(host, reqPath, nil)
}

// MatchHeaders returns the rule for a request's Host header, URL path and
// header fields (nil: none). For a weighted split it returns the rule whose
// turn it is.
func (r *Router[T]) MatchHeaders(host, reqPath string, hdr Headers) (*Rule[T], bool) {
	host = RequestHost(host)
	p := cleanPath(reqPath)
	if ps := r.exact[host]; ps != nil {
		if rule := ps.match(p, hdr); rule != nil {
			return rule, true
		}
	}
	if i := strings.IndexByte(host, '.'); i > 0 {
		if ps := r.wildcard[host[i:]]; ps != nil {
			if rule := ps.match(p, hdr); rule != nil {
				return rule, true
			}
		}
		// AnyDepth wildcards, the longest (most specific) suffix first.
		for j := i; len(r.deep) > 0 && j >= 0 && j < len(host)-1; {
			if ps := r.deep[host[j:]]; ps != nil {
				if rule := ps.match(p, hdr); rule != nil {
					return rule, true
				}
			}
			k := strings.IndexByte(host[j+1:], '.')
			if k < 0 {
				break
			}
			j += 1 + k
		}
	}
	if r.any != nil {
		if rule := r.any.match(p, hdr); rule != nil {
			return rule, true
		}
	}
	return nil, false
}

// pick returns the slot's first group whose headers match, and the rule
// of it whose turn it is.
func (sl *slot[T]) pick(hdr Headers) *Rule[T] {
	for _, g := range sl.groups {
		if !g.matches(hdr) {
			continue
		}
		if g.cum == nil {
			return g.rules[0]
		}
		total := g.cum[len(g.cum)-1]
		if total == 0 {
			return g.rules[0]
		}
		// A deterministic interleave: request n takes the rule whose
		// cumulative-weight interval holds n*stride mod total, where the
		// stride is coprime with the total, so every window of total
		// requests gives each rule exactly its weight.
		n := (g.next.Add(1) - 1) % total
		x := (n * stride(total)) % total
		i, _ := slices.BinarySearch(g.cum, x+1)
		return g.rules[i]
	}
	return nil
}

// stride is a step through 0..total-1 that visits every value once per
// total steps (coprime with total) and spreads consecutive requests over
// the rules rather than sending a run of them to one.
func stride(total uint64) uint64 {
	s := total/2 + 1
	for gcd(s, total) != 1 {
		s++
	}
	return s
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func (g *group[T]) matches(hdr Headers) bool {
	if len(g.headers) == 0 {
		return true
	}
	if hdr == nil {
		return false
	}
	for _, c := range g.headers {
		v, ok := hdr.Get(c.name)
		if !ok {
			return false
		}
		if c.re != nil {
			if !c.re.MatchString(v) {
				return false
			}
		} else if v != c.value {
			return false
		}
	}
	return true
}

// match finds the longest matching rule: an exact match has the length of the
// whole path, so it beats every prefix, and prefixes are tried from the
// longest element boundary down to the root.
func (ps *paths[T]) match(p string, hdr Headers) *Rule[T] {
	if sl, ok := ps.exact[p]; ok {
		if rule := sl.pick(hdr); rule != nil {
			return rule
		}
	}
	if len(ps.prefix) == 0 {
		return nil
	}
	c := trimSlash(p)
	for {
		if sl, ok := ps.prefix[c]; ok {
			if rule := sl.pick(hdr); rule != nil {
				return rule
			}
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
