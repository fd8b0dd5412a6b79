package h1

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Exchange is one request and its answer, handed to the Handler. It is
// the connection's and reused for its next request.
type Exchange struct {
	Req  Request
	Resp Response
	// Remote is the client's address (the zero value for a connection that
	// is not TCP).
	Remote netip.AddrPort
	// Client is the client's connection, for a handler that watches it or
	// closes it to give up on a client that left (then no answer is sent).
	Client net.Conn
	// Out is scratch space for the handler (the request as it goes
	// upstream), kept with the connection.
	Out []byte
	// Charge holds the exchange's share of the server's BodyBudget, for
	// the request body and, through the handler's reader, the answer's;
	// released once the answer is written.
	Charge Charge
}

// Handler answers a request read whole: it reads x.Req and fills x.Resp.
type Handler func(x *Exchange)

// Server is an HTTP/1.1 server that reads each request whole, head and
// body, before its handler runs, and writes the handler's answer whole
// with a Content-Length. One goroutine serves each connection, one request
// at a time (pipelined requests wait their turn).
type Server struct {
	Handler Handler
	// ClientError answers a request the server could not take: status
	// 400 (does not parse, no Host, head too large), 408 (not whole in
	// time), 413 (body too large) or 501 (a transfer coding other than
	// chunked). The handler never sees it; the connection closes after.
	ClientError func(x *Exchange, status int, err error)
	// MaxHeadSize bounds a request head; default 16 KiB. MaxBodySize
	// bounds a body; default 32 MiB.
	MaxHeadSize int
	MaxBodySize int
	// ReadTimeout bounds reading a request, head and body, from its first
	// byte. WriteTimeout bounds writing an answer. IdleTimeout bounds the
	// wait for a connection's next request. Zero: no bound.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// FirstRequestTimeout bounds the wait for a new connection's first
	// byte, shorter than IdleTimeout so a socket that never sends anything
	// holds its descriptor briefly. Zero: IdleTimeout.
	FirstRequestTimeout time.Duration
	// MaxConns caps open connections. At the cap a new connection sheds
	// the connection that has been idle longest (waiting for a request);
	// when none is idle the new one is closed at once. Zero: no cap.
	MaxConns int
	// BodyBudget, when set, bounds the body bytes all connections hold at
	// once; a request whose body would overrun it gets 503.
	BodyBudget *BodyBudget

	shed, refused atomic.Uint64

	shutdown atomic.Bool
	mu       sync.Mutex
	lns      map[net.Listener]struct{}
	conns    map[*conn]struct{}
	drained  chan struct{} // closed when shutting down and no connection is left
}

// Connection states, for Shutdown: an idle connection (waiting for a
// request) is closed at once, an active one after its answer.
const (
	stateActive int32 = iota
	stateIdle
	stateClosed
)

type conn struct {
	nc    net.Conn
	br    *Reader
	x     Exchange
	wbuf  []byte
	state atomic.Int32
	// idleSince is when the connection last began to wait for a request
	// (UnixNano), for shedding the oldest idle one at MaxConns.
	idleSince atomic.Int64
}

// Shed is how many idle connections were closed to make room for a new
// one at MaxConns; Refused how many new ones were closed because none was
// idle.
func (s *Server) Shed() uint64    { return s.shed.Load() }
func (s *Server) Refused() uint64 { return s.refused.Load() }

// Serve accepts connections on l and serves them until Shutdown, then
// returns nil; another failure to accept is returned.
func (s *Server) Serve(l net.Listener) error {
	if s.Handler == nil {
		return errors.New("h1: Server without a Handler")
	}
	s.mu.Lock()
	if s.shutdown.Load() {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	if s.lns == nil {
		s.lns = map[net.Listener]struct{}{}
		s.conns = map[*conn]struct{}{}
	}
	s.lns[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, l)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.shutdown.Load() {
				return nil
			}
			// Out of descriptors or a connection aborted before it was
			// taken: wait a little and go on, as net/http does.
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		c := &conn{nc: nc}
		// Waiting for its first request from the start, so it can be shed
		// before its goroutine first runs (on a busy host, the newest
		// connections of a flood had not run yet and none could be shed).
		c.idleSince.Store(time.Now().UnixNano())
		c.state.Store(stateIdle)
		switch s.track(c) {
		case trackShutdown:
			nc.Close()
			return nil
		case trackFull:
			nc.Close()
			continue
		}
		go s.serve(c)
	}
}

func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

const (
	tracked = iota
	trackShutdown
	trackFull
)

// track registers c; at MaxConns it first closes the connection idle
// longest, so idle sockets cannot lock active clients out.
func (s *Server) track(c *conn) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutdown.Load() {
		return trackShutdown
	}
	if s.MaxConns > 0 && len(s.conns) >= s.MaxConns {
		if !s.shedOldestIdleLocked() {
			s.refused.Add(1)
			return trackFull
		}
	}
	s.conns[c] = struct{}{}
	return tracked
}

// shedOldestIdleLocked closes the connection that has waited longest for
// a request. Its goroutine sees the close and untracks it; it is counted
// out of s.conns at once so the new connection takes its place. O(n) in
// open connections, only at the cap.
func (s *Server) shedOldestIdleLocked() bool {
	var oldest *conn
	for c := range s.conns {
		if c.state.Load() == stateIdle && (oldest == nil || c.idleSince.Load() < oldest.idleSince.Load()) {
			oldest = c
		}
	}
	if oldest == nil || !oldest.state.CompareAndSwap(stateIdle, stateClosed) {
		return false
	}
	oldest.nc.Close()
	delete(s.conns, oldest)
	s.shed.Add(1)
	return true
}

func (s *Server) untrack(c *conn) {
	c.state.Store(stateClosed)
	s.mu.Lock()
	delete(s.conns, c)
	if s.shutdown.Load() && len(s.conns) == 0 && s.drained != nil {
		select {
		case <-s.drained:
		default:
			close(s.drained)
		}
	}
	s.mu.Unlock()
}

// Shutdown stops accepting, closes idle connections at once and active
// ones after their answer (sent with Connection: close), and waits for them
// up to ctx's end; then it closes what is left and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutdown.Store(true)
	if s.drained == nil {
		s.drained = make(chan struct{})
	}
	for l := range s.lns {
		l.Close()
	}
	for c := range s.conns {
		if c.state.CompareAndSwap(stateIdle, stateClosed) {
			c.nc.Close()
		}
	}
	if len(s.conns) == 0 {
		select {
		case <-s.drained:
		default:
			close(s.drained)
		}
	}
	drained := s.drained
	s.mu.Unlock()
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		return ctx.Err()
	}
}

func (s *Server) maxHead() int {
	if s.MaxHeadSize > 0 {
		return s.MaxHeadSize
	}
	return 16 << 10
}

func (s *Server) maxBody() int {
	if s.MaxBodySize > 0 {
		return s.MaxBodySize
	}
	return 32 << 20
}

// deadline is now+d, or none for d <= 0.
func deadline(now time.Time, d time.Duration) time.Time {
	if d <= 0 {
		return time.Time{}
	}
	return now.Add(d)
}

// retainLimit is the largest buffer a connection keeps between requests;
// a larger one (a big body) is dropped so an idle connection holds little.
const retainLimit = 16 << 10

// retainHead is the largest head copy a connection keeps between requests.
const retainHead = 4 << 10

var continue100 = []byte("HTTP/1.1 100 Continue\r\n\r\n")

func (s *Server) serve(c *conn) {
	defer s.untrack(c)
	defer c.nc.Close()
	c.br = NewReader(c.nc, s.maxHead())
	c.x.Client = c.nc
	if a, ok := c.nc.RemoteAddr().(*net.TCPAddr); ok {
		c.x.Remote = a.AddrPort()
	}
	x := &c.x
	x.Charge.Use(s.BodyBudget)
	c.br.ChargeTo(&x.Charge)
	defer x.Charge.Release()
	for answered := false; ; answered = true {
		// Wait for the next request's first byte, idle (a new connection
		// is idle from its accept).
		if answered {
			c.idleSince.Store(time.Now().UnixNano())
			if !c.state.CompareAndSwap(stateActive, stateIdle) {
				return // shed at MaxConns or closed by Shutdown
			}
		} else if c.state.Load() != stateIdle {
			return // shed or closed by Shutdown before it started
		}
		if s.shutdown.Load() {
			if answered {
				lingerClose(c.nc) // the client may have pipelined more
			}
			return
		}
		if c.br.Buffered() == 0 {
			wait := s.IdleTimeout
			if !answered && s.FirstRequestTimeout > 0 {
				wait = s.FirstRequestTimeout
			}
			if err := c.nc.SetReadDeadline(deadline(time.Now(), wait)); err != nil {
				return
			}
			if err := c.br.Fill(); err != nil {
				return
			}
		}
		if !c.state.CompareAndSwap(stateIdle, stateActive) {
			return // Shutdown closed it while idle
		}
		if err := c.nc.SetReadDeadline(deadline(time.Now(), s.ReadTimeout)); err != nil {
			return
		}
		if err := s.readRequest(c); err != nil {
			s.refuse(c, err)
			return
		}
		s.Handler(x)
		closing := x.Req.Close || s.shutdown.Load()
		err := s.answer(c, closing)
		x.Charge.Release()
		if err != nil || closing {
			if err == nil {
				// Requests the client pipelined may be unread, in the buffer
				// or still in the socket: closing over them would reset the
				// connection and could cut the answer short.
				lingerClose(c.nc)
			}
			return
		}
		c.trim()
	}
}

// readRequest reads a request whole, answering 100 Continue to a client
// that waits for it.
func (s *Server) readRequest(c *conn) error {
	r := &c.x.Req
	if err := c.br.ReadRequestHead(r); err != nil {
		return err
	}
	if r.Minor >= 1 && r.Host == nil {
		return badRequest("no Host field")
	}
	if r.ExpectContinue && (r.Chunked || r.ContentLength > 0) {
		if r.ContentLength > int64(s.maxBody()) {
			return ErrBodyTooLarge // without reading the body the client holds back
		}
		if c.br.Buffered() == 0 {
			if err := s.write(c, continue100); err != nil {
				return err
			}
		}
	}
	return c.br.ReadRequestBody(r, s.maxBody())
}

// refuse answers a request the server could not take, if an answer is
// owed, and closes the connection gently: what the client still sends is
// read and dropped for a moment, so its answer is not lost to a reset.
func (s *Server) refuse(c *conn, err error) {
	status := StatusOf(err)
	var ne net.Error
	if status == 0 && errors.As(err, &ne) && ne.Timeout() {
		status = 408
	}
	if status == 0 || s.ClientError == nil {
		return // the connection failed, or nothing may be said
	}
	s.ClientError(&c.x, status, err)
	if s.answer(c, true) != nil {
		return
	}
	lingerClose(c.nc)
}

// smallBody is the largest body written in one piece with its head; a
// larger one is written on its own rather than copied.
const smallBody = 16 << 10

// answer writes x.Resp to the client.
func (s *Server) answer(c *conn, closing bool) error {
	x := &c.x
	head := x.Req.IsHead()
	c.wbuf = AppendResponseHead(c.wbuf[:0], &x.Resp, head, closing, !closing && x.Req.Minor == 0)
	body := x.Resp.Body
	if !x.Resp.HasBody(head) {
		body = nil
	}
	if len(body) <= smallBody {
		c.wbuf = append(c.wbuf, body...)
		return s.write(c, c.wbuf)
	}
	if err := s.write(c, c.wbuf); err != nil {
		return err
	}
	return s.write(c, body)
}

// lingerClose stops sending and reads what the client still sends for up
// to half a second (at most 256 KiB), so that closing with unread bytes
// does not reset the connection before the client read its answer.
func lingerClose(nc net.Conn) {
	cw, ok := nc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	if nc.SetReadDeadline(time.Now().Add(500*time.Millisecond)) != nil {
		return
	}
	_, _ = io.CopyN(io.Discard, nc, 256<<10)
}

func (s *Server) write(c *conn, b []byte) error {
	if err := c.nc.SetWriteDeadline(deadline(time.Now(), s.WriteTimeout)); err != nil {
		return err
	}
	_, err := c.nc.Write(b)
	return err
}

// trim drops buffers a large message left behind, so an idle connection
// holds little.
func (c *conn) trim() {
	c.br.Shrink()
	x := &c.x
	x.Req.trimHead(retainHead)
	x.Resp.trimHead(retainHead)
	if cap(x.Req.Body) > retainLimit {
		x.Req.Body = nil
	}
	if cap(x.Resp.Body) > retainLimit {
		x.Resp.Body = nil
	}
	if cap(x.Out) > retainLimit {
		x.Out = nil
	}
	if cap(c.wbuf) > retainLimit {
		c.wbuf = nil
	}
	// A head of thousands of tiny fields leaves a large field list.
	if cap(x.Req.Fields) > retainFields {
		x.Req.Fields = nil
	}
	if cap(x.Resp.Fields) > retainFields {
		x.Resp.Fields = nil
	}
}

// retainFields is the longest field list a connection keeps between
// requests.
const retainFields = 256
