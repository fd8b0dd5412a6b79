package ingress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/prequalbench/prequalbench/ingress/internal/h1"
	"github.com/prequalbench/prequalbench/ingress/internal/hangup"
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

// upstreamConn is one connection with its read buffer, kept across
// requests.
type upstreamConn struct {
	conn      net.Conn
	br        *h1.Reader
	live      liveness.Checker
	idleSince time.Time
	reused    bool
}

// setReadDeadline makes reads on c fail timeout from now.
func (c *upstreamConn) setReadDeadline(now time.Time, timeout time.Duration) error {
	return c.conn.SetReadDeadline(now.Add(timeout))
}

// setWriteDeadline makes writes on c fail timeout from now.
func (c *upstreamConn) setWriteDeadline(now time.Time, timeout time.Duration) error {
	return c.conn.SetWriteDeadline(now.Add(timeout))
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
)

// upstreamError is a failed exchange and the phase it failed in.
type upstreamError struct {
	phase upstreamPhase
	err   error
	// silent: not a byte of answer had come when it failed.
	silent bool
}

func (e *upstreamError) Error() string { return e.err.Error() }
func (e *upstreamError) Unwrap() error { return e.err }

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
// While the exchange runs, a client that hangs up (client, when watched)
// has its backend connection closed: the backend sees the close and drops
// the request, and do returns errClientGone.
//
// start is the caller's clock reading at the start (after a dial a fresh
// one is taken for the write deadline), and end the one taken when the
// exchange ended (one clock read shared with the caller).
func (u *upstreams) do(addr string, x *h1.Exchange, client *hangup.Conn, start time.Time) (end time.Time, err error) {
	h := u.host(addr)
	for replayed := false; ; replayed = true {
		c, err := u.get(h, addr, start)
		if err != nil {
			return time.Now(), &upstreamError{phase: phaseDial, err: err}
		}
		if client != nil && !client.Attach(c.conn) {
			u.put(h, c, time.Now()) // unused
			return time.Now(), errClientGone
		}
		if !c.reused {
			start = time.Now() // the dial's time is not the write's
		}
		keep, err := u.exchange(c, x, start)
		gone := client != nil && client.Detach() // then c may be closed
		end = time.Now()
		if err == nil {
			if gone || !keep || x.Resp.Close || declaredUnsentBody(&x.Req, &x.Resp) {
				c.conn.Close()
			} else {
				u.put(h, c, end)
			}
			return end, nil
		}
		c.conn.Close()
		if gone {
			return end, errClientGone
		}
		if !replayed && c.reused && staleConn(err) && idempotent(&x.Req) {
			start = end
			continue
		}
		return end, err
	}
}

// errClientGone: the client hung up while its request waited for the
// backend; the exchange was given up (nginx's 499).
var errClientGone = errors.New("client closed the connection before the answer")

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
	c := &upstreamConn{conn: conn, br: h1.NewReader(conn, maxResponseHead)}
	c.live.Init(conn)
	return c, nil
}

// declaredUnsentBody: an answer that has no body by the rules (to a HEAD,
// a 204, a 304) but whose head declares one. A backend that sends the body
// anyway may send it in a later segment than put and the liveness check
// see, to be read as another client's answer: the connection is not
// reused. (Past this, a backend that sends more than it declared after a
// pause can still put a connection out of step; nginx shares the window.)
func declaredUnsentBody(req *h1.Request, resp *h1.Response) bool {
	if !req.IsHead() && resp.Code != http.StatusNoContent && resp.Code != http.StatusNotModified {
		return false
	}
	return resp.ContentLength > 0 || resp.Chunked
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
	c.br.Shrink() // a buffer grown for one large answer head is let go
	h.mu.Lock()
	if h.gone || len(h.idle) >= u.maxIdlePerHost {
		h.mu.Unlock()
		c.conn.Close()
		return
	}
	h.idle = append(h.idle, c)
	h.mu.Unlock()
}

// exchange writes the request (x.Out, with the body when it is not in
// there) on c and reads the answer into x.Resp; keep reports whether c may
// carry another request. Deadlines: the request write and the body read
// each get readTimeout (nginx's proxy_send_timeout and proxy_read_timeout,
// here over the whole body because it is read into memory at once), the
// headers headerTimeout from the end of the write.
func (u *upstreams) exchange(c *upstreamConn, x *h1.Exchange, now time.Time) (keep bool, err error) {
	c.br.Mark()
	if err := c.setWriteDeadline(now, u.readTimeout); err != nil {
		return false, &upstreamError{phase: phaseSend, err: err, silent: true}
	}
	_, err = c.conn.Write(x.Out)
	if body := x.Req.Body; err == nil && len(body) > smallRequestBody {
		_, err = c.conn.Write(body)
	}
	if err != nil {
		if u.earlyAnswer(c, x) {
			return false, nil
		}
		return false, &upstreamError{phase: phaseSend, err: err, silent: c.br.Received() == 0}
	}
	if err := c.setReadDeadline(time.Now(), u.headerTimeout); err != nil {
		return false, &upstreamError{phase: phaseHeader, err: err, silent: true}
	}
	if err := readHeader(c, &x.Resp); err != nil {
		return false, err
	}
	// The answer's body is charged to the client's exchange, whose budget
	// share is released once the answer is written.
	c.br.ChargeTo(&x.Charge)
	err = u.readBody(c, &x.Req, &x.Resp)
	c.br.ChargeTo(nil)
	if err != nil {
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
func (u *upstreams) earlyAnswer(c *upstreamConn, x *h1.Exchange) bool {
	if c.setReadDeadline(time.Now(), earlyAnswerWait) != nil {
		return false
	}
	if readHeader(c, &x.Resp) != nil || (c.reused && x.Resp.Code == http.StatusRequestTimeout) {
		return false
	}
	return u.readBody(c, &x.Req, &x.Resp) == nil
}

// readHeader reads the final answer's head, by the deadline set (interim
// answers skipped).
func readHeader(c *upstreamConn, resp *h1.Response) error {
	if err := c.br.ReadResponseHead(resp); err != nil {
		return &upstreamError{phase: phaseHeader, err: err, silent: c.br.Received() == 0}
	}
	return nil
}

// readBody reads the response body, within readTimeout.
func (u *upstreams) readBody(c *upstreamConn, req *h1.Request, resp *h1.Response) error {
	head := req.IsHead()
	// A body already buffered whole (most small answers arrive with their
	// headers) needs no read, so no deadline.
	if !c.br.BodyBuffered(resp, head) {
		if err := c.setReadDeadline(time.Now(), u.readTimeout); err != nil {
			return &upstreamError{phase: phaseBody, err: err}
		}
	}
	if err := c.br.ReadResponseBody(resp, head, u.maxBody); err != nil {
		return &upstreamError{phase: phaseBody, err: err}
	}
	return nil
}

// staleConn reports a failure before the first byte of an answer on a
// connection the backend had already closed.
func staleConn(err error) bool {
	var ue *upstreamError
	if !errors.As(err, &ue) || ue.phase > phaseHeader || !ue.silent {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// idempotent: a request that may be sent twice, by its method (RFC 9110
// §9.2.2: GET, HEAD, OPTIONS, TRACE, PUT, DELETE). Bodies are in memory, so
// a body does not stop a replay; the method does.
func idempotent(req *h1.Request) bool {
	switch string(req.Method) {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
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
