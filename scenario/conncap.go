package scenario

import (
	"math"
	"time"
)

// Bounds of the default connection cap (see Load.ConnectionCap).
const (
	// MinConnectionCap keeps a slow low-rate run from queueing at the
	// client.
	MinConnectionCap = 64
	// MaxConnectionCap keeps the generator's sockets well inside a
	// default file limit, with the ingress and backends on the same host.
	MaxConnectionCap = 8192
)

// ConnectionCap is the load generator's cap on open connections, in total
// over all ingress replicas: MaxConnections when set, otherwise sized from
// the scenario so it binds only when the run is already failing. An open
// loop at peak rate R whose requests take up to the timeout T has at most
// R×T in flight (Little's law); more can only be waiting when requests
// take longer than the timeout, i.e. when they fail anyway. A closed loop
// never has more than Users in flight. Both are bounded by
// [MinConnectionCap, MaxConnectionCap].
func (l Load) ConnectionCap() int {
	if l.MaxConnections > 0 {
		return l.MaxConnections
	}
	return int(min(max(l.InFlightBound(), MinConnectionCap), MaxConnectionCap))
}

// InFlightBound is the most requests the load can have in flight while
// every request ends within the timeout: peak rate × timeout for an open
// loop (Little's law), the users for a closed loop. A connection cap at
// or above it can hold back only requests that fail by the timeout
// anyway; below it, the cap queues requests that could have succeeded.
func (l Load) InFlightBound() float64 {
	if len(l.Open) == 0 {
		return float64(l.Users)
	}
	timeout := l.Timeout.Std()
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return math.Ceil(l.PeakRate() * timeout.Seconds())
}

// PeakRate is the highest open-loop rate of any phase; 0 for closed loop.
func (l Load) PeakRate() float64 {
	peak := 0.0
	for _, p := range l.Open {
		peak = max(peak, p.Rate, p.From, p.To, p.High, p.Low)
	}
	return peak
}
