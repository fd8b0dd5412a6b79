package rawio

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress/internal/tcppair"
)

// pair returns a connected loopback TCP pair: the client end wrapped, the
// server end as package net makes it.
func pair(t testing.TB) (wrapped, peer net.Conn) {
	t.Helper()
	c, peer := tcppair.New(t)
	return Wrap(c), peer
}

func TestWrap_OnlySockets(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Wrap(a) != a {
		t.Fatal("a pipe was wrapped")
	}
	w, _ := pair(t)
	if _, ok := w.(*Conn); ok != supported {
		t.Fatalf("a TCP connection wrapped: %v, want %v", ok, supported)
	}
	if _, ok := w.(syscall.Conn); !ok {
		t.Fatal("the wrapped connection hides SyscallConn (socket options, liveness peeks)")
	}
}

// Bytes larger than the socket buffers and than one system call's chunk
// go both ways at once, intact: partial writes go on after the poller
// reports room, and reads and writes of one connection run concurrently.
func TestConn_LargeTransfersBothWays(t *testing.T) {
	w, peer := pair(t)
	out := make([]byte, 3*maxChunk+12345)
	in := make([]byte, 2*maxChunk+777)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range out {
		out[i] = byte(rng.Uint32())
	}
	for i := range in {
		in[i] = byte(rng.Uint32())
	}
	errc := make(chan error, 4)
	got := make(chan []byte, 2)
	go func() { // wrapped -> peer
		n, err := w.Write(out)
		if err == nil && n != len(out) {
			err = io.ErrShortWrite
		}
		errc <- err
	}()
	go func() {
		b, err := io.ReadAll(io.LimitReader(peer, int64(len(out))))
		got <- b
		errc <- err
	}()
	go func() { // peer -> wrapped
		_, err := peer.Write(in)
		errc <- err
	}()
	b := make([]byte, len(in))
	if _, err := io.ReadFull(w, b); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(b, in) {
		t.Fatal("the wrapped end read other bytes than the peer wrote")
	}
	if !bytes.Equal(<-got, out) {
		t.Fatal("the peer read other bytes than the wrapped end wrote")
	}
}

func TestConn_EOFAfterPeerClose(t *testing.T) {
	w, peer := pair(t)
	if _, err := peer.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	peer.Close()
	b, err := io.ReadAll(w)
	if err != nil || string(b) != "bye" {
		t.Fatalf("ReadAll = %q, %v; want \"bye\", nil (io.EOF ends it)", b, err)
	}
	if n, err := w.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("Read after EOF = %d, %v; want 0, io.EOF", n, err)
	}
}

func TestConn_ResetReadsAsNetDoes(t *testing.T) {
	w, peer := pair(t)
	_ = peer.(*net.TCPConn).SetLinger(0) // close sends RST
	peer.Close()
	_, err := w.Read(make([]byte, 8))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Read after a reset = %v; want ECONNRESET", err)
	}
	var oe *net.OpError
	var se *os.SyscallError
	if !errors.As(err, &oe) || oe.Op != "read" || !errors.As(err, &se) {
		t.Fatalf("Read after a reset = %#v; want *net.OpError{Op: read} around *os.SyscallError", err)
	}
	// Writing to a connection the peer reset fails too (EPIPE or
	// ECONNRESET), with the write's name; polled, as the kernel may take
	// the first write before it reports.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err = w.Write([]byte("x"))
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("writes to a reset connection kept succeeding")
		}
	}
	if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Write after a reset = %v; want EPIPE or ECONNRESET", err)
	}
	if !errors.As(err, &oe) || oe.Op != "write" {
		t.Fatalf("Write after a reset = %#v; want *net.OpError{Op: write}", err)
	}
}

func TestConn_DeadlinesAndClose(t *testing.T) {
	w, peer := pair(t)
	if err := w.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := w.Read(make([]byte, 8))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past the deadline = %v; want a timeout (os.ErrDeadlineExceeded)", err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("Read past the deadline = %#v; want Op read, as package net", err)
	}

	// Writes to a peer that does not read fill the socket's buffers, then
	// block until the write deadline; each reports what it wrote, to the
	// byte: the peer reads exactly the sum.
	written := 0
	var werr error
	chunk := make([]byte, 1<<20)
	for range 1000 {
		if err := w.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		n, err := w.Write(chunk)
		written += n
		if err != nil {
			werr = err
			break
		}
	}
	if !errors.Is(werr, os.ErrDeadlineExceeded) {
		t.Fatalf("Write into a full buffer = %v; want the deadline", werr)
	}
	w2, peer2 := pair(t) // the rest of the test needs an open connection
	w.Close()
	got, err := io.Copy(io.Discard, peer)
	if err != nil || got != int64(written) {
		t.Fatalf("the peer read %d bytes (%v); the writes reported %d", got, err, written)
	}
	w = w2
	_ = peer2

	// A blocked read is ended by Close, with net.ErrClosed.
	_ = w.SetReadDeadline(time.Time{})
	errc := make(chan error, 1)
	go func() {
		_, err := w.Read(make([]byte, 8))
		errc <- err
	}()
	time.AfterFunc(10*time.Millisecond, func() { w.Close() })
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read ended by Close = %v; want net.ErrClosed", err)
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close = %v; want net.ErrClosed", err)
	}
}

func TestListener_WrapsAccepted(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rl := Listener{l}
	defer rl.Close()
	go func() {
		c, err := net.Dial("tcp", l.Addr().String())
		if err == nil {
			_, _ = c.Write([]byte("hi"))
			c.Close()
		}
	}()
	c, err := rl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*Conn); ok != supported {
		t.Fatalf("accepted connection wrapped: %v, want %v", ok, supported)
	}
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "hi" {
		t.Fatalf("read %q, %v", b, err)
	}
}

// BenchmarkPingPong sends 64 bytes and reads them back from an echoing
// peer, through this package and through package net: the cost of a
// request's two calls on each side.
func BenchmarkPingPong(b *testing.B) {
	for _, raw := range []bool{false, true} {
		name := "net"
		if raw {
			name = "rawio"
		}
		b.Run(name, func(b *testing.B) {
			w, peer := pair(b)
			if c, ok := w.(*Conn); ok && !raw {
				w = c.Unwrap()
			}
			go func() { _, _ = io.Copy(peer, peer) }()
			msg := make([]byte, 64)
			buf := make([]byte, 64)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := w.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(w, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
