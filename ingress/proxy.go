package ingress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

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

var _ prober.Target = (*routeState)(nil)

// serve is the data plane's request handler: it checks the path, finds the
// route and forwards the request to an endpoint the route's policy picks.
// The request and its body are in memory (fasthttp reads them before
// calling), and so is the answer: it is read whole from the backend, then
// written to the client after serve returns.
func (i *Ingress) serve(ctx *fasthttp.RequestCtx) {
	defer func() {
		if v := recover(); v != nil { // before a route's forward, which recovers its own
			i.panicked(ctx, "", v)
		}
	}()
	req := &ctx.Request
	path, ok := requestPath(req)
	if ok {
		path, ok = forwardablePath(path)
	}
	if !ok {
		i.metrics.RejectedPaths.Inc()
		writeText(ctx, fasthttp.StatusBadRequest, "400 Bad Request: the path has a dot-segment, an empty segment, a backslash, an encoded slash or a #\n")
		return
	}
	host := bytesString(req.Header.Host())
	if host == "" {
		// Only HTTP/1.0 may leave it out (the server answers 400 to
		// HTTP/1.1 without it), and a backend must get one: the client's
		// fault, before any endpoint is picked (and blamed).
		i.metrics.ClientErrors.WithLabelValues("400").Inc()
		writeText(ctx, fasthttp.StatusBadRequest, statusBodies[fasthttp.StatusBadRequest])
		return
	}
	rule, ok := i.table.Load().router.Match(host, path)
	if !ok {
		i.metrics.NoRoute.Inc()
		writeText(ctx, fasthttp.StatusNotFound, fmt.Sprintf("prequalbench ingress: no route for host %q and path %q\n", host, path))
		return
	}
	rule.Value.forward(ctx)
}

// bytesString views b as a string without copying; the string must not
// outlive the request.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// requestPath returns the raw path of the request target. An absolute-form
// target (a client that thinks it talks to a forward proxy) is rewritten to
// origin form, with its authority as the Host, as net/http reads it.
func requestPath(req *fasthttp.Request) (string, bool) {
	uri := req.Header.RequestURI()
	if len(uri) == 0 {
		return "", false
	}
	if uri[0] != '/' {
		rest, ok := bytes.CutPrefix(uri, []byte("http://"))
		if !ok {
			return "", false
		}
		slash := bytes.IndexByte(rest, '/')
		if slash <= 0 {
			return "", false
		}
		req.Header.SetHostBytes(rest[:slash])
		req.Header.SetRequestURIBytes(rest[slash:])
		uri = req.Header.RequestURI()
	}
	if q := bytes.IndexByte(uri, '?'); q >= 0 {
		uri = uri[:q]
	}
	return bytesString(uri), true
}

// forward sends the request to a picked endpoint, once more to another
// endpoint when the first could not take it, and reports how it went to the
// policy, outlier detection and the metrics.
func (rs *routeState) forward(ctx *fasthttp.RequestCtx) {
	rs.requests.Add(1)
	req, resp := &ctx.Request, &ctx.Response
	var (
		pol   loadbalancer.Policy
		p     loadbalancer.Picked
		start time.Time
		open  bool // p was picked and is not reported finished yet
	)
	// fasthttp does not recover a handler's panic: it would end the whole
	// ingress. The attempt in flight, if any, is reported finished (status
	// 0) once, and the client gets 502.
	defer func() {
		if v := recover(); v != nil {
			if open {
				open = false
				now := time.Now()
				rs.attemptDone(pol, p, now.Sub(start), 0, now)
			}
			rs.finish(fasthttp.StatusBadGateway)
			rs.ing.panicked(ctx, rs.key, v)
		}
	}()
	rs.ing.prepareRequest(ctx)
	start = time.Now()
	first := start // the request's duration runs from here, retries included
	pol, p, err := rs.pick(start)
	if err != nil {
		rs.noEndpoint.Add(1)
		rs.answer(ctx, fasthttp.StatusServiceUnavailable)
		return
	}
	open = true
	now, err := rs.ing.upstreams.do(p.Endpoint, req, resp, start)
	if err != nil && retryable(req, err, rs.ing.opts.Retry) {
		// Tell the first endpoint's policy, then try once more elsewhere.
		open = false
		rs.attemptDone(pol, p, now.Sub(start), 0, now)
		pol2, p2, ok := rs.pickOther(now, p.Endpoint)
		if !ok {
			rs.failed(ctx, err) // nowhere else to go
			return
		}
		pol, p, start, open = pol2, p2, now, true
		// Not Reset: it would also clear the server's no-default-header
		// settings (a Content-Type and Date nobody sent would appear).
		// The next answer's headers replace the old ones as they are read.
		resp.ResetBody()
		now, err = rs.ing.upstreams.do(p.Endpoint, req, resp, now)
	}
	lat := now.Sub(start)
	open = false // reported below, once, even if the report panics
	if err != nil && requestFault(err) {
		// Not the endpoint's failure: it heard nothing, or a request cut
		// short, and is told of a 400.
		rs.attemptDone(pol, p, lat, fasthttp.StatusBadRequest, now)
		rs.answer(ctx, fasthttp.StatusBadRequest)
		return
	}
	if err != nil {
		rs.attemptDone(pol, p, lat, 0, now)
		rs.failed(ctx, err)
		return
	}
	code := resp.StatusCode()
	rs.attemptDoneFeedback(pol, p, lat, code, now, &resp.Header) // the policy hears of its attempt's latency
	rs.duration.Observe(now.Sub(first).Seconds())
	rs.finish(code)
	cleanResponse(&resp.Header)
}

// retryable: an attempt that may go to another endpoint. A failed dial sent
// nothing, so any request may (the body is in memory). With wider
// (--retry) also an idempotent request whose exchange failed before the
// response headers for any reason but a timeout (a 504 retried would double
// a long wait).
func retryable(req *fasthttp.Request, err error, wider bool) bool {
	var ue *upstreamError
	if !errors.As(err, &ue) {
		return false
	}
	switch ue.phase {
	case phaseDial:
		return true
	case phaseRequest:
		return false // another endpoint could not take it either
	}
	return wider && ue.phase < phaseBody && !isTimeout(err) && idempotent(req)
}

// failed answers a request whose exchange with the backends failed.
func (rs *routeState) failed(ctx *fasthttp.RequestCtx, err error) {
	var ue *upstreamError
	errors.As(err, &ue)
	code := fasthttp.StatusBadGateway
	switch {
	case ue != nil && ue.phase == phaseBody:
		// The backend broke off (or stalled, or overflowed the size limit)
		// mid-body: the client gets a clean 502, never a cut answer.
		rs.upstreamError(upstreamBody, err)
	case isTimeout(err):
		rs.upstreamError(upstreamTimeout, err)
		code = fasthttp.StatusGatewayTimeout
	default:
		rs.upstreamError(upstreamFailed, err)
	}
	ctx.Response.Reset()
	rs.answer(ctx, code)
}

// answer counts and writes a generic answer the ingress makes itself.
func (rs *routeState) answer(ctx *fasthttp.RequestCtx, code int) {
	rs.finish(code)
	writeText(ctx, code, statusBodies[code])
}

// panicked answers 502 for a request whose handling panicked, counts it
// and logs it with its stack (rate-limited as the upstream errors are).
func (i *Ingress) panicked(ctx *fasthttp.RequestCtx, route string, v any) {
	i.metrics.Panics.Inc()
	if ok, suppressed := i.panicLog.allow(time.Now()); ok {
		i.log.Error("panic on the request path; answered 502", "route", route, "method", string(ctx.Method()),
			"path", string(ctx.Request.Header.RequestURI()), "panic", fmt.Sprint(v), "stack", string(debug.Stack()),
			"suppressed_since_last", suppressed)
	}
	writeText(ctx, fasthttp.StatusBadGateway, statusBodies[fasthttp.StatusBadGateway])
}

func writeText(ctx *fasthttp.RequestCtx, code int, msg string) {
	ctx.Response.Reset()
	ctx.SetStatusCode(code)
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.SetBodyString(msg)
}

// hopHeaders are the hop-by-hop headers (RFC 9110 §7.6.1) besides
// Connection and the ones it names. Upgrade is among them: the data plane
// does not carry protocol switches, so an upgrade request reaches the
// backend as a plain request, as through nginx without upgrade settings.
var hopHeaders = []string{"Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Upgrade"}

var hostHeader = []byte(fasthttp.HeaderHost)

// connectionTokens calls drop for every header named in the Connection
// header fields of a request or response.
func connectionTokens(values [][]byte, drop func(name []byte)) {
	for _, v := range values {
		for len(v) > 0 {
			tok := v
			if c := bytes.IndexByte(v, ','); c >= 0 {
				tok, v = v[:c], v[c+1:]
			} else {
				v = nil
			}
			if tok = bytes.TrimSpace(tok); len(tok) > 0 {
				drop(tok)
			}
		}
	}
}

// prepareRequest makes the inbound request the outbound one: without
// hop-by-hop headers, HTTP/1.1 and keep-alive towards the backend, and with the
// X-Forwarded-* and X-Real-IP headers that name the client. The Host
// header and the request target pass unchanged.
func (i *Ingress) prepareRequest(ctx *fasthttp.RequestCtx) {
	// The server parsed the target into a URI (decoded, normalized, the
	// host lowercased), and a request with a parsed URI is written from
	// it. Setting the target again, to itself, drops the parsed form, so
	// the raw target and Host the client sent are written byte for byte.
	ctx.Request.SetRequestURIBytes(ctx.Request.Header.RequestURI())
	h := &ctx.Request.Header
	h.SetNoDefaultContentType(true) // a body without a Content-Type goes without one
	// One pass over the headers finds which of the ones dropped or
	// replaced here the request has (most have none), instead of a
	// normalizing lookup per name. Before the Connection tokens are
	// dropped: dropping Trailer (as Connection: Trailer asks) moves the
	// trailer fields into the headers and empties PeekTrailerKeys.
	has := requestHas(h)
	if conn := h.PeekAll(fasthttp.HeaderConnection); len(conn) > 0 {
		connectionTokens(conn, func(name []byte) {
			if !bytes.EqualFold(name, hostHeader) { // not hop-by-hop, whatever the client says
				h.DelBytes(name)
			}
		})
		h.Del(fasthttp.HeaderConnection)
	}
	h.ResetConnectionClose()
	if !h.IsHTTP11() {
		// An HTTP/1.0 client's request goes upstream as HTTP/1.1 too, so
		// its connection is kept alive (the client's own is the server's
		// business, decided before the handler ran).
		h.SetProtocol("HTTP/1.1")
	}
	if has&hasHop != 0 {
		for _, name := range hopHeaders {
			h.Del(name)
		}
	}
	// Expect: the server has read the body already. The rest are set below.
	for _, d := range droppedNames[len(hopHeaders):] {
		if has&d.bit != 0 && d.bit&(hasXForwardedFor|hasXRealIP) == 0 {
			h.DelBytes(d.name)
		}
	}

	var scratch [64]byte
	peerAddr, _ := netip.AddrFromSlice(ctx.RemoteIP())
	peerAddr = peerAddr.Unmap()
	peerBytes := scratch[:0]
	if peerAddr.IsValid() {
		peerBytes = peerAddr.AppendTo(peerBytes)
	}
	trusted := i.trustsAddr(peerAddr)
	switch {
	case trusted:
		// A trusted proxy's chain is extended, as edge proxies do; its
		// X-Real-IP names the client, and without one the client is the
		// last address of the chain that is not a trusted proxy (nginx's
		// real_ip_recursive).
		chain := h.PeekAll("X-Forwarded-For")
		var lines []string
		for _, l := range chain {
			lines = append(lines, string(l))
		}
		if len(h.Peek("X-Real-Ip")) == 0 {
			h.Set("X-Real-Ip", i.clientOf(lines, peerAddr.String()))
		}
		lines = append(lines, peerAddr.String())
		h.Del("X-Forwarded-For")
		h.Set("X-Forwarded-For", strings.Join(lines, ", "))
	case len(peerBytes) > 0:
		// Anyone else's claims are replaced by the peer.
		if has&hasXForwardedFor != 0 {
			h.Del("X-Forwarded-For")
		}
		h.SetCanonical(headerXForwardedFor, peerBytes)
		if has&hasXRealIP != 0 {
			h.Del("X-Real-Ip")
		}
		h.SetCanonical(headerXRealIP, peerBytes)
	default:
		if has&hasXForwardedFor != 0 {
			h.Del("X-Forwarded-For")
		}
		if has&hasXRealIP != 0 {
			h.Del("X-Real-Ip")
		}
	}
	h.SetCanonical(headerXForwardedHost, h.Host())
	h.SetCanonical(headerXForwardedProto, headerHTTP)
}

// The headers the proxy sets, by their canonical names (SetCanonical skips
// normalizing the name on every request).
var (
	headerXForwardedFor   = []byte("X-Forwarded-For")
	headerXRealIP         = []byte("X-Real-Ip")
	headerXForwardedHost  = []byte("X-Forwarded-Host")
	headerXForwardedProto = []byte("X-Forwarded-Proto")
	headerHTTP            = []byte("http")
)

// Bits of requestHas: which of the headers a proxy drops or replaces a
// request carries.
const (
	hasHop uint16 = 1 << iota // any of hopHeaders
	hasExpect
	hasForwarded
	hasXForwardedHost
	hasXForwardedProto
	hasXForwardedFor
	hasXRealIP
)

// droppedName is a header name the proxy drops or replaces, and its bit.
type droppedName struct {
	name []byte
	bit  uint16
}

// droppedNames are those names: hopHeaders first, then the others.
var droppedNames = func() []droppedName {
	var d []droppedName
	for _, n := range hopHeaders {
		d = append(d, droppedName{[]byte(n), hasHop})
	}
	return append(d, droppedName{[]byte("Expect"), hasExpect}, droppedName{[]byte("Forwarded"), hasForwarded},
		droppedName{[]byte("X-Forwarded-Host"), hasXForwardedHost}, droppedName{[]byte("X-Forwarded-Proto"), hasXForwardedProto},
		droppedName{headerXForwardedFor, hasXForwardedFor}, droppedName{headerXRealIP, hasXRealIP})
}()

// nameBits is the bits of the dropped names equal to name, compared without
// regard to case as Del does.
func nameBits(name []byte) (bits uint16) {
	for _, d := range droppedNames {
		if len(name) == len(d.name) && bytes.EqualFold(name, d.name) {
			bits |= d.bit
		}
	}
	return bits
}

// requestHas reads the request's header names from its raw head, as
// parsed. Not through h.All(): that parses the Cookie header into cookies,
// and the request is then written from them, which drops cookies with a
// quote, backslash or semicolon in their value and merges Cookie lines.
// With trailer fields (a chunked body's), every bit is set: deleting
// Trailer (as a hop-by-hop header, or as a Connection token) moves those
// fields into the headers, where they are dropped by name as before. So
// is a head that was not parsed here. It runs before the Connection
// tokens are dropped, while the trailer fields are still told apart.
func requestHas(h *fasthttp.RequestHeader) (bits uint16) {
	raw := h.RawHeaders()
	if len(raw) == 0 || len(h.PeekTrailerKeys()) > 0 {
		return ^uint16(0)
	}
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if len(line) == 0 || line[0] == ' ' || line[0] == '\t' {
			continue // a folded line continues the previous value
		}
		if c := bytes.IndexByte(line, ':'); c > 0 {
			bits |= nameBits(bytes.TrimRight(line[:c], " \t"))
		}
	}
	return bits
}

// responseHas is requestHas for an answer, whose names All gives without
// side effects.
func responseHas(h *fasthttp.ResponseHeader) (bits uint16) {
	for k := range h.All() {
		bits |= nameBits(k)
	}
	return bits
}

// cleanResponse drops the backend's hop-by-hop headers; the server frames
// the answer to the client itself (Content-Length, keep-alive).
func cleanResponse(h *fasthttp.ResponseHeader) {
	if conn := h.PeekAll(fasthttp.HeaderConnection); len(conn) > 0 {
		connectionTokens(conn, h.DelBytes)
		h.Del(fasthttp.HeaderConnection)
	}
	h.ResetConnectionClose()
	if responseHas(h)&hasHop != 0 {
		for _, name := range hopHeaders {
			h.Del(name)
		}
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
	fasthttp.StatusBadRequest:            "400 Bad Request\n",
	fasthttp.StatusRequestTimeout:        "408 Request Timeout\n",
	fasthttp.StatusRequestEntityTooLarge: "413 Content Too Large\n",
	fasthttp.StatusBadGateway:            "502 Bad Gateway\n",
	fasthttp.StatusServiceUnavailable:    "503 Service Unavailable\n",
	fasthttp.StatusGatewayTimeout:        "504 Gateway Timeout\n",
}

// clientError answers a request the server could not read: a stalled body
// (408), one over the size limit (413) or one that does not parse (400). No
// route or endpoint saw it.
func (i *Ingress) clientError(ctx *fasthttp.RequestCtx, err error) {
	code := fasthttp.StatusBadRequest
	switch {
	case isTimeout(err):
		code = fasthttp.StatusRequestTimeout
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		code = fasthttp.StatusRequestEntityTooLarge
	}
	i.metrics.ClientErrors.WithLabelValues(strconv.Itoa(code)).Inc()
	writeText(ctx, code, statusBodies[code])
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
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, fasthttp.ErrTimeout) {
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
func (rs *routeState) attemptDoneFeedback(pol loadbalancer.Policy, p loadbalancer.Picked, latency time.Duration, status int, now time.Time, h *fasthttp.ResponseHeader) {
	fu, ok := pol.(loadbalancer.FeedbackUser)
	var fb loadbalancer.ServerFeedback
	if ok {
		fb = serverFeedback(h)
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

// Headers the backend adds to every /work answer (docs/DESIGN.md, the
// backend contract): its queue length when it answered and the request's
// service time.
const (
	headerQueue     = "X-Prequal-Queue"
	headerServiceUs = "X-Prequal-Service-Us"
)

// serverFeedback reads the feedback headers; Known is false when the
// answer carried neither or they do not parse.
func serverFeedback(h *fasthttp.ResponseHeader) loadbalancer.ServerFeedback {
	var fb loadbalancer.ServerFeedback
	if v := h.Peek(headerQueue); len(v) > 0 {
		n, err := fasthttp.ParseUint(v)
		if err != nil {
			return loadbalancer.ServerFeedback{}
		}
		fb.QueueSize, fb.Known = n, true
	}
	if v := h.Peek(headerServiceUs); len(v) > 0 {
		n, err := fasthttp.ParseUint(v)
		if err != nil {
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
