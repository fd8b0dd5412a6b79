// Package deadlinesweep keeps the deadlines of many connections without a
// runtime timer update or a clock read per deadline: a deadline set on a
// Conn is only recorded, and a sweeper that wakes once a tick expires the
// connections whose deadline has passed, so a deadline fires up to one
// tick late, never early. One that had passed by the last sweep when it is
// set takes effect at once.
//
// Why: an HTTP server sets two or three deadlines per request on its
// client connection (the idle wait, the request read, the answer write).
// Each is a timer update in the runtime, and each update of a timer that is
// already queued wakes another thread to look at the timers when none is
// parked in the network poller. In a profile of the ingress at saturation
// the updates were 3.3% of its CPU (a throughput A/B of this package alone
// was within the host's noise); nginx's timers are lazy the same way
// (NGX_TIMER_LAZY_DELAY).
package deadlinesweep

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// TickFor is the sweep interval for the shortest timeout the deadlines
// stand for: a sixteenth of it, between 1 ms and 250 ms.
func TickFor(shortest time.Duration) time.Duration {
	return min(max(shortest/16, time.Millisecond), 250*time.Millisecond)
}

// Sweeper expires the deadlines of the connections it wrapped. Its
// goroutine runs only while it has open connections.
type Sweeper struct {
	tick time.Duration
	base time.Time    // deadlines are kept as nanoseconds since base (monotonic)
	last atomic.Int64 // the last sweep's time, since base

	mu      sync.Mutex
	conns   []*Conn // open connections; each knows its index
	running bool
}

// New returns a sweeper that looks at its connections every tick.
func New(tick time.Duration) *Sweeper {
	if tick <= 0 {
		panic("deadlinesweep: tick must be positive")
	}
	return &Sweeper{tick: tick, base: time.Now()}
}

// Wrap returns c with its deadlines kept by s until it is closed.
func (s *Sweeper) Wrap(c net.Conn) *Conn {
	k := &Conn{Conn: c, s: s}
	s.mu.Lock()
	k.idx = len(s.conns)
	s.conns = append(s.conns, k)
	if !s.running {
		s.running = true
		go s.run()
	}
	s.mu.Unlock()
	return k
}

func (s *Sweeper) remove(k *Conn) {
	s.mu.Lock()
	if k.idx >= 0 {
		last := len(s.conns) - 1
		s.conns[k.idx] = s.conns[last]
		s.conns[k.idx].idx = k.idx
		s.conns[last] = nil
		s.conns = s.conns[:last]
		k.idx = -1
	}
	s.mu.Unlock()
}

// run expires passed deadlines every tick, and ends once no connection is
// open (Wrap starts it again).
func (s *Sweeper) run() {
	t := time.NewTicker(s.tick)
	defer t.Stop()
	for range t.C {
		if !s.sweep(time.Now()) {
			return
		}
	}
}

// sweep expires the deadlines passed by now; false (and the sweeper marked
// stopped) when no connection is open.
func (s *Sweeper) sweep(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.conns) == 0 {
		s.running = false
		return false
	}
	at := now.Sub(s.base)
	for _, c := range s.conns {
		c.expire(int64(at))
	}
	s.last.Store(int64(at))
	return true
}

// Len is the number of open connections the sweeper looks after.
func (s *Sweeper) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Conn is a connection whose deadlines a Sweeper keeps. Reads, writes and
// everything else are the wrapped connection's.
type Conn struct {
	net.Conn
	s   *Sweeper
	idx int // in s.conns; -1 once closed; guarded by s.mu

	mu     sync.Mutex
	dl     [2]deadline // read, write
	closed bool
}

// deadline is one direction's: whether one is set, the time it was set
// for (since the sweeper's base), and whether the wrapped connection's own
// deadline was set to fire (expired).
type deadline struct {
	set     bool
	at      int64
	expired bool
}

const (
	read  = 0
	write = 1
)

// alreadyPassed is the deadline set on the wrapped connection to end a
// blocked read or write at once.
var alreadyPassed = time.Unix(1, 0)

// SetReadDeadline records t; see the package comment.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.set(t, read, read) }

// SetWriteDeadline is SetReadDeadline for writes.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.set(t, write, write) }

// SetDeadline sets both.
func (c *Conn) SetDeadline(t time.Time) error { return c.set(t, read, write) }

func (c *Conn) set(t time.Time, from, to int) error {
	// t.Sub uses t's monotonic reading when it has one (time.Now().Add
	// does), as the runtime's deadlines do.
	at := int64(t.Sub(c.s.base))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.Conn.SetDeadline(t) // the wrapped connection's error for a closed one
	}
	for dir := from; dir <= to; dir++ {
		d := &c.dl[dir]
		d.set, d.at = !t.IsZero(), at
		var err error
		switch {
		case d.set && at <= c.s.last.Load():
			d.expired = true
			err = c.setConn(dir, t)
		case d.expired:
			d.expired = false
			err = c.setConn(dir, time.Time{})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *Conn) setConn(dir int, t time.Time) error {
	if dir == read {
		return c.Conn.SetReadDeadline(t)
	}
	return c.Conn.SetWriteDeadline(t)
}

// expire ends the waits of deadlines passed by now (since the base).
func (c *Conn) expire(now int64) {
	c.mu.Lock()
	for dir := range c.dl {
		d := &c.dl[dir]
		if d.set && !d.expired && d.at <= now {
			d.expired = true
			_ = c.setConn(dir, alreadyPassed)
		}
	}
	c.mu.Unlock()
}

// Close closes the wrapped connection and leaves the sweeper.
func (c *Conn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.s.remove(c)
	return c.Conn.Close()
}

// Unwrap returns the wrapped connection.
func (c *Conn) Unwrap() net.Conn { return c.Conn }

// CloseWrite shuts down the sending side of the wrapped connection.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// Listener wraps every connection its Listener accepts with its Sweeper.
type Listener struct {
	net.Listener
	Sweeper *Sweeper
}

// Accept waits for the next connection and wraps it.
func (l Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.Sweeper.Wrap(c), nil
}
