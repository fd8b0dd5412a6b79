package router

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/ingress/route"
)

var (
	fuzzHosts     = []string{"", "a.test", "*.test", "b.a.test", "*.a.test", "A.Test"}
	fuzzSegments  = []string{"a", "b", "ab", "a.b", ""}
	fuzzPathTypes = []string{route.PathExact, route.PathPrefix, route.PathImplementationSpecific}
)

// fuzzRules turns bytes into a small rule set: 3 bytes per rule choose the
// host, the path (segments) and the path type.
func fuzzRules(data []byte) []Rule[string] {
	var out []Rule[string]
	for i := 0; i+2 < len(data) && len(out) < 12; i += 3 {
		h, p, k := data[i], data[i+1], data[i+2]
		var sb strings.Builder
		n := int(p % 4)
		for j := 0; j < n; j++ {
			sb.WriteString("/")
			sb.WriteString(fuzzSegments[int(p>>(2+j))%len(fuzzSegments)])
		}
		pth := sb.String()
		if pth == "" || k&0x10 != 0 {
			pth += "/"
		}
		key := fmt.Sprintf("k%d", k%5)
		out = append(out, Rule[string]{
			Host: fuzzHosts[int(h)%len(fuzzHosts)], Path: pth,
			PathType: fuzzPathTypes[int(k>>5)%len(fuzzPathTypes)],
			Key:      key, Origin: fmt.Sprintf("o%d", h%3), Value: key,
		})
	}
	return out
}

// reference is a slow, obviously correct matcher: scan every rule.
func reference(rs []Rule[string], host, reqPath string) (string, bool) {
	host = RequestHost(host)
	p := "/" + strings.TrimPrefix(reqPath, "/")
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	sorted := slices.Clone(rs)
	slices.SortStableFunc(sorted, func(a, b Rule[string]) int {
		return cmp.Or(cmp.Compare(a.Origin, b.Origin), cmp.Compare(a.Key, b.Key))
	})
	level := func(ruleHost string) int {
		rh := strings.ToLower(ruleHost)
		switch {
		case rh == "":
			return 2
		case strings.HasPrefix(rh, "*."):
			first, rest, ok := strings.Cut(host, ".")
			if ok && first != "" && rest == rh[2:] {
				return 1
			}
			return -1
		case rh == host:
			return 0
		}
		return -1
	}
	segs := func(s string) []string {
		var out []string
		for _, x := range strings.Split(s, "/") {
			if x != "" {
				out = append(out, x)
			}
		}
		return out
	}
	for lv := 0; lv <= 2; lv++ {
		best, bestLen, bestExact := "", -1, false
		for _, r := range sorted {
			if level(r.Host) != lv {
				continue
			}
			var n int
			exact := r.PathType == route.PathExact
			if exact {
				if r.Path != c {
					continue
				}
				n = len(r.Path)
			} else {
				rs, ps := segs(r.Path), segs(c)
				if len(rs) > len(ps) || !slices.Equal(rs, ps[:len(rs)]) {
					continue
				}
				n = len("/" + strings.Join(rs, "/"))
			}
			if n > bestLen || (n == bestLen && exact && !bestExact) {
				best, bestLen, bestExact = r.Key, n, exact
			}
		}
		if bestLen >= 0 {
			return best, true
		}
	}
	return "", false
}

func FuzzRouter(f *testing.F) {
	f.Add([]byte{0, 1, 0x20, 1, 5, 0x41}, "a.test", "/a/b")
	f.Add([]byte{2, 0, 0, 3, 9, 0x33, 4, 2, 0x12}, "x.a.test:80", "/a/../b/")
	f.Add([]byte{5, 3, 7}, "A.TEST.", "//a//ab")
	f.Fuzz(func(t *testing.T, data []byte, host, reqPath string) {
		rs := fuzzRules(data)
		r, _, errs := New(rs)
		if len(errs) != 0 {
			t.Fatalf("generated rules rejected: %v", errs)
		}
		got, ok := r.Match(host, reqPath)
		want, wantOK := reference(rs, host, reqPath)
		if ok != wantOK || (ok && got.Key != want) {
			gotKey := ""
			if ok {
				gotKey = got.Key
			}
			t.Fatalf("Match(%q, %q) = %q,%v; reference %q,%v; rules %+v", host, reqPath, gotKey, ok, want, wantOK, rs)
		}
	})
}
