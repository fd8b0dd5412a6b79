//go:build !linux

package rawio

import (
	"net"
	"syscall"
)

// Elsewhere connections are used as package net makes them.
const supported = false

func newConn(c net.Conn, _ syscall.RawConn) net.Conn { return c }

// Conn is never made here; the type is declared so that code naming it
// builds on every platform.
type Conn struct{ net.Conn }

// Unwrap returns the wrapped connection.
func (c *Conn) Unwrap() net.Conn { return c.Conn }
