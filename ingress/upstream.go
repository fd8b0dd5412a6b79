package ingress

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/prequalbench/prequalbench/ingress/internal/liveness"
	"github.com/prequalbench/prequalbench/ingress/internal/rawio"
)

// upstreams holds the keep-alive connections to every backend and sends one
// request at a time on each, on the calling goroutine: no per-connection
// reader and writer goroutines and no channel hand-offs, which is where
// net/http's transport spent most of a proxied request's CPU here.
type upstreams struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// headerTimeout bounds the wait for the response headers after the
	// request is written (504 when it fires); readTimeout bounds writing the
	// request and reading the response body; idleTimeout closes unused
	// connections.
	headerTimeout, readTimeout, idleTimeout time.Duration
	maxIdlePerHost                          int
	maxBody                                 int

	mu    sync.RWMutex
	hosts map[string]*hostConns
}

// hostConns is one backend's idle connections, most recently used last.
type hostConns struct {
	mu   sync.Mutex
	idle []*upstreamConn
	// gone: no route names the backend any more (forget dropped it), so a
	// request still in flight closes its connection instead of putting it
	// back where nothing would ever take or sweep it.
	gone bool
}

// upstreamConn is one connection with its buffers, kept across requests.
type upstreamConn struct {
	conn      net.Conn
	w         connWriter // bw writes through it
	br        *bufio.Reader
	bw        *bufio.Writer
	live      liveness.Checker
	idleSince time.Time
	reused    bool
	// The deadlines last set on conn, for lazy renewal (setReadDeadline).
	readDeadline, writeDeadline time.Time
}

// deadlineSlack is how much later than its timeout a deadline may fire: a
// deadline is renewed only when it would fire before the timeout, and then
// set this much later, so a busy connection renews it about once per slack
// instead of three times per request (each a timer update in the runtime).
// nginx's timers are lazy the same way (NGX_TIMER_LAZY_DELAY, 300 ms).
func deadlineSlack(timeout time.Duration) time.Duration {
	return min(timeout/16, 250*time.Millisecond)
}

// lazyDeadline returns the deadline to set for timeout from now, or false
// when cur already fires between now+timeout and now+timeout+slack.
func lazyDeadline(cur, now time.Time, timeout time.Duration) (time.Time, bool) {
	want := now.Add(timeout)
	slack := deadlineSlack(timeout)
	if !cur.Before(want) && cur.Sub(want) <= slack {
		return cur, false
	}
	return want.Add(slack), true
}

// setReadDeadline makes reads on c fail no sooner than timeout from now,
// and no later than its slack after that.
func (c *upstreamConn) setReadDeadline(now time.Time, timeout time.Duration) error {
	d, renew := lazyDeadline(c.readDeadline, now, timeout)
	if !renew {
		return nil
	}
	c.readDeadline = time.Time{} // unknown if the call fails
	if err := c.conn.SetReadDeadline(d); err != nil {
		return err
	}
	c.readDeadline = d
	return nil
}

// setWriteDeadline is setReadDeadline for writes.
func (c *upstreamConn) setWriteDeadline(now time.Time, timeout time.Duration) error {
	d, renew := lazyDeadline(c.writeDeadline, now, timeout)
	if !renew {
		return nil
	}
	c.writeDeadline = time.Time{}
	if err := c.conn.SetWriteDeadline(d); err != nil {
		return err
	}
	c.writeDeadline = d
	return nil
}

// connWriter writes to the connection and keeps the last write error, so a
// failure to write a request can be told apart: the connection's (the
// backend's, or the network's) or the request's own.
type connWriter struct {
	conn net.Conn
	err  error
}

func (w *connWriter) Write(p []byte) (int, error) {
	n, err := w.conn.Write(p)
	if err != nil {
		w.err = err
	}
	return n, err
}

// maxResponseHead is the largest response head (status line and headers)
// taken from a backend, the read buffer's size: a larger one is a 502. As
// the request head limit (nginx's large_client_header_buffers), and above
// nginx's proxy_buffer_size (4 or 8 KiB), which a long
// Content-Security-Policy or a few cookies can exceed.
const maxResponseHead = 16 << 10

// Phases of an exchange, for the answer a failure gets.
type upstreamPhase uint8

const (
	phaseDial   upstreamPhase = iota // no connection: nothing was sent
	phaseSend                        // writing the request
	phaseHeader                      // waiting for or reading the response headers
	phaseBody                        // reading the response body
	// phaseRequest: the request itself could not be written (the
	// request's fault, not the connection's: 400, no endpoint blamed).
	phaseRequest
)

// upstreamError is a failed exchange and the phase it failed in.
type upstreamError struct {
	phase upstreamPhase
	err   error
}

func (e *upstreamError) Error() string { return e.err.Error() }
func (e *upstreamError) Unwrap() error { return e.err }

// requestFault reports a failure caused by the request itself.
func requestFault(err error) bool {
	var ue *upstreamError
	return errors.As(err, &ue) && ue.phase == phaseRequest
}

func newUpstreams(opts Options) *upstreams {
	return &upstreams{
		dial:           opts.DialContext,
		headerTimeout:  opts.UpstreamTimeout,
		readTimeout:    opts.UpstreamReadTimeout,
		idleTimeout:    opts.UpstreamIdleTimeout,
		maxIdlePerHost: 256,
		maxBody:        opts.MaxBodySize,
		hosts:          map[string]*hostConns{},
	}
}

func (u *upstreams) host(addr string) *hostConns {
	u.mu.RLock()
	h := u.hosts[addr]
	u.mu.RUnlock()
	if h != nil {
		return h
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if h = u.hosts[addr]; h == nil {
		h = &hostConns{}
		u.hosts[addr] = h
	}
	return h
}

// do sends req to addr and reads the answer into resp. An idle connection
// is checked before it is reused (get), but the backend may still close it
// in the moment between: a reused connection that fails before a single byte
// of answer is replaced once, for an idempotent request (RFC 9110 §9.2.2),
// as net/http does. Nothing reached the backend's application.
//
// start is the caller's clock reading at the start (after a dial a fresh
// one is taken for the write deadline), and end the one taken when the
// exchange ended (one clock read shared with the caller).
func (u *upstreams) do(addr string, req *fasthttp.Request, resp *fasthttp.Response, start time.Time) (end time.Time, err error) {
	h := u.host(addr)
	for replayed := false; ; replayed = true {
		c, err := u.get(h, addr, start)
		if err != nil {
			return time.Now(), &upstreamError{phase: phaseDial, err: err}
		}
		if !c.reused {
			start = time.Now() // the dial's time is not the write's
		}
		keep, err := u.exchange(c, req, resp, start)
		end = time.Now()
		if err == nil {
			if !keep || resp.ConnectionClose() || req.ConnectionClose() {
				c.conn.Close()
			} else {
				u.put(h, c, end)
			}
			return end, nil
		}
		c.conn.Close()
		if !replayed && c.reused && staleConn(err) && idempotent(req) {
			resp.ResetBody() // not Reset, which clears the no-default-header settings
			start = end
			continue
		}
		return end, err
	}
}

// get returns an idle connection to addr, or a new one. An idle connection
// is taken only while it is quiet: one the backend closed (or said 408 on,
// or sent stray bytes on) since it was put back is closed instead, so no
// request is sent on it (a POST could not be replayed) and no stray bytes
// are read as the next answer.
func (u *upstreams) get(h *hostConns, addr string, now time.Time) (*upstreamConn, error) {
	for {
		h.mu.Lock()
		n := len(h.idle)
		if n == 0 {
			h.mu.Unlock()
			break
		}
		c := h.idle[n-1]
		h.idle[n-1] = nil
		h.idle = h.idle[:n-1]
		h.mu.Unlock()
		if (u.idleTimeout > 0 && now.Sub(c.idleSince) >= u.idleTimeout) || !c.live.Usable() {
			c.conn.Close()
			continue
		}
		c.reused = true
		return c, nil
	}
	conn, err := u.dial(context.Background(), "tcp", addr)
	if err != nil {
		return nil, err
	}
	conn = rawio.Wrap(conn)
	c := &upstreamConn{conn: conn, br: bufio.NewReaderSize(conn, maxResponseHead)}
	c.w.conn = conn
	c.bw = bufio.NewWriterSize(&c.w, 4096)
	c.live.Init(conn)
	return c, nil
}

// put keeps c for the next request, unless bytes past the answer are
// already buffered (a HEAD answer with a body, a body longer than its
// Content-Length): they would be read as the next answer.
func (u *upstreams) put(h *hostConns, c *upstreamConn, now time.Time) {
	if c.br.Buffered() > 0 {
		c.conn.Close()
		return
	}
	c.idleSince = now
	h.mu.Lock()
	if h.gone || len(h.idle) >= u.maxIdlePerHost {
		h.mu.Unlock()
		c.conn.Close()
		return
	}
	h.idle = append(h.idle, c)
	h.mu.Unlock()
}

// exchange writes req on c and reads the response; keep reports whether
// c may carry another request. Deadlines: the request write and the body
// read each get readTimeout (nginx's proxy_send_timeout and
// proxy_read_timeout, here over the whole body because it is read into
// memory at once), the headers headerTimeout from the end of the write.
// Each may fire up to its deadlineSlack late.
func (u *upstreams) exchange(c *upstreamConn, req *fasthttp.Request, resp *fasthttp.Response, now time.Time) (keep bool, err error) {
	if err := c.setWriteDeadline(now, u.readTimeout); err != nil {
		return false, &upstreamError{phase: phaseSend, err: err}
	}
	err = req.Write(c.bw)
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		if c.w.err == nil {
			// Not a write to the connection that failed: the request
			// could not be written (the connection is closed all the same).
			return false, &upstreamError{phase: phaseRequest, err: err}
		}
		if u.earlyAnswer(c, req, resp) {
			return false, nil
		}
		return false, &upstreamError{phase: phaseSend, err: err}
	}
	if err := c.setReadDeadline(time.Now(), u.headerTimeout); err != nil {
		return false, &upstreamError{phase: phaseHeader, err: err}
	}
	if err := readHeader(c, resp); err != nil {
		return false, err
	}
	if err := u.readBody(c, req, resp); err != nil {
		return false, err
	}
	return true, nil
}

// earlyAnswerWait bounds the wait for an answer once writing the request
// failed: an answer sent before the backend stopped reading is in the
// socket by then.
const earlyAnswerWait = 100 * time.Millisecond

// earlyAnswer reads the answer of a backend that answered before it had
// the whole request and stopped reading it (a 413 for a body it will not
// take, then a close), which made writing the rest fail. The client gets
// that answer, as it would from the backend directly; the connection is
// not reused. On a reused connection a 408 is the backend's goodbye to the
// idle connection, not an answer to this request: the write failure
// stands (and a replay may follow).
func (u *upstreams) earlyAnswer(c *upstreamConn, req *fasthttp.Request, resp *fasthttp.Response) bool {
	if c.setReadDeadline(time.Now(), earlyAnswerWait) != nil {
		return false
	}
	if readHeader(c, resp) != nil || (c.reused && resp.StatusCode() == fasthttp.StatusRequestTimeout) {
		return false
	}
	return u.readBody(c, req, resp) == nil
}

// readHeader reads the response headers, by the deadline set. Interim
// answers (100 Continue, 103 Early Hints) are skipped: the client gets the
// final one only. Each Read replaces the headers read before (and, unlike
// Reset, keeps the server's no-default-header settings).
func readHeader(c *upstreamConn, resp *fasthttp.Response) error {
	for {
		if err := resp.Header.Read(c.br); err != nil {
			return &upstreamError{phase: phaseHeader, err: err}
		}
		if code := resp.StatusCode(); code < 100 || code >= 200 || code == fasthttp.StatusSwitchingProtocols {
			break
		}
	}
	if resp.StatusCode() == fasthttp.StatusSwitchingProtocols {
		return &upstreamError{phase: phaseHeader, err: errUpgrade}
	}
	return nil
}

// readBody reads the response body, within readTimeout.
func (u *upstreams) readBody(c *upstreamConn, req *fasthttp.Request, resp *fasthttp.Response) error {
	resp.SkipBody = req.Header.IsHead()
	if resp.SkipBody || resp.StatusCode() == fasthttp.StatusNoContent || resp.StatusCode() == fasthttp.StatusNotModified {
		return nil
	}
	// A body already buffered whole (most small answers arrive with their
	// headers) needs no read, so no deadline.
	if n := resp.Header.ContentLength(); n < 0 || c.br.Buffered() < n {
		if err := c.setReadDeadline(time.Now(), u.readTimeout); err != nil {
			return &upstreamError{phase: phaseBody, err: err}
		}
	}
	if err := resp.ReadBody(c.br, u.maxBody); err != nil {
		return &upstreamError{phase: phaseBody, err: err}
	}
	if resp.Header.ContentLength() == -1 { // chunked: the trailer section follows
		if err := discardTrailer(c.br); err != nil {
			return &upstreamError{phase: phaseBody, err: err}
		}
	}
	return nil
}

// discardTrailer reads the trailer section that ends a chunked body, up to
// and including its empty line, and drops it, as nginx does: the answer goes
// to the client whole, with a Content-Length, so its trailer fields have
// nowhere to go (and may not be merged into the headers, RFC 9110 §6.5.1).
// Left unread, they were read as the next answer on the connection.
func discardTrailer(br *bufio.Reader) error {
	for n := 0; ; {
		line, err := br.ReadSlice('\n')
		if n += len(line); n > maxResponseHead {
			return errTrailerTooLarge
		}
		if err != nil {
			return err // a line longer than the buffer, or the connection broke off
		}
		if len(line) == 1 || (len(line) == 2 && line[0] == '\r') {
			return nil
		}
	}
}

var errTrailerTooLarge = errors.New("the chunked body's trailer section is over 16 KiB")

// errUpgrade is a backend switching protocols, which the buffered data
// plane does not carry.
var errUpgrade = errors.New("the backend switched protocols; upgrades are not proxied")

// staleConn reports a failure before the first byte of an answer on a
// connection the backend had already closed.
func staleConn(err error) bool {
	var ue *upstreamError
	if !errors.As(err, &ue) || ue.phase > phaseHeader {
		return false // phaseRequest too
	}
	var nothing *fasthttp.ErrNothingRead
	return errors.As(err, &nothing) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)
}

// idempotent: a request that may be sent twice, by its method (RFC 9110
// §9.2.2: GET, HEAD, OPTIONS, TRACE, PUT, DELETE). Bodies are in memory, so
// a body does not stop a replay; the method does.
func idempotent(req *fasthttp.Request) bool {
	m := req.Header.Method()
	switch string(m) {
	case fasthttp.MethodGet, fasthttp.MethodHead, fasthttp.MethodOptions, fasthttp.MethodTrace,
		fasthttp.MethodPut, fasthttp.MethodDelete:
		return true
	}
	return false
}

// closeIdle closes connections idle for at least the idle timeout, or every
// idle connection with all set.
func (u *upstreams) closeIdle(now time.Time, all bool) {
	u.mu.RLock()
	hosts := make([]*hostConns, 0, len(u.hosts))
	for _, h := range u.hosts {
		hosts = append(hosts, h)
	}
	u.mu.RUnlock()
	for _, h := range hosts {
		h.mu.Lock()
		keep := h.idle[:0]
		for _, c := range h.idle {
			if all || now.Sub(c.idleSince) >= u.idleTimeout {
				c.conn.Close()
				continue
			}
			keep = append(keep, c)
		}
		clear(h.idle[len(keep):])
		h.idle = keep
		h.mu.Unlock()
	}
}

// forget drops the pools of backends no route names any more; connections
// of requests still in flight to them are closed when they end.
func (u *upstreams) forget(keep func(addr string) bool) {
	u.mu.Lock()
	var gone []*hostConns
	for addr, h := range u.hosts {
		if !keep(addr) {
			gone = append(gone, h)
			delete(u.hosts, addr)
		}
	}
	u.mu.Unlock()
	for _, h := range gone {
		h.mu.Lock()
		h.gone = true
		for _, c := range h.idle {
			c.conn.Close()
		}
		h.idle = nil
		h.mu.Unlock()
	}
}
