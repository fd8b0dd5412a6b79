package sim

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// CPUShare places a group's replicas on machines whose CPU they share, as
// the paper's testbed does: each replica has an allocation (a fraction of
// its machine), may borrow the machine's idle CPU beyond it (soft limit)
// or not (hard), and splits its rate equally among the requests it serves
// (processor sharing). A co-tenant antagonist on each machine takes the
// CPU it demands first. sim/README.md gives the equations.
type CPUShare struct {
	// Share is each replica's allocation as a fraction of its machine.
	Share float64
	// PerMachine is how many of the group's replicas share one machine;
	// Share × PerMachine must not pass 1.
	PerMachine int
	// Hard caps a replica at its allocation even when the machine idles.
	Hard bool
	// Threads is how many requests a replica serves at once (0: all); the
	// rest wait FIFO.
	Threads int
	// Cores is the machine's core count: one request runs on at most one
	// core, i.e. at most 1/(Share × Cores) allocations. 0: no such cap.
	Cores int
	// Antagonist is the co-tenant's demand on every machine of the group.
	Antagonist MachineLoad
}

// MachineLoad is a co-tenant's CPU demand, a fraction of its machine. It
// steps through Levels, staying at Levels[k] for Hold[k]. Cyclic
// schedules start machine m of M at m/M of the cycle, so the machines'
// antagonists are staggered; Random ones hold each level for an
// exponential time of mean Hold[k] and then move to the next level, from
// a seeded random start. No levels: no antagonist.
type MachineLoad struct {
	Levels []float64
	Hold   []time.Duration
	Random bool
}

func (l MachineLoad) validate(group string) error {
	if len(l.Levels) != len(l.Hold) {
		return fmt.Errorf("sim: group %s: antagonist has %d levels and %d holds; want one hold per level", group, len(l.Levels), len(l.Hold))
	}
	for k, v := range l.Levels {
		if v < 0 || v > 1 || math.IsNaN(v) {
			return fmt.Errorf("sim: group %s: antagonist level[%d] = %v; want a fraction of the machine in [0, 1]", group, k, v)
		}
		if l.Hold[k] <= 0 {
			return fmt.Errorf("sim: group %s: antagonist hold[%d] = %v; want > 0", group, k, l.Hold[k])
		}
	}
	return nil
}

func (c *CPUShare) validate(group string) error {
	switch {
	case !(c.Share > 0 && c.Share <= 1):
		return fmt.Errorf("sim: group %s: cpu-share share = %v; want a fraction in (0, 1]", group, c.Share)
	case c.PerMachine < 1:
		return fmt.Errorf("sim: group %s: cpu-share perMachine = %d; want >= 1", group, c.PerMachine)
	case c.Share*float64(c.PerMachine) > 1+1e-9:
		return fmt.Errorf("sim: group %s: cpu-share share × perMachine = %v; want <= 1 (a machine cannot allocate more than itself)", group, c.Share*float64(c.PerMachine))
	case c.Threads < 0 || c.Cores < 0:
		return fmt.Errorf("sim: group %s: cpu-share threads and cores must be >= 0, got %d and %d", group, c.Threads, c.Cores)
	}
	return c.Antagonist.validate(group)
}

// machine is one host: the cpu-share replicas on it and its antagonist.
// Rates are in allocations: 1 is a replica running exactly at its share.
type machine struct {
	servers  []int32
	capacity float64 // the machine in allocations: 1/Share
	perReq   float64 // one request's cap (one core), allocations; +Inf without cores
	hard     bool
	load     MachineLoad
	level    int
	demand   float64 // antagonist demand now, in allocations
	last     int64   // virtual time the replicas' progress was advanced to
	rng      Rng
	caps     []float64 // scratch for shareRates
	rates    []float64
}

// psState is a cpu-share replica's processor-sharing state. Requests in
// service progress together on a virtual clock v (work done per request,
// in ns at the allocation's speed); each finishes when v reaches its tag.
type psState struct {
	machine int32
	threads int     // 0: all
	rate    float64 // the replica's rate now, allocations
	v       float64
	tags    minHeap[float64, int32] // requests in service by finish tag
	gen     uint32                  // invalidates completion events scheduled before a rate change
}

// inService is how many requests share the replica's rate.
func (p *psState) inService() int { return p.tags.len() }

// perRequest is each request's speed now, in work-ns per ns.
func (p *psState) perRequest() float64 {
	if n := p.tags.len(); n > 0 {
		return p.rate / float64(n)
	}
	return 0
}

// demandCap is how much CPU the replica could use now, in allocations.
func (m *machine) demandCap(p *psState) float64 {
	n := p.inService()
	if n == 0 {
		return 0
	}
	c := float64(n) * m.perReq
	if m.hard {
		c = min(c, 1)
	}
	return c
}

// shareRates divides available CPU among replicas with the given demand
// caps by max-min fairness with equal weights (progressive filling): no
// replica gets more than its cap, and a replica that is capped leaves its
// unused part to the others. It writes rates and returns them.
func shareRates(available float64, caps, rates []float64) []float64 {
	rates = rates[:0]
	idx := make([]int, 0, len(caps))
	for i, c := range caps {
		rates = append(rates, 0)
		if c > 0 {
			idx = append(idx, i)
		}
	}
	sort.Slice(idx, func(a, b int) bool { return caps[idx[a]] < caps[idx[b]] })
	left := max(available, 0)
	for k, i := range idx {
		fair := left / float64(len(idx)-k)
		r := min(caps[i], fair)
		rates[i] = r
		left -= r
	}
	return rates
}

// step moves the antagonist to its next level and returns when it
// changes again (maxTime: never).
func (m *machine) step(now int64) int64 {
	if len(m.load.Levels) == 0 {
		return maxTime
	}
	m.level = (m.level + 1) % len(m.load.Levels)
	m.demand = m.load.Levels[m.level] * m.capacity
	return now + m.hold(m.level)
}

func (m *machine) hold(k int) int64 {
	h := float64(m.load.Hold[k])
	if m.load.Random {
		h *= -math.Log(1 - m.rng.Float64())
	}
	return max(int64(h), 1)
}

// start places the antagonist at time 0 and returns its first change.
func (m *machine) start(index, of int) int64 {
	if len(m.load.Levels) == 0 {
		return maxTime
	}
	if m.load.Random {
		m.level = int(m.rng.Uint64() % uint64(len(m.load.Levels)))
		m.demand = m.load.Levels[m.level] * m.capacity
		return m.hold(m.level)
	}
	var cycle int64
	for _, h := range m.load.Hold {
		cycle += int64(h)
	}
	phase := cycle * int64(index) / int64(of)
	for k, h := range m.load.Hold {
		if phase < int64(h) {
			m.level = k
			m.demand = m.load.Levels[k] * m.capacity
			return int64(h) - phase
		}
		phase -= int64(h)
	}
	return 1 // unreachable: phase < cycle
}

// load is what the replica's load meter integrates: busy and capacity in
// slots, or, for a cpu-share replica, its CPU rate against its allocation
// in thousandths.
func (s *server) load() (busy, capacity int) {
	if s.ps != nil {
		return int(s.ps.rate*1000 + 0.5), 1000
	}
	return s.inService, s.capacity
}

func (s *server) advanceMeter(now int64) {
	busy, capacity := s.load()
	s.meter.advance(now, busy, capacity)
}

// psAdvance brings every replica on m to now: each request in service has
// done rate/n more work per ns since m.last.
func (w *World) psAdvance(m *machine) {
	if dt := float64(w.now - m.last); dt > 0 {
		for _, si := range m.servers {
			p := w.servers[si].ps
			p.v += dt * p.perRequest()
		}
	}
	m.last = w.now
}

// psReshare recomputes the rates on m after its demand changed (a replica
// gained or lost a request, or the antagonist moved) and reschedules the
// next completion of every replica whose per-request speed changed, and
// of changed (-1: none), whose request count did.
func (w *World) psReshare(m *machine, changed int32) {
	m.caps = m.caps[:0]
	for _, si := range m.servers {
		m.caps = append(m.caps, m.demandCap(w.servers[si].ps))
	}
	m.rates = shareRates(m.capacity-m.demand, m.caps, m.rates)
	for k, si := range m.servers {
		s := w.servers[si]
		if s.ps.rate == m.rates[k] && si != changed {
			continue
		}
		s.advanceMeter(w.now)
		s.ps.rate = m.rates[k]
		w.psSchedule(si)
	}
}

// psSchedule plans replica si's next completion at its current speed.
func (w *World) psSchedule(si int32) {
	p := w.servers[si].ps
	p.gen++
	speed := p.perRequest()
	if speed <= 0 {
		return // nothing in service, or the antagonist holds the whole machine
	}
	tag, _ := p.tags.min()
	left := max(tag-p.v, 0)
	w.q.push(event{at: w.now + int64(math.Ceil(left/speed)), kind: evPSDone, a: si, x: int64(p.gen)})
}

// psArrive admits request i at cpu-share replica si: into service, or
// FIFO behind the thread cap, or 503 past the queue limit.
func (w *World) psArrive(si, i int32) admission {
	s := w.servers[si]
	p := s.ps
	switch s.workFault {
	case workFaultFailFast:
		return admitFailFast
	case workFaultHang:
		return admitHang
	}
	if p.threads > 0 && p.inService() >= p.threads {
		if s.queue.len() >= s.queueLimit {
			s.reject++
			return admitRejected
		}
		s.queue.push(i)
		return admitQueued
	}
	m := w.machines[p.machine]
	w.psAdvance(m)
	w.psStart(s, i)
	w.psReshare(m, si)
	return admitServe
}

func (w *World) psStart(s *server, i int32) {
	s.inService++
	w.reqs[i].where = wServing
	w.reqs[i].started = w.now
	s.ps.tags.push(s.ps.v+float64(s.serviceTime()), i)
}

// psDone finishes the request of si whose tag came due, if the event is
// still current, and starts the next FIFO waiter.
func (w *World) psDone(si int32, gen uint32) {
	s := w.servers[si]
	p := s.ps
	if gen != p.gen {
		return
	}
	m := w.machines[p.machine]
	w.psAdvance(m)
	tag, done := p.tags.pop()
	p.v = max(p.v, tag)
	s.inService--
	s.served++
	r := &w.reqs[done]
	s.est.Record(r.rifAt, float64(w.now-r.arrived)/1e6, w.now)
	s.rif--
	r.where = wDone
	w.answer(done, 200)
	for s.queue.len() > 0 && (p.threads == 0 || p.inService() < p.threads) {
		w.psStart(s, s.queue.pop())
	}
	w.psReshare(m, si)
}

// machineStep moves machine mi's antagonist to its next level.
func (w *World) machineStep(mi int32) {
	m := w.machines[mi]
	w.psAdvance(m)
	next := m.step(w.now)
	w.psReshare(m, -1)
	if next < maxTime {
		w.q.push(event{at: next, kind: evMachine, a: mi})
	}
}

// placeMachines puts the cpu-share replicas of group g (servers first..)
// onto ceil(replicas/perMachine) machines, in order.
func (w *World) placeMachines(g Group, first int) {
	c := g.CPUShare
	n := (g.Replicas + c.PerMachine - 1) / c.PerMachine
	perReq := math.Inf(1)
	if c.Cores > 0 {
		perReq = 1 / (c.Share * float64(c.Cores))
	}
	for k := range n {
		mi := int32(len(w.machines))
		m := &machine{
			capacity: 1 / c.Share, perReq: perReq, hard: c.Hard, load: c.Antagonist,
			rng: NewRng(mix(w.cfg.Seed, 0x6d616368<<8+uint64(mi))),
		}
		for j := k * c.PerMachine; j < min((k+1)*c.PerMachine, g.Replicas); j++ {
			si := int32(first + j)
			w.servers[si].ps.machine = mi
			m.servers = append(m.servers, si)
		}
		w.machines = append(w.machines, m)
		if next := m.start(k, n); next < maxTime {
			w.q.push(event{at: next, kind: evMachine, a: mi})
		}
	}
}
