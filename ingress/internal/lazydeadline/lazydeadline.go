// Package lazydeadline renews a connection's deadline only when the one in
// force would fire too early or too late: a renewed deadline is set a
// little later than asked (its slack), so the next requests on a busy
// connection find it still good and update no runtime timer. A deadline
// fires between its time and its slack after it, never early. nginx's
// timers are lazy the same way (NGX_TIMER_LAZY_DELAY, 300 ms).
package lazydeadline

import "time"

// Slack is how much later than asked a deadline for timeout may fire: a
// sixteenth of it, at most 250 ms.
func Slack(timeout time.Duration) time.Duration {
	return min(timeout/16, 250*time.Millisecond)
}

// Renew returns the deadline to set for want, or false when cur, the
// deadline in force, already fires between want and want+slack.
func Renew(cur, want time.Time, slack time.Duration) (time.Time, bool) {
	if !cur.Before(want) && cur.Sub(want) <= slack {
		return cur, false
	}
	return want.Add(slack), true
}
