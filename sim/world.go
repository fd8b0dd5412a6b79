// Package sim is a discrete-event simulator of the benchmark's testbed:
// many ingress replicas (clients), each running the unchanged
// loadbalancer policies, in front of backend replicas modelled on the Rust
// backend (slots and a FIFO queue, the same service-time draws, the same
// latency estimator behind probe answers, antagonists and faults), with a
// one-way network delay between them; or replicas that share machines'
// CPU with co-tenants, as the paper's (cpushare.go). Time is virtual, so a
// run of 100 clients × 100 servers is deterministic (same seed, same
// result) and takes seconds instead of a cluster.
//
// One idea per file: queue.go (the event queue), server.go (a replica),
// estimator.go and dist.go (ports of the backend's), network.go (delays),
// client.go (an ingress replica's policies and probes), schedule.go (the
// open-loop phases, package openloop's), cpushare.go (replicas sharing
// machines), record.go (what a run measured) and world.go (the event loop
// that ties them together).
package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

// Config describes one simulated testbed.
type Config struct {
	Seed uint64
	// Clients is the number of ingress replicas, each with its own policy
	// per route and its own seeded RNG.
	Clients   int
	Routes    []Route
	Algorithm string
	Policy    loadbalancer.Config
	// ProbeTimeout bounds a probe (the ingress's default, 100 ms, when 0);
	// UpstreamTimeout is how long the ingress waits for a backend before
	// answering 504 (its default, 5 s, when 0).
	ProbeTimeout    time.Duration
	UpstreamTimeout time.Duration
	Network         Network
	// CPURoundTime is the service time of one hash round of a cpu-mode
	// backend (DefaultCPURoundTime when 0).
	CPURoundTime time.Duration
}

// DefaultCPURoundTime is an assumed cost of one hash round (one SHA-256
// compression) on an idle core; measured here with the backend's
// hash::chain it took 440–670 ns of wall time at a load average of 35 on
// 2 cores. Set simulation.cpuRoundTime to what the real backend's host
// gives.
const DefaultCPURoundTime = 250 * time.Nanosecond

// probeStaleAfter is the prober's default skew limit; the backend's
// stale_timestamp fault (10 s) is past it.
const probeStaleAfter = 5 * time.Second

// Route is one ingress route and the replicas behind it.
type Route struct {
	Name, Host string
	Weight     float64
	Iterations int // work per request; 1000 = one service time
	Groups     []Group
}

// Endpoint describes one simulated backend replica.
type Endpoint struct{ Address, Group, Route string }

// epoch is virtual time zero as the policies see it.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// World is a simulated testbed. It is not safe for concurrent use; worlds
// share nothing, so separate worlds may run in parallel.
type World struct {
	cfg      Config
	now      int64
	q        eventQueue
	servers  []*server
	machines []*machine // hosts of cpu-share replicas
	byAddr   map[string]int32
	clients  []*client // one per (ingress replica, route): index c*len(Routes)+r
	net      network
	reqs     []request
	free     []int32
	deadline deadlines
	probeTO  int64
	upTO     int64
	usesProb bool

	rec    *recorder
	users  []user
	events uint64
	due    []string // scratch for ProbesDue and PlanSync
	// syncs are the queries of a synchronous-probing policy waiting for
	// answers; syncFree the free slots.
	syncs    []syncQuery
	syncFree []int32
}

// New builds a world at virtual time 0: every replica idle, every policy
// fresh.
func New(cfg Config) (*World, error) {
	if cfg.Clients < 1 {
		return nil, fmt.Errorf("sim: clients must be >= 1, got %d", cfg.Clients)
	}
	if len(cfg.Routes) == 0 {
		return nil, errors.New("sim: routes must list at least one route")
	}
	if cfg.ProbeTimeout == 0 {
		cfg.ProbeTimeout = 100 * time.Millisecond
	}
	if cfg.UpstreamTimeout == 0 {
		cfg.UpstreamTimeout = 5 * time.Second
	}
	if cfg.CPURoundTime == 0 {
		cfg.CPURoundTime = DefaultCPURoundTime
	}
	// C3's q̂ = 1 + os·n + q̄ counts n clients sharing the servers: here
	// the simulated ingress replicas. Left at its default (1), it would
	// weigh each replica's outstanding requests as if it were alone. A
	// variant (c3{clients=k}) still overrides it.
	if cfg.Policy.C3.Clients == loadbalancer.DefaultConfig().C3.Clients {
		cfg.Policy.C3.Clients = cfg.Clients
	}
	if cfg.Network.Delay < 0 || cfg.Network.Jitter < 0 {
		return nil, fmt.Errorf("sim: network delay and jitter must be >= 0, got %v and %v", cfg.Network.Delay, cfg.Network.Jitter)
	}
	w := &World{cfg: cfg, byAddr: map[string]int32{}, probeTO: int64(cfg.ProbeTimeout), upTO: int64(cfg.UpstreamTimeout)}
	w.net = network{delay: int64(cfg.Network.Delay), jitter: int64(cfg.Network.Jitter), rng: NewRng(mix(cfg.Seed, 0x6e6574))}
	routeAddrs := make([][]string, len(cfg.Routes))
	for ri, r := range cfg.Routes {
		iters := r.Iterations
		if iters == 0 {
			iters = 1000
		}
		for gi, g := range r.Groups {
			if g.Replicas < 0 {
				return nil, fmt.Errorf("sim: group %s: replicas must be >= 0, got %d", g.Name, g.Replicas)
			}
			first := len(w.servers)
			for k := range g.Replicas {
				s, err := newServer(g, gi, ri, k, iters, cfg.CPURoundTime, mix(cfg.Seed, uint64(len(w.servers))+1))
				if err != nil {
					return nil, err
				}
				if _, dup := w.byAddr[s.addr]; dup {
					return nil, fmt.Errorf("sim: replica %s appears twice (group names must be unique)", s.addr)
				}
				w.byAddr[s.addr] = int32(len(w.servers))
				w.servers = append(w.servers, s)
				routeAddrs[ri] = append(routeAddrs[ri], s.addr)
			}
			if g.CPUShare != nil {
				w.placeMachines(g, first)
			}
		}
	}
	w.usesProb = loadbalancer.UsesProbes(cfg.Algorithm)
	tick := int64(0)
	if w.usesProb { // the ingress's idle ticker runs while a policy probes
		tick = int64(loadbalancer.IdleProbeTick(cfg.Policy))
	}
	phase := NewRng(mix(cfg.Seed, 0x7469636b))
	for c := range cfg.Clients {
		for ri := range cfg.Routes {
			p, err := loadbalancer.New(cfg.Algorithm, cfg.Policy)
			if err != nil {
				return nil, fmt.Errorf("sim: %w", err)
			}
			p.SetEndpoints(epoch, routeAddrs[ri])
			ci := int32(len(w.clients))
			cl := &client{
				replica: c, route: ri, policy: p,
				rng: rand.New(rand.NewPCG(cfg.Seed+1000+uint64(c), uint64(ri))),
			}
			// Drive what the policy declares, as the ingress does.
			if cp, ok := p.(loadbalancer.Capable); ok {
				caps := cp.Caps()
				if fu, ok := p.(loadbalancer.FeedbackUser); ok && caps.Feedback {
					cl.feedback = fu
				}
				if sp, ok := p.(loadbalancer.SyncPicker); ok && caps.Sync {
					cl.sync = sp
				}
			}
			w.clients = append(w.clients, cl)
			if tick > 0 {
				w.q.push(event{at: int64(phase.Float64() * float64(tick)), kind: evIdleTick, a: ci, x: tick})
			}
		}
	}
	for si, s := range w.servers {
		if next := s.nextCapacityChange(0); next < maxTime {
			w.q.push(event{at: next, kind: evCapacity, a: int32(si)})
		}
	}
	return w, nil
}

const maxTime = int64(1<<63 - 1)

// mix derives a seed for one stream from the world's seed (splitmix64).
func mix(seed, stream uint64) uint64 {
	r := NewRng(seed ^ stream*0x9E3779B97F4A7C15)
	return r.Uint64()
}

// Endpoints lists every replica in route and group order.
func (w *World) Endpoints() []Endpoint {
	out := make([]Endpoint, len(w.servers))
	for i, s := range w.servers {
		r := w.cfg.Routes[s.route]
		out[i] = Endpoint{Address: s.addr, Group: r.Groups[s.group].Name, Route: r.Name}
	}
	return out
}

// Events is the number of events the world has processed in Runs.
func (w *World) Events() uint64 { return w.events }

// Now is the virtual time since the world was built.
func (w *World) Now() time.Duration { return time.Duration(w.now) }

func (w *World) wall(ns int64) time.Time { return epoch.Add(time.Duration(ns)) }

// step fires the earliest event.
func (w *World) step() {
	e := w.q.pop()
	w.now = e.at
	switch e.kind {
	case evSend:
		w.openSend(e.c == 1)
	case evUserSend:
		w.userSend(e.a)
	case evReqAtServer:
		w.reqAtServer(e.a)
	case evServiceDone:
		w.serviceDone(e.a)
	case evRespAtClient:
		w.respAtClient(e.a)
	case evDeadline:
		w.expire()
	case evProbeAtServer:
		w.probeAtServer(e.a, e.b, e.x)
	case evProbeReply:
		c := w.clients[e.a]
		c.policy.ProbeResult(w.wall(w.now), w.servers[e.b].addr, w.probeReply(e.b, e.c, e.x))
	case evProbeFail:
		w.clients[e.a].policy.ProbeFailed(w.wall(w.now), w.servers[e.b].addr, probeOutcomes[e.c])
	case evIdleTick:
		w.sendProbes(e.a)
		w.q.push(event{at: w.now + e.x, kind: evIdleTick, a: e.a, x: e.x})
	case evCapacity:
		w.capacityChange(e.a)
	case evSecond:
		if e.x == 1 {
			w.rec.warmupSecond()
		} else {
			w.rec.closeSecond()
		}
	case evWindowStart:
		if f := w.rec.load.l.OnWindowStart; f != nil {
			f()
		}
	case evSyncProbeAtServer:
		w.syncProbeAtServer(e.a, e.b, e.x)
	case evSyncReply:
		w.syncReply(e.a, e.b, e.c, e.x)
	case evSyncTimeout:
		w.syncFinish(e.a, true)
	case evPSDone:
		w.psDone(e.a, uint32(e.x))
	case evMachine:
		w.machineStep(e.a)
	case evWindowEnd:
		w.rec.windowShut = true
		if f := w.rec.load.l.OnWindowEnd; f != nil {
			f()
		}
	}
}

// request is one request in flight somewhere in the world.
type request struct {
	sent    int64 // intended send (open loop) or actual send (closed loop)
	picked  int64
	arrived int64
	tok     loadbalancer.Picked
	rifAt   uint64
	started int64 // service start (the server's X-Prequal-Service-Us counts from here)
	svc     int64 // the answer's service time, queueing excluded (0 when never served)
	queueAt int32 // the server's queue length when it answered (X-Prequal-Queue)
	client  int32
	server  int32
	user    int32 // closed-loop user, or -1
	status  int32
	holds   int8 // references: the client's wait, events, a server's queue or hang
	gen     uint32
	where   uint8 // at the server: wTransit, wQueued, wServing, wHanging, wDone
	settled bool  // the client has its outcome (answer or timeout)
	counted bool  // sent inside the measured window
}

const (
	wTransit = iota
	wQueued
	wServing
	wHanging
	wDone
)

func (w *World) alloc() int32 {
	if n := len(w.free); n > 0 {
		i := w.free[n-1]
		w.free = w.free[:n-1]
		return i
	}
	w.reqs = append(w.reqs, request{})
	return int32(len(w.reqs) - 1)
}

// release drops one hold of request i and frees it when none is left.
func (w *World) release(i int32) {
	r := &w.reqs[i]
	r.holds--
	if r.holds == 0 {
		r.gen++
		w.free = append(w.free, i)
	}
}

// reqAtServer admits a request reaching its replica.
func (w *World) reqAtServer(i int32) {
	r := &w.reqs[i]
	if r.settled { // the client left while the request was on the wire
		r.where = wDone
		w.release(i)
		return
	}
	s := w.servers[r.server]
	r.arrived = w.now
	r.rifAt = uint64(s.rif)
	s.rif++
	s.advanceMeter(w.now)
	var adm admission
	if s.ps != nil {
		if adm = w.psArrive(r.server, i); adm == admitServe {
			return // psArrive started it
		}
	} else {
		adm = s.arrive(i)
	}
	switch adm {
	case admitServe:
		r.where = wServing
		r.started = w.now
		w.q.push(event{at: w.now + s.serviceTime(), kind: evServiceDone, a: i})
	case admitQueued:
		r.where = wQueued
	case admitRejected:
		s.rif--
		r.where = wDone
		w.answer(i, 503)
	case admitFailFast:
		// A broken replica still measures its own tiny latency: the sinkhole.
		s.est.Record(r.rifAt, 0, w.now)
		s.rif--
		r.where = wDone
		w.answer(i, 500)
	case admitHang:
		r.where = wHanging
	}
}

// answer sends request i's response back to its client; the event holds i
// in place of the server.
func (w *World) answer(i int32, status int32) {
	r := &w.reqs[i]
	r.status = status
	s := w.servers[r.server]
	s.advanceMeter(w.now)
	s.meter.answered(w.now, status)
	r.queueAt = int32(s.queue.len())
	r.svc = 0
	if status == 200 {
		r.svc = w.now - r.started
	}
	if r.settled {
		w.release(i)
		return
	}
	w.q.push(event{at: w.now + w.net.draw(), kind: evRespAtClient, a: i})
}

// serviceDone frees request i's slot, records its latency in the replica's
// estimator and starts the next waiter.
func (w *World) serviceDone(i int32) {
	r := &w.reqs[i]
	s := w.servers[r.server]
	s.advanceMeter(w.now)
	s.inService--
	s.served++
	s.est.Record(r.rifAt, float64(w.now-r.arrived)/1e6, w.now)
	s.rif--
	r.where = wDone
	w.answer(i, 200)
	w.dispatch(s)
}

func (w *World) dispatch(s *server) {
	s.advanceMeter(w.now)
	for {
		j := s.next()
		if j < 0 {
			return
		}
		w.reqs[j].where = wServing
		w.reqs[j].started = w.now
		w.q.push(event{at: w.now + s.serviceTime(), kind: evServiceDone, a: j})
	}
}

// capacityChange applies the antagonist schedule of server si.
func (w *World) capacityChange(si int32) {
	s := w.servers[si]
	s.advanceMeter(w.now)
	s.capacity = s.capacityAt(w.now)
	w.dispatch(s)
	if next := s.nextCapacityChange(w.now); next < maxTime {
		w.q.push(event{at: next, kind: evCapacity, a: si})
	}
}

var probeOutcomes = [...]loadbalancer.ProbeOutcome{
	probeFaultTimeout: loadbalancer.ProbeTimeout, probeFault500: loadbalancer.ProbeStatus,
	probeFaultMalformed: loadbalancer.ProbeMalformed, probeFaultStale: loadbalancer.ProbeStale,
}

// probeAtServer answers a probe sent at sent from client ci, as the
// backend's /prequal/probe does, unless the answer would come back after
// the probe timeout.
func (w *World) probeAtServer(ci, si int32, sent int64) {
	s := w.servers[si]
	deadline := sent + w.probeTO
	if s.probeFault == probeFaultTimeout {
		w.q.push(event{at: deadline, kind: evProbeFail, a: ci, b: si, c: probeFaultTimeout})
		return
	}
	back := w.now + w.net.draw()
	if back > deadline {
		w.q.push(event{at: deadline, kind: evProbeFail, a: ci, b: si, c: probeFaultTimeout})
		return
	}
	if s.probeFault != faultNone {
		w.q.push(event{at: back, kind: evProbeFail, a: ci, b: si, c: int32(s.probeFault)})
		return
	}
	rif, lat := w.probeAnswer(s)
	w.q.push(event{at: back, kind: evProbeReply, a: ci, b: si, c: rif, x: lat})
}

// probeAnswer is server s's probe answer now: its RIF and latency estimate
// (ns, -1 unknown).
func (w *World) probeAnswer(s *server) (int32, int64) {
	est := s.est.Estimate(uint64(s.rif), w.now)
	lat := int64(-1)
	if est.Known {
		// The backend writes milliseconds with three decimals; the prober
		// reads them back as a float.
		ms := float64(int64(est.MedianMS*1000+0.5)) / 1000
		lat = int64(ms * float64(time.Millisecond))
	}
	return int32(s.rif), lat
}

// probeReply is the answer of server si with RIF rif and latency lat (ns,
// -1 unknown). The load report is read when the answer arrives rather
// than when the server wrote it: one network delay later, over a window
// of a second.
func (w *World) probeReply(si, rif int32, lat int64) loadbalancer.ProbeReply {
	r := loadbalancer.ProbeReply{RIF: int(rif), Latency: time.Duration(lat), LatencyKnown: lat >= 0}
	if !r.LatencyKnown {
		r.Latency = 0
	}
	s := w.servers[si]
	busy, capacity := s.load()
	r.QPS, r.EPS, r.Utilization, r.LoadKnown = s.meter.report(w.now, busy, capacity)
	return r
}

// Run offers l to the world from its current virtual time, waits (in
// virtual time) until every request of l has its outcome, and returns what
// the load generator would have measured. ctx is checked every few
// thousand events.
func (w *World) Run(ctx context.Context, l Load) (*Result, error) {
	if err := l.validate(len(w.cfg.Routes), w.cfg.Clients); err != nil {
		return nil, err
	}
	if err := w.start(l); err != nil {
		return nil, err
	}
	// Until every request has its outcome and the window has ended: a
	// load whose last answer comes early (a closed loop thinking past the
	// end, an early last send) still gets its end callback and a row per
	// second, and leaves no event of its own to a later Run.
	var n uint64
	for !w.rec.finished() || !w.rec.windowShut {
		if w.q.len() == 0 {
			return nil, errors.New("sim: the event queue ran dry with requests outstanding")
		}
		w.step()
		n++
		if n%8192 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	w.events += n
	res := w.rec.result()
	res.Events = n
	w.rec = nil
	return res, nil
}
