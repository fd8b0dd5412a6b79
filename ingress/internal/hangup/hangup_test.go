package hangup

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// closer records its Close.
type closer struct{ closed atomic.Bool }

func (c *closer) Close() error { c.closed.Store(true); return nil }

// pair returns a watched server side and its client, over loopback TCP.
func pair(t *testing.T) (*Conn, *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cl, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	w, ok := Watch(sc).(*Conn)
	if !ok {
		t.Skip("hangups are not watched on this platform")
	}
	t.Cleanup(func() { w.Close(); cl.Close() })
	return w, cl.(*net.TCPConn)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A client's close, half-close or reset closes what is attached; data does
// not.
func TestHangupClosesAttached(t *testing.T) {
	for _, tt := range []struct {
		name string
		hang func(c *net.TCPConn)
	}{
		{"close", func(c *net.TCPConn) { c.Close() }},
		{"half-close", func(c *net.TCPConn) { c.CloseWrite() }},
		{"reset", func(c *net.TCPConn) { c.SetLinger(0); c.Close() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w, cl := pair(t)
			var x closer
			if !w.Attach(&x) {
				t.Fatal("attach refused before any hangup")
			}
			if _, err := cl.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond) // data alone must not count
			if x.closed.Load() || w.Gone() {
				t.Fatal("data read as a hangup")
			}
			tt.hang(cl)
			waitFor(t, "attached closed", x.closed.Load)
			if !w.Detach() {
				t.Fatal("Detach: not gone after the hangup")
			}
			var y closer
			if w.Attach(&y) {
				t.Fatal("attached after the hangup")
			}
		})
	}
}

// A hangup while nothing is attached is remembered; Detach stops the
// attached Closer from being closed later.
func TestHangupDetached(t *testing.T) {
	w, cl := pair(t)
	var x closer
	w.Attach(&x)
	if w.Detach() {
		t.Fatal("gone before any hangup")
	}
	cl.Close()
	waitFor(t, "gone", w.Gone)
	if x.closed.Load() {
		t.Fatal("a detached Closer was closed")
	}
}

// Closing stops the watch: the id is forgotten.
func TestCloseForgets(t *testing.T) {
	w, _ := pair(t)
	w.Close()
	ww := theWatcher()
	ww.mu.Lock()
	_, ok := ww.conns[w.id]
	ww.mu.Unlock()
	if ok {
		t.Fatal("closed connection still registered")
	}
}
