package prober

import (
	"errors"
	"net"
	"os"
	"sync"
	"time"

	"github.com/prequalbench/prequalbench/ingress/internal/h1"
	"github.com/prequalbench/prequalbench/ingress/internal/liveness"
	"github.com/prequalbench/prequalbench/ingress/internal/rawio"
)

// Limits on one probe answer: a real one is ~200 B with its headers. The
// framing rules are the data plane's (package h1); only the sizes are the
// prober's.
const (
	maxHeader = 8 << 10
	maxBody   = 4 << 10
)

// errNoAnswer is a connection that failed before a byte of answer came
// back: closed by the peer, reset, or unwritable.
var errNoAnswer = errors.New("prober: connection closed before an answer")

// conn is one keep-alive connection to a backend with its reader and the
// answer it reads into, both reused from one probe to the next.
type conn struct {
	nc   net.Conn
	br   *h1.Reader
	resp h1.Response
	live liveness.Checker
	idle time.Time // when it was last put back
}

func newConn(nc net.Conn) *conn {
	nc = rawio.Wrap(nc) // a probe's write and reads skip the runtime's syscall bookkeeping
	c := &conn{nc: nc, br: h1.NewReader(nc, maxHeader)}
	c.live.Init(nc)
	return c
}

func (c *conn) close() { _ = c.nc.Close() }

// roundTrip writes req and reads one answer by deadline. The answer is read as the proxy reads a backend's (h1's
// ReadResponseHead and ReadResponseBody: interim answers skipped, the same
// framing refused); a body over maxBody is h1.ErrBodyTooLarge with the
// status set. The answer points into c and is valid until the next
// roundTrip. It reports whether the connection can carry another probe.
func (c *conn) roundTrip(req []byte, deadline time.Time) (r *h1.Response, reusable bool, err error) {
	r = &c.resp
	r.Code = 0
	if err := c.nc.SetDeadline(deadline); err != nil {
		return r, false, errNoAnswer
	}
	if _, err := c.nc.Write(req); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return r, false, err
		}
		return r, false, errNoAnswer
	}
	c.br.Mark()
	if err := c.br.ReadResponseHead(r); err != nil {
		if c.br.Received() == 0 && !errors.Is(err, os.ErrDeadlineExceeded) {
			return r, false, errNoAnswer // closed or reset
		}
		return r, false, err
	}
	if err := c.br.ReadResponseBody(r, false, maxBody); err != nil {
		return r, false, err
	}
	// Bytes past the answer put the connection out of step.
	return r, !r.Close && c.br.Buffered() == 0, nil
}

// pool keeps idle connections per endpoint, most recently used last.
type pool struct {
	maxIdle     int
	idleTimeout time.Duration

	mu     sync.Mutex
	eps    map[string]*endpointConns
	closed bool
}

type endpointConns struct {
	req  []byte // the probe request for this endpoint, built once
	idle []*conn
	used time.Time // when a connection was last taken or put back
}

// get returns an idle connection to endpoint if idle is set and one is
// there, else nil, and the request to send it. An idle connection is taken
// only while it is quiet: one the backend closed or sent bytes on since its
// last answer (a second answer nobody asked for would be read as this
// probe's) is closed instead. The check is one non-blocking syscall, made
// outside the pool's lock.
func (p *pool) get(endpoint string, idle bool, now time.Time) (*conn, []byte) {
	for {
		c, req := p.pop(endpoint, idle, now)
		if c == nil || c.live.Usable() {
			return c, req
		}
		c.close()
	}
}

// pop takes the most recent idle connection to endpoint that is within the
// idle timeout, if idle is set.
func (p *pool) pop(endpoint string, idle bool, now time.Time) (*conn, []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.eps[endpoint]
	if e == nil {
		e = &endpointConns{req: []byte("GET " + Path + " HTTP/1.1\r\nHost: " + endpoint + "\r\nUser-Agent: prequalbench-prober\r\n\r\n")}
		p.eps[endpoint] = e
	}
	e.used = now
	for idle && len(e.idle) > 0 {
		c := e.idle[len(e.idle)-1]
		e.idle[len(e.idle)-1] = nil
		e.idle = e.idle[:len(e.idle)-1]
		if now.Sub(c.idle) < p.idleTimeout {
			return c, e.req
		}
		c.close()
	}
	return nil, e.req
}

// put keeps c for reuse, or closes it when the pool is full or closed.
func (p *pool) put(endpoint string, c *conn, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.eps[endpoint]
	if p.closed || e == nil || len(e.idle) >= p.maxIdle {
		c.close()
		return
	}
	c.idle, e.used = now, now
	e.idle = append(e.idle, c)
}

// closeIdle closes connections idle for the idle timeout at now and forgets
// endpoints unused as long, so departed backends leave nothing behind.
func (p *pool) closeIdle(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ep, e := range p.eps {
		// The oldest are first: keep the suffix still fresh.
		k := 0
		for k < len(e.idle) && now.Sub(e.idle[k].idle) >= p.idleTimeout {
			e.idle[k].close()
			k++
		}
		if k > 0 {
			n := copy(e.idle, e.idle[k:])
			clear(e.idle[n:])
			e.idle = e.idle[:n]
		}
		if len(e.idle) == 0 && now.Sub(e.used) >= p.idleTimeout {
			delete(p.eps, ep)
		}
	}
}

// close closes every idle connection; connections put back later are
// closed too.
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for ep, e := range p.eps {
		for _, c := range e.idle {
			c.close()
		}
		delete(p.eps, ep)
	}
}

// idleCount is the number of idle connections kept for endpoint.
func (p *pool) idleCount(endpoint string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.eps[endpoint]; e != nil {
		return len(e.idle)
	}
	return 0
}
