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

// Lazy deadlines never fire before their timeout and at most their slack
// after it, whatever the order of the timeouts asked for; and a busy
// connection renews them far less often than it asks.
func TestUpstreamConn_LazyDeadlines(t *testing.T) {
	fc := &deadlineConn{}
	c := &upstreamConn{conn: fc}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	header, body := 5*time.Second, 60*time.Second
	check := func(now time.Time, timeout time.Duration, got time.Time, what string) {
		t.Helper()
		if want := now.Add(timeout); got.Before(want) || got.Sub(want) > deadlineSlack(timeout) {
			t.Fatalf("%s at +%v for %v: deadline +%v, want within [+%v, +%v]", what, now.Sub(t0), timeout,
				got.Sub(t0), want.Sub(t0), want.Add(deadlineSlack(timeout)).Sub(t0))
		}
	}
	calls := 0
	read := func(now time.Time, timeout time.Duration, what string) {
		t.Helper()
		if err := c.setReadDeadline(now, timeout); err != nil {
			t.Fatal(err)
		}
		check(now, timeout, fc.read, what)
		calls++
	}
	for i := range 10000 {
		now := t0.Add(time.Duration(i) * 100 * time.Microsecond) // 10,000 requests/s on one connection
		if err := c.setWriteDeadline(now, body); err != nil {
			t.Fatal(err)
		}
		check(now, body, fc.write, "write")
		calls++
		read(now, header, "header read")
		if i%1000 == 999 { // now and then a body that is not buffered whole
			read(now, body, "body read")
			read(now, earlyAnswerWait, "early answer")
		}
	}
	// One second at 10,000 requests/s: the 250 ms slack of the 60 s write
	// deadline and the 5 s header deadline's 250 ms each renew about 4
	// times, plus 2 renewals per switch to another timeout.
	if fc.sets > 60 {
		t.Fatalf("%d deadline updates for %d requests to set one, want at most 60", fc.sets, calls)
	}
	// A connection idle past its deadline gets a fresh one.
	read(t0.Add(time.Hour), header, "after an idle hour")
}

// A deadline kept is never earlier than asked nor later than its slack.
func TestLazyDeadline_Bounds(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	timeout := 5 * time.Second
	want, slack := now.Add(timeout), deadlineSlack(timeout)
	if slack != 250*time.Millisecond || deadlineSlack(100*time.Millisecond) != 6250*time.Microsecond {
		t.Fatalf("slack %v for 5 s and %v for 100 ms, want 250 ms and 6.25 ms", slack, deadlineSlack(100*time.Millisecond))
	}
	for _, tt := range []struct {
		cur   time.Time
		renew bool
	}{
		{time.Time{}, true},
		{want.Add(-time.Nanosecond), true}, // would fire early
		{want, false},
		{want.Add(slack), false},
		{want.Add(slack + time.Nanosecond), true}, // would fire too late
	} {
		got, renew := lazyDeadline(tt.cur, now, timeout)
		if renew != tt.renew {
			t.Errorf("deadline +%v: renew %v, want %v", tt.cur.Sub(now), renew, tt.renew)
		}
		if renew && !got.Equal(want.Add(slack)) {
			t.Errorf("renewed to +%v, want +%v", got.Sub(now), want.Add(slack).Sub(now))
		}
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
