package loadbalancer

import (
	"math"
	"sort"
	"testing"
	"time"
)

// sinkholeRun drives policy name over n endpoints in virtual time: one
// request per millisecond for dur; endpoint 0 answers every request with an
// instant 500 (1 ms) and, to a prober, looks idle and fast, as the backend's
// fail_fast mode does; the others take 20 ms and answer 200. failAfter < 0
// keeps endpoint 0 failing throughout; otherwise it heals at that time.
// It returns the policy and endpoint 0's picks from healAt on (all picks
// when it never heals).
func sinkholeRun(t *testing.T, name string, n int, dur, healAt time.Duration) (Policy, uint64, uint64) {
	t.Helper()
	return sinkholeRunStatus(t, name, n, dur, healAt, 500)
}

// sinkholeRunStatus is sinkholeRun with endpoint 0 answering failStatus.
func sinkholeRunStatus(t *testing.T, name string, n int, dur, healAt time.Duration, failStatus int) (Policy, uint64, uint64) {
	t.Helper()
	p := newPolicy(t, name, n, nil)
	rng := newRNG()
	eps := addrs(n)
	type inflight struct {
		pk         Picked
		start, end time.Time
		ok         bool
	}
	var running []inflight
	var probes []string
	var faultyPicks, picks uint64
	for ms := 0; ms < int(dur/time.Millisecond); ms++ {
		now := at(ms)
		healed := healAt >= 0 && now.Sub(t0) >= healAt
		// Finish what is due, in end order.
		sort.Slice(running, func(i, j int) bool { return running[i].end.Before(running[j].end) })
		k := 0
		for ; k < len(running) && !running[k].end.After(now); k++ {
			r := running[k]
			status := 200
			if !r.ok {
				status = failStatus
			}
			p.Done(r.end, r.pk, r.end.Sub(r.start), status)
		}
		running = running[k:]
		// Probe answers: the real in-flight count; the faulty replica
		// reports its 1 ms failures as its latency.
		for _, ep := range probes {
			rif := 0
			for _, r := range running {
				if r.pk.Endpoint == ep {
					rif++
				}
			}
			lat := 20 * time.Millisecond
			if ep == eps[0] && !healed {
				lat = time.Millisecond
			}
			p.ProbeResult(now, ep, known(rif, lat))
		}
		pk := mustPick(t, p, now, rng)
		probes = p.ProbesDue(now, rng, probes[:0])
		faulty := pk.Endpoint == eps[0] && !healed
		if healAt < 0 || healed {
			picks++
			if pk.Endpoint == eps[0] {
				faultyPicks++
			}
		}
		d := 20 * time.Millisecond
		if faulty {
			d = time.Millisecond
		}
		running = append(running, inflight{pk: pk, start: now, end: now.Add(d), ok: !faulty})
	}
	return p, faultyPicks, picks
}

// Every policy sends a fail-fast replica far less than its fair share, and
// counts the decisions. Without aversion least-request, p2c, peak-ewma and
// prequal send it more than 1/n (it looks idle and fast) and round-robin and
// random exactly 1/n.
func TestErrorAversionAvoidsFailFastReplica(t *testing.T) {
	const n = 4
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			p, faulty, picks := sinkholeRun(t, name, n, 4*time.Second, -1)
			share := float64(faulty) / float64(picks)
			t.Logf("%s: fail-fast share %.4f (%d of %d), aversions %d", name, share, faulty, picks, p.Stats().Aversions)
			if share > 0.02 {
				t.Errorf("fail-fast replica got %.2f%% of picks, want <= 2%% (fair share %.0f%%)", 100*share, 100.0/n)
			}
			if st := p.Stats(); st.Endpoints[0].Errors == 0 {
				t.Errorf("endpoint 0 errors = 0")
			}
		})
	}
}

// A replica that heals gets traffic again: decay lets it back in.
func TestErrorAversionLetsHealedReplicaBackIn(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			p, got, picks := sinkholeRun(t, name, 4, 8*time.Second, 2*time.Second)
			share := float64(got) / float64(picks)
			if share < 0.05 {
				t.Errorf("healed replica got %.2f%% of the picks after healing, want >= 5%%", 100*share)
			}
			if p.Stats().Endpoints[0].Averse {
				t.Errorf("healed replica still averse at the end")
			}
		})
	}
}

// When every endpoint fails, aversion has no healthy alternative and the
// policies pick as without it (no endpoint starves, no panic).
func TestErrorAversionAllFailingStillPicksEveryEndpoint(t *testing.T) {
	for _, name := range []string{NameRoundRobin, NameRandom, NameLeastRequest} {
		p := newPolicy(t, name, 3, nil)
		rng := newRNG()
		seen := map[string]bool{}
		for ms := range 300 {
			pk := mustPick(t, p, at(ms), rng)
			seen[pk.Endpoint] = true
			p.Done(at(ms), pk, time.Millisecond, 503)
		}
		if len(seen) != 3 {
			t.Errorf("%s: picked %d of 3 endpoints while all fail", name, len(seen))
		}
	}
}

// rateProbe drives one errorRate as base.done does and reads it as
// base.averse does.
type rateProbe struct {
	b base
	errorRate
}

func (p *rateProbe) observe(now time.Time, status int) {
	p.b.observe(&p.errorRate, p.b.instant(now), status)
}

func (p *rateProbe) averse(now time.Time) bool {
	t := p.b.instant(now)
	return t < p.averseUntil || t < p.excludedUntil
}

func TestErrorRateThresholdAndMinimumSample(t *testing.T) {
	var r rateProbe
	for i := range AversionMinSamples - 1 {
		r.observe(at(i), 500)
	}
	if r.averse(at(5)) {
		t.Fatalf("averse after %d outcomes, below the minimum sample", AversionMinSamples-1)
	}
	r.observe(at(5), 500)
	if !r.averse(at(6)) {
		t.Fatalf("not averse after %d failures", AversionMinSamples)
	}
	if r.averse(at(6).Add(AversionDecay)) {
		t.Fatalf("still averse one decay time later with no new outcomes")
	}
	var ok rateProbe
	for i := range 20 {
		status := 200
		if i%5 == 0 {
			status = 500 // 20% errors, below the threshold
		}
		ok.observe(at(i), status)
	}
	if ok.averse(at(20)) {
		t.Fatalf("averse at a 20%% error rate, threshold %.0f%%", 100*AversionThreshold)
	}
	var client rateProbe
	for i := range 20 {
		client.observe(at(i), 499)
	}
	if client.averse(at(20)) || client.total != 0 {
		t.Fatalf("499 (client gone) counted against the endpoint: total %v", client.total)
	}
}

// A fail-fast 500 does not teach peak-ewma a low latency: as an endpoint's
// first outcome it would otherwise set the estimate to 1 ms.
func TestPeakEWMAFailureDoesNotLookFast(t *testing.T) {
	p := newPolicy(t, NamePeakEWMA, 2, nil).(*peakEWMA)
	pk := mustPick(t, p, at(0), newRNG())
	p.Done(at(1), pk, time.Millisecond, 500)
	i := p.byAddr[pk.Endpoint]
	if est := time.Duration(p.estimate(i, at(1))); est < p.cfg.DefaultRTT {
		t.Fatalf("estimate after a 1 ms failure = %v, want >= DefaultRTT %v", est, p.cfg.DefaultRTT)
	}
	p.Done(at(2), mustPick(t, p, at(2), newRNG()), 80*time.Millisecond, 200)
	before := p.estimate(i, at(2))
	p.Done(at(2), p.pick(i), time.Millisecond, 503)
	if after := p.estimate(i, at(2)); after < before {
		t.Fatalf("a fast failure lowered the estimate from %v to %v", time.Duration(before), time.Duration(after))
	}
}

// PickOther never returns the endpoint to avoid, and prefers healthy ones.
func TestPickOtherAvoidsEndpointAndAverseOnes(t *testing.T) {
	for _, name := range Names() {
		p := newPolicy(t, name, 3, nil)
		rng := newRNG()
		eps := addrs(3)
		// Make eps[2] averse.
		for ms := 0; !p.Stats().Endpoints[2].Averse; ms++ {
			if ms >= 40 {
				t.Fatalf("%s: endpoint failing every request not averse after 40 picks", name)
			}
			pk, ok := p.(OtherPicker).PickOther(at(ms), rng, eps[0])
			if !ok {
				t.Fatalf("%s: PickOther found no other endpoint", name)
			}
			status := 200
			if pk.Endpoint == eps[2] {
				status = 500
			}
			p.Done(at(ms), pk, time.Millisecond, status)
		}
		for ms := 10; ms < 40; ms++ {
			pk, ok := p.(OtherPicker).PickOther(at(ms), rng, eps[0])
			if !ok || pk.Endpoint == eps[0] {
				t.Fatalf("%s: PickOther(avoid %s) = %s, %v", name, eps[0], pk.Endpoint, ok)
			}
			if p.Stats().Endpoints[2].Averse && pk.Endpoint == eps[2] {
				t.Fatalf("%s: PickOther chose the averse endpoint over a healthy one", name)
			}
			p.Done(at(ms), pk, time.Millisecond, 200)
		}
	}
	p := newPolicy(t, NameRoundRobin, 1, nil)
	if _, ok := p.(OtherPicker).PickOther(at(0), newRNG(), addrs(1)[0]); ok {
		t.Fatalf("PickOther with a single endpoint returned one")
	}
}

// Head to head: an averse endpoint that looks best by the policy's own rule
// (idle, fast) loses to a busy, slow healthy one, and the decision is
// counted. Each policy fails this without its aversion check.
func TestErrorAversionAverseLosesHeadToHead(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			p := newPolicy(t, name, 2, nil)
			rng := newRNG()
			eps := addrs(2)
			bad, good := eps[0], eps[1]
			// good: slow and busy (three requests left open).
			for range 3 {
				pk, _ := p.(OtherPicker).PickOther(at(0), rng, bad)
				_ = pk
			}
			if pw, ok := p.(*peakEWMA); ok {
				pk, _ := pw.PickOther(at(0), rng, bad)
				pw.Done(at(1), pk, time.Second, 200)
			}
			// bad: fails fast until averse.
			for ms := 1; ms <= AversionMinSamples; ms++ {
				pk, _ := p.(OtherPicker).PickOther(at(ms), rng, good)
				p.Done(at(ms), pk, time.Millisecond, 500)
			}
			if !p.Stats().Endpoints[0].Averse {
				t.Fatalf("endpoint failing %d of %d requests is not averse", AversionMinSamples, AversionMinSamples)
			}
			// Prequal's probes: bad idle and fast, good busy and slow.
			p.ProbeResult(at(10), bad, known(0, time.Millisecond))
			p.ProbeResult(at(10), good, known(3, 50*time.Millisecond))
			before := p.Stats().Aversions
			for ms := 11; ms < 31; ms++ {
				pk := mustPick(t, p, at(ms), rng)
				if pk.Endpoint == bad {
					t.Fatalf("pick %d went to the averse endpoint", ms-10)
				}
			}
			if got := p.Stats().Aversions - before; got == 0 {
				t.Errorf("Stats().Aversions did not count the avoided picks")
			}
		})
	}
}

// An excluded endpoint (the ingress's outlier ejection) gets no pick while
// any other endpoint is left, under every policy, even where the policy's
// own rule favours it (prequal: the only probes in the pool are its), and
// gets picks again once the exclusion ends.
func TestExcludeKeepsEndpointOutUntilItEnds(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			p := newPolicy(t, name, 3, nil)
			rng := newRNG()
			eps := addrs(3)
			ex := p.(Excluder)
			if !ex.Exclude(eps[0], at(1000)) || !ex.Exclude(eps[1], at(1000)) {
				t.Fatalf("Exclude of a known endpoint reported false")
			}
			if ex.Exclude("10.9.9.9:1", at(1000)) {
				t.Fatalf("Exclude of an unknown endpoint reported true")
			}
			p.ProbeResult(at(0), eps[0], known(0, time.Millisecond))
			p.ProbeResult(at(0), eps[1], known(0, time.Millisecond))
			for ms := range 200 {
				pk := mustPick(t, p, at(ms), rng)
				if pk.Endpoint != eps[2] {
					t.Fatalf("pick %d went to excluded %s", ms, pk.Endpoint)
				}
				p.Done(at(ms), pk, time.Millisecond, 200)
			}
			seen := map[string]bool{}
			for ms := 1000; ms < 1300; ms++ {
				pk := mustPick(t, p, at(ms), rng)
				seen[pk.Endpoint] = true
				p.Done(at(ms), pk, time.Millisecond, 200)
			}
			if !seen[eps[0]] && !seen[eps[1]] {
				t.Fatalf("after the exclusion ended, picks reached %v", seen)
			}
		})
	}
}

// A replica that hangs (requests in flight, none finished) is avoided once
// it has finished nothing for AversionStall, before any failure is
// reported; round-robin and random would otherwise send it its full share
// until the first timeout.
func TestErrorAversionAvoidsStalledReplica(t *testing.T) {
	for _, name := range []string{NameRoundRobin, NameRandom, NameP2C, NamePeakEWMA} {
		t.Run(name, func(t *testing.T) {
			p := newPolicy(t, name, 3, nil)
			rng := newRNG()
			hang := addrs(3)[0]
			late := 0
			for ms := 0; ms < 3000; ms += 5 {
				pk := mustPick(t, p, at(ms), rng)
				if pk.Endpoint == hang {
					if ms > int(AversionStall/time.Millisecond)+50 {
						late++
					}
					continue // never finishes
				}
				p.Done(at(ms+1), pk, time.Millisecond, 200)
			}
			if late != 0 {
				t.Fatalf("the hung replica got %d picks after it stalled", late)
			}
			if !p.Stats().Endpoints[0].Averse {
				t.Fatalf("the hung replica is not shown averse")
			}
		})
	}
}

// Clients giving up on a hung replica (499) arrive steadily once the first
// give up; they are not answers, so they do not end its stall: without
// that the replica got its full share again from the first 499 on.
func TestErrorAversionStallIgnoresClientsLeaving(t *testing.T) {
	p := newPolicy(t, NameRoundRobin, 3, nil)
	rng := newRNG()
	hang := addrs(3)[0]
	type hungReq struct {
		pk Picked
		at int
	}
	var hung []hungReq
	late := 0
	for ms := 0; ms < 4000; ms += 5 {
		for len(hung) > 0 && ms-hung[0].at >= 1200 {
			p.Done(at(ms), hung[0].pk, 1200*time.Millisecond, 499)
			hung = hung[1:]
		}
		pk := mustPick(t, p, at(ms), rng)
		if pk.Endpoint == hang {
			if ms >= 1500 {
				late++
			}
			hung = append(hung, hungReq{pk, ms})
			continue
		}
		p.Done(at(ms+1), pk, time.Millisecond, 200)
	}
	fair := (4000 - 1500) / 5 / 3
	t.Logf("hung replica: %d picks after 1.5 s, fair share %d", late, fair)
	if late > fair*6/10 {
		t.Fatalf("the hung replica got %d picks after 1.5 s, more than 60%% of its fair share %d", late, fair)
	}
}

// 503 (a full queue shedding load) makes no endpoint averse while the
// endpoint also serves: an overloaded replica shedding 60% of what it is
// sent stays in.
func TestErrorRateIgnoresServiceUnavailable(t *testing.T) {
	var r rateProbe
	for i := range 50 {
		status := 200
		if i%5 < 3 {
			status = 503
		}
		r.observe(at(i), status)
	}
	if r.averse(at(50)) || r.fails != 0 || r.total > 20 {
		t.Fatalf("503s counted: failures %v, total %v (want at most the 20 answers), averse %v", r.fails, r.total, r.averse(at(50)))
	}
}

// A replica that answers 503 at once to everything is a sinkhole like a
// fail-fast 500 (without the shed share least-request sent it 86% of the
// requests, p2c 50%): every policy sends it far less than its fair share.
func TestErrorAversionAvoidsInstant503Replica(t *testing.T) {
	const n = 4
	for _, name := range Names() {
		p, faulty, picks := sinkholeRunStatus(t, name, n, 4*time.Second, -1, 503)
		share := float64(faulty) / float64(picks)
		t.Logf("%s: instant-503 share %.4f (%d of %d), aversions %d", name, share, faulty, picks, p.Stats().Aversions)
		if share > 0.02 {
			t.Errorf("%s: the instant-503 replica got %.2f%% of picks, want <= 2%% (fair share %.0f%%)", name, 100*share, 100.0/n)
		}
	}
	var r rateProbe
	for i := range AversionMinSamples {
		r.observe(at(i), 503)
	}
	if !r.averse(at(AversionMinSamples)) {
		t.Fatalf("not averse after %d 503s and nothing else", AversionMinSamples)
	}
}

// The decayed counts at their boundaries: the threshold is strict (exactly
// 25% failures is not averse), and AversionMinSamples failures at one
// instant keep an endpoint averse for exactly τ·ln(5/4), while their
// decayed count is above AversionMinSamples − 1.
func TestErrorRateBoundaries(t *testing.T) {
	var quarter rateProbe
	for i := range 4 * AversionMinSamples {
		status := 200
		if i%4 == 0 {
			status = 500
		}
		quarter.observe(at(0), status)
	}
	if quarter.averse(at(0)) {
		t.Fatalf("averse at exactly %.0f%% failures (%v of %v)", 100*AversionThreshold, quarter.fails, quarter.total)
	}
	quarter.observe(at(0), 500)
	if !quarter.averse(at(0)) {
		t.Fatalf("not averse just above the threshold (%v of %v)", quarter.fails, quarter.total)
	}

	var five rateProbe
	for range AversionMinSamples {
		five.observe(at(0), 0)
	}
	span := time.Duration(float64(AversionDecay) * math.Log(AversionMinSamples/(AversionMinSamples-1.0)))
	if !five.averse(at(0).Add(span - time.Millisecond)) {
		t.Fatalf("not averse 1 ms before τ·ln(5/4) = %v", span)
	}
	if five.averse(at(0).Add(span + time.Millisecond)) {
		t.Fatalf("still averse 1 ms after τ·ln(5/4) = %v", span)
	}
	// One more failure then, on a decayed count of 4: 5 again, averse again.
	five.observe(at(0).Add(span+time.Millisecond), 0)
	if !five.averse(at(0).Add(span + 2*time.Millisecond)) {
		t.Fatalf("a failure on a decayed count of %.3f did not make it averse again", five.total)
	}
}

// A replica that is slow but answers (every request 1.5 s, longer than
// AversionStall) is not a stalled one: once it has answered, the stall
// rule waits twice its longest gap between answers, so round-robin still
// sends it its share (the rule alone skipped it for most of each request).
func TestErrorAversionStallSparesSlowReplica(t *testing.T) {
	for _, name := range []string{NameRoundRobin, NameRandom} {
		p := newPolicy(t, name, 2, nil)
		rng := newRNG()
		slow := addrs(2)[1]
		type inflight struct {
			pk  Picked
			end int
		}
		var running []inflight
		var slowPicks, picks int
		for ms := 0; ms < 40000; ms += 700 {
			kept := running[:0]
			for _, r := range running {
				if r.end <= ms {
					p.Done(at(r.end), r.pk, 0, 200)
				} else {
					kept = append(kept, r)
				}
			}
			running = kept
			pk := mustPick(t, p, at(ms), rng)
			d := 10
			if pk.Endpoint == slow {
				d = 1500
			}
			running = append(running, inflight{pk, ms + d})
			if ms >= 5000 {
				picks++
				if pk.Endpoint == slow {
					slowPicks++
				}
			}
		}
		share := float64(slowPicks) / float64(picks)
		t.Logf("%s: slow replica's share %.3f, aversions %d", name, share, p.Stats().Aversions)
		if share < 0.4 {
			t.Errorf("%s: the slow (1.5 s) replica got %.1f%% of picks, want about 50%%", name, 100*share)
		}
	}
}

// With every endpoint averse, p2c and peak-ewma still apply their own
// rule: of two averse endpoints the idle one wins (they took the first
// draw, a coin flip, before).
func TestErrorAversionAllAverseKeepsPolicyRule(t *testing.T) {
	for _, name := range []string{NameP2C, NamePeakEWMA} {
		p := newPolicy(t, name, 2, nil)
		rng := newRNG()
		eps := addrs(2)
		// Endpoint 0 ends up with requests in flight, endpoint 1 with none.
		var busy int
		var idle []Picked
		for range 20 {
			if pk := mustPick(t, p, at(0), rng); pk.Endpoint == eps[0] {
				busy++
			} else {
				idle = append(idle, pk)
			}
		}
		for _, pk := range idle {
			p.Done(at(0), pk, time.Millisecond, 200)
		}
		if busy == 0 {
			t.Fatalf("%s: no pick of endpoint 0 in 20", name)
		}
		for _, ep := range eps {
			if !p.(Excluder).Exclude(ep, at(1000)) {
				t.Fatalf("%s: Exclude(%s) = false", name, ep)
			}
		}
		for k := range 50 {
			pk := mustPick(t, p, at(1+k), rng)
			if pk.Endpoint == eps[0] {
				t.Fatalf("%s: pick %d went to the endpoint with %d in flight, not the idle one, while both are excluded", name, k, busy)
			}
			p.Done(at(1+k), pk, time.Millisecond, 200)
		}
	}
}
