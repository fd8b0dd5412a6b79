package router

import (
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/ingress/route"
)

func rules(rs ...Rule[string]) []Rule[string] {
	for i := range rs {
		rs[i].Value = rs[i].Key
	}
	return rs
}

func TestRouter_Match(t *testing.T) {
	r, conflicts, errs := New(rules(
		Rule[string]{Key: "api", Host: "", Path: "/api", PathType: route.PathPrefix},
		Rule[string]{Key: "api-exact", Host: "", Path: "/api", PathType: route.PathExact},
		Rule[string]{Key: "api-v1", Host: "", Path: "/api/v1/", PathType: route.PathPrefix},
		Rule[string]{Key: "root", Host: "", Path: "/", PathType: route.PathPrefix},
		Rule[string]{Key: "health", Host: "", Path: "/health", PathType: route.PathExact},
		Rule[string]{Key: "impl", Host: "", Path: "/impl", PathType: route.PathImplementationSpecific},
		Rule[string]{Key: "foo-host", Host: "Foo.Example.com", Path: "/x", PathType: route.PathPrefix},
		Rule[string]{Key: "wild", Host: "*.example.com", Path: "/", PathType: route.PathPrefix},
		Rule[string]{Key: "exact-root", Host: "only.test", Path: "/", PathType: route.PathExact},
	))
	if len(conflicts) != 0 || len(errs) != 0 {
		t.Fatalf("conflicts %v errs %v", conflicts, errs)
	}
	tests := []struct {
		host, path, want string
	}{
		{"bench.local", "/api", "api-exact"},
		{"bench.local", "/api/", "api"},
		{"bench.local", "/api/x", "api"},
		{"bench.local", "/apiv2", "root"},
		{"bench.local", "/api/v1", "api-v1"},
		{"bench.local", "/api/v1/users", "api-v1"},
		{"bench.local", "/api/v10", "api"},
		{"bench.local", "/health", "health"},
		{"bench.local", "/health/check", "root"},
		{"bench.local", "/impl/a", "impl"},
		{"bench.local", "", "root"},
		{"bench.local", "/api/../health", "health"},
		{"bench.local", "//api//x", "api"},
		{"foo.example.com", "/x/y", "foo-host"},
		{"FOO.example.com:8080", "/x", "foo-host"},
		{"foo.example.com.", "/x", "foo-host"},
		{"foo.example.com", "/y", "wild"}, // falls through to the wildcard
		{"bar.example.com", "/anything", "wild"},
		{"a.b.example.com", "/anything", "root"}, // a wildcard covers one label only
		{"example.com", "/anything", "root"},
		{"only.test", "/", "exact-root"},
		{"only.test", "/x", "root"},
		{"[::1]:8080", "/api/x", "api"},
	}
	for _, tt := range tests {
		got, ok := r.Match(tt.host, tt.path)
		if !ok {
			t.Errorf("Match(%q, %q): no match, want %q", tt.host, tt.path, tt.want)
			continue
		}
		if got.Value != tt.want {
			t.Errorf("Match(%q, %q) = %q, want %q", tt.host, tt.path, got.Value, tt.want)
		}
	}
}

func TestRouter_NoMatch(t *testing.T) {
	r, _, _ := New(rules(
		Rule[string]{Key: "a", Host: "a.test", Path: "/a", PathType: route.PathPrefix},
		Rule[string]{Key: "e", Host: "", Path: "/e", PathType: route.PathExact},
	))
	for _, c := range [][2]string{{"b.test", "/a"}, {"a.test", "/b"}, {"a.test", "/e/"}, {"x", "/"}} {
		if got, ok := r.Match(c[0], c[1]); ok {
			t.Errorf("Match(%q, %q) = %q, want no match", c[0], c[1], got.Key)
		}
	}
}

func TestRouter_ConflictIsDeterministic(t *testing.T) {
	a := Rule[string]{Key: "b-route", Origin: "ns/one", Host: "h", Path: "/p", PathType: route.PathPrefix}
	b := Rule[string]{Key: "a-route", Origin: "ns/two", Host: "h", Path: "/p/", PathType: route.PathImplementationSpecific}
	for _, order := range [][]Rule[string]{rules(a, b), rules(b, a)} {
		r, conflicts, _ := New(order)
		got, ok := r.Match("h", "/p/q")
		if !ok || got.Key != "b-route" {
			t.Fatalf("winner = %v, want b-route (origin ns/one sorts first)", got)
		}
		if len(conflicts) != 1 || conflicts[0].LoserKey != "a-route" || conflicts[0].WinnerKey != "b-route" {
			t.Fatalf("conflicts = %v", conflicts)
		}
		if !strings.Contains(conflicts[0].String(), "wins over") {
			t.Fatalf("conflict text %q", conflicts[0])
		}
	}
}

func TestRouter_SameKeyIsNotAConflict(t *testing.T) {
	_, conflicts, _ := New(rules(
		Rule[string]{Key: "k", Path: "/p", PathType: route.PathPrefix},
		Rule[string]{Key: "k", Path: "/p", PathType: route.PathPrefix},
	))
	if len(conflicts) != 0 {
		t.Fatalf("conflicts = %v", conflicts)
	}
}

func TestRouter_InvalidRules(t *testing.T) {
	_, _, errs := New(rules(
		Rule[string]{Key: "nopath", Path: "api", PathType: route.PathPrefix},
		Rule[string]{Key: "badtype", Path: "/", PathType: "Regex"},
		Rule[string]{Key: "badwild", Host: "a.*.com", Path: "/"},
	))
	if len(errs) != 3 {
		t.Fatalf("errs = %v, want 3", errs)
	}
	// Errors come in (Origin, Key) order: badtype, badwild, nopath.
	for i, want := range []string{`path type "Regex"`, "wildcard", `must start with "/"`} {
		if !strings.Contains(errs[i].Error(), want) {
			t.Errorf("errs[%d] = %v, want it to mention %s", i, errs[i], want)
		}
	}
}

func TestRequestHost(t *testing.T) {
	for in, want := range map[string]string{
		"Example.COM:80": "example.com", "example.com": "example.com", "[::1]:80": "[::1]",
		"10.0.0.1:8080": "10.0.0.1", "a.b.": "a.b", "": "",
	} {
		if got := RequestHost(in); got != want {
			t.Errorf("RequestHost(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMatch_DoesNotAllocate(t *testing.T) {
	r, _, _ := New(rules(
		Rule[string]{Key: "w", Host: "bench.local", Path: "/work", PathType: route.PathPrefix},
		Rule[string]{Key: "root", Path: "/", PathType: route.PathPrefix},
	))
	allocs := testing.AllocsPerRun(100, func() {
		if _, ok := r.Match("bench.local:8080", "/work/a/b"); !ok {
			t.Fatal("no match")
		}
	})
	if allocs != 0 {
		t.Fatalf("Match allocates %v times", allocs)
	}
}

func BenchmarkMatch(b *testing.B) {
	r, _, _ := New(rules(
		Rule[string]{Key: "w", Host: "bench.local", Path: "/work", PathType: route.PathPrefix},
		Rule[string]{Key: "x", Host: "*.local", Path: "/x", PathType: route.PathPrefix},
		Rule[string]{Key: "root", Path: "/", PathType: route.PathPrefix},
	))
	b.ReportAllocs()
	for b.Loop() {
		r.Match("bench.local:8080", "/work/a/b")
	}
}
