// Package external is the campaign environment for an ingress this tool
// does not run: Envoy Gateway, Envoy, Traefik, or the project's own
// ingress started by hand. The user names where the load goes and, as
// shell hooks, how to switch the algorithm and how to reset; when the
// backends are prequalbench backends, their /stats and /reset give the
// reset verification and the selection shares. What is not given is
// recorded as such: a run without a reset hook is not reset-verified,
// and without backend addresses the report has no selection shares.
package external

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prequalbench/prequalbench/scenario"
	"sigs.k8s.io/yaml"
)

// Config is the external environment's file (--external FILE).
type Config struct {
	// Proxy is the ingress's base URL (http://host:port) for every
	// algorithm not in Proxies; the setAlgorithm hook switches it.
	Proxy string `json:"proxy,omitempty"`
	// Proxies maps an algorithm to the base URL of an ingress that runs
	// it ("one ingress per algorithm"), e.g. prequal on the project's
	// ingress beside nginx's round robin.
	Proxies map[string]string `json:"proxies,omitempty"`
	// Describe says, per algorithm, what really runs under that name
	// (e.g. "round-robin": "nginx 1.22 upstream round robin"); it goes
	// into campaign.json's topology and so into the report.
	Describe map[string]string `json:"describe,omitempty"`
	// Host overrides the Host header of every route (default: the
	// scenario route's host).
	Host string `json:"host,omitempty"`
	// SetAlgorithm is a shell command run before each run's reset, with
	// {algorithm} replaced by the algorithm (single-quoted unless the hook
	// quotes it) and PREQUALBENCH_ALGORITHM
	// and PREQUALBENCH_PROXY in its environment.
	SetAlgorithm string `json:"setAlgorithm,omitempty"`
	// Reset is a shell command that brings the ingress back to a clean
	// state (same substitutions). Without one, runs are recorded as not
	// reset-verified: the ingress kept whatever the previous run left.
	Reset string `json:"reset,omitempty"`
	// Backends are the addresses (host:port) of the backends when they
	// are prequalbench backends, in the scenario's order (route by
	// route, group by group, replica by replica). They are reset and
	// verified through POST /reset, drained through GET /stats, and their
	// served counters give the selection shares.
	Backends []string `json:"backends,omitempty"`
	// HookTimeout bounds each hook (default 60s); Settle is waited after
	// SetAlgorithm and Reset for a proxy that applies changes
	// asynchronously (a reload), default 0.
	HookTimeout string `json:"hookTimeout,omitempty"`
	Settle      string `json:"settle,omitempty"`

	// dir is the file's directory: hooks run there.
	dir         string
	hookTimeout time.Duration
	settle      time.Duration
}

// Load reads and checks a config file.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("external: %w", err)
	}
	var c Config
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return nil, fmt.Errorf("external: %s: %w", path, err)
	}
	abs, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("external: %w", err)
	}
	c.dir = abs
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("external: %s: %w", path, err)
	}
	return &c, nil
}

// check validates c and fills the parsed durations.
func (c *Config) check() error {
	var errs []error
	if c.Proxy == "" && len(c.Proxies) == 0 {
		errs = append(errs, errors.New("proxy or proxies: at least one is required"))
	}
	check := func(field, raw string) {
		if err := checkBaseURL(raw); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
		}
	}
	if c.Proxy != "" {
		check("proxy", c.Proxy)
	}
	for _, a := range sortedKeys(c.Proxies) {
		check("proxies."+a, c.Proxies[a])
	}
	for i, b := range c.Backends {
		if u, err := url.Parse("http://" + b); err != nil || u.Host != b || u.Port() == "" {
			errs = append(errs, fmt.Errorf("backends[%d]: want host:port, got %q", i, b))
		}
	}
	c.hookTimeout = time.Minute
	for _, d := range []struct {
		field, raw string
		dst        *time.Duration
	}{{"hookTimeout", c.HookTimeout, &c.hookTimeout}, {"settle", c.Settle, &c.settle}} {
		if d.raw == "" {
			continue
		}
		v, err := time.ParseDuration(d.raw)
		if err != nil || v < 0 {
			errs = append(errs, fmt.Errorf("%s: want a duration >= 0 such as 5s, got %q", d.field, d.raw))
			continue
		}
		*d.dst = v
	}
	return errors.Join(errs...)
}

// checkBaseURL accepts http(s)://host[:port] with at most a "/" path.
func checkBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return fmt.Errorf("want a base URL http://HOST:PORT, got %q", raw)
	}
	return nil
}

// CheckScenario checks c against the scenario it will run: every
// algorithm needs an ingress, and the backends must match the
// scenario's replicas one for one.
func (c *Config) CheckScenario(s *scenario.Scenario) error {
	var errs []error
	if c.Proxy == "" {
		for _, a := range s.Protocol.Algorithms {
			if _, ok := c.Proxies[a]; !ok {
				errs = append(errs, fmt.Errorf("proxies: no ingress for algorithm %s and no default proxy (have %s)", a, strings.Join(sortedKeys(c.Proxies), ", ")))
			}
		}
	}
	for _, a := range sortedKeys(c.Proxies) {
		if !slices.Contains(s.Protocol.Algorithms, a) {
			errs = append(errs, fmt.Errorf("proxies.%s: not an algorithm of the campaign (%s)", a, strings.Join(s.Protocol.Algorithms, ", ")))
		}
	}
	if s.Churn != nil {
		errs = append(errs, fmt.Errorf("scenario %s: the churn block scales backends, which the external environment does not run", s.Name))
	}
	if n := len(c.Backends); n > 0 {
		if want := replicaCount(s); n != want {
			errs = append(errs, fmt.Errorf("backends: %d addresses for the scenario's %d backend replicas (list them route by route, group by group)", n, want))
		}
	}
	return errors.Join(errs...)
}

func replicaCount(s *scenario.Scenario) int {
	n := 0
	for _, r := range s.Workload.Routes {
		for _, g := range r.Backends {
			n += g.Replicas
		}
	}
	return n
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
