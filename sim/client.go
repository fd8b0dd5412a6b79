package sim

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
	"github.com/prequalbench/prequalbench/openloop"
)

// client is one ingress replica's policy for one route: its own policy
// instance and seeded RNG, as a real replica has.
type client struct {
	replica, route int
	policy         loadbalancer.Policy
	feedback       loadbalancer.FeedbackUser // policy, when it reads response feedback
	sync           loadbalancer.SyncPicker   // policy, when it probes synchronously
	rng            *rand.Rand
	// requests counts requests routed here since the world was built, and
	// upstreamErrors the 504s the replica answered itself (the admin
	// API's per-route counters).
	requests, upstreamErrors uint64
}

// Load is what the load generator offers during one Run: open-loop phases
// or closed-loop users, spread over targets (one per ingress replica and
// route) by weight, as package load does.
type Load struct {
	Open      []Phase
	Users     int
	Duration  time.Duration // closed loop
	ThinkTime time.Duration // closed loop
	// Timeout bounds each request, from its (intended) send.
	Timeout time.Duration
	Targets []Target
	Seed    uint64
	// Warmup is load offered before the measured window in the same
	// schedule, without a pause: open loop at WarmupRate, closed loop the
	// same users running through. Its requests are answered, not counted.
	Warmup     time.Duration
	WarmupRate float64
	// OnWindowStart and OnWindowEnd, when set, are called once each when
	// virtual time reaches the window's start and end (the campaign
	// runner snapshots the ingress state there). OnSecond, when set, gets
	// each row of the series as it closes, and a row with Warmup set for
	// each second of the warmup.
	OnWindowStart, OnWindowEnd func()
	OnSecond                   func(Second)
}

// Target is an ingress replica and route, with a relative weight.
type Target struct {
	Client, Route int
	Weight        float64
}

// Window is the planned length of the load.
func (l Load) Window() time.Duration {
	if len(l.Open) == 0 {
		return l.Duration
	}
	var d time.Duration
	for _, p := range l.Open {
		d += p.Duration
	}
	return d
}

func (l Load) validate(routes, clients int) error {
	if len(l.Targets) == 0 {
		return fmt.Errorf("sim: load targets must list at least one target")
	}
	for i, t := range l.Targets {
		if t.Client < 0 || t.Client >= clients || t.Route < 0 || t.Route >= routes {
			return fmt.Errorf("sim: load targets[%d] is client %d route %d, want client in [0, %d) and route in [0, %d)", i, t.Client, t.Route, clients, routes)
		}
		if !(t.Weight >= 0) {
			return fmt.Errorf("sim: load targets[%d].weight must be >= 0, got %v", i, t.Weight)
		}
	}
	if (len(l.Open) > 0) == (l.Users > 0) {
		return fmt.Errorf("sim: load needs open-loop phases or users > 0, not both (got %d phases, %d users)", len(l.Open), l.Users)
	}
	if l.Users > 0 && l.Duration <= 0 {
		return fmt.Errorf("sim: load duration must be > 0 for a closed loop, got %v", l.Duration)
	}
	if l.Timeout <= 0 {
		return fmt.Errorf("sim: load timeout must be > 0, got %v", l.Timeout)
	}
	if l.Warmup < 0 {
		return fmt.Errorf("sim: load warmup must be >= 0, got %v", l.Warmup)
	}
	if len(l.Open) > 0 && l.Warmup > 0 && !(l.WarmupRate > 0) {
		return fmt.Errorf("sim: load warmup rate must be > 0 with an open-loop warmup, got %v", l.WarmupRate)
	}
	return nil
}

// picker chooses a target with probability proportional to its weight
// (0 counts as 1), drawing one Float64 per request as package load does.
type picker struct {
	cum     []float64
	targets []int32 // policy index of each target
}

func (p *picker) pick(rng *rand.Rand) int32 {
	if len(p.targets) == 1 {
		return p.targets[0]
	}
	x := rng.Float64() * p.cum[len(p.cum)-1]
	i := sort.SearchFloat64s(p.cum, x)
	for i < len(p.cum) && p.cum[i] <= x {
		i++
	}
	return p.targets[min(i, len(p.targets)-1)]
}

// user is one closed-loop user.
type user struct {
	rng *rand.Rand
}

// loadRun is the state of the load of one Run.
type loadRun struct {
	l       Load
	pick    picker
	sched   *openloop.Schedule
	openRNG *rand.Rand
	start   int64 // the warmup's start
	winFrom int64 // the window's start (= start + warmup)
	winTo   int64 // the window's end; closed loop: no send at or after it
	timeout int64
	active  int // closed-loop users still sending
}

// start sets up the recorder, the window's boundaries and the first sends
// of l.
func (w *World) start(l Load) error {
	lr := &loadRun{l: l, start: w.now, timeout: int64(l.Timeout)}
	var sum float64
	for _, t := range l.Targets {
		wt := t.Weight
		if wt == 0 {
			wt = 1
		}
		sum += wt
		lr.pick.cum = append(lr.pick.cum, sum)
		lr.pick.targets = append(lr.pick.targets, int32(t.Client*len(w.cfg.Routes)+t.Route))
	}
	window := int64(l.Window())
	lr.winFrom = w.now + int64(l.Warmup)
	lr.winTo = lr.winFrom + window
	w.rec = newRecorder(lr, window)
	sec := int64(time.Second)
	for k := int64(1); k*sec < int64(l.Warmup); k++ {
		w.q.push(event{at: w.now + k*sec, kind: evSecond, x: 1})
	}
	// An open-loop send due exactly at the warmup's end belongs to the
	// warmup, so the window opens just after it; a closed-loop send at
	// that instant belongs to the window, which opens first (this event is
	// older than any send queued for that instant).
	if len(l.Open) > 0 && l.Warmup > 0 {
		w.q.push(event{at: lr.winFrom + 1, kind: evWindowStart})
	} else {
		w.q.push(event{at: lr.winFrom, kind: evWindowStart})
	}
	for k := int64(1); k*sec < window; k++ {
		w.q.push(event{at: lr.winFrom + k*sec, kind: evSecond})
	}
	// Just after the window's last instant, so a send due exactly at its
	// end is in the window and in the snapshot taken there.
	w.q.push(event{at: lr.winTo + 1, kind: evWindowEnd})
	if len(l.Open) > 0 {
		phases := l.Open
		if l.Warmup > 0 {
			phases = append([]Phase{{Kind: KindConstant, Duration: l.Warmup, Rate: l.WarmupRate}}, l.Open...)
		}
		s, err := openloop.New(phases)
		if err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		lr.sched = s
		lr.openRNG = rand.New(rand.NewPCG(l.Seed, 0x6c6f6164))
		w.rec.targetRate = openloop.MeanRate(l.Open)
		w.nextOpen()
		return nil
	}
	w.users = w.users[:0]
	for u := range l.Users {
		w.users = append(w.users, user{rng: rand.New(rand.NewPCG(l.Seed, uint64(u)+1))})
		w.q.push(event{at: w.now, kind: evUserSend, a: int32(u)})
	}
	lr.active = l.Users
	return nil
}

// nextOpen schedules the next open-loop send, or marks the schedule done.
func (w *World) nextOpen() {
	lr := w.rec.load
	next, ok := lr.sched.Next()
	off := int64(next)
	if !ok {
		w.rec.sendsDone = true
		return
	}
	// As in package load, the warmup is the schedule's first phase and a
	// send belongs to the phase that scheduled it.
	var counted int32
	if lr.l.Warmup == 0 || lr.sched.Index() > 0 {
		counted = 1
	}
	w.q.push(event{at: lr.start + off, kind: evSend, c: counted})
}

func (w *World) openSend(counted bool) {
	lr := w.rec.load
	w.send(lr.pick.pick(lr.openRNG), w.now, -1, counted)
	w.nextOpen()
}

func (w *World) userSend(u int32) {
	lr := w.rec.load
	if w.now >= lr.winTo {
		w.userStop()
		return
	}
	w.send(lr.pick.pick(w.users[u].rng), w.now, u, w.now >= lr.winFrom)
}

func (w *World) userStop() {
	lr := w.rec.load
	lr.active--
	if lr.active == 0 {
		w.rec.sendsDone = true
	}
}

// userNext lets closed-loop user u think, then send again.
func (w *World) userNext(u int32) {
	lr := w.rec.load
	next := w.now + int64(lr.l.ThinkTime)
	if next >= lr.winTo {
		w.userStop()
		return
	}
	w.q.push(event{at: next, kind: evUserSend, a: u})
}

// send is one request entering ingress replica/route ci at sent: the
// policy picks, the probes it owes go out, the request goes on the wire.
// Only counted (window) requests enter the result.
func (w *World) send(ci int32, sent int64, u int32, counted bool) {
	c := w.clients[ci]
	c.requests++
	w.rec.sent(counted)
	if c.sync != nil {
		w.syncPlan(ci, sent, u, counted)
		return
	}
	tok, err := c.policy.Pick(w.wall(w.now), c.rng)
	w.dispatchPick(ci, tok, err, sent, u, counted)
}

// dispatchPick sends a picked request on its way (or answers 503 when the
// policy had no endpoint).
func (w *World) dispatchPick(ci int32, tok loadbalancer.Picked, err error, sent int64, u int32, counted bool) {
	if err != nil { // no endpoints: the ingress answers 503 itself
		w.rec.done(counted, w.now, 0, 503, false)
		if u >= 0 {
			w.userNext(u)
		}
		return
	}
	w.sendProbes(ci)
	i := w.alloc()
	r := &w.reqs[i]
	gen := r.gen
	*r = request{sent: sent, picked: w.now, tok: tok, client: ci, server: w.byAddr[tok.Endpoint], user: u, holds: 2, gen: gen, counted: counted}
	w.q.push(event{at: w.now + w.net.draw(), kind: evReqAtServer, a: i})
	w.deadline.add(w, i, gen, sent+min(w.upTO, w.rec.load.timeout))
}

// syncQuery is one query of a synchronous-probing policy waiting for its
// probes' answers (loadbalancer.SyncPicker), as the ingress drives it:
// PlanSync, probes on the wire, PickSync at `need` answers or the timeout.
type syncQuery struct {
	client  int32
	user    int32
	sent    int64
	counted bool
	done    bool
	pending int // events still to come for it (probes, answers, timeout)
	need    int
	okCount int
	answers []loadbalancer.SyncAnswer
}

func (w *World) syncPlan(ci int32, sent int64, u int32, counted bool) {
	c := w.clients[ci]
	now := w.wall(w.now)
	w.due = c.sync.PlanSync(now, c.rng, w.due[:0])
	need, timeout := c.sync.SyncWait()
	var qi int32
	if n := len(w.syncFree); n > 0 {
		qi = w.syncFree[n-1]
		w.syncFree = w.syncFree[:n-1]
	} else {
		w.syncs = append(w.syncs, syncQuery{})
		qi = int32(len(w.syncs) - 1)
	}
	q := &w.syncs[qi]
	*q = syncQuery{client: ci, user: u, sent: sent, counted: counted, need: min(need, len(w.due)),
		pending: len(w.due) + 1, answers: q.answers[:0]}
	for _, addr := range w.due {
		si := w.byAddr[addr]
		w.q.push(event{at: w.now + w.net.draw(), kind: evSyncProbeAtServer, a: qi, b: si, x: w.now})
	}
	w.q.push(event{at: w.now + int64(timeout), kind: evSyncTimeout, a: qi})
	if q.need == 0 { // nothing to wait for (no endpoints)
		w.syncFinish(qi, false)
	}
}

// syncProbeAtServer answers a sync probe as probeAtServer answers an
// async one; a failing probe answers "failed" with its fault (c = -1 -
// fault), a timed-out one never answers (the query's timeout covers it).
func (w *World) syncProbeAtServer(qi, si int32, sent int64) {
	s := w.servers[si]
	back := w.now + w.net.draw()
	switch s.probeFault {
	case faultNone:
		rif, lat := w.probeAnswer(s)
		w.q.push(event{at: back, kind: evSyncReply, a: qi, b: si, c: rif, x: lat})
	case probeFaultTimeout:
		w.syncRelease(qi)
	default:
		w.q.push(event{at: back, kind: evSyncReply, a: qi, b: si, c: -1 - int32(s.probeFault)})
	}
}

func (w *World) syncReply(qi, si, rif int32, lat int64) {
	q := &w.syncs[qi]
	if !q.done {
		a := loadbalancer.SyncAnswer{Endpoint: w.servers[si].addr, OK: rif >= 0}
		if a.OK {
			a.Reply = w.probeReply(si, rif, lat)
			q.okCount++
		} else {
			a.Outcome = probeOutcomes[-1-rif]
		}
		q.answers = append(q.answers, a)
	}
	if !q.done && q.okCount >= q.need {
		w.syncFinish(qi, false)
	}
	w.syncRelease(qi)
}

// syncFinish picks from the answers so far and sends the request; timer is
// true when the timeout event calls it (which releases its hold).
func (w *World) syncFinish(qi int32, timer bool) {
	q := &w.syncs[qi]
	if !q.done {
		q.done = true
		c := w.clients[q.client]
		tok, err := c.sync.PickSync(w.wall(w.now), c.rng, q.answers)
		w.dispatchPick(q.client, tok, err, q.sent, q.user, q.counted)
	}
	if timer {
		w.syncRelease(qi)
	}
}

// syncRelease drops one pending event of query qi and frees it when none
// is left.
func (w *World) syncRelease(qi int32) {
	q := &w.syncs[qi]
	q.pending--
	if q.pending == 0 {
		w.syncFree = append(w.syncFree, qi)
	}
}

// sendProbes sends the probes policy ci owes now.
func (w *World) sendProbes(ci int32) {
	if !w.usesProb {
		return
	}
	c := w.clients[ci]
	w.due = c.policy.ProbesDue(w.wall(w.now), c.rng, w.due[:0])
	for _, addr := range w.due {
		si := w.byAddr[addr]
		if d := w.net.draw(); d <= w.probeTO {
			w.q.push(event{at: w.now + d, kind: evProbeAtServer, a: ci, b: si, x: w.now})
		} else {
			w.q.push(event{at: w.now + w.probeTO, kind: evProbeFail, a: ci, b: si, c: probeFaultTimeout})
		}
	}
}

// respAtClient delivers request i's answer to its ingress replica and on
// to the load generator.
func (w *World) respAtClient(i int32) {
	r := &w.reqs[i]
	if r.settled {
		w.release(i)
		return
	}
	r.settled = true
	c := w.clients[r.client]
	if c.feedback != nil { // the backend's X-Prequal-Queue and X-Prequal-Service-Us
		c.feedback.ServerFeedback(w.wall(w.now), r.tok, loadbalancer.ServerFeedback{
			Known: true, QueueSize: int(r.queueAt), ServiceTime: time.Duration(r.svc)})
	}
	c.policy.Done(w.wall(w.now), r.tok, time.Duration(w.now-r.picked), int(r.status))
	w.rec.done(r.counted, w.now, w.now-r.sent, int(r.status), false)
	u := r.user
	w.release(i) // the event's hold
	w.release(i) // the client's
	if u >= 0 {
		w.userNext(u)
	}
}

// deadlines holds outstanding requests in send order, which is also the
// order of their deadlines (one timeout for all), so one pending event
// covers them all.
type deadlines struct {
	buf   []deadline
	head  int
	armed bool
}

type deadline struct {
	at  int64
	i   int32
	gen uint32
}

// deadlineQuantum batches expiry checks; an expired request is still timed
// at its exact deadline.
const deadlineQuantum = int64(time.Millisecond)

func (d *deadlines) add(w *World, i int32, gen uint32, at int64) {
	if d.head > 0 && d.head*2 >= len(d.buf) {
		n := copy(d.buf, d.buf[d.head:])
		d.buf, d.head = d.buf[:n], 0
	}
	d.buf = append(d.buf, deadline{at: at, i: i, gen: gen})
	if !d.armed {
		d.arm(w)
	}
}

func (d *deadlines) arm(w *World) {
	at := d.buf[d.head].at
	at = (at + deadlineQuantum - 1) / deadlineQuantum * deadlineQuantum
	w.q.push(event{at: max(at, w.now), kind: evDeadline})
	d.armed = true
}

// expire times out every outstanding request whose deadline has passed.
func (w *World) expire() {
	d := &w.deadline
	d.armed = false
	for d.head < len(d.buf) && d.buf[d.head].at <= w.now {
		e := d.buf[d.head]
		d.head++
		if r := &w.reqs[e.i]; r.gen == e.gen && !r.settled {
			w.timeout(e.i, e.at)
		}
	}
	if d.head == len(d.buf) {
		d.buf, d.head = d.buf[:0], 0
		return
	}
	d.arm(w)
}

// timeout settles request i at its deadline: the ingress answers 504 when
// its upstream timeout comes first, else the load generator gives up (and
// the ingress sees the client leave, 499). A replica drops a waiter whose
// client left, and a hanging request ends; one in service runs on.
func (w *World) timeout(i int32, at int64) {
	r := &w.reqs[i]
	r.settled = true
	c := w.clients[r.client]
	if w.upTO < w.rec.load.timeout {
		c.upstreamErrors++
		c.policy.Done(w.wall(w.now), r.tok, time.Duration(w.now-r.picked), 0)
		w.rec.done(r.counted, at, at-r.sent, 504, false)
	} else {
		c.policy.Done(w.wall(w.now), r.tok, time.Duration(w.now-r.picked), 499)
		w.rec.done(r.counted, at, at-r.sent, 0, true)
	}
	s := w.servers[r.server]
	switch r.where {
	case wQueued:
		s.leaveQueue(i)
		s.rif--
		r.where = wDone
		w.release(i)
	case wHanging:
		s.rif--
		r.where = wDone
		w.release(i)
	}
	u := r.user
	w.release(i) // the client's hold
	if u >= 0 {
		w.userNext(u)
	}
}

// ClientState is one ingress replica's admin state: per route, the
// requests routed and the policy's counters.
type ClientState struct {
	Routes []RouteState
}

// RouteState is one route of one ingress replica.
type RouteState struct {
	Route          string
	Requests       uint64
	UpstreamErrors uint64 // 504: the backend did not answer in time
	Stats          loadbalancer.Stats
}

// Snapshot returns every ingress replica's state, in replica order.
func (w *World) Snapshot() []ClientState {
	out := make([]ClientState, w.cfg.Clients)
	for _, c := range w.clients {
		out[c.replica].Routes = append(out[c.replica].Routes, RouteState{
			Route: w.cfg.Routes[c.route].Name, Requests: c.requests, UpstreamErrors: c.upstreamErrors, Stats: c.policy.Stats(),
		})
	}
	return out
}
