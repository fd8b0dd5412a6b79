package ingress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prequalbench/prequalbench/ingress/internal/h1"
	"github.com/prequalbench/prequalbench/ingress/internal/hangup"
	"github.com/prequalbench/prequalbench/ingress/metrics"
	"github.com/prequalbench/prequalbench/ingress/prober"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

// routeState is one route key: its policy and counters.
type routeState struct {
	key string
	ing *Ingress

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

	// fixedStatus, when not 0, is answered to every request instead of
	// forwarding it (route.Spec.Status); written by Update.
	fixedStatus atomic.Int32

	// Counters since the last reset, for the admin state.
	requests, noEndpoint, upstreamErrors, clientAborts atomic.Uint64
	inFlight                                           atomic.Int64

	// Pre-resolved metric children.
	codes              [600]atomic.Pointer[prometheus.Counter]
	duration           prometheus.Observer
	upstreamErrorKinds map[string]prometheus.Counter // immutable
	clientAbortsMetric prometheus.Counter
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

var _ prober.Target = (*routeState)(nil)

// serve is the data plane's request handler: it checks the path, finds the
// route and forwards the request to an endpoint the route's policy picks.
// The request and its body are in memory (the server reads them before
// calling), and so is the answer: it is read whole from the backend, then
// written to the client after serve returns.
func (i *Ingress) serve(x *h1.Exchange) {
	defer func() {
		if v := recover(); v != nil { // before a route's forward, which recovers its own
			i.panicked(x, "", v)
		}
	}()
	req := &x.Req
	path, ok := requestPath(req)
	if ok {
		path, ok = forwardablePath(path)
	}
	if !ok {
		i.metrics.RejectedPaths.Inc()
		writeText(x, http.StatusBadRequest, "400 Bad Request: the path has a dot-segment, an empty segment, a backslash, an encoded slash or a #\n")
		return
	}
	host := bytesString(req.Host)
	if host == "" {
		// Only HTTP/1.0 may leave it out (the server answers 400 to
		// HTTP/1.1 without it), and a backend must get one: the client's
		// fault, before any endpoint is picked (and blamed).
		i.metrics.ClientErrors.WithLabelValues("400").Inc()
		writeText(x, http.StatusBadRequest, statusBodies[http.StatusBadRequest])
		return
	}
	rule, ok := i.table.Load().router.MatchHeaders(host, path, (*fieldHeaders)(&req.Fields))
	if !ok {
		i.metrics.NoRoute.Inc()
		writeText(x, http.StatusNotFound, fmt.Sprintf("prequalbench ingress: no route for host %q and path %q\n", host, path))
		return
	}
	rule.Value.forward(x)
}

// bytesString views b as a string without copying; the string must not
// outlive the request.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// requestPath returns the raw path of the request target. An absolute-form
// target (a client that thinks it talks to a forward proxy) is rewritten to
// origin form, with its authority as the Host (RFC 9112 §3.2.2); one with
// userinfo (http://user@host/) is refused, as RFC 9110 §4.2.4 asks, so no
// "user@host" reaches the router or the backend as a Host.
func requestPath(req *h1.Request) (string, bool) {
	uri := req.Target
	if len(uri) == 0 {
		return "", false
	}
	if uri[0] != '/' {
		const scheme = "http://"
		if len(uri) < len(scheme) || !strings.EqualFold(string(uri[:len(scheme)]), scheme) {
			return "", false
		}
		rest := uri[len(scheme):]
		end := bytes.IndexAny(rest, "/?")
		if end < 0 {
			end = len(rest)
		}
		authority := rest[:end]
		if len(authority) == 0 || !h1.ValidHost(authority) { // userinfo's @ is not valid
			return "", false
		}
		target := rest[end:]
		if len(target) == 0 || target[0] != '/' { // http://h and http://h?q have the path /
			target = append([]byte{'/'}, target...)
		}
		req.SetHost(authority)
		req.Target = target
		uri = req.Target
	}
	if q := bytes.IndexByte(uri, '?'); q >= 0 {
		uri = uri[:q]
	}
	return bytesString(uri), true
}

// forward sends the request to a picked endpoint, once more to another
// endpoint when the first could not take it, and reports how it went to the
// policy, outlier detection and the metrics.
func (rs *routeState) forward(x *h1.Exchange) {
	rs.requests.Add(1)
	if code := rs.fixedStatus.Load(); code != 0 {
		rs.answer(x, int(code))
		return
	}
	req, resp := &x.Req, &x.Resp
	var (
		pol   loadbalancer.Policy
		p     loadbalancer.Picked
		start time.Time
		open  bool // p was picked and is not reported finished yet
	)
	// A handler's panic would end the whole ingress: it is recovered. The
	// attempt in flight, if any, is reported finished (status 0) once, and
	// the client gets 502.
	defer func() {
		if v := recover(); v != nil {
			if open {
				open = false
				now := time.Now()
				rs.attemptDone(pol, p, now.Sub(start), 0, now)
			}
			rs.finish(http.StatusBadGateway)
			rs.ing.panicked(x, rs.key, v)
		}
	}()
	x.Out = rs.ing.appendUpstreamRequest(x.Out[:0], x)
	client, _ := x.Client.(*hangup.Conn) // nil: not watched
	if client != nil && client.Gone() {
		// Gone before an endpoint was picked (a client that half-closed
		// after sending): no policy is told of an attempt that never
		// reached a backend, whose near-zero latency would read as fast.
		rs.clientLeft(x)
		return
	}
	start = time.Now()
	first := start // the request's duration runs from here, retries included
	pol, p, err := rs.pick(start)
	if err != nil {
		rs.noEndpoint.Add(1)
		rs.answer(x, http.StatusServiceUnavailable)
		return
	}
	open = true
	now, err := rs.ing.upstreams.do(p.Endpoint, x, client, start)
	if err != nil && retryable(req, err, rs.ing.opts.Retry) {
		// Tell the first endpoint's policy, then try once more elsewhere.
		open = false
		rs.attemptDone(pol, p, now.Sub(start), 0, now)
		if client != nil && client.Gone() {
			rs.clientLeft(x) // no second pick for a client that left
			return
		}
		pol2, p2, ok := rs.pickOther(now, p.Endpoint)
		if !ok {
			rs.failed(x, err) // nowhere else to go
			return
		}
		pol, p, start, open = pol2, p2, now, true
		now, err = rs.ing.upstreams.do(p.Endpoint, x, client, now)
	}
	lat := now.Sub(start)
	open = false // reported below, once, even if the report panics
	if errors.Is(err, errClientGone) {
		rs.abandoned(x, pol, p, lat, now)
		return
	}
	if err != nil {
		rs.attemptDone(pol, p, lat, 0, now)
		rs.failed(x, err)
		return
	}
	code := resp.Code
	rs.attemptDoneFeedback(pol, p, lat, code, now, resp) // the policy hears of its attempt's latency
	rs.duration.Observe(now.Sub(first).Seconds())
	rs.finish(code)
}

// retryable: an attempt that may go to another endpoint. A failed dial sent
// nothing, so any request may (the body is in memory). With wider
// (--retry) also an idempotent request whose connection broke before the
// response headers (closed, reset): not a timeout (a 504 retried would
// double a long wait), nor an answer that came and was refused.
func retryable(req *h1.Request, err error, wider bool) bool {
	var ue *upstreamError
	if !errors.As(err, &ue) {
		return false
	}
	if ue.phase == phaseDial {
		return true
	}
	return wider && ue.phase < phaseBody && connectionFailure(err) && idempotent(req)
}

// connectionFailure: the connection broke (closed, reset), as opposed to a
// timeout or an answer that came and was refused (malformed, a 101): only
// such a failure is worth another endpoint's try.
func connectionFailure(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED)
}

// failed answers a request whose exchange with the backends failed.
func (rs *routeState) failed(x *h1.Exchange, err error) {
	var ue *upstreamError
	errors.As(err, &ue)
	code := http.StatusBadGateway
	switch {
	case errors.Is(err, h1.ErrBodyBudget):
		// The ingress is short of memory for bodies, not the backend at
		// fault: 503, not counted against the endpoint.
		rs.ing.metrics.BodyBudgetRefusals.Inc()
		code = http.StatusServiceUnavailable
	case ue != nil && ue.phase == phaseBody:
		// The backend broke off (or stalled, or overflowed the size limit)
		// mid-body: the client gets a clean 502, never a cut answer.
		rs.upstreamError(upstreamBody, err)
	case isTimeout(err):
		rs.upstreamError(upstreamTimeout, err)
		code = http.StatusGatewayTimeout
	default:
		rs.upstreamError(upstreamFailed, err)
	}
	rs.answer(x, code)
}

// statusClientGone is nginx's 499 for a client that closed its connection
// before the answer: the code counted and reported to the policy, never
// sent.
const statusClientGone = 499

// abandoned ends a request whose client hung up while it waited for the
// backend (whose connection was closed, so the backend drops it): the
// policy hears of a 499, as in sim, which its error accounting and outlier
// detection do not count against the endpoint; the metrics count it as the
// client's, not as an upstream error; the client connection is closed
// without an answer.
func (rs *routeState) abandoned(x *h1.Exchange, pol loadbalancer.Policy, p loadbalancer.Picked, lat time.Duration, now time.Time) {
	rs.attemptDone(pol, p, lat, statusClientGone, now)
	rs.clientLeft(x)
}

// clientLeft counts a request whose client hung up as the client's (499)
// and closes the client connection without an answer.
func (rs *routeState) clientLeft(x *h1.Exchange) {
	rs.clientAborts.Add(1)
	rs.clientAbortsMetric.Inc()
	rs.finish(statusClientGone)
	_ = x.Client.Close()
}

// answer counts and writes a generic answer the ingress makes itself.
func (rs *routeState) answer(x *h1.Exchange, code int) {
	rs.finish(code)
	writeText(x, code, statusBodies[code])
}

// panicked answers 502 for a request whose handling panicked, counts it
// and logs it with its stack (rate-limited as the upstream errors are).
func (i *Ingress) panicked(x *h1.Exchange, route string, v any) {
	i.metrics.Panics.Inc()
	if ok, suppressed := i.panicLog.allow(time.Now()); ok {
		i.log.Error("panic on the request path; answered 502", "route", route, "method", string(x.Req.Method),
			"path", string(x.Req.Target), "panic", fmt.Sprint(v), "stack", string(debug.Stack()),
			"suppressed_since_last", suppressed)
	}
	writeText(x, http.StatusBadGateway, statusBodies[http.StatusBadGateway])
}

// writeText makes the answer a plain-text one of the ingress's own.
func writeText(x *h1.Exchange, code int, msg string) { x.Resp.Text(code, msg) }

// appendUpstreamRequest appends the request as it goes to a backend: the
// method and target as received, HTTP/1.1 (an HTTP/1.0 client's request
// too, so the backend connection is kept alive), the client's fields but
// the hop-by-hop ones (RFC 9110 §7.6.1, Upgrade among them: the data plane
// does not switch protocols, as nginx without upgrade settings), Expect
// (the body is read already), the forwarding claims the ingress replaces
// and the framing, then X-Forwarded-For and X-Real-IP naming the peer,
// X-Forwarded-Host and -Proto, and a Content-Length when the request frames
// a body. The Host field and the target pass unchanged, and so does every
// other field, byte for byte and in order (Cookie lines among them). The
// body follows; a small one is appended here.
func (i *Ingress) appendUpstreamRequest(dst []byte, x *h1.Exchange) []byte {
	req := &x.Req
	dst = append(dst, req.Method...)
	dst = append(dst, ' ')
	dst = append(dst, req.Target...)
	dst = append(dst, " HTTP/1.1\r\n"...)
	peer := x.Remote.Addr().Unmap()
	trusted := i.trustsAddr(peer)
	hasRealIP := false
	for k := range req.Fields {
		f := &req.Fields[k]
		if f.Hop {
			continue
		}
		switch f.Kind {
		case h1.KindContentLength, h1.KindTransferEncoding, h1.KindExpect,
			h1.KindForwarded, h1.KindXForwardedHost, h1.KindXForwardedProto, h1.KindXForwardedFor:
			continue
		case h1.KindXRealIP:
			// A trusted proxy's X-Real-IP names the client.
			if !trusted || len(f.Value) == 0 {
				continue
			}
			hasRealIP = true
		}
		dst = h1.AppendField(dst, f.Name, f.Value)
	}
	var scratch [64]byte
	switch {
	case trusted:
		// A trusted proxy's chain is extended, as edge proxies do; without
		// its X-Real-IP the client is the last address of the chain that
		// is not a trusted proxy (nginx's real_ip_recursive).
		var lines []string
		for k := range req.Fields {
			if f := &req.Fields[k]; f.Kind == h1.KindXForwardedFor && !f.Hop {
				lines = append(lines, string(f.Value))
			}
		}
		if !hasRealIP {
			dst = h1.AppendField(dst, headerXRealIP, []byte(i.clientOf(lines, peer.String())))
		}
		lines = append(lines, peer.String())
		dst = h1.AppendField(dst, headerXForwardedFor, []byte(strings.Join(lines, ", ")))
	case peer.IsValid():
		// Anyone else's claims are replaced by the peer.
		p := peer.AppendTo(scratch[:0])
		dst = h1.AppendField(dst, headerXForwardedFor, p)
		dst = h1.AppendField(dst, headerXRealIP, p)
	}
	dst = h1.AppendField(dst, headerXForwardedHost, req.Host)
	dst = h1.AppendField(dst, headerXForwardedProto, headerHTTP)
	if req.HasBody {
		dst = append(dst, "Content-Length: "...)
		dst = strconv.AppendInt(dst, int64(len(req.Body)), 10)
		dst = append(dst, "\r\n"...)
	}
	dst = append(dst, "\r\n"...)
	if len(req.Body) <= smallRequestBody {
		dst = append(dst, req.Body...)
	}
	return dst
}

// smallRequestBody is the largest body appended to its request's head and
// sent in one write; a larger one is sent on its own rather than copied.
const smallRequestBody = 16 << 10

// The fields the proxy sets.
var (
	headerXForwardedFor   = []byte("X-Forwarded-For")
	headerXRealIP         = []byte("X-Real-Ip")
	headerXForwardedHost  = []byte("X-Forwarded-Host")
	headerXForwardedProto = []byte("X-Forwarded-Proto")
	headerHTTP            = []byte("http")
)

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
	return i.trustsAddr(a)
}

func (i *Ingress) trustsAddr(a netip.Addr) bool {
	if len(i.opts.TrustedProxies) == 0 || !a.IsValid() {
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
	http.StatusBadRequest:            "400 Bad Request\n",
	http.StatusRequestTimeout:        "408 Request Timeout\n",
	http.StatusRequestEntityTooLarge: "413 Content Too Large\n",
	http.StatusInternalServerError:   "500 Internal Server Error\n",
	http.StatusNotImplemented:        "501 Not Implemented\n",
	http.StatusBadGateway:            "502 Bad Gateway\n",
	http.StatusServiceUnavailable:    "503 Service Unavailable\n",
	http.StatusGatewayTimeout:        "504 Gateway Timeout\n",
}

// clientError answers a request the server could not read: a stalled body
// (408), one over the size limit (413), one that does not parse (400) or
// one in a transfer coding other than chunked (501). No route or endpoint
// saw it.
func (i *Ingress) clientError(x *h1.Exchange, code int, _ error) {
	i.metrics.ClientErrors.WithLabelValues(strconv.Itoa(code)).Inc()
	writeText(x, code, statusBodies[code])
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

// pick runs the policy under the route lock, then hands the due probes to
// the prober outside it.
func (rs *routeState) pick(now time.Time) (loadbalancer.Policy, loadbalancer.Picked, error) {
	var stack [16]string
	pol, p, sel, due, err := rs.pickLocked(now, stack[:0])
	if err != nil {
		return nil, p, err
	}
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

// pickLocked takes rs.mu and picks, appending the probes due to due. The
// lock is released by a deferred call, so a panicking policy leaves it free
// (forward recovers the panic). A synchronous-probing pick (prequal-sync):
// the policy names the replicas to probe, the route lock is released while
// they are probed concurrently, and the policy picks from this query's
// answers.
func (rs *routeState) pickLocked(now time.Time, due []string) (pol loadbalancer.Policy, p loadbalancer.Picked, sel prometheus.Counter, _ []string, err error) {
	rs.mu.Lock()
	locked := true
	defer func() {
		if locked {
			rs.mu.Unlock()
		}
	}()
	pol = rs.policy
	if sp, ok := pol.(loadbalancer.SyncPicker); ok {
		var stack [8]string
		targets := sp.PlanSync(now, rs.rng, stack[:0])
		need, timeout := sp.SyncWait()
		locked = false
		rs.mu.Unlock()
		answers := rs.syncProbe(targets, need, timeout)
		rs.mu.Lock()
		locked = true
		p, err = sp.PickSync(time.Now(), rs.rng, answers)
	} else {
		p, err = pol.Pick(now, rs.rng)
	}
	if err != nil {
		return nil, p, nil, due, err
	}
	sel = rs.selections[p.Endpoint]
	if rs.usesProbes {
		rs.probeBuf = pol.ProbesDue(now, rs.rng, rs.probeBuf[:0])
		due = append(due, rs.probeBuf...)
	}
	return pol, p, sel, due, nil
}

// syncProbe probes targets concurrently, one goroutine each (not through
// the prober's workers, whose queue would make the query's pick wait behind
// other routes' probes), and returns the answers that came
// in before need of them succeeded or timeout passed. Probes still out then
// finish on their own (bounded by the probe timeout) so their connections
// can be reused; their answers are dropped, never fed to the policy.
func (rs *routeState) syncProbe(targets []string, need int, timeout time.Duration) []loadbalancer.SyncAnswer {
	answers := make([]loadbalancer.SyncAnswer, 0, len(targets))
	if len(targets) == 0 {
		return answers
	}
	ch := make(chan loadbalancer.SyncAnswer, len(targets))
	for _, ep := range targets {
		go func() {
			r := rs.ing.prober.Probe(context.Background(), ep)
			rs.countProbe(r)
			ch <- loadbalancer.SyncAnswer{Endpoint: ep, Reply: r.Reply, OK: r.Outcome == loadbalancer.ProbeOK, Outcome: r.Outcome}
		}()
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	ok := 0
	for range targets {
		select {
		case a := <-ch:
			answers = append(answers, a)
			if a.OK {
				if ok++; ok >= need {
					return answers
				}
			}
		case <-t.C:
			return answers
		}
	}
	return answers
}

// pickOther picks among the endpoints other than avoid directly (healthy
// ones first), for a retry: asking the policy again gave least-request the
// endpoint that had just failed (its request released, it looked idle).
func (rs *routeState) pickOther(now time.Time, avoid string) (loadbalancer.Policy, loadbalancer.Picked, bool) {
	pol, p, sel, ok := rs.pickOtherLocked(now, avoid)
	if !ok {
		return nil, p, false // nowhere else to go
	}
	rs.inFlight.Add(1)
	if sel != nil {
		sel.Inc()
	}
	return pol, p, true
}

// pickOtherLocked is pickOther's part under rs.mu, released by a deferred
// call (a panicking policy leaves it free).
func (rs *routeState) pickOtherLocked(now time.Time, avoid string) (pol loadbalancer.Policy, p loadbalancer.Picked, sel prometheus.Counter, ok bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	pol = rs.policy
	op, ok := pol.(loadbalancer.OtherPicker)
	if ok {
		p, ok = op.PickOther(now, rs.rng, avoid)
	}
	if ok {
		sel = rs.selections[p.Endpoint]
	}
	return pol, p, sel, ok
}

// attemptDone reports one finished attempt to the policy that picked it and
// to outlier detection.
func (rs *routeState) attemptDone(pol loadbalancer.Policy, p loadbalancer.Picked, latency time.Duration, status int, now time.Time) {
	defer rs.inFlight.Add(-1)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.doneLocked(pol, p, latency, status, now)
}

// attemptDoneFeedback is attemptDone for an attempt that got an answer: a
// policy that reads server feedback (c3) gets the queue size and service
// time the backend put in the answer's headers first.
func (rs *routeState) attemptDoneFeedback(pol loadbalancer.Policy, p loadbalancer.Picked, latency time.Duration, status int, now time.Time, resp *h1.Response) {
	fu, ok := pol.(loadbalancer.FeedbackUser)
	var fb loadbalancer.ServerFeedback
	if ok {
		fb = serverFeedback(resp)
	}
	defer rs.inFlight.Add(-1)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	// Deferred, so the attempt is reported finished even if the feedback
	// call panics (forward has already marked it reported).
	defer rs.doneLocked(pol, p, latency, status, now)
	if fb.Known {
		fu.ServerFeedback(now, p, fb)
	}
}

// doneLocked finishes an attempt with rs.mu held. The callers release the
// lock and the in-flight count by deferred calls, so that a panicking
// policy leaves neither taken.
func (rs *routeState) doneLocked(pol loadbalancer.Policy, p loadbalancer.Picked, latency time.Duration, status int, now time.Time) {
	pol.Done(now, p, latency, status)
	rs.ejectBuf = rs.outliers.observe(now, p.Endpoint, status, rs.ejectBuf[:0])
	rs.applyEjectionsLocked(rs.ejectBuf, true)
}

// serverFeedback reads the headers the backend adds to every /work answer
// (docs/DESIGN.md, the backend contract): X-Prequal-Queue, its queue
// length when it answered, and X-Prequal-Service-Us, the request's service
// time. Known is false when the answer carried neither or they do not
// parse.
func serverFeedback(resp *h1.Response) loadbalancer.ServerFeedback {
	var fb loadbalancer.ServerFeedback
	if v := resp.Field(h1.KindPrequalQueue); len(v) > 0 {
		n, ok := h1.ParseUint(v)
		if !ok {
			return loadbalancer.ServerFeedback{}
		}
		fb.QueueSize, fb.Known = int(n), true
	}
	if v := resp.Field(h1.KindPrequalServiceUs); len(v) > 0 {
		n, ok := h1.ParseUint(v)
		if !ok {
			return loadbalancer.ServerFeedback{}
		}
		fb.ServiceTime, fb.Known = time.Duration(n)*time.Microsecond, true
	}
	return fb
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

// enqueue hands probes to the prober; drops are reported to the policy.
func (rs *routeState) enqueue(due []string) {
	for _, ep := range due {
		if !rs.ing.prober.Enqueue(prober.Job{Endpoint: ep, Target: rs}) {
			rs.ProbeDone(ep, prober.Result{Outcome: loadbalancer.ProbeDropped, Received: time.Now()})
		}
	}
}

// countProbe counts a probe's outcome in the metrics.
func (rs *routeState) countProbe(r prober.Result) {
	if r.Outcome != loadbalancer.ProbeDropped {
		rs.probesSent.Inc()
		rs.probeLatency.Observe(r.Duration.Seconds())
	}
	if c := rs.probeResults[r.Outcome]; c != nil {
		c.Inc()
	}
}

// ProbeDone feeds a probe outcome to the route's current policy. It is
// called from prober workers and, for a probe dropped at a full queue, from
// the request path; a panicking policy is recovered here (counted and
// logged) with the route lock released, so it neither ends the ingress nor
// wedges the route.
func (rs *routeState) ProbeDone(endpoint string, r prober.Result) {
	defer rs.recoverPolicy("probe outcome")
	rs.countProbe(r)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r.Outcome == loadbalancer.ProbeOK {
		rs.policy.ProbeResult(r.Received, endpoint, r.Reply)
	} else {
		rs.policy.ProbeFailed(r.Received, endpoint, r.Outcome)
	}
}

// idleProbes asks the policy for probes owed without traffic.
func (rs *routeState) idleProbes(now time.Time) {
	defer rs.recoverPolicy("idle probes")
	var stack [16]string
	due := stack[:0]
	func() {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if rs.usesProbes && rs.policy != nil {
			rs.probeBuf = rs.policy.ProbesDue(now, rs.rng, rs.probeBuf[:0])
			due = append(due, rs.probeBuf...)
		}
	}()
	rs.enqueue(due)
}

// recoverPolicy, deferred, recovers a panic off the request path (a
// policy's probe handling), counts it with the request path's panics and
// logs it, rate-limited.
func (rs *routeState) recoverPolicy(where string) {
	v := recover()
	if v == nil {
		return
	}
	i := rs.ing
	i.metrics.Panics.Inc()
	if ok, suppressed := i.panicLog.allow(time.Now()); ok {
		i.log.Error("panic in a policy's "+where+"; recovered", "route", rs.key, "panic", fmt.Sprint(v),
			"stack", string(debug.Stack()), "suppressed_since_last", suppressed)
	}
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
