package ingress

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/prequalbench/prequalbench/ingress/adminapi"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

// AdminConfig configures the admin handler.
type AdminConfig struct {
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// every endpoint except /healthz and /readyz.
	Token string
	// Pprof mounts /debug/pprof/.
	Pprof bool
	// Ready backs /readyz; nil means ready once routes were received.
	Ready func() bool
}

// maxAdminBody bounds admin request bodies.
const maxAdminBody = 1 << 20

// State is a snapshot of every route's configuration and counters.
func (i *Ingress) State() adminapi.State {
	t := i.table.Load()
	s := adminapi.State{Routes: make([]adminapi.RouteState, 0, len(t.routes)), ProbeQueueDepth: i.prober.QueueDepth()}
	for _, rs := range t.routes {
		s.Routes = append(s.Routes, rs.state())
	}
	return s
}

func (rs *routeState) state() adminapi.RouteState {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.tickOutliersLocked(time.Now()) // returns due are shown as returned
	return rs.stateLocked()
}

func (rs *routeState) stateLocked() adminapi.RouteState {
	return adminapi.RouteState{
		Key: rs.key, Host: rs.host, Path: rs.path, PathType: rs.pathType, Algorithm: rs.algo,
		Requests: rs.requests.Load(), NoEndpoint: rs.noEndpoint.Load(), UpstreamErrors: rs.upstreamErrors.Load(),
		ClientAborts: rs.clientAborts.Load(),
		Policy:       rs.policy.Stats(), Outliers: rs.outliers.state(),
	}
}

// Routes lists the routes in key order.
func (i *Ingress) Routes() []adminapi.Route {
	t := i.table.Load()
	out := make([]adminapi.Route, 0, len(t.routes))
	for _, rs := range t.routes {
		rs.mu.Lock()
		out = append(out, adminapi.Route{
			Key: rs.key, Host: rs.host, Path: rs.path, PathType: rs.pathType, Algorithm: rs.algo,
			Endpoints: append([]string{}, rs.endpoints...),
		})
		rs.mu.Unlock()
	}
	return out
}

// Reset clears the pools and per-run counters of one route (key) or all
// (key ""), and returns the state of the reset routes as it was right after
// each was reset, so a caller can verify the reset. Prometheus counters are
// monotonic and are not reset.
func (i *Ingress) Reset(key string) (adminapi.State, error) {
	t := i.table.Load()
	if key != "" && t.byKey[key] == nil {
		return adminapi.State{}, fmt.Errorf("%w %q", ErrUnknownRoute, key)
	}
	now := time.Now()
	s := adminapi.State{Routes: []adminapi.RouteState{}}
	for _, rs := range t.routes {
		if key != "" && rs.key != key {
			continue
		}
		rs.mu.Lock()
		rs.policy.Reset(now) // also ends the policy's exclusions
		rs.outliers.reset()
		rs.requests.Store(0)
		rs.noEndpoint.Store(0)
		rs.upstreamErrors.Store(0)
		rs.clientAborts.Store(0)
		s.Routes = append(s.Routes, rs.stateLocked())
		rs.mu.Unlock()
	}
	s.ProbeQueueDepth = i.prober.QueueDepth()
	return s, nil
}

// Admin returns the admin API handler.
func (i *Ingress) Admin(cfg AdminConfig) http.Handler {
	ready := cfg.Ready
	if ready == nil {
		ready = i.Synced
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeAdminText(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !ready() {
			writeJSONError(w, http.StatusServiceUnavailable, "not ready: no complete route set yet, or shutting down")
			return
		}
		writeAdminText(w, http.StatusOK, "ok\n")
	})
	// Reads name endpoint addresses and route keys (and pprof the command
	// line): a rebound DNS name must not read them either. Every path but
	// the two health checks goes through localHostOnly.
	read := func(h http.HandlerFunc) http.HandlerFunc {
		return method(http.MethodGet, localHostOnly(cfg.Token != "", h))
	}
	metrics := promhttp.HandlerFor(i.reg, promhttp.HandlerOpts{Registry: i.reg})
	mux.HandleFunc("/metrics", localHostOnly(cfg.Token != "", metrics.ServeHTTP))
	mux.HandleFunc("/routes", read(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, i.Routes())
	}))
	mux.HandleFunc("/admin/state", read(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, i.State())
	}))
	// State-changing endpoints: guarded against cross-site requests.
	change := func(h http.HandlerFunc) http.HandlerFunc {
		return method(http.MethodPost, sameSiteOnly(cfg.Token != "", h))
	}
	mux.HandleFunc("/admin/algorithm", change(func(w http.ResponseWriter, r *http.Request) {
		var req adminapi.AlgorithmRequest
		if err := decodeBody(r, &req, false); err != nil {
			writeJSONError(w, http.StatusBadRequest, err.Error())
			return
		}
		if _, err := loadbalancer.Canonical(req.Algorithm); err != nil {
			writeJSONError(w, http.StatusBadRequest, "admin: algorithm: "+err.Error())
			return
		}
		if err := i.SetAlgorithm(req.Route, req.Algorithm); err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, i.State())
	}))
	mux.HandleFunc("/admin/reset", change(func(w http.ResponseWriter, r *http.Request) {
		var req adminapi.ResetRequest
		if err := decodeBody(r, &req, true); err != nil {
			writeJSONError(w, http.StatusBadRequest, err.Error())
			return
		}
		s, err := i.Reset(req.Route)
		if err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, s)
	}))
	if cfg.Pprof {
		guard := func(h http.HandlerFunc) http.HandlerFunc { return localHostOnly(cfg.Token != "", h) }
		mux.HandleFunc("/debug/pprof/", guard(pprof.Index))
		mux.HandleFunc("/debug/pprof/cmdline", guard(pprof.Cmdline))
		mux.HandleFunc("/debug/pprof/profile", guard(pprof.Profile))
		mux.HandleFunc("/debug/pprof/symbol", guard(pprof.Symbol))
		mux.HandleFunc("/debug/pprof/trace", guard(pprof.Trace))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSONError(w, http.StatusNotFound, fmt.Sprintf("admin: no endpoint %s %s", r.Method, r.URL.Path))
	})
	if cfg.Token == "" {
		return mux
	}
	want := []byte("Bearer " + cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && r.URL.Path != "/readyz" &&
			subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="prequalbench-admin"`)
			writeJSONError(w, http.StatusUnauthorized, "admin: missing or wrong bearer token")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func method(m string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != m {
			w.Header().Set("Allow", m)
			writeJSONError(w, http.StatusMethodNotAllowed, fmt.Sprintf("admin: %s wants %s, got %s", r.URL.Path, m, r.Method))
			return
		}
		h(w, r)
	}
}

// sameSiteOnly refuses state-changing requests that a web page in a local
// browser could send. A cross-site form or fetch without a CORS preflight
// can only send text/plain, form or multipart bodies, so application/json is
// required. A page of a rebound DNS name (evil.example resolving to
// 127.0.0.1) can send JSON to its own origin, but its Host header names that
// origin, so without a token the Host must be loopback ("localhost") or an
// IP literal. A valid bearer token (checked before) proves a real client and
// lifts the Host rule.
func sameSiteOnly(tokenChecked bool, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || ct != "application/json" {
			writeJSONError(w, http.StatusUnsupportedMediaType,
				fmt.Sprintf("admin: %s needs Content-Type: application/json, got %q", r.URL.Path, r.Header.Get("Content-Type")))
			return
		}
		localHostOnly(tokenChecked, h)(w, r)
	}
}

// localHostOnly refuses, without a token, a Host that is not "localhost" or
// an IP literal: the name a DNS-rebinding page would send (see sameSiteOnly).
func localHostOnly(tokenChecked bool, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !tokenChecked && !localHost(r.Host) {
			writeJSONError(w, http.StatusForbidden,
				fmt.Sprintf("admin: Host %q refused: without a token, the admin API needs a loopback or IP-literal Host", r.Host))
			return
		}
		h(w, r)
	}
}

// localHost reports whether a Host header names no DNS name a web page
// could own: "localhost" or an IP literal, with or without a port.
func localHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	_, err := netip.ParseAddr(host)
	return err == nil
}

// decodeBody decodes one JSON object, rejecting unknown fields. An empty
// body is allowed only when optional.
func decodeBody(r *http.Request, v any, optional bool) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxAdminBody+1))
	if err != nil {
		return fmt.Errorf("admin: reading body: %v", err)
	}
	if len(body) > maxAdminBody {
		return fmt.Errorf("admin: body larger than %d bytes", maxAdminBody)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		if optional {
			return nil
		}
		return errors.New("admin: empty body, want a JSON object")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("admin: bad JSON body: %v", err)
	}
	if dec.More() {
		return errors.New("admin: bad JSON body: trailing data after the object")
	}
	return nil
}

func writeAdminError(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrUnknownRoute) {
		writeJSONError(w, http.StatusNotFound, "admin: "+err.Error())
		return
	}
	writeJSONError(w, http.StatusBadRequest, "admin: "+err.Error())
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeJSONError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, adminapi.Error{Error: msg})
}

func writeAdminText(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg)
}
