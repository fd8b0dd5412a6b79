// Package tcppair makes connected loopback TCP connections for tests of
// the packages that work on sockets.
package tcppair

import (
	"net"
	"testing"
)

// New returns the two ends of a TCP connection on 127.0.0.1, both closed
// when the test ends.
func New(t testing.TB) (client, server net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		acc <- c
	}()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-acc
	if server == nil {
		client.Close()
		t.Fatal("tcppair: accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}
