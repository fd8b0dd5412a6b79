package filesource

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prequalbench/prequalbench/ingress/route"
)

const good = `
routes:
  - name: work
    host: bench.local
    path: /work
    pathType: Prefix
    algorithm: prequal
    endpoints: ["127.0.0.1:4001", "127.0.0.1:4002"]
  - name: any
    endpoints: []
`

func TestParse_Good(t *testing.T) {
	specs, err := Parse([]byte(good), "routes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []route.Spec{
		{Key: "work", Host: "bench.local", Path: "/work", PathType: "Prefix", Algorithm: "prequal",
			Endpoints: []string{"127.0.0.1:4001", "127.0.0.1:4002"}, Origin: "routes.yaml"},
		{Key: "any", Path: "/", PathType: "Prefix", Origin: "routes.yaml"},
	}
	if d := cmp.Diff(want, specs); d != "" {
		t.Fatalf("specs (-want +got):\n%s", d)
	}
}

func TestParse_Errors(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string // substrings of the error
	}{
		{"unknown field", "routes:\n  - name: a\n    endpoint: []\n", []string{"endpoint", "not found"}},
		{"unknown top field", "route: []\n", []string{"route"}},
		{"routes missing", "{}\n", []string{"field routes is required"}},
		{"name missing", "routes:\n  - endpoints: []\n", []string{"routes[0].name: required"}},
		{"duplicate name", "routes:\n  - {name: a, path: /a, endpoints: []}\n  - {name: a, path: /b, endpoints: []}\n",
			[]string{"routes[1].name", "unique"}},
		{"bad path", "routes:\n  - {name: a, path: a, endpoints: []}\n", []string{"routes[0].path", `must start with "/"`}},
		{"bad path type", "routes:\n  - {name: a, pathType: Regex, endpoints: []}\n", []string{"routes[0].pathType", "Exact, Prefix or ImplementationSpecific"}},
		{"bad algorithm", "routes:\n  - {name: a, algorithm: fastest, endpoints: []}\n", []string{"routes[0].algorithm", "fastest", "prequal"}},
		{"endpoints missing", "routes:\n  - {name: a}\n", []string{"routes[0].endpoints: required"}},
		{"bad endpoint", "routes:\n  - {name: a, endpoints: [\"127.0.0.1\", \"h:0\", \"x:1\", \"x:1\"]}\n",
			[]string{"routes[0].endpoints[0]", "routes[0].endpoints[1]", "1..65535", "routes[0].endpoints[3]", "twice"}},
		{"bad host", "routes:\n  - {name: a, host: \"a.b:80\", endpoints: []}\n", []string{"routes[0].host", "no port"}},
		{"bad wildcard", "routes:\n  - {name: a, host: \"a.*.com\", endpoints: []}\n", []string{"routes[0].host", "wildcard"}},
		{"duplicate rule", "routes:\n  - {name: a, path: /x, endpoints: []}\n  - {name: b, path: /x/, pathType: ImplementationSpecific, endpoints: []}\n",
			[]string{"routes[1].path", "already routed by routes[0]"}},
		{"not yaml", "routes: [", []string{"filesource: f.yaml"}},
		{"two documents", "routes: []\n---\nroutes: []\n", []string{"more than one YAML document"}},
		{"malformed second document", "routes: []\n---\nroutes: [\n", []string{"trailing garbage"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), "f.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("routes:\n  - {name: a, host: \"*.x\", endpoints: [\"[::1]:80\"]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		specs, err := Parse(data, "f")
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, s := range specs {
			if s.Key == "" || seen[s.Key] || !strings.HasPrefix(s.Path, "/") || s.PathType == "" {
				t.Fatalf("accepted invalid spec %+v", s)
			}
			seen[s.Key] = true
		}
	})
}

// recorder is a route.Sink that keeps every update.
type recorder struct {
	mu      sync.Mutex
	updates [][]route.Spec
	results []string
}

func (r *recorder) Update(specs []route.Spec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.updates = append(r.updates, specs)
}

func (r *recorder) ObserveReconcile(result string, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, result)
}

func (r *recorder) snapshot() ([][]route.Spec, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]route.Spec(nil), r.updates...), append([]string(nil), r.results...)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func writeAtomic(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestSource_Reload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "routes.yaml")
	writeAtomic(t, path, good)
	src := New(path, nil)
	src.Debounce = 10 * time.Millisecond
	reloads := make(chan error, 16)
	src.reloaded = func(err error) { reloads <- err }
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, rec) }()
	waitFor(t, "first sync", src.Synced)

	// Atomic rename-replace.
	writeAtomic(t, path, "routes:\n  - {name: only, endpoints: [\"127.0.0.1:9\"]}\n")
	waitFor(t, "reload after rename", func() bool { u, _ := rec.snapshot(); return len(u) == 2 })
	if u, _ := rec.snapshot(); len(u[1]) != 1 || u[1][0].Key != "only" {
		t.Fatalf("second update %+v", u[1])
	}

	// A bad file is rejected and the routes stay.
	if err := os.WriteFile(path, []byte("routes:\n  - {name: x, bogus: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "rejected reload", func() bool { _, r := rec.snapshot(); return len(r) > 0 && r[len(r)-1] == "error" })
	if u, _ := rec.snapshot(); len(u) != 2 {
		t.Fatalf("a bad file produced an update: %d updates", len(u))
	}

	// In-place write of a good file.
	if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "reload after write", func() bool { u, _ := rec.snapshot(); return len(u) == 3 })

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if _, r := rec.snapshot(); r[0] != "success" {
		t.Fatalf("reconcile results %v", r)
	}
}

func TestSource_BadFileAtStartIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "routes.yaml")
	writeAtomic(t, path, "routes: 3\n")
	err := New(path, nil).Run(context.Background(), &recorder{})
	if err == nil || !strings.Contains(err.Error(), "filesource:") {
		t.Fatalf("Run = %v", err)
	}
}

// configMapDir lays out a directory as the kubelet mounts a ConfigMap:
// routes.yaml -> ..data/routes.yaml, ..data -> ..<version>, and swap
// publishes a new version by renaming a fresh "..data_tmp" symlink over
// "..data" and removing the old version, never touching routes.yaml itself.
type configMapDir struct {
	t       *testing.T
	dir     string
	version string
	n       int
}

func newConfigMapDir(t *testing.T, content string) *configMapDir {
	c := &configMapDir{t: t, dir: t.TempDir()}
	c.publish(content)
	if err := os.Symlink(filepath.Join("..data", "routes.yaml"), filepath.Join(c.dir, "routes.yaml")); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *configMapDir) publish(content string) {
	c.t.Helper()
	c.n++
	version := fmt.Sprintf("..2026_12_01_00_00_%02d.%d", c.n, c.n)
	if err := os.Mkdir(filepath.Join(c.dir, version), 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, version, "routes.yaml"), []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
	tmp := filepath.Join(c.dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "..data")); err != nil {
		c.t.Fatal(err)
	}
	if c.version != "" {
		if err := os.RemoveAll(filepath.Join(c.dir, c.version)); err != nil {
			c.t.Fatal(err)
		}
	}
	c.version = version
}

func TestSource_ReloadsOnConfigMapSymlinkSwap(t *testing.T) {
	cm := newConfigMapDir(t, good)
	src := New(filepath.Join(cm.dir, "routes.yaml"), nil)
	src.Debounce = 10 * time.Millisecond
	reloads := make(chan error, 64)
	src.reloaded = func(err error) { reloads <- err }
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, rec) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	waitFor(t, "first sync", src.Synced)

	cm.publish("routes:\n  - {name: swapped, endpoints: [\"127.0.0.1:9\"]}\n")
	waitFor(t, "reload after the ..data swap", func() bool { u, _ := rec.snapshot(); return len(u) == 2 })
	if u, _ := rec.snapshot(); len(u[1]) != 1 || u[1][0].Key != "swapped" {
		t.Fatalf("update after the swap %+v", u[1])
	}

	// A change elsewhere in the directory is read but, with the same
	// content, applies nothing.
	drain(reloads)
	if err := os.WriteFile(filepath.Join(cm.dir, "unrelated"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-reloads:
		if err != nil {
			t.Fatalf("reload after an unrelated change: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reload attempt after a change in the directory")
	}
	if u, results := rec.snapshot(); len(u) != 2 || len(results) != 2 {
		t.Fatalf("unchanged content was applied again: %d updates, reconciles %v", len(u), results)
	}
}

func drain(c chan error) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}
