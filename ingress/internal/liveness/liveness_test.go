package liveness

import (
	"net"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress/internal/tcppair"
)

func pair(t *testing.T) (client, server net.Conn) { return tcppair.New(t) }

// waitUnusable polls: the peer's bytes or FIN reach the socket soon after
// its call returns, not necessarily before.
func waitUnusable(t *testing.T, k *Checker) {
	t.Helper()
	end := time.Now().Add(5 * time.Second)
	for k.Usable() {
		if time.Now().After(end) {
			t.Fatal("the connection still looks usable")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestChecker_QuietConnectionIsUsable(t *testing.T) {
	c, _ := pair(t)
	var k Checker
	k.Init(c)
	if !k.Usable() {
		t.Fatal("a quiet connection is not usable")
	}
	// An expired read deadline does not make it unusable.
	_ = c.SetReadDeadline(time.Now().Add(-time.Second))
	if !k.Usable() {
		t.Fatal("a quiet connection with an expired deadline is not usable")
	}
}

func TestChecker_StrayBytesEOFAndCloseAreNotUsable(t *testing.T) {
	t.Run("stray bytes", func(t *testing.T) {
		c, s := pair(t)
		var k Checker
		k.Init(c)
		if _, err := s.Write([]byte("HTTP/1.1 408 Request Timeout\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		waitUnusable(t, &k)
		// Peeking consumed nothing.
		buf := make([]byte, 8)
		if n, _ := c.Read(buf); string(buf[:n]) != "HTTP/1.1" {
			t.Fatalf("read %q after the check", buf[:n])
		}
	})
	t.Run("peer closed", func(t *testing.T) {
		c, s := pair(t)
		var k Checker
		k.Init(c)
		s.Close()
		waitUnusable(t, &k)
	})
	t.Run("closed here", func(t *testing.T) {
		c, _ := pair(t)
		var k Checker
		k.Init(c)
		c.Close()
		if k.Usable() {
			t.Fatal("a closed connection is usable")
		}
	})
}

func TestChecker_NotASocketIsNotChecked(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var k Checker
	k.Init(a)
	if !k.Usable() {
		t.Fatal("a pipe is not checked, so usable")
	}
}

func TestChecker_AllocatesNothing(t *testing.T) {
	c, _ := pair(t)
	var k Checker
	k.Init(c)
	if n := testing.AllocsPerRun(100, func() { k.Usable() }); n != 0 {
		t.Fatalf("%v allocations per check", n)
	}
}

func BenchmarkChecker(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		s, _ := l.Accept()
		if s != nil {
			defer s.Close()
			buf := make([]byte, 1)
			_, _ = s.Read(buf)
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var k Checker
	k.Init(c)
	b.ReportAllocs()
	for b.Loop() {
		if !k.Usable() {
			b.Fatal("not usable")
		}
	}
}
