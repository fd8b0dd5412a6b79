package sim

import (
	"fmt"
	"math"
	"time"
)

// Group is a set of identical backend replicas, with the knobs of the Rust
// backend (backend/src/config.rs) that shape its answers in time.
type Group struct {
	Name     string
	Replicas int
	// Mode is io (default), sleep (no capacity limit, no antagonists),
	// cpu (a service time of rounds × CPURoundTime) or cpu-share (shared
	// machines, processor sharing: see CPUShare).
	Mode         string
	ServiceTime  time.Duration // mean service time of 1000 iterations
	Distribution string        // fixed, exp or normal
	Slow         float64       // work multiplier; 0 means 1
	Concurrency  int           // slots; 0 = unlimited
	QueueLimit   int           // waiting requests before 503
	CPURounds    int           // hash rounds per iteration in cpu mode
	Antagonists  []Antagonist
	// ProbeFault is none, timeout, 500, malformed or stale_timestamp;
	// WorkFault none, fail_fast or hang.
	ProbeFault, WorkFault string
	// LatencyWindow is how long a latency sample counts; 0 (the backend's
	// default) counts each RIF bucket's newest samples whatever their age.
	LatencyWindow time.Duration
	// LatencyIdleMaxAge is the backend's --latency-idle-max-age: by count,
	// an idle replica's samples older than it do not count. 0 takes the
	// backend's default (DefaultIdleMaxAge); negative turns it off.
	LatencyIdleMaxAge time.Duration
	// CPUShare places the replicas on shared machines; mode cpu-share
	// only.
	CPUShare *CPUShare
}

// Antagonist caps a replica's slots at Capacity for For, starting At after
// the replica starts, and again every Every (if set), as
// backend/src/antagonist.rs.
type Antagonist struct {
	At, For  time.Duration
	Capacity int
	Every    time.Duration
}

func (a Antagonist) active(elapsed int64) bool {
	if elapsed < int64(a.At) {
		return false
	}
	since := elapsed - int64(a.At)
	if a.Every > 0 {
		since %= int64(a.Every)
	}
	return since < int64(a.For)
}

// nextChange is the first instant after elapsed at which a's activity may
// flip, or MaxInt64.
func (a Antagonist) nextChange(elapsed int64) int64 {
	at, f := int64(a.At), int64(a.For)
	if elapsed < at {
		return at
	}
	if a.Every <= 0 {
		if elapsed < at+f {
			return at + f
		}
		return math.MaxInt64
	}
	e := int64(a.Every)
	k := (elapsed - at) / e
	start := at + k*e
	if elapsed < start+f {
		return start + f
	}
	return start + e
}

const (
	faultNone = iota
	probeFaultTimeout
	probeFault500
	probeFaultMalformed
	probeFaultStale
	workFaultFailFast
	workFaultHang
)

// The estimator's answers, and with them prequal's choices, depend
// strongly on its mode: on sim-three-speeds-90, prequal's p99 was 621 ms with a
// 1 s time window and 205 ms by count (the backend's default since
// 8ccc1cc, --latency-window 0).

// unlimited is the capacity of a replica without a slot limit.
const unlimited = math.MaxInt

// server is one replica: a FIFO gate in front of its slots, the requests in
// flight (RIF, counted from arrival until the answer leaves, as the backend
// does) and the latency estimator its probe answers come from.
type server struct {
	group, route int
	addr         string

	mode           string
	meanNS         float64 // mean service time of one request, or rounds in cpu mode
	cpuRound       float64 // ns per hash round (cpu mode)
	dist           Distribution
	baseCapacity   int // 0 = unlimited, as concurrency
	antagonists    []Antagonist
	probeFault     int
	workFault      int
	queueLimit     int
	rng            Rng
	est            *Estimator
	capacity       int // in force now; unlimited or >= 0
	inService, rif int
	queue          ring // request indexes waiting, oldest first
	served, reject uint64
	meter          loadMeter // the probe's load report (qps, eps, utilization)
	ps             *psState  // cpu-share mode only
}

func newServer(g Group, groupIdx, routeIdx, replica int, iterations int, cpuRound time.Duration, seed uint64) (*server, error) {
	d, err := ParseDistribution(g.Distribution)
	if err != nil {
		return nil, fmt.Errorf("sim: group %s: %w", g.Name, err)
	}
	slow := g.Slow
	if slow == 0 {
		slow = 1
	}
	s := &server{
		group: groupIdx, route: routeIdx,
		addr:         fmt.Sprintf("%s-%d.sim:80", g.Name, replica),
		mode:         g.Mode,
		dist:         d,
		baseCapacity: g.Concurrency,
		antagonists:  g.Antagonists,
		queueLimit:   g.QueueLimit,
		rng:          NewRng(seed),
		cpuRound:     float64(cpuRound),
	}
	idleAge := g.LatencyIdleMaxAge
	if idleAge == 0 {
		idleAge = DefaultIdleMaxAge
	}
	s.est = NewEstimator(int64(max(g.LatencyWindow, 0))).WithIdleMaxAge(int64(idleAge))
	switch g.Mode {
	case "io", "sleep", "":
		s.meanNS = float64(g.ServiceTime) * float64(iterations) / 1000 * slow
	case "cpu-share":
		if g.CPUShare == nil {
			return nil, fmt.Errorf("sim: group %s: mode cpu-share needs its cpuShare settings", g.Name)
		}
		if err := g.CPUShare.validate(g.Name); err != nil {
			return nil, err
		}
		if len(g.Antagonists) > 0 || g.Concurrency != 0 {
			return nil, fmt.Errorf("sim: group %s: mode cpu-share takes its antagonist and threads from cpuShare, not antagonists or concurrency", g.Name)
		}
		// Work is ns at the replica's allocation: ServiceTime is the mean
		// time of a lone request on a replica held to its share.
		s.meanNS = float64(g.ServiceTime) * float64(iterations) / 1000 * slow
		s.ps = &psState{threads: g.CPUShare.Threads}
	case "cpu":
		rounds := max(g.CPURounds, 1)
		s.meanNS = float64(iterations) * float64(rounds) * slow
	default:
		return nil, fmt.Errorf("sim: group %s: mode %q is not one of cpu, cpu-share, io, sleep", g.Name, g.Mode)
	}
	switch g.ProbeFault {
	case "", "none":
	case "timeout":
		s.probeFault = probeFaultTimeout
	case "500":
		s.probeFault = probeFault500
	case "malformed":
		s.probeFault = probeFaultMalformed
	case "stale_timestamp":
		s.probeFault = probeFaultStale
	default:
		return nil, fmt.Errorf("sim: group %s: probeFault %q is not one of none, timeout, 500, malformed, stale_timestamp", g.Name, g.ProbeFault)
	}
	switch g.WorkFault {
	case "", "none":
	case "fail_fast":
		s.workFault = workFaultFailFast
	case "hang":
		s.workFault = workFaultHang
	default:
		return nil, fmt.Errorf("sim: group %s: workFault %q is not one of none, fail_fast, hang", g.Name, g.WorkFault)
	}
	if g.Mode == "sleep" {
		s.antagonists = nil // the backend applies no capacity in sleep mode
		s.baseCapacity = 0
	}
	s.capacity = s.capacityAt(0)
	return s, nil
}

// capacityAt is antagonist.rs's capacity_at: the base capacity lowered to
// the smallest active drop.
func (s *server) capacityAt(elapsed int64) int {
	c := unlimited
	if s.baseCapacity > 0 {
		c = s.baseCapacity
	}
	for _, a := range s.antagonists {
		if a.active(elapsed) {
			c = min(c, a.Capacity)
		}
	}
	return c
}

// nextCapacityChange is when the capacity may change next, or MaxInt64.
func (s *server) nextCapacityChange(elapsed int64) int64 {
	next := int64(math.MaxInt64)
	for _, a := range s.antagonists {
		next = min(next, a.nextChange(elapsed))
	}
	return next
}

// serviceTime draws one request's service time in ns, as server.rs does:
// io and sleep sleep a drawn duration; cpu runs a drawn, rounded number of
// hash rounds.
func (s *server) serviceTime() int64 {
	v := s.dist.Draw(s.meanNS, &s.rng)
	if s.mode == "cpu" {
		return int64(math.Round(v) * s.cpuRound)
	}
	return int64(min(v, 1e18))
}

// admission is what happens to a request reaching the server.
type admission uint8

const (
	admitServe    admission = iota // it holds a slot now
	admitQueued                    // it waits in the FIFO queue
	admitRejected                  // the queue is full: 503
	admitFailFast                  // work fault: 500 at once
	admitHang                      // work fault: no answer until the client leaves
)

// arrive admits request ri; the caller has counted it in RIF.
func (s *server) arrive(ri int32) admission {
	switch s.workFault {
	case workFaultFailFast:
		return admitFailFast
	case workFaultHang:
		return admitHang
	}
	if s.queue.len() == 0 && s.inService < s.capacity {
		s.inService++
		return admitServe
	}
	if s.queue.len() >= s.queueLimit {
		s.reject++
		return admitRejected
	}
	s.queue.push(ri)
	return admitQueued
}

// next hands a free slot to the head of the queue, or returns -1.
func (s *server) next() int32 {
	if s.queue.len() == 0 || s.inService >= s.capacity {
		return -1
	}
	s.inService++
	return s.queue.pop()
}

// leaveQueue removes a waiter whose client went away (the gate's cancel).
func (s *server) leaveQueue(ri int32) bool { return s.queue.remove(ri) }

// ring is a FIFO of request indexes.
type ring struct {
	buf        []int32
	head, size int
}

func (r *ring) len() int { return r.size }

func (r *ring) push(v int32) {
	if r.size == len(r.buf) {
		nb := make([]int32, max(16, 2*len(r.buf)))
		for i := range r.size {
			nb[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.size)%len(r.buf)] = v
	r.size++
}

func (r *ring) pop() int32 {
	v := r.buf[r.head]
	r.head = (r.head + 1) % len(r.buf)
	r.size--
	return v
}

// remove deletes v, keeping the order of the rest; O(len).
func (r *ring) remove(v int32) bool {
	for i := range r.size {
		if r.buf[(r.head+i)%len(r.buf)] != v {
			continue
		}
		for j := i; j < r.size-1; j++ {
			r.buf[(r.head+j)%len(r.buf)] = r.buf[(r.head+j+1)%len(r.buf)]
		}
		r.size--
		return true
	}
	return false
}
