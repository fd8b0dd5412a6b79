package loadbalancer

import (
	"math/rand/v2"
	"testing"
	"time"
)

// suspectRig drives round-robin over 4 endpoints on the fake clock, with
// endpoint 0 the one under test. Round-robin skips an averse endpoint
// while a healthy one exists, so whether endpoint 0 comes up in a cycle of
// picks shows whether it is averse.
type suspectRig struct {
	t   *testing.T
	p   Policy
	rng *rand.Rand
	ep0 string
}

const suspectRigN = 4

func newSuspectRig(t *testing.T) *suspectRig {
	return &suspectRig{t: t, p: newPolicy(t, NameRoundRobin, suspectRigN, nil), rng: newRNG(), ep0: addrs(suspectRigN)[0]}
}

// cycle makes n picks at now, answering each 200 at once except endpoint
// 0's, which gets status; it reports whether endpoint 0 was picked.
func (r *suspectRig) cycle(now time.Time, n, status int) bool {
	r.t.Helper()
	got := false
	for range n {
		pk := mustPick(r.t, r.p, now, r.rng)
		s := 200
		if pk.Endpoint == r.ep0 {
			got, s = true, status
		}
		r.p.Done(now, pk, time.Millisecond, s)
	}
	return got
}

// makeSuspect fails endpoint 0 AversionFailRun times in a row, 3 s apart,
// so that the decayed error rate alone (τ = 2 s) never makes it averse:
// only the failure run does. It returns the time of the last failure.
func (r *suspectRig) makeSuspect() time.Time {
	r.t.Helper()
	var last time.Time
	for k := range AversionFailRun {
		last = t0.Add(time.Duration(k) * 3 * time.Second)
		if !r.cycle(last, suspectRigN, 500) {
			r.t.Fatalf("failure %d: endpoint 0 not picked in a cycle", k+1)
		}
	}
	if !r.p.Stats().Endpoints[0].Averse {
		r.t.Fatalf("not averse after %d failures in a row", AversionFailRun)
	}
	return last
}

// A suspect's retry waits for AversionRetryShare·n of the policy's picks
// and for AversionRetryTime (446 ms) after its failure, whichever is later:
// with the picks made early, the time floor alone keeps it out.
func TestAversion_SuspectRetryWaitsTheTimeFloor(t *testing.T) {
	r := newSuspectRig(t)
	last := r.makeSuspect()
	// These picks pay the pick share: every one goes elsewhere while the
	// time floor holds.
	if r.cycle(last.Add(AversionRetryTime-time.Millisecond), AversionRetryShare*suspectRigN, 500) {
		t.Fatalf("endpoint 0 retried %v after its failure, before the %v floor", AversionRetryTime-time.Millisecond, AversionRetryTime)
	}
	if !r.cycle(last.Add(AversionRetryTime+time.Millisecond), suspectRigN, 500) {
		t.Fatalf("endpoint 0 not retried %v after its failure, past the floor and the picks", AversionRetryTime+time.Millisecond)
	}
}

// A success from a suspect clears the suspicion: the next single failure
// is judged by the error rate again (one failure on a small sample: not
// averse), not treated as the suspect's failed retry (averse at once).
func TestAversion_SuccessClearsSuspicion(t *testing.T) {
	r := newSuspectRig(t)
	last := r.makeSuspect()
	retry := last.Add(3 * time.Second) // past the floor; the cycles pay the picks
	for range AversionRetryShare {
		r.cycle(retry, suspectRigN, 200)
	}
	if !r.cycle(retry, suspectRigN, 200) {
		t.Fatal("endpoint 0 not retried 3 s after its last failure")
	}
	// One failure now.
	if !r.cycle(retry.Add(time.Millisecond), suspectRigN, 500) {
		t.Fatal("endpoint 0 not picked after its success")
	}
	if r.p.Stats().Endpoints[0].Averse {
		t.Fatal("one failure after a success made endpoint 0 averse: the success did not clear its suspicion")
	}
	if !r.cycle(retry.Add(2*time.Millisecond), suspectRigN, 200) {
		t.Fatal("endpoint 0 skipped after one failure that followed a success")
	}
}

// Prequal's pool holds at most one probe per replica, so with fewer
// replicas than MinProbes a full pool is n probes: Pick chooses from it
// (hot-cold) rather than falling back to a random replica forever.
func TestPrequal_FewerReplicasThanMinProbesStillChoose(t *testing.T) {
	p := newPrequalT(t, 2, func(c *PrequalConfig) { c.MinProbes = 3 })
	rng := newRNG()
	fast, slow := p.eps[0].addr, p.eps[1].addr
	for q := range 50 {
		now := at(q)
		// Fresh probes of both every time: the pool stays full at 2.
		p.ProbeResult(now, fast, known(0, time.Millisecond))
		p.ProbeResult(now, slow, known(0, 50*time.Millisecond))
		pk := mustPick(t, p, now, rng)
		if pk.Fallback {
			t.Fatalf("pick %d: a random fallback with both replicas probed (MinProbes 3 > 2 replicas)", q)
		}
		if pk.Endpoint != fast {
			t.Fatalf("pick %d: %s, want the faster replica %s", q, pk.Endpoint, fast)
		}
		p.Done(now, pk, time.Millisecond, 200)
	}
	if s := p.Stats(); s.Fallbacks != 0 {
		t.Errorf("%d fallbacks in %d picks, want 0", s.Fallbacks, s.Picks)
	}
}
