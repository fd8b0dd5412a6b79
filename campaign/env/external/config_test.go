package external

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/scenario"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "external.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The shipped example loads and fits its scenario; bad files name the
// field at fault.
func TestLoad(t *testing.T) {
	c, err := Load(filepath.Join("..", "..", "..", "examples", "external", "nginx", "external.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := scenario.Lookup(filepath.Join("..", "..", "..", "examples", "external", "nginx", "scenario.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckScenario(s); err != nil {
		t.Errorf("the example does not fit its scenario: %v", err)
	}
	for body, want := range map[string]string{
		"reset: x\n":                                     "proxy or proxies",
		"proxy: tcp://a:80\n":                            "base URL",
		"proxy: http://a:1/x\n":                          "base URL",
		"proxy: http://a:1\nbackends: [nohost]\n":        "backends[0]",
		"proxy: http://a:1\nsettle: soon\n":              "settle",
		"proxy: http://a:1\nunknownField: 1\n":           "unknownField",
		"proxies: {prequal: 'http://a:1', x: 'ftp://b'}": "proxies.x",
	} {
		if _, err := Load(write(t, body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one naming %s", body, err, want)
		}
	}
}

// The Envoy example (not run here: no Envoy) loads and fits the nginx
// scenario with its two algorithms.
func TestEnvoyExampleConfig(t *testing.T) {
	c, err := Load(filepath.Join("..", "..", "..", "examples", "external", "envoy", "external.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := scenario.Lookup(filepath.Join("..", "..", "..", "examples", "external", "nginx", "scenario.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s.Protocol.Algorithms = []string{"round-robin", "least-request"}
	if err := c.CheckScenario(s); err != nil {
		t.Error(err)
	}
	if c.Reset != "" || c.SetAlgorithm != "" {
		t.Error("the Envoy example has hooks")
	}
}

// Without a default proxy every algorithm needs its own; the backends
// must match the replicas one for one.
func TestCheckScenario(t *testing.T) {
	s, err := scenario.Lookup(filepath.Join("..", "..", "..", "examples", "external", "nginx", "scenario.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(write(t, "proxies: {prequal: 'http://a:1'}\nbackends: ['a:1']\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = c.CheckScenario(s)
	for _, want := range []string{"no ingress for algorithm round-robin", "1 addresses for the scenario's 3"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}
