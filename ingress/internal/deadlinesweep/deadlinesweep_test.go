package deadlinesweep

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress/internal/tcppair"
)

// pair returns a loopback TCP pair, the first end wrapped by s.
func pair(t *testing.T, s *Sweeper) (*Conn, net.Conn) {
	t.Helper()
	c, peer := tcppair.New(t)
	w := s.Wrap(c)
	t.Cleanup(func() { w.Close() })
	return w, peer
}

// manual is a sweeper whose own goroutine never sweeps within a test: the
// test sweeps with the times it chooses.
func manual() *Sweeper { return New(time.Hour) }

func readByte(t *testing.T, c net.Conn) (byte, error) {
	t.Helper()
	b := make([]byte, 1)
	_, err := c.Read(b)
	return b[0], err
}

func wantTimeout(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: %v; want the deadline exceeded", what, err)
	}
}

func TestConn_DeadlineFiresOnlyWhenSweptPastIt(t *testing.T) {
	s := manual()
	c, peer := pair(t, s)
	at := time.Now().Add(time.Hour)
	if err := c.SetReadDeadline(at); err != nil {
		t.Fatal(err)
	}
	// A sweep before the deadline leaves the connection alone.
	s.sweep(at.Add(-time.Nanosecond))
	if _, err := peer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if b, err := readByte(t, c); err != nil || b != 'x' {
		t.Fatalf("read before the deadline = %q, %v", b, err)
	}
	// A sweep at the deadline ends the wait: a read times out at once.
	s.sweep(at)
	_, err := readByte(t, c)
	wantTimeout(t, err, "read after a sweep past the deadline")

	// A new deadline (later, or none) lifts the expiry.
	for _, next := range []time.Time{at.Add(time.Hour), {}} {
		if err := c.SetReadDeadline(next); err != nil {
			t.Fatal(err)
		}
		if _, err := peer.Write([]byte("y")); err != nil {
			t.Fatal(err)
		}
		if b, err := readByte(t, c); err != nil || b != 'y' {
			t.Fatalf("read after the deadline moved to %v = %q, %v", next, b, err)
		}
		s.sweep(at.Add(90 * time.Minute))
		if next.IsZero() {
			if _, err := peer.Write([]byte("z")); err != nil {
				t.Fatal(err)
			}
			if b, err := readByte(t, c); err != nil || b != 'z' {
				t.Fatalf("no deadline, swept = %q, %v", b, err)
			}
		}
	}
}

func TestConn_PassedDeadlineAppliesAtOnce(t *testing.T) {
	s := manual()
	c, _ := pair(t, s)
	if err := c.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err := readByte(t, c)
	wantTimeout(t, err, "read with a deadline passed before the last sweep, no sweep since")
}

// A deadline that passed after the last sweep (no clock is read when it is
// set) fires at the next one.
func TestConn_DeadlineSinceTheLastSweepWaitsForTheNext(t *testing.T) {
	s := manual()
	c, _ := pair(t, s)
	swept := time.Now()
	s.sweep(swept)
	if err := c.SetReadDeadline(swept.Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	expired := c.dl[read].expired
	c.mu.Unlock()
	if expired {
		t.Fatal("a deadline after the last sweep was applied before the next")
	}
	errc := make(chan error, 1)
	go func() {
		_, err := readByte(t, c)
		errc <- err
	}()
	s.sweep(swept.Add(time.Millisecond))
	wantTimeout(t, <-errc, "read ended by the next sweep")
}

func TestConn_SetDeadlineCoversWrites(t *testing.T) {
	s := manual()
	c, _ := pair(t, s)
	at := time.Now().Add(time.Hour)
	if err := c.SetDeadline(at); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("before")); err != nil {
		t.Fatal(err)
	}
	s.sweep(at)
	_, err := c.Write([]byte("after"))
	wantTimeout(t, err, "write after a sweep past SetDeadline's deadline")
	_, err = readByte(t, c)
	wantTimeout(t, err, "read after a sweep past SetDeadline's deadline")

	// SetWriteDeadline alone leaves the read deadline expired.
	if err := c.SetWriteDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("again")); err != nil {
		t.Fatal(err)
	}
	_, err = readByte(t, c)
	wantTimeout(t, err, "read after only the write deadline was lifted")
}

// With three connections and the middle one closed, the other two are
// still swept (the swap-remove keeps the indexes right) and the sweeper
// holds two.
func TestSweeper_CloseKeepsTheOthers(t *testing.T) {
	s := manual()
	a, _ := pair(t, s)
	b, _ := pair(t, s)
	c, _ := pair(t, s)
	at := time.Now().Add(time.Hour)
	for _, k := range []*Conn{a, b, c} {
		if err := k.SetReadDeadline(at); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	b.Close() // twice is harmless
	if n := s.Len(); n != 2 {
		t.Fatalf("sweeper holds %d connections after one of 3 closed; want 2", n)
	}
	s.sweep(at)
	for _, k := range []*Conn{a, c} {
		_, err := readByte(t, k)
		wantTimeout(t, err, "read on a connection the close left in place")
	}
	if err := b.SetReadDeadline(at); err == nil {
		t.Fatal("setting a deadline on a closed connection did not fail")
	}
}

// The sweeper's own goroutine ends a read once its deadline passed, never
// before it, and stops when the last connection closes.
func TestSweeper_RunsWhileConnectionsAreOpen(t *testing.T) {
	s := New(time.Millisecond)
	c, _ := pair(t, s)
	start := time.Now()
	at := start.Add(30 * time.Millisecond)
	if err := c.SetReadDeadline(at); err != nil {
		t.Fatal(err)
	}
	_, err := readByte(t, c)
	wantTimeout(t, err, "read past the deadline")
	if now := time.Now(); now.Before(at) {
		t.Fatalf("the deadline fired %v early", at.Sub(now))
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		running := s.running
		s.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sweeper still runs with no connection open")
		}
		time.Sleep(time.Millisecond)
	}
	// A new connection starts it again.
	c2, _ := pair(t, s)
	if err := c2.SetReadDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err = readByte(t, c2)
	wantTimeout(t, err, "read past the deadline on a restarted sweeper")
}

// Deadlines set, sweeps and closes at once (run with -race).
func TestSweeper_Concurrent(t *testing.T) {
	s := manual()
	var conns []*Conn
	for range 8 {
		c, _ := pair(t, s)
		conns = append(conns, c)
	}
	stop := make(chan struct{})
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		for {
			select {
			case <-stop:
				return
			default:
				s.sweep(time.Now())
			}
		}
	}()
	var workers sync.WaitGroup
	for i, c := range conns {
		workers.Go(func() {
			for j := range 200 {
				_ = c.SetDeadline(time.Now().Add(time.Duration(j%3) * time.Millisecond))
			}
			if i%2 == 0 {
				c.Close()
			}
		})
	}
	workers.Wait()
	close(stop)
	<-swept
	if n := s.Len(); n != 4 {
		t.Fatalf("sweeper holds %d connections; want 4", n)
	}
}

func TestListener_WrapsAccepted(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := manual()
	sl := Listener{Listener: l, Sweeper: s}
	defer sl.Close()
	go func() {
		if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
			defer c.Close()
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	c, err := sl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*Conn); !ok || s.Len() != 1 {
		t.Fatalf("accepted %T, sweeper holds %d; want a *Conn held", c, s.Len())
	}
	c.Close()
	if s.Len() != 0 {
		t.Fatal("a closed accepted connection stays with the sweeper")
	}
}

func TestTickFor(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{60 * time.Second, 250 * time.Millisecond},
		{time.Second, 62500 * time.Microsecond},
		{5 * time.Millisecond, time.Millisecond},
		{0, time.Millisecond},
	} {
		if got := TickFor(c.in); got != c.want {
			t.Errorf("TickFor(%v) = %v; want %v", c.in, got, c.want)
		}
	}
}
