package sim

import "time"

// Network is the one-way delay between an ingress replica and a server,
// for requests, answers and probes alike: Delay plus a uniform draw in
// [0, Jitter). The load generator's hop to the ingress is not modelled
// (on a real testbed it is the same for every policy).
type Network struct {
	Delay  time.Duration
	Jitter time.Duration
}

// DefaultNetwork is a loopback-like hop: 100 µs ± 50 µs.
var DefaultNetwork = Network{Delay: 50 * time.Microsecond, Jitter: 100 * time.Microsecond}

// network draws delays from its own stream, so changing the delay does
// not change the service times the servers draw.
type network struct {
	delay, jitter int64
	rng           Rng
}

func (n *network) draw() int64 {
	if n.jitter <= 0 {
		return n.delay
	}
	return n.delay + int64(n.rng.Float64()*float64(n.jitter))
}
