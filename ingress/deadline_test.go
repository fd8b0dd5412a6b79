package ingress

import (
	"net"
	"testing"
	"time"
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
	for i := range 10000 {
		now := t0.Add(time.Duration(i) * 100 * time.Microsecond) // 10,000 requests/s on one connection
		if err := c.setWriteDeadline(now, body); err != nil {
			t.Fatal(err)
		}
		check(now, body, fc.write, "write")
		if err := c.setReadDeadline(now, header); err != nil {
			t.Fatal(err)
		}
		check(now, header, fc.read, "header read")
		calls += 2
		if i%1000 == 999 { // now and then a body that is not buffered whole
			if err := c.setReadDeadline(now, body); err != nil {
				t.Fatal(err)
			}
			check(now, body, fc.read, "body read")
			if err := c.setReadDeadline(now, earlyAnswerWait); err != nil {
				t.Fatal(err)
			}
			check(now, earlyAnswerWait, fc.read, "early answer")
			calls += 2
		}
	}
	// One second at 10,000 requests/s: the 250 ms slack of the 60 s write
	// deadline and the 5 s header deadline's 250 ms each renew about 4
	// times, plus 2 renewals per switch to another timeout.
	if fc.sets > 60 {
		t.Fatalf("%d deadline updates for %d requests to set one, want at most 60", fc.sets, calls)
	}
	// A connection idle past its deadline gets a fresh one.
	later := t0.Add(time.Hour)
	if err := c.setReadDeadline(later, header); err != nil {
		t.Fatal(err)
	}
	check(later, header, fc.read, "after an idle hour")
}
