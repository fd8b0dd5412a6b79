package ingress

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress/route"
)

// deadlineConn records the deadlines set on it.
type deadlineConn struct {
	net.Conn
	read, write time.Time
	sets        int
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error  { c.read = t; c.sets++; return nil }
func (c *deadlineConn) SetWriteDeadline(t time.Time) error { c.write = t; c.sets++; return nil }

// Every request sets its deadlines afresh, timeout from the time given:
// a connection kept from an earlier request never carries its old ones.
func TestUpstreamConn_DeadlinesAreTimeoutFromNow(t *testing.T) {
	fc := &deadlineConn{}
	c := &upstreamConn{conn: fc}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, timeout := range []time.Duration{60 * time.Second, 5 * time.Second, earlyAnswerWait, 5 * time.Second} {
		now := t0.Add(time.Duration(i) * 100 * time.Microsecond)
		if err := c.setWriteDeadline(now, timeout); err != nil {
			t.Fatal(err)
		}
		if err := c.setReadDeadline(now, timeout); err != nil {
			t.Fatal(err)
		}
		if want := now.Add(timeout); !fc.write.Equal(want) || !fc.read.Equal(want) {
			t.Fatalf("request %d: write deadline +%v, read +%v, want +%v", i, fc.write.Sub(now), fc.read.Sub(now), timeout)
		}
	}
	if fc.sets != 8 {
		t.Fatalf("%d deadline updates for 4 requests, want 8", fc.sets)
	}
}

// deadlineRecorder is a dialed connection that records the write
// deadlines set on it.
type deadlineRecorder struct {
	net.Conn
	mu     sync.Mutex
	writes []time.Time
}

func (c *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.writes = append(c.writes, t)
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

// A slow dial does not use up the write timeout: the write's deadline
// starts after the dial, whatever the dial took.
func TestProxy_SlowDialKeepsTheWriteTimeout(t *testing.T) {
	be := startRawBackend(t, answerOK)
	var (
		d       net.Dialer
		mu      sync.Mutex
		dialed  []*deadlineRecorder
		dialEnd time.Time
	)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		time.Sleep(300 * time.Millisecond) // longer than the write timeout's slack
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		r := &deadlineRecorder{Conn: c}
		mu.Lock()
		dialed, dialEnd = append(dialed, r), time.Now()
		mu.Unlock()
		return r, nil
	}
	const timeout = 250 * time.Millisecond
	_, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin", DialContext: dial, UpstreamReadTimeout: timeout},
		route.Spec{Key: "w", Path: "/", Endpoints: []string{be.addr}})
	out := exchangeRaw(t, strings.TrimPrefix(url, "http://"), "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
	mu.Lock()
	defer mu.Unlock()
	if len(dialed) != 1 {
		t.Fatalf("%d dials, want 1 (answer %q)", len(dialed), statusLine(out))
	}
	w := dialed[0]
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.writes) == 0 {
		t.Fatalf("no write deadline was set (answer %q)", statusLine(out))
	}
	if got, min := w.writes[0], dialEnd.Add(timeout); got.Before(min) {
		t.Fatalf("write deadline %v before the dial ended + the %v write timeout; the dial's time came out of it", min.Sub(got), timeout)
	}
}
