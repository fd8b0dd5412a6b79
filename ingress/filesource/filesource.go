// Package filesource is the route source for local runs: a YAML file of
// routes with their endpoint addresses, validated strictly and reloaded when
// its content changes, however it was replaced: written in place, renamed
// over, or swapped behind a symlink as Kubernetes does with a mounted
// ConfigMap. A bad file keeps the previous routes; the error is logged and
// counted.
//
// Format:
//
//	routes:
//	  - name: work            # route key (pool identity); required, unique
//	    host: bench.local     # optional; "" = any host; "*.example.com" wildcard
//	    path: /work           # default "/"
//	    pathType: Prefix      # Exact | Prefix | ImplementationSpecific; default Prefix
//	    algorithm: prequal    # optional; default: the ingress's default
//	    endpoints: ["127.0.0.1:4001", "127.0.0.1:4002"]
//
// Routes may also be Gateway API HTTPRoutes, as applied to a cluster,
// mapped onto the route model by the Kubernetes source's own code
// (kubesource.TranslateHTTPRoutes), with the Services their backendRefs
// name listed by endpoint:
//
//	services:
//	  - name: work            # a backendRef's name
//	    port: 8080            # and port
//	    endpoints: ["127.0.0.1:4001"]
//	httpRoutes:
//	  - apiVersion: gateway.networking.k8s.io/v1
//	    kind: HTTPRoute
//	    metadata: {name: work}
//	    spec:
//	      rules: [{backendRefs: [{name: work, port: 8080}]}]
//
// The HTTPRoutes attach to an implicit Gateway of one HTTP listener
// admitting every namespace (their parentRefs are not read); a route
// without a namespace is in "default". What a cluster would report as a
// status condition that is not True rejects the file. A service's route
// key is its name.
package filesource

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/prequalbench/prequalbench/ingress/kubesource"
	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

// file is the document; yaml.v3's KnownFields rejects unknown fields.
type file struct {
	Routes     *[]fileRoute     `yaml:"routes"`
	Services   []fileService    `yaml:"services"`
	HTTPRoutes []map[string]any `yaml:"httpRoutes"`
}

type fileService struct {
	Name      string   `yaml:"name"`
	Port      int32    `yaml:"port"`
	Endpoints []string `yaml:"endpoints"`
}

type fileRoute struct {
	Name      string    `yaml:"name"`
	Host      string    `yaml:"host"`
	Path      string    `yaml:"path"`
	PathType  string    `yaml:"pathType"`
	Algorithm string    `yaml:"algorithm"`
	Endpoints *[]string `yaml:"endpoints"`
}

// Parse decodes and validates a routes file. origin names the file in the
// specs (route.Spec.Origin). Every problem is reported, each naming the
// route and field.
func Parse(data []byte, origin string) ([]route.Spec, error) {
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("filesource: %s: %v", origin, err)
	}
	var extra file
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("filesource: %s: more than one YAML document, or trailing garbage", origin)
	}
	if f.Routes == nil && f.HTTPRoutes == nil {
		return nil, fmt.Errorf("filesource: %s: field routes is required (a list, may be empty), or httpRoutes", origin)
	}
	if f.Routes == nil {
		f.Routes = &[]fileRoute{}
	}
	var errs []error
	bad := func(i int, field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("filesource: %s: routes[%d].%s: %s", origin, i, field, fmt.Sprintf(format, args...)))
	}
	names := map[string]int{}
	rules := map[string]int{}
	specs := make([]route.Spec, 0, len(*f.Routes))
	for i, r := range *f.Routes {
		if r.Name == "" {
			bad(i, "name", "required")
		} else if strings.ContainsAny(r.Name, " \t\r\n") {
			bad(i, "name", "%q must not contain whitespace", r.Name)
		} else if j, dup := names[r.Name]; dup {
			bad(i, "name", "%q is also the name of routes[%d]; names must be unique", r.Name, j)
		} else {
			names[r.Name] = i
		}
		if err := checkHost(r.Host); err != nil {
			bad(i, "host", "%v", err)
		}
		if r.Path == "" {
			r.Path = "/"
		}
		if !strings.HasPrefix(r.Path, "/") || strings.ContainsAny(r.Path, " \t\r\n?#") {
			bad(i, "path", "%q must start with \"/\" and have no whitespace, query or fragment", r.Path)
		}
		switch r.PathType {
		case "":
			r.PathType = route.PathPrefix
		case route.PathExact, route.PathPrefix, route.PathImplementationSpecific:
		default:
			bad(i, "pathType", "%q: want %s, %s or %s", r.PathType, route.PathExact, route.PathPrefix, route.PathImplementationSpecific)
		}
		if r.Algorithm != "" {
			if _, err := loadbalancer.Canonical(r.Algorithm); err != nil {
				bad(i, "algorithm", "%v", err)
			}
		}
		if r.Endpoints == nil {
			bad(i, "endpoints", "required (a list of \"ip:port\", may be empty)")
		}
		var eps []string
		if r.Endpoints != nil {
			seen := map[string]bool{}
			for j, ep := range *r.Endpoints {
				if err := checkEndpoint(ep); err != nil {
					bad(i, fmt.Sprintf("endpoints[%d]", j), "%v", err)
				} else if seen[ep] {
					bad(i, fmt.Sprintf("endpoints[%d]", j), "%q is listed twice", ep)
				}
				seen[ep] = true
				eps = append(eps, ep)
			}
		}
		ruleKey := strings.ToLower(r.Host) + " " + strings.TrimRight(r.Path, "/") + " " + normType(r.PathType)
		if j, dup := rules[ruleKey]; dup {
			bad(i, "path", "host %q path %q (%s) is already routed by routes[%d]", r.Host, r.Path, r.PathType, j)
		} else {
			rules[ruleKey] = i
		}
		specs = append(specs, route.Spec{
			Key: r.Name, Host: r.Host, Path: r.Path, PathType: r.PathType,
			Algorithm: r.Algorithm, Endpoints: eps, Origin: origin,
		})
	}
	gwSpecs, err := parseHTTPRoutes(f, origin)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return append(specs, gwSpecs...), nil
}

// parseHTTPRoutes checks the services and translates the httpRoutes.
func parseHTTPRoutes(f file, origin string) ([]route.Spec, error) {
	if len(f.Services) > 0 && f.HTTPRoutes == nil {
		return nil, fmt.Errorf("filesource: %s: services: only httpRoutes' backendRefs use them, and there are no httpRoutes", origin)
	}
	var errs []error
	type svcPort struct {
		name string
		port int32
	}
	svcs := map[svcPort][]string{}
	for i, sv := range f.Services {
		bad := func(field, format string, args ...any) {
			errs = append(errs, fmt.Errorf("filesource: %s: services[%d].%s: %s", origin, i, field, fmt.Sprintf(format, args...)))
		}
		if sv.Name == "" {
			bad("name", "required")
		}
		if sv.Port < 1 || sv.Port > 65535 {
			bad("port", "%d: want 1..65535", sv.Port)
		}
		if _, dup := svcs[svcPort{sv.Name, sv.Port}]; dup {
			bad("name", "%q port %d is listed twice", sv.Name, sv.Port)
		}
		for j, ep := range sv.Endpoints {
			if err := checkEndpoint(ep); err != nil {
				bad(fmt.Sprintf("endpoints[%d]", j), "%v", err)
			}
		}
		svcs[svcPort{sv.Name, sv.Port}] = append([]string{}, sv.Endpoints...)
	}
	objs := make([]*unstructured.Unstructured, 0, len(f.HTTPRoutes))
	for i, m := range f.HTTPRoutes {
		// Through JSON, so numbers are the int64 and float64 the
		// Kubernetes decoders expect.
		raw, err := json.Marshal(m)
		var obj map[string]any
		if err == nil {
			err = utiljson.Unmarshal(raw, &obj)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("filesource: %s: httpRoutes[%d]: %v", origin, i, err))
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: obj})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	specs, err := kubesource.TranslateHTTPRoutes(objs, func(_, name string, port int32) (string, []string, bool) {
		eps, ok := svcs[svcPort{name, port}]
		return name, eps, ok
	})
	if err != nil {
		return nil, fmt.Errorf("filesource: %s: %w", origin, err)
	}
	for i := range specs {
		specs[i].Origin = origin + " " + specs[i].Origin
	}
	return specs, nil
}

func normType(t string) string {
	if t == route.PathExact {
		return t
	}
	return route.PathPrefix
}

// checkHost accepts "", a DNS name, or "*." followed by a DNS name.
func checkHost(h string) error {
	if h == "" {
		return nil
	}
	name := strings.TrimPrefix(h, "*.")
	if strings.Contains(name, "*") {
		return fmt.Errorf("%q: a wildcard must be the whole first label, as in \"*.example.com\"", h)
	}
	if len(name) > 253 {
		return fmt.Errorf("%q: longer than 253 characters", h)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("%q: want a DNS name such as bench.local (labels of 1 to 63 characters), no port", h)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("%q: character %q not allowed, want letters, digits, '-' and '.', no port", h, c)
			}
		}
	}
	return nil
}

// checkEndpoint accepts "host:port" with a port in 1..65535.
func checkEndpoint(ep string) error {
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		return fmt.Errorf("%q: want \"ip:port\": %v", ep, err)
	}
	if host == "" {
		return fmt.Errorf("%q: host is empty, want \"ip:port\"", ep)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port %q must be a number in 1..65535", ep, port)
	}
	return nil
}

// Load reads and parses a routes file.
func Load(path string) ([]route.Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("filesource: %w", err)
	}
	return Parse(data, path)
}

// ReconcileObserver is implemented by sinks that count reconciles (the
// ingress does).
type ReconcileObserver interface {
	ObserveReconcile(result string, d time.Duration)
}

// Source watches a routes file.
type Source struct {
	path   string
	log    *slog.Logger
	synced atomic.Bool
	// Debounce groups the events of one save; default 50ms.
	Debounce time.Duration
	// reloaded is signalled after every reload attempt (tests).
	reloaded func(err error)
}

var _ route.Source = (*Source)(nil)

// New returns a source for the routes file at path.
func New(path string, logger *slog.Logger) *Source {
	if logger == nil {
		logger = slog.Default()
	}
	return &Source{path: path, log: logger, Debounce: 50 * time.Millisecond}
}

// Synced reports whether the first route set was delivered.
func (s *Source) Synced() bool { return s.synced.Load() }

// Run loads the file, hands it to sink, then reloads on every change until
// ctx ends. A file that cannot be loaded at start is an error; later bad
// versions are logged and the previous routes stay.
func (s *Source) Run(ctx context.Context, sink route.Sink) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("filesource: %w", err)
	}
	defer w.Close()
	// Watch the directory: editors and atomic writers replace the file by
	// rename, which a watch on the file itself would lose. Any event there
	// triggers a (debounced) read, and only changed content is applied: a
	// ConfigMap update swaps the "..data" symlink that the file points
	// through and never touches the file's own name.
	dir := filepath.Dir(s.path)
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("filesource: watching %s: %w", dir, err)
	}
	last, err := s.reload(sink, nil)
	if err != nil {
		return err
	}
	s.synced.Store(true)
	var timer *time.Timer
	var fire <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-w.Events:
			if !ok {
				return nil
			}
			if timer == nil {
				timer = time.NewTimer(s.Debounce)
			} else {
				timer.Reset(s.Debounce)
			}
			fire = timer.C
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			s.log.Error("routes file watch error", "path", s.path, "err", err)
		case <-fire:
			fire = nil
			data, err := s.reload(sink, last)
			if err != nil {
				s.log.Error("routes file rejected; keeping the previous routes", "path", s.path, "err", err)
			} else {
				last = data
			}
			if s.reloaded != nil {
				s.reloaded(err)
			}
		}
	}
}

// reload reads the file and, if it parses and differs from last, hands it
// to sink. It returns the bytes now in effect.
func (s *Source) reload(sink route.Sink, last []byte) ([]byte, error) {
	start := time.Now()
	obs, _ := sink.(ReconcileObserver)
	data, err := os.ReadFile(s.path)
	if err != nil {
		err = fmt.Errorf("filesource: %w", err)
	} else if last != nil && bytes.Equal(data, last) {
		return last, nil
	}
	var specs []route.Spec
	if err == nil {
		specs, err = Parse(data, s.path)
	}
	if err != nil {
		if obs != nil {
			obs.ObserveReconcile("error", time.Since(start))
		}
		return last, err
	}
	sink.Update(specs)
	if obs != nil {
		obs.ObserveReconcile("success", time.Since(start))
	}
	s.log.Info("routes loaded", "path", s.path, "routes", len(specs))
	return data, nil
}
