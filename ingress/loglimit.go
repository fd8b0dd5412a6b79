package ingress

import (
	"sync/atomic"
	"time"
)

// logEvery is the shortest interval between two lines of a limited log.
const logEvery = time.Second

// logLimiter lets one line through per logEvery and counts the rest, so a
// dead backend under load cannot flood the log.
type logLimiter struct {
	next       atomic.Int64 // unix nanoseconds before which lines are dropped
	suppressed atomic.Int64
}

// allow reports whether a line may be logged now and, if so, how many were
// dropped since the last one.
func (l *logLimiter) allow(now time.Time) (bool, int64) {
	n := l.next.Load()
	if now.UnixNano() < n || !l.next.CompareAndSwap(n, now.Add(logEvery).UnixNano()) {
		l.suppressed.Add(1)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}
