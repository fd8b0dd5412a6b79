// Package hangup notices that a client hung up (closed, half-closed or
// reset its connection) while the proxy waits for a backend's answer, and
// closes the backend connection of that request, so the backend sees the
// close at once and drops the request from its queue, as nginx does (its
// 499).
//
// Why this way: the proxy serves each request on its client connection's
// goroutine, which waits on the backend's socket; Go's poller cannot wait on
// two sockets from one goroutine. Instead every client socket is added, when
// accepted, to one epoll set of the process, for EPOLLRDHUP only and edge
// triggered: it reports once when the client's FIN or RST arrives, and
// never for data, so a busy connection costs nothing per request but two
// mutex operations (Attach, Detach). One goroutine, blocked in epoll_wait,
// serves the whole process.
//
// A client that half-closes after sending its request (shutdown(SHUT_WR))
// reads as gone, as it does for nginx (proxy_ignore_client_abort off): a
// FIN cannot be told from a close.
package hangup

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
)

// Conn is a client connection watched for hangups.
type Conn struct {
	net.Conn
	id    uint64
	once  sync.Once
	mu    sync.Mutex
	gone  bool
	onHup io.Closer // closed at a hangup, while attached
}

// Watch returns c watched for hangups (a *Conn), or c itself where
// hangups cannot be watched (not a socket, not Linux, no epoll).
func Watch(c net.Conn) net.Conn {
	w := theWatcher()
	if w == nil {
		return c
	}
	hc := &Conn{Conn: c}
	if !w.add(hc) {
		return c
	}
	return hc
}

// Attach has x closed as soon as the client hangs up, until Detach. It
// reports false, attaching nothing, when the client is gone already.
func (c *Conn) Attach(x io.Closer) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone {
		return false
	}
	c.onHup = x
	return true
}

// Detach ends Attach and reports whether the client hung up meanwhile (the
// attached Closer was then closed, or is being closed).
func (c *Conn) Detach() (gone bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onHup = nil
	return c.gone
}

// Gone reports whether the client hung up.
func (c *Conn) Gone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gone
}

// hangUp is called by the watcher at the client's FIN or RST.
func (c *Conn) hangUp() {
	c.mu.Lock()
	c.gone = true
	x := c.onHup
	c.onHup = nil
	c.mu.Unlock()
	if x != nil {
		_ = x.Close()
	}
}

// Close stops watching and closes the connection.
func (c *Conn) Close() error {
	c.once.Do(func() { theWatcher().remove(c) })
	return c.Conn.Close()
}

// CloseWrite shuts down the sending side of the wrapped connection.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// SyscallConn is the wrapped connection's (add checks it is one).
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}

// Unwrap returns the wrapped connection.
func (c *Conn) Unwrap() net.Conn { return c.Conn }
