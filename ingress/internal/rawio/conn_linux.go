package rawio

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

const supported = true

// Conn is a wrapped connection. Reads and writes may run at the same time,
// as on any net.Conn; each direction has its own state and lock.
type Conn struct {
	net.Conn // deadlines, Close, addresses: the wrapped connection's
	rc       syscall.RawConn
	r, w     op
}

// op is one direction's call in progress: the buffer, what was done and
// the error, with the function the poller calls bound once, so a call
// allocates nothing.
type op struct {
	mu    sync.Mutex
	fn    func(fd uintptr) bool
	p     []byte
	n     int
	errno syscall.Errno
}

func newConn(c net.Conn, rc syscall.RawConn) *Conn {
	k := &Conn{Conn: c, rc: rc}
	k.r.fn = k.r.read
	k.w.fn = k.w.write
	return k
}

// SyscallConn is the wrapped connection's, for callers that peek or set
// socket options.
func (c *Conn) SyscallConn() (syscall.RawConn, error) { return c.rc, nil }

// Unwrap returns the wrapped connection.
func (c *Conn) Unwrap() net.Conn { return c.Conn }

// CloseWrite shuts down the sending side of the wrapped connection.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// Read reads what the socket holds, up to len(p), waiting on the poller
// (and the read deadline) while it holds nothing.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	o := &c.r
	o.mu.Lock()
	o.p, o.n, o.errno = p, 0, 0
	err := c.rc.Read(o.fn)
	n, errno := o.n, o.errno
	o.p = nil
	o.mu.Unlock()
	switch {
	case err != nil:
		return 0, c.renamed(err, "read")
	case errno != 0:
		return 0, c.opError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	raceRead(p[:n])
	return n, nil
}

// Write writes all of p, waiting on the poller (and the write deadline)
// while the socket's buffer is full.
func (c *Conn) Write(p []byte) (int, error) {
	raceWrite(p)
	o := &c.w
	o.mu.Lock()
	o.p, o.n, o.errno = p, 0, 0
	err := c.rc.Write(o.fn)
	n, errno := o.n, o.errno
	o.p = nil
	o.mu.Unlock()
	switch {
	case err != nil:
		return n, c.renamed(err, "write")
	case errno != 0:
		return n, c.opError("write", errno)
	}
	return n, nil
}

// read is called by the poller with the socket's descriptor: true when the
// read is done (bytes, EOF or an error), false to wait for readiness.
func (o *op) read(fd uintptr) bool {
	p := o.p
	if len(p) > maxChunk {
		p = p[:maxChunk]
	}
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch e {
		case 0:
			o.n = int(n)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			o.errno = e
			return true
		}
	}
}

// write writes what is left of o.p until it is all written (true), the
// socket's buffer is full (false: wait for readiness, then go on) or an
// error (true).
func (o *op) write(fd uintptr) bool {
	for o.n < len(o.p) {
		p := o.p[o.n:]
		if len(p) > maxChunk {
			p = p[:maxChunk]
		}
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch e {
		case 0:
			o.n += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			o.errno = e
			return true
		}
	}
	return true
}

// opError is the error package net returns for a failed system call.
func (c *Conn) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError(op, errno)}
}

// renamed gives an error of the raw connection (deadline exceeded, closed)
// the operation's name package net uses ("read" for "raw-read").
func (c *Conn) renamed(err error, op string) error {
	if oe, ok := err.(*net.OpError); ok {
		oe.Op = op
	}
	return err
}
