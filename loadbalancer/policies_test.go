package loadbalancer

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// load is a load report with all three fields.
func load(qps, eps, util float64) ProbeReply {
	return ProbeReply{RIF: 1, QPS: qps, EPS: eps, Utilization: util, LoadKnown: true}
}

// shares picks k times at ms (Done at once) and returns each endpoint's
// share of the picks.
func shares(t *testing.T, p Policy, ms, k int) map[string]float64 {
	t.Helper()
	rng := newRNG()
	c := map[string]float64{}
	for range k {
		pk := mustPick(t, p, at(ms), rng)
		c[pk.Endpoint]++
		p.Done(at(ms), pk, time.Millisecond, 200)
	}
	for a := range c {
		c[a] /= float64(k)
	}
	return c
}

func TestWRR_WeightsFromLoadReportsBlackoutAndExpiry(t *testing.T) {
	p := newPolicy(t, "wrr{blackout=2s}", 3, nil)
	eps := addrs(3)
	report := func(ms int, utilA float64) {
		p.ProbeResult(at(ms), eps[0], load(100, 0, utilA)) // weight 100/util
		p.ProbeResult(at(ms), eps[1], load(100, 0, 0.5))   // 200
		p.ProbeResult(at(ms), eps[2], load(100, 0, 0.5))   // 200
	}
	report(0, 1.0) // weights 100, 200, 200 from the start
	// In the blackout every endpoint weighs the same.
	s := shares(t, p, 1500, 3000)
	if math.Abs(s[eps[0]]-1.0/3) > 0.02 {
		t.Fatalf("in the blackout: shares %v, want equal", s)
	}
	// Utilization of eps[0] rises to 1.0: its weight halves (100 vs 200,
	// 200): it gets 1/5 of the picks once the weights are in force.
	for ms := 1000; ms <= 3000; ms += 1000 {
		report(ms, 1.0)
	}
	s = shares(t, p, 3100, 5000)
	if math.Abs(s[eps[0]]-0.2) > 0.02 || math.Abs(s[eps[1]]-0.4) > 0.03 {
		t.Fatalf("after the blackout: shares %v, want 0.2/0.4/0.4", s)
	}
	// Errors: eps/qps·penalty adds to utilization (0.5 + 50/100 = 1.0).
	for ms := 4000; ms <= 5000; ms += 1000 {
		p.ProbeResult(at(ms), eps[0], load(100, 0, 0.5))
		p.ProbeResult(at(ms), eps[1], load(100, 50, 0.5))
		p.ProbeResult(at(ms), eps[2], load(100, 0, 0.5))
	}
	s = shares(t, p, 5100, 5000)
	if math.Abs(s[eps[1]]-0.2) > 0.02 {
		t.Fatalf("with errors: shares %v, want eps[1] at 0.2", s)
	}
	// Reports stop: past the 3 min expiry every weight is gone: equal.
	s = shares(t, p, 5000+int(3*time.Minute/time.Millisecond)+1500, 3000)
	if math.Abs(s[eps[1]]-1.0/3) > 0.02 {
		t.Fatalf("after expiry: shares %v, want equal", s)
	}
}

func TestWRR_IgnoresReportsWithoutLoad(t *testing.T) {
	p := newPolicy(t, "wrr{blackout=0s}", 2, nil).(*wrr)
	p.ProbeResult(at(0), addrs(2)[0], ProbeReply{RIF: 3}) // an old backend
	p.ProbeResult(at(0), addrs(2)[1], load(0, 0, 0.5))    // idle: qps 0
	if p.st[0].nonEmptySince != 0 || p.st[1].nonEmptySince != 0 {
		t.Fatalf("a report without load set a weight: %+v", p.st)
	}
}

func TestPolled_ProbesEveryEndpointOncePerPeriod(t *testing.T) {
	for name, period := range map[string]time.Duration{"wrr": time.Second, "yarp-po2c": 500 * time.Millisecond} {
		p := newPolicy(t, name, 10, nil)
		rng := newRNG()
		count := map[string]int{}
		var due []string
		for ms := 0; ms < 10_000; ms += 7 {
			due = p.ProbesDue(at(ms), rng, due[:0])
			for _, d := range due {
				count[d]++
			}
		}
		want := int(10*time.Second/period) + 1
		for _, a := range addrs(10) {
			if c := count[a]; c < want-1 || c > want+1 {
				t.Errorf("%s: %s probed %d times in 10 s, want about %d", name, a, c, want)
			}
		}
	}
}

func TestYARPPo2C_PolledRIFNotLocalCounts(t *testing.T) {
	p := newPolicy(t, "yarp-po2c", 2, nil)
	eps := addrs(2)
	p.ProbeResult(at(0), eps[0], ProbeReply{RIF: 10})
	p.ProbeResult(at(0), eps[1], ProbeReply{RIF: 2})
	rng := newRNG()
	// Held requests do not move the choice until the next poll: the
	// staleness the comparison is about.
	for range 20 {
		if pk := mustPick(t, p, at(1), rng); pk.Endpoint != eps[1] {
			t.Fatalf("picked %s with polled RIF 10 over 2", pk.Endpoint)
		}
	}
	p.ProbeResult(at(500), eps[1], ProbeReply{RIF: 22})
	if pk := mustPick(t, p, at(501), rng); pk.Endpoint != eps[0] {
		t.Fatalf("after the poll: picked %s, want %s", pk.Endpoint, eps[0])
	}
}

func TestEWMA_LowerScoreWinsDecaysAndNewEndpointsStartAtMean(t *testing.T) {
	p := newPolicy(t, "ewma", 2, nil).(*nginxEWMA)
	eps := addrs(2)
	rng := newRNG()
	for i, lat := range []time.Duration{50 * time.Millisecond, 10 * time.Millisecond} {
		pk := p.pick(i)
		p.Done(at(0), pk, lat, 200)
	}
	for range 20 {
		pk := mustPick(t, p, at(1), rng)
		if pk.Endpoint != eps[1] {
			t.Fatalf("picked %s (50 ms) over %s (10 ms)", pk.Endpoint, eps[1])
		}
		p.Done(at(1), pk, 10*time.Millisecond, 200) // no in-flight term: still the best
	}
	// Decay toward 0: 10 s later the score is about 1/e of the EWMA.
	t10 := p.instant(at(10_001))
	if got, want := p.score(0, t10), 50e6*math.Exp(-1); math.Abs(got-want) > 0.01*want {
		t.Errorf("decayed score = %.0f, want %.0f", got, want)
	}
	// A new endpoint starts at the mean of the others' scores.
	p.SetEndpoints(at(1), append(eps, "10.9.9.9:1"))
	got := p.score(2, p.instant(at(1)))
	want := (p.score(0, p.instant(at(1))) + p.score(1, p.instant(at(1)))) / 2
	if math.Abs(got-want) > 1 {
		t.Errorf("new endpoint's score = %.0f, want the mean %.0f", got, want)
	}
}

func TestC3_AvoidsGrowingQueueCubically(t *testing.T) {
	p := newPolicy(t, "c3", 2, nil).(*c3)
	eps := addrs(2)
	rng := newRNG()
	fb := func(ep int, queue int, ms int) {
		pk := p.pick(ep)
		p.ServerFeedback(at(ms), pk, ServerFeedback{Known: true, QueueSize: queue, ServiceTime: 10 * time.Millisecond})
		p.Done(at(ms), pk, 10*time.Millisecond+time.Duration(queue)*10*time.Millisecond, 200)
	}
	fb(0, 0, 0)
	fb(1, 0, 0)
	// Equal servers: the picks split.
	s := shares(t, p, 1, 2000)
	if s[eps[0]] < 0.4 || s[eps[1]] < 0.4 {
		t.Fatalf("equal servers: shares %v", s)
	}
	// eps[0]'s queue grows: it loses every pick.
	for ms := 2; ms < 10; ms++ {
		fb(0, 4*ms, ms)
	}
	for range 20 {
		if pk := mustPick(t, p, at(20), rng); pk.Endpoint != eps[1] {
			t.Fatalf("picked %s with queue %.1f over an empty one", pk.Endpoint, p.st[0].queue)
		}
	}
	// Its own outstanding requests count too (q̂ = 1 + os·n + q̄): with
	// enough of them in flight the empty server loses.
	for range 40 {
		p.pick(1)
	}
	p.rescore(1)
	if pk := mustPick(t, p, at(21), rng); pk.Endpoint != eps[0] {
		t.Fatalf("with %d outstanding on the empty server it still won over a queue of %.1f", p.gates[1].inFlight, p.st[0].queue)
	}
}

func TestC3_WithoutFeedbackUsesLatency(t *testing.T) {
	p := newPolicy(t, "c3", 2, nil).(*c3)
	eps := addrs(2)
	p.Done(at(0), p.pick(0), 40*time.Millisecond, 200)
	p.Done(at(0), p.pick(1), 10*time.Millisecond, 200)
	if pk := mustPick(t, p, at(1), newRNG()); pk.Endpoint != eps[1] {
		t.Fatalf("picked %s (40 ms) over the 10 ms one", pk.Endpoint)
	}
}

// pool fills a pool policy's pool with answers (rif, latency ms) for
// endpoints 0.. in order.
func fillPool(t *testing.T, p Policy, answers [][2]int) {
	t.Helper()
	for i, a := range answers {
		p.ProbeResult(at(0), addrs(len(answers))[i], known(a[0], time.Duration(a[1])*time.Millisecond))
	}
}

func TestLinearAndRIFOnly_Rules(t *testing.T) {
	// The answers at RIF <= 1 (40 ms, then 20 ms) make Linear's scale a =
	// 40 + (20−40)/16 = 38.75 ms; scores are weight·RIF + latency/a.
	answers := [][2]int{{0, 40}, {3, 5}, {1, 20}, {6, 4}}
	eps := addrs(4)
	tests := []struct {
		name string
		want string
	}{
		{"rif-only", eps[0]},             // lowest RIF
		{"linear{weight=0}", eps[3]},     // latency only
		{"linear{weight=1000}", eps[0]},  // RIF dominates
		{"linear", eps[0]},               // 0+1.03, 3+0.13, 1+0.52, 6+0.10
		{"linear{weight=0.25}", eps[2]},  // 1.03, 0.75+0.13, 0.25+0.52, 1.5+0.10
		{"linear{weight=0.05}", eps[1]},  // 1.03, 0.28, 0.57, 0.40
		{"linear{weight=0.001}", eps[3]}, // 1.03, 0.132, 0.517, 0.109
		{"prequal{qrif=1}", eps[3]},      // HCL with every probe cold: fastest
	}
	for _, tt := range tests {
		p := newPolicy(t, tt.name, 4, nil)
		fillPool(t, p, answers)
		if pk := mustPick(t, p, at(1), newRNG()); pk.Endpoint != tt.want {
			t.Errorf("%s picked %s, want %s", tt.name, pk.Endpoint, tt.want)
		}
	}
}

// The paper scales RIF by the processing time at one request in flight
// (§5.2), a fleet constant, not by the pool's mean latency, which queueing
// inflates: here a = 10 ms from answers at RIF 1, and the replicas in the
// pool answer (9, 200 ms) twice, (2, 30 ms) and (0, 60 ms). The paper's
// score latency/a + RIF is 29, 29, 5 and 6: the RIF-2 replica wins. Scaled
// by the pool's mean latency (122.5 ms) it would be 10.6, 10.6, 2.2 and
// 0.5, and the slow idle replica would.
func TestLinear_ScalesRIFByTheLatencyAtOneInFlight(t *testing.T) {
	p := newPolicy(t, "linear", 4, nil)
	eps := addrs(4)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	p.ProbeResult(at(0), eps[0], known(1, ms(10)))
	p.ProbeResult(at(0), eps[1], known(1, ms(10)))
	p.ProbeResult(at(1), eps[0], known(9, ms(200))) // replaces its first answer
	p.ProbeResult(at(1), eps[1], known(9, ms(200)))
	p.ProbeResult(at(1), eps[2], known(2, ms(30)))
	p.ProbeResult(at(1), eps[3], known(0, ms(60)))
	if pk := mustPick(t, p, at(2), newRNG()); pk.Endpoint != eps[2] {
		t.Errorf("linear picked %s, want %s (RIF 2 at 30 ms over RIF 0 at 60 ms with a = 10 ms)", pk.Endpoint, eps[2])
	}
	// Reset forgets the scale with the rest.
	p.Reset(at(3))
	if got := p.(*prequal).unitLatency; got != 0 {
		t.Errorf("unitLatency after Reset = %v, want 0", got)
	}
}

func TestPrequalSync_PlansDistinctAndPicksFromThisQueryOnly(t *testing.T) {
	p := newPolicy(t, "prequal-sync{d=3}", 10, nil)
	sp := p.(SyncPicker)
	rng := newRNG()
	if n, to := sp.SyncWait(); n != 2 || to != 3*time.Millisecond {
		t.Fatalf("SyncWait = %d, %v; want 2, 3ms", n, to)
	}
	eps := addrs(10)
	// An excellent answer delivered outside a query (an async prober's)
	// must never be used.
	p.ProbeResult(at(0), eps[9], known(0, time.Microsecond))
	for q := range 200 {
		plan := sp.PlanSync(at(q), rng, nil)
		if len(plan) != 3 || plan[0] == plan[1] || plan[1] == plan[2] || plan[0] == plan[2] {
			t.Fatalf("plan %v, want 3 distinct", plan)
		}
		// Two answers: the second is faster and as idle: it wins.
		ans := []SyncAnswer{
			{Endpoint: plan[0], Reply: known(0, 20*time.Millisecond), OK: true},
			{Endpoint: plan[1], Reply: known(0, 5*time.Millisecond), OK: true},
			{Endpoint: plan[2], OK: false},
		}
		pk, err := sp.PickSync(at(q), rng, ans)
		if err != nil || pk.Endpoint != plan[1] || pk.Fallback {
			t.Fatalf("PickSync = %+v, %v; want %s", pk, err, plan[1])
		}
		p.Done(at(q), pk, time.Millisecond, 200)
	}
	// No answers: a random fallback, counted.
	pk, err := sp.PickSync(at(300), rng, nil)
	if err != nil || !pk.Fallback {
		t.Fatalf("PickSync(no answers) = %+v, %v; want a fallback", pk, err)
	}
	if s := p.Stats(); s.Fallbacks != 1 || s.ColdPicks != 200 || s.ProbesPlanned != 600 || s.PoolSize != 0 {
		t.Errorf("stats: fallbacks %d cold %d planned %d pool %d", s.Fallbacks, s.ColdPicks, s.ProbesPlanned, s.PoolSize)
	}
}

func TestNewPolicies_SeamCallsDoNotAllocate(t *testing.T) {
	c := newPolicy(t, "c3", 100, nil)
	fu := c.(FeedbackUser)
	rng := newRNG()
	if a := testing.AllocsPerRun(500, func() {
		pk, _ := c.Pick(at(1), rng)
		fu.ServerFeedback(at(1), pk, ServerFeedback{Known: true, QueueSize: 2, ServiceTime: time.Millisecond})
		c.Done(at(1), pk, 2*time.Millisecond, 200)
	}); a != 0 {
		t.Errorf("c3 pick+feedback+done: %v allocations", a)
	}
	s := newPolicy(t, "prequal-sync", 100, nil)
	sp := s.(SyncPicker)
	plan := make([]string, 0, 8)
	ans := make([]SyncAnswer, 0, 8)
	if a := testing.AllocsPerRun(500, func() {
		plan = sp.PlanSync(at(1), rng, plan[:0])
		ans = ans[:0]
		for i, e := range plan {
			ans = append(ans, SyncAnswer{Endpoint: e, Reply: known(i, time.Duration(i+1)*time.Millisecond), OK: true})
		}
		pk, _ := sp.PickSync(at(1), rng, ans)
		s.Done(at(1), pk, time.Millisecond, 200)
	}); a != 0 {
		t.Errorf("prequal-sync plan+pick+done: %v allocations", a)
	}
}

// gRPC's stride scheduler offsets each endpoint's turn by index·32767 so
// that endpoints of equal weight skip different generations: with weights
// 0.8, 0.8 and 1 the heaviest endpoint must never be picked twice in a
// row (without the offset both light ones skip every fifth generation
// together and it is).
func TestWRR_EqualWeightsSkipDifferentGenerations(t *testing.T) {
	p := newPolicy(t, "wrr{blackout=0s}", 3, nil)
	eps := addrs(3)
	p.ProbeResult(at(0), eps[0], load(80, 0, 1))
	p.ProbeResult(at(0), eps[1], load(80, 0, 1))
	p.ProbeResult(at(0), eps[2], load(100, 0, 1))
	rng := newRNG()
	prev, runs, counts := "", 0, map[string]int{}
	for i := range 3000 {
		now := at(1000 + i%500) // after the first rebuild
		pk := mustPick(t, p, now, rng)
		p.Done(now, pk, time.Millisecond, 200)
		if pk.Endpoint == eps[2] && prev == eps[2] {
			runs++
		}
		prev = pk.Endpoint
		counts[pk.Endpoint]++
	}
	if runs > 0 {
		t.Errorf("the heaviest endpoint was picked twice in a row %d times", runs)
	}
	if got := float64(counts[eps[2]]) / 3000; math.Abs(got-100.0/260) > 0.01 {
		t.Errorf("heaviest share %.3f, want %.3f", got, 100.0/260)
	}
}

// Weights are clamped to at most 10× their mean, as gRPC C++ does, so one
// endpoint reporting a tiny utilization cannot take nearly every pick:
// among 20 endpoints, one of weight 1e4 and 19 of weight 100 (mean 595),
// the big one counts as 5950 and has a share of 5950/(5950+1900) ≈ 0.758
// (0.84 unclamped).
func TestWRR_WeightRatioClamped(t *testing.T) {
	p := newPolicy(t, "wrr{blackout=0s}", 20, nil)
	eps := addrs(20)
	p.ProbeResult(at(0), eps[0], load(100, 0, 0.01)) // weight 1e4
	for _, a := range eps[1:] {
		p.ProbeResult(at(0), a, load(100, 0, 1)) // weight 100
	}
	s := shares(t, p, 1000, 20000)
	if want := 5950.0 / 7850; math.Abs(s[eps[0]]-want) > 0.02 {
		t.Errorf("big endpoint's share %.3f, want %.3f (10× the mean)", s[eps[0]], want)
	}
}

// A server never answered is tried one request at a time until its first
// answer, however busy the answered ones are: with 3 servers answered at
// 5 ms and a 4th added, 50 picks without a Done send the new one exactly
// one (it scored its outstanding count in ns, below every measured score,
// and took all 50).
func TestC3_NewEndpointOneRequestUntilItsFirstAnswer(t *testing.T) {
	p := newPolicy(t, "c3", 3, nil).(*c3)
	for i := range 3 {
		pk := p.pick(i)
		p.ServerFeedback(at(0), pk, ServerFeedback{Known: true, ServiceTime: 5 * time.Millisecond})
		p.Done(at(0), pk, 5*time.Millisecond, 200)
	}
	eps := append(addrs(3), "10.9.9.9:1")
	p.SetEndpoints(at(1), eps)
	rng := newRNG()
	var picks []Picked
	for range 50 {
		picks = append(picks, mustPick(t, p, at(2), rng))
	}
	if got := picksByAddr(p.Stats())[eps[3]]; got != 1 {
		t.Fatalf("the new endpoint got %d of 50 picks before its first answer, want 1", got)
	}
	// Its first answer (as fast as the others) gives it a real score: it
	// takes picks again.
	for _, pk := range picks {
		if pk.Endpoint == eps[3] {
			p.ServerFeedback(at(3), pk, ServerFeedback{Known: true, ServiceTime: 5 * time.Millisecond})
			p.Done(at(3), pk, 5*time.Millisecond, 200)
		}
	}
	if s := shares(t, p, 4, 400); s[eps[3]] < 0.1 {
		t.Errorf("after its first answer the new endpoint's share is %.3f, want a fair part", s[eps[3]])
	}
	// With no endpoint answered yet (a start, or after Reset) the fewest
	// outstanding goes first: 8 picks over 4 put 2 on each.
	fresh := newPolicy(t, "c3", 4, nil)
	for range 8 {
		mustPick(t, fresh, at(6), rng)
	}
	for i, e := range fresh.Stats().Endpoints {
		if e.InFlight != 2 {
			t.Errorf("no answers yet: endpoint %d has %d of 8 picks in flight, want 2", i, e.InFlight)
		}
	}
}

// A shed request (503, X-Prequal-Service-Us: 0) is a queue-size sample,
// not a service-time one: the shedding server's 1/μ̄ must not fall toward
// 0, or the cubic queue term vanishes on exactly the replica whose queue
// is full.
func TestC3_ShedAnswersGiveNoServiceTimeSample(t *testing.T) {
	p := newPolicy(t, "c3", 2, nil).(*c3)
	eps := addrs(2)
	answer := func(ep, queue int, svc time.Duration, lat time.Duration, status int) {
		pk := p.pick(ep)
		p.ServerFeedback(at(0), pk, ServerFeedback{Known: true, QueueSize: queue, ServiceTime: svc})
		p.Done(at(0), pk, lat, status)
	}
	answer(0, 0, 10*time.Millisecond, 10*time.Millisecond, 200)
	answer(1, 2, 10*time.Millisecond, 30*time.Millisecond, 200)
	for range 5 { // eps[1] sheds: full queue of 4, answered at once
		answer(1, 4, 0, 200*time.Microsecond, 503)
	}
	if got := p.st[1].svc; got != float64(10*time.Millisecond) {
		t.Errorf("service time EWMA after 503s = %v, want the 10 ms of its one served answer", time.Duration(got))
	}
	if got := p.st[1].queue; got < 3.9 {
		t.Errorf("queue EWMA after 503s with queue 4 = %.2f, want about 4 (the queue sample is kept)", got)
	}
	rng := newRNG()
	for range 20 {
		pk := mustPick(t, p, at(1), rng)
		if pk.Endpoint != eps[0] {
			t.Fatalf("picked the shedding server (queue %.1f) over an idle one", p.st[1].queue)
		}
		p.Done(at(1), pk, 10*time.Millisecond, 200)
	}
	// A server whose only answers so far are failures has no sample: one
	// request at a time, as a new one.
	q := newPolicy(t, "c3", 2, nil).(*c3)
	pk := q.pick(1)
	q.ServerFeedback(at(0), pk, ServerFeedback{Known: true, QueueSize: 4})
	q.Done(at(0), pk, time.Millisecond, 503)
	if q.st[1].fb || q.st[1].seen {
		t.Errorf("a 503 gave a sample: %+v", q.st[1])
	}
	q.Done(at(0), q.pick(0), time.Millisecond, 500)
	if q.st[0].seen {
		t.Errorf("a 500 without feedback gave a latency sample: %+v", q.st[0])
	}
}

// strideReference is gRPC's static stride scheduler as written, one turn
// at a time: the turn seq = generation·n + index takes the endpoint when
// (w·generation + index·32767) mod 65535 >= 65535 − w.
func strideReference(sched []uint16, seq *uint64) int {
	n := uint64(len(sched))
	for {
		s := *seq
		*seq++
		i, g := s%n, s/n
		wt := uint64(sched[i])
		if (wt*g+i*wrrOffset)%wrrMaxWeight >= wrrMaxWeight-wt {
			return int(i)
		}
	}
}

// The scheduler walks to the next due endpoint instead of testing every
// turn; its picks must be exactly the turn-by-turn scheduler's, from any
// starting sequence, across weight changes and endpoint-set changes.
func TestWRR_SchedulerPicksAsTheTurnByTurnStrideScheduler(t *testing.T) {
	rng := newRNG()
	for trial := range 200 {
		n := 1 + rng.IntN(40)
		p := newPolicy(t, "wrr{blackout=0s}", n, nil).(*wrr)
		weights := func() {
			for i := range p.sched {
				switch rng.IntN(4) {
				case 0:
					p.sched[i] = wrrMaxWeight
				case 1:
					p.sched[i] = uint16(1 + rng.IntN(10))
				default:
					p.sched[i] = uint16(1 + rng.IntN(wrrMaxWeight))
				}
			}
			p.sched[rng.IntN(n)] = wrrMaxWeight // as rebuild scales them
			p.redue()
		}
		seq := rng.Uint64N(1 << 32)
		p.seek(seq)
		weights()
		for step := range 3000 {
			if step == 1000 { // a rebuild mid-generation
				weights()
			}
			if step == 2000 { // the endpoint set changes: the sequence goes on
				n = 1 + rng.IntN(40)
				p.SetEndpoints(at(0), addrs(n))
				weights()
			}
			want := strideReference(p.sched, &seq)
			if got := p.next(); got != want {
				t.Fatalf("trial %d (n=%d) step %d: picked %d, the turn-by-turn scheduler %d", trial, n, step, got, want)
			}
		}
	}
}

// PickSync counts each answer's own outcome, and planned probes that never
// answered as timeouts when the wait ended for want of answers (not when
// it ended at its d − 1 answers: the rest were not waited for).
func TestPrequalSync_CountsEachProbesOutcome(t *testing.T) {
	p := newPolicy(t, "prequal-sync{d=3}", 10, nil)
	sp := p.(SyncPicker)
	rng := newRNG()
	query := func(answers func(plan []string) []SyncAnswer) {
		t.Helper()
		plan := sp.PlanSync(at(0), rng, nil)
		pk, err := sp.PickSync(at(0), rng, answers(plan))
		if err != nil {
			t.Fatal(err)
		}
		p.Done(at(0), pk, time.Millisecond, 200)
	}
	// One success, a 500 and a malformed answer: the wait ended with
	// every probe back.
	query(func(plan []string) []SyncAnswer {
		return []SyncAnswer{
			{Endpoint: plan[0], Reply: known(0, time.Millisecond), OK: true},
			{Endpoint: plan[1], Outcome: ProbeStatus},
			{Endpoint: plan[2], Outcome: ProbeMalformed},
		}
	})
	// Two successes: the pick's count; the third was not waited for.
	query(func(plan []string) []SyncAnswer {
		return []SyncAnswer{
			{Endpoint: plan[0], Reply: known(0, time.Millisecond), OK: true},
			{Endpoint: plan[1], Reply: known(1, time.Millisecond), OK: true},
		}
	})
	// One success, then the timeout: the two silent probes timed out.
	query(func(plan []string) []SyncAnswer {
		return []SyncAnswer{{Endpoint: plan[0], Reply: known(0, time.Millisecond), OK: true}}
	})
	// A stale answer, and one failure whose caller gave no reason.
	query(func(plan []string) []SyncAnswer {
		return []SyncAnswer{{Endpoint: plan[0], Outcome: ProbeStale}, {Endpoint: plan[1]}}
	})
	want := map[ProbeOutcome]uint64{ProbeOK: 4, ProbeStatus: 1, ProbeMalformed: 1, ProbeTimeout: 2 + 1 + 1, ProbeStale: 1, ProbeDropped: 0}
	if diff := cmp.Diff(want, p.Stats().ProbeOutcomes); diff != "" {
		t.Errorf("probe outcomes (-want +got):\n%s", diff)
	}
	if s := p.Stats(); s.ProbesPlanned != 12 {
		t.Errorf("planned %d probes, want 12", s.ProbesPlanned)
	}
}

// prequal-sync takes coldrif from its variant string and ranks its
// answers by the same key: a busier, faster answer loses to an idle one.
func TestPrequalSync_ColdRIF(t *testing.T) {
	for _, tt := range []struct {
		name string
		want int
	}{{"prequal-sync", 0}, {"prequal-sync{coldrif=1}", 1}} {
		p, err := New(tt.name, DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		p.SetEndpoints(t0, addrs(10))
		sp := p.(SyncPicker)
		rng := newRNG()
		plan := sp.PlanSync(t0, rng, nil)
		// 5 ms at RIF 3 against 8 ms idle: keys 20 and 8 ms at w = 1.
		ans := []SyncAnswer{
			{Endpoint: plan[0], Reply: known(3, 5*time.Millisecond), OK: true},
			{Endpoint: plan[1], Reply: known(0, 8*time.Millisecond), OK: true},
		}
		pk, err := sp.PickSync(t0, rng, ans)
		if err != nil || pk.Endpoint != plan[tt.want] {
			t.Errorf("%s: PickSync = %+v, %v; want %s", tt.name, pk, err, plan[tt.want])
		}
	}
}
