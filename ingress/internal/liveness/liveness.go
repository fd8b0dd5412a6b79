// Package liveness tells whether an idle keep-alive connection can carry
// another request: the peer has sent nothing since the last answer (no
// stray bytes, no 408 before a close, no EOF) and the socket holds no
// error. A connection that fails the check would put the next exchange out
// of step (stray bytes read as its answer) or fail it before a byte of
// answer, which for a request that is not idempotent cannot be replayed.
//
// The check is one non-blocking recv with MSG_PEEK through the socket's
// syscall.RawConn, kept on the Checker with the callback bound once, so a
// check allocates nothing and reads nothing off the connection.
package liveness

import (
	"net"
	"syscall"
)

// Checker checks one connection. Its zero value checks nothing (every call
// of Usable reports true); Init binds it to a connection. It is not safe for
// concurrent use, like the idle connection it checks.
type Checker struct {
	rc     syscall.RawConn
	fn     func(fd uintptr)
	buf    [1]byte
	usable bool
}

// Init binds k to c. A connection that is not a socket (a test's in-memory
// pipe, a wrapper) is not checked.
func (k *Checker) Init(c net.Conn) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	k.rc, k.fn = rc, k.peek
}

// Usable reports whether the connection has nothing to read and no error
// pending: false once the peer sent a byte, closed or reset it.
func (k *Checker) Usable() bool {
	if k.fn == nil || !supported {
		return true
	}
	k.usable = false
	if err := k.rc.Control(k.fn); err != nil {
		return false // closed
	}
	return k.usable
}
