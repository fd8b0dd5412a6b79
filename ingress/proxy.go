package ingress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prequalbench/prequalbench/ingress/metrics"
	"github.com/prequalbench/prequalbench/ingress/prober"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

// routeState is one route key: its policy, reverse proxy and counters.
type routeState struct {
	key   string
	ing   *Ingress
	proxy *httputil.ReverseProxy

	mu sync.Mutex // guards the fields below; held only around policy calls
	// Configuration, written by Update under Ingress.mu and mu.
	host, path, pathType, specAlgo string
	endpoints                      []string // replaced, never modified
	nextEndpoints                  []string // scratch for Update
	// Policy state.
	policy     loadbalancer.Policy
	algo       string
	usesProbes bool
	rng        *rand.Rand
	probeBuf   []string
	selections map[string]prometheus.Counter // by endpoint, for algo
	// reuseWarning is the last Eq. 1 warning logged for this route.
	reuseWarning string

	// Counters since the last reset, for the admin state.
	requests, noEndpoint, upstreamErrors atomic.Uint64
	inFlight                             atomic.Int64

	// Pre-resolved metric children.
	codes              [600]atomic.Pointer[prometheus.Counter]
	duration           prometheus.Observer
	upstreamErrorKinds map[string]prometheus.Counter // immutable
	fallbacks          prometheus.Counter
	probesSent         prometheus.Counter
	probeLatency       prometheus.Observer
	probeResults       map[loadbalancer.ProbeOutcome]prometheus.Counter // immutable

	// Outlier ejection, guarded by mu.
	outliers        *outliers
	ejectBuf        []ejection
	ejectionMetrics map[string]prometheus.Counter // by reason; immutable
	returnsMetric   prometheus.Counter
}

var (
	_ http.RoundTripper = (*routeState)(nil)
	_ prober.Target     = (*routeState)(nil)
)

// ServeHTTP proxies a request to an endpoint of the matching route.
func (i *Ingress) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !forwardablePath(r.URL) {
		i.metrics.RejectedPaths.Inc()
		writeText(w, http.StatusBadRequest, "400 Bad Request: the path has a dot-segment, an empty segment, a backslash or an encoded slash\n")
		return
	}
	rule, ok := i.table.Load().router.Match(r.Host, r.URL.Path)
	if !ok {
		i.metrics.NoRoute.Inc()
		writeText(w, http.StatusNotFound, fmt.Sprintf("prequalbench ingress: no route for host %q and path %q\n", r.Host, r.URL.Path))
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		b := &clientBody{ReadCloser: r.Body, ResponseWriter: w, timeout: i.opts.ClientBodyTimeout}
		r.Body, w = b, b
	}
	rule.Value.proxy.ServeHTTP(w, r)
}

func writeText(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg)
}

// rewrite prepares the outbound request; the endpoint is chosen later, in
// RoundTrip. The inbound Host header is kept. ReverseProxy has already
// removed X-Forwarded-* and Forwarded from the outbound request.
func (rs *routeState) rewrite(pr *httputil.ProxyRequest) {
	pr.Out.URL.Scheme = "http"
	peer, _, err := net.SplitHostPort(pr.In.RemoteAddr)
	if err != nil {
		peer = ""
	}
	trusted := rs.ing.trusts(peer)
	if trusted {
		// A trusted proxy's chain is extended, as edge proxies do.
		if xff, ok := pr.In.Header["X-Forwarded-For"]; ok {
			pr.Out.Header["X-Forwarded-For"] = xff
		}
	}
	pr.SetXForwarded()
	switch {
	case trusted:
		// Its X-Real-IP names the client; without one, the client is the
		// last address of the chain that is not a trusted proxy (nginx's
		// real_ip_recursive).
		if _, ok := pr.In.Header["X-Real-Ip"]; !ok {
			pr.Out.Header["X-Real-Ip"] = []string{rs.ing.clientOf(pr.In.Header.Values("X-Forwarded-For"), peer)}
		}
	case peer != "":
		// Anyone else's claims are replaced by the peer, which is exactly
		// what X-Forwarded-For holds now; the transport only reads the
		// shared slice.
		pr.Out.Header["X-Real-Ip"] = pr.Out.Header["X-Forwarded-For"]
	default:
		delete(pr.Out.Header, "X-Real-Ip")
	}
}

// clientOf walks an X-Forwarded-For chain (header lines of comma-separated
// addresses, nearest last) from a trusted peer back to the first address
// that is not a trusted proxy.
func (i *Ingress) clientOf(xff []string, peer string) string {
	client := peer
	for l := len(xff) - 1; l >= 0; l-- {
		hops := strings.Split(xff[l], ",")
		for h := len(hops) - 1; h >= 0; h-- {
			hop := strings.TrimSpace(hops[h])
			if hop == "" {
				continue
			}
			client = hop
			if !i.trusts(hop) {
				return client
			}
		}
	}
	return client
}

// trusts reports whether peer (an IP literal) is a trusted proxy.
func (i *Ingress) trusts(peer string) bool {
	if len(i.opts.TrustedProxies) == 0 {
		return false
	}
	a, err := netip.ParseAddr(peer)
	if err != nil {
		return false
	}
	a = a.WithZone("").Unmap()
	for _, p := range i.opts.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// RoundTrip picks an endpoint, sends the request over the shared transport
// and arranges for the policy to hear when the response body is done.
func (rs *routeState) RoundTrip(req *http.Request) (*http.Response, error) {
	rs.requests.Add(1)
	start := time.Now()
	pol, p, err := rs.pick(start)
	if err != nil {
		return nil, errNoEndpoints
	}
	req.URL.Host = p.Endpoint
	resp, err := rs.ing.transport.RoundTrip(req)
	if err != nil && retryable(req, err, rs.ing.opts.Retry) {
		// Tell the first endpoint's policy, then try once more elsewhere.
		now := time.Now()
		rs.attemptDone(pol, p, now.Sub(start), 0, now)
		if pol2, p2, ok := rs.pickOther(now, p.Endpoint); ok {
			r2 := *req
			u := *req.URL
			u.Host = p2.Endpoint
			r2.URL = &u
			pol, p, start = pol2, p2, now
			resp, err = rs.ing.transport.RoundTrip(&r2)
		} else {
			return nil, err
		}
	}
	if err != nil {
		now := time.Now()
		status := 0
		if req.Context().Err() != nil || isClientBodyError(err) {
			// The client gave up, stalled sending its body (the server
			// cancels the request then) or sent a body that does not parse
			// (a bad chunk size): not the endpoint's fault.
			status = 499
		}
		rs.attemptDone(pol, p, now.Sub(start), status, now)
		return nil, err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// The upgraded connection needs the raw body; count the handshake.
		now := time.Now()
		rs.attemptDone(pol, p, now.Sub(start), resp.StatusCode, now)
		rs.finish(resp.StatusCode)
		return resp, nil
	}
	resp.Body = &trackedBody{ReadCloser: resp.Body, rs: rs, pol: pol, picked: p, start: start, status: resp.StatusCode, ctx: req.Context()}
	return resp, nil
}

// pick runs the policy under the route lock, then hands the due probes to
// the prober outside it.
func (rs *routeState) pick(now time.Time) (loadbalancer.Policy, loadbalancer.Picked, error) {
	var stack [16]string
	due := stack[:0]
	rs.mu.Lock()
	pol := rs.policy
	p, err := pol.Pick(now, rs.rng)
	if err != nil {
		rs.mu.Unlock()
		return nil, p, err
	}
	sel := rs.selections[p.Endpoint]
	if rs.usesProbes {
		rs.probeBuf = pol.ProbesDue(now, rs.rng, rs.probeBuf[:0])
		due = append(due, rs.probeBuf...)
	}
	rs.mu.Unlock()
	rs.inFlight.Add(1)
	if sel != nil {
		sel.Inc()
	}
	if p.Fallback {
		rs.fallbacks.Inc()
	}
	rs.enqueue(due)
	return pol, p, nil
}

// pickOther picks among the endpoints other than avoid directly (healthy
// ones first), for a retry: asking the policy again gave least-request the
// endpoint that had just failed (its request released, it looked idle).
func (rs *routeState) pickOther(now time.Time, avoid string) (loadbalancer.Policy, loadbalancer.Picked, bool) {
	rs.mu.Lock()
	pol := rs.policy
	op, ok := pol.(loadbalancer.OtherPicker)
	var p loadbalancer.Picked
	if ok {
		p, ok = op.PickOther(now, rs.rng, avoid)
	}
	var sel prometheus.Counter
	if ok {
		sel = rs.selections[p.Endpoint]
	}
	rs.mu.Unlock()
	if !ok {
		return nil, p, false // nowhere else to go
	}
	rs.inFlight.Add(1)
	if sel != nil {
		sel.Inc()
	}
	return pol, p, true
}

// attemptDone reports one finished attempt to the policy that picked it and
// to outlier detection.
func (rs *routeState) attemptDone(pol loadbalancer.Policy, p loadbalancer.Picked, latency time.Duration, status int, now time.Time) {
	rs.mu.Lock()
	pol.Done(now, p, latency, status)
	rs.ejectBuf = rs.outliers.observe(now, p.Endpoint, status, rs.ejectBuf[:0])
	rs.applyEjectionsLocked(rs.ejectBuf, true)
	rs.mu.Unlock()
	rs.inFlight.Add(-1)
}

// tickOutliersLocked returns endpoints whose ejection time is up and runs
// a due success-rate evaluation.
func (rs *routeState) tickOutliersLocked(now time.Time) {
	rs.ejectBuf = rs.outliers.tick(now, rs.ejectBuf[:0])
	rs.applyEjectionsLocked(rs.ejectBuf, true)
}

// applyEjectionsLocked keeps ejected endpoints out of the current policy's
// picks until their time (the policy keeps their counters, so selection
// shares stay continuous) and counts ejections and returns. A return needs
// no call: the exclusion ends on its own.
// fresh marks new decisions (counted); otherwise ej re-applies standing
// ejections to a new policy.
func (rs *routeState) applyEjectionsLocked(ej []ejection, fresh bool) {
	ex, _ := rs.policy.(loadbalancer.Excluder)
	for _, e := range ej {
		if ex != nil {
			ex.Exclude(e.addr, e.until)
		}
		if fresh {
			rs.ejectionMetrics[e.reason].Inc()
			if ok, _ := rs.ing.failLog.allow(time.Now()); ok {
				rs.ing.log.Warn("endpoint ejected", "route", rs.key, "endpoint", e.addr, "reason", e.reason, "until", e.until)
			}
		}
	}
	if n := rs.outliers.newReturns; n > 0 {
		rs.returnsMetric.Add(float64(n))
		rs.outliers.newReturns = 0
	}
}

// finish counts a request's final status code.
func (rs *routeState) finish(code int) {
	if code < 100 || code >= len(rs.codes) {
		code = 0
	}
	c := rs.codes[code].Load()
	if c == nil {
		v := rs.ing.metrics.Requests.WithLabelValues(rs.key, strconv.Itoa(code))
		c = &v
		rs.codes[code].Store(c)
	}
	(*c).Inc()
}

// retryable: a request without a body (the transport has consumed and
// closed one) whose connection could not be made: nothing was sent, so any
// method is safe to send elsewhere. With wider (--retry) also an
// idempotent one whose exchange failed before response headers for any
// reason but a timeout (a 504 retried would double a long wait).
func retryable(req *http.Request, err error, wider bool) bool {
	if req.Body != nil && req.Body != http.NoBody {
		return false
	}
	if req.Context().Err() != nil {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	if !wider || isTimeout(err) {
		return false
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// Kinds of upstream failure, the kind label of prequal_upstream_errors_total.
const (
	upstreamTimeout = "timeout" // no response headers in time (504)
	upstreamFailed  = "failed"  // connection or exchange failed (502)
	upstreamBody    = "body"    // the response body broke off after the headers
)

// Bodies of the answers the ingress makes itself: generic, so that no
// endpoint address, route key or error text reaches a client. The details
// go to the (rate-limited) log and the metrics.
var statusBodies = map[int]string{
	http.StatusBadRequest:         "400 Bad Request\n",
	http.StatusRequestTimeout:     "408 Request Timeout\n",
	http.StatusBadGateway:         "502 Bad Gateway\n",
	http.StatusServiceUnavailable: "503 Service Unavailable\n",
	http.StatusGatewayTimeout:     "504 Gateway Timeout\n",
}

// errorHandler answers requests that got no response from a backend.
func (rs *routeState) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	var code int
	switch {
	case errors.Is(err, errNoEndpoints):
		rs.noEndpoint.Add(1)
		code = http.StatusServiceUnavailable
	case clientBodyTimedOut(w):
		// Checked before the context: the server cancels the request when
		// its connection's read deadline expires.
		code = http.StatusRequestTimeout
	case r.Context().Err() != nil:
		// The client went away; nobody reads an answer. 499 as nginx logs it.
		rs.finish(499)
		return
	case isClientBodyError(err):
		// A malformed body (e.g. a bad chunk size): the client's error.
		code = http.StatusBadRequest
	case isTimeout(err):
		rs.upstreamError(upstreamTimeout, err)
		code = http.StatusGatewayTimeout
	default:
		rs.upstreamError(upstreamFailed, err)
		code = http.StatusBadGateway
	}
	rs.finish(code)
	writeText(w, code, statusBodies[code])
}

// upstreamError counts a failed exchange with a backend and logs it.
func (rs *routeState) upstreamError(kind string, err error) {
	rs.upstreamErrors.Add(1)
	rs.upstreamErrorKinds[kind].Inc()
	if ok, suppressed := rs.ing.failLog.allow(time.Now()); ok {
		rs.ing.log.Warn("upstream error", "route", rs.key, "kind", kind, "err", err, "suppressed_since_last", suppressed)
	}
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// trackedBody reports the request to the policy when the proxy closes the
// response body, so latency covers the whole response. The proxy's goroutine
// does both the reads and the close.
type trackedBody struct {
	io.ReadCloser
	rs      *routeState
	pol     loadbalancer.Policy
	picked  loadbalancer.Picked
	start   time.Time
	status  int
	ctx     context.Context // the request's: done when the client went away
	readErr error           // the first read error other than io.EOF
	closed  atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.readErr == nil {
		b.readErr = err
	}
	return n, err
}

func (b *trackedBody) Close() error {
	err := b.ReadCloser.Close()
	if b.closed.CompareAndSwap(false, true) {
		now := time.Now()
		lat := now.Sub(b.start)
		code, status := b.status, b.status
		if b.readErr != nil {
			if b.ctx.Err() != nil {
				code, status = 499, 499 // the client went away mid-body
			} else {
				// The backend broke off mid-body: the client got a cut
				// response, so this is the backend's error, not a success.
				code, status = http.StatusBadGateway, 0
				b.rs.upstreamError(upstreamBody, b.readErr)
			}
		}
		b.rs.attemptDone(b.pol, b.picked, lat, status, now)
		b.rs.duration.Observe(lat.Seconds())
		b.rs.finish(code)
	}
	return err
}

// enqueue hands probes to the prober; drops are reported to the policy.
func (rs *routeState) enqueue(due []string) {
	for _, ep := range due {
		if !rs.ing.prober.Enqueue(prober.Job{Endpoint: ep, Target: rs}) {
			rs.ProbeDone(ep, prober.Result{Outcome: loadbalancer.ProbeDropped, Received: time.Now()})
		}
	}
}

// ProbeDone feeds a probe outcome to the route's current policy.
func (rs *routeState) ProbeDone(endpoint string, r prober.Result) {
	if r.Outcome != loadbalancer.ProbeDropped {
		rs.probesSent.Inc()
		rs.probeLatency.Observe(r.Duration.Seconds())
	}
	if c := rs.probeResults[r.Outcome]; c != nil {
		c.Inc()
	}
	rs.mu.Lock()
	if r.Outcome == loadbalancer.ProbeOK {
		rs.policy.ProbeResult(r.Received, endpoint, r.Reply)
	} else {
		rs.policy.ProbeFailed(r.Received, endpoint, r.Outcome)
	}
	rs.mu.Unlock()
}

// idleProbes asks the policy for probes owed without traffic.
func (rs *routeState) idleProbes(now time.Time) {
	var stack [16]string
	due := stack[:0]
	rs.mu.Lock()
	if rs.usesProbes && rs.policy != nil {
		rs.probeBuf = rs.policy.ProbesDue(now, rs.rng, rs.probeBuf[:0])
		due = append(due, rs.probeBuf...)
	}
	rs.mu.Unlock()
	rs.enqueue(due)
}

// gaugeSnapshot feeds the scrape-time gauges.
func (i *Ingress) gaugeSnapshot() metrics.Snapshot {
	t := i.table.Load()
	s := metrics.Snapshot{ProbeQueueDepth: i.prober.QueueDepth(), Routes: make([]metrics.RouteGauges, 0, len(t.routes))}
	for _, rs := range t.routes {
		rs.mu.Lock()
		st := rs.policy.Stats()
		n := len(rs.endpoints)
		rs.mu.Unlock()
		s.Routes = append(s.Routes, metrics.RouteGauges{
			Route: rs.key, PoolOccupancy: st.PoolSize, ActiveEndpoints: n, InFlight: int(rs.inFlight.Load()),
		})
	}
	return s
}
