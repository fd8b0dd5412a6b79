package loadbalancer

import (
	"math/rand/v2"
	"testing"
	"time"
)

// simReplica is a backend in the simulation: conc slots (0 = unlimited) and
// a FIFO queue, a fixed service time, and a probe answer in the spirit of the
// real backend (RIF counts queued and serving requests; the latency estimate
// is what an arrival at the current RIF would see).
type simReplica struct {
	service time.Duration
	conc    int
	serving []simReq
	queue   []simReq
}

type simReq struct {
	tok      Picked
	arrived  time.Time
	finishes time.Time
}

func (r *simReplica) rif() int { return len(r.serving) + len(r.queue) }

func (r *simReplica) estimate(jitter time.Duration) time.Duration {
	l := r.service
	if r.conc > 0 {
		if wait := r.rif() - r.conc + 1; wait > 0 {
			l += r.service * time.Duration(wait) / time.Duration(r.conc)
		}
	}
	return l + jitter
}

func (r *simReplica) start(now time.Time) {
	for len(r.queue) > 0 && (r.conc == 0 || len(r.serving) < r.conc) {
		q := r.queue[0]
		r.queue = r.queue[1:]
		q.finishes = now.Add(r.service)
		r.serving = append(r.serving, q)
	}
}

type simProbe struct {
	due  time.Time
	addr string
}

// simulate drives p with Poisson arrivals at rps for dur, in 1 ms steps;
// probes are answered 1 ms after they are planned. It returns the picks per
// endpoint after warmup.
func simulate(t *testing.T, p Policy, reps []*simReplica, rps float64, dur, warmup time.Duration, jitter time.Duration) []uint64 {
	t.Helper()
	rng := newRNG()
	env := rand.New(rand.NewPCG(7, 8)) // the world's randomness, apart from the policy's
	a := addrs(len(reps))
	idx := map[string]int{}
	for i, x := range a {
		idx[x] = i
	}
	p.SetEndpoints(t0, a)
	var probes []simProbe
	var due []string
	next := 0.0 // ms until the next arrival
	for ms := 0; ms < int(dur/time.Millisecond); ms++ {
		now := at(ms)
		if time.Duration(ms)*time.Millisecond == warmup {
			p.Reset(now)
		}
		for _, r := range reps {
			kept := r.serving[:0]
			for _, q := range r.serving {
				if !q.finishes.After(now) {
					p.Done(now, q.tok, now.Sub(q.arrived), 200)
					continue
				}
				kept = append(kept, q)
			}
			r.serving = kept
			r.start(now)
		}
		keep := probes[:0]
		for _, pr := range probes {
			if pr.due.After(now) {
				keep = append(keep, pr)
				continue
			}
			r := reps[idx[pr.addr]]
			var j time.Duration
			if jitter > 0 {
				j = time.Duration(env.Int64N(int64(jitter)))
			}
			p.ProbeResult(now, pr.addr, ProbeReply{RIF: r.rif(), Latency: r.estimate(j), LatencyKnown: true})
		}
		probes = keep
		for next -= 1; next <= 0; next += env.ExpFloat64() * 1000 / rps {
			pk, err := p.Pick(now, rng)
			if err != nil {
				t.Fatal(err)
			}
			r := reps[idx[pk.Endpoint]]
			r.queue = append(r.queue, simReq{tok: pk, arrived: now})
			r.start(now)
		}
		due = p.ProbesDue(now, rng, due[:0])
		for _, d := range due {
			probes = append(probes, simProbe{due: now.Add(time.Millisecond), addr: d})
		}
	}
	s := p.Stats()
	out := make([]uint64, len(reps))
	for _, e := range s.Endpoints {
		out[idx[e.Address]] = e.Picks
	}
	return out
}

// TestPrequal_IdenticalReplicasNotHerded: the seed sent 35 to 3,354 picks to
// 14 identical replicas; ties broken at random, one entry per replica and
// compensation keep the spread tight.
func TestPrequal_IdenticalReplicasNotHerded(t *testing.T) {
	for _, tt := range []struct {
		name   string
		jitter time.Duration
	}{{"equal estimates", 0}, {"jittered estimates", 2 * time.Millisecond}} {
		t.Run(tt.name, func(t *testing.T) {
			reps := make([]*simReplica, 14)
			for i := range reps {
				reps[i] = &simReplica{service: 50 * time.Millisecond}
			}
			p := newPolicy(t, NamePrequal, 0, nil)
			picks := simulate(t, p, reps, 500, 22*time.Second, 2*time.Second, tt.jitter)
			lo, hi := picks[0], picks[0]
			for _, c := range picks {
				lo, hi = min(lo, c), max(hi, c)
			}
			t.Logf("picks per replica: %v", picks)
			if lo == 0 || float64(hi)/float64(lo) > 1.5 {
				t.Errorf("max/min picks = %d/%d, want <= 1.5", hi, lo)
			}
			if fb := p.Stats().Fallbacks; fb > p.Stats().Picks/100 {
				t.Errorf("fallbacks = %d of %d picks", fb, p.Stats().Picks)
			}
		})
	}
}

// TestPrequal_SlowGroupGetsLessNotZero: 7 fast and 7 half-speed replicas with
// real capacity at 70% load. The slow group should get less than its
// capacity share of picks per replica than the fast group, but not none.
func TestPrequal_SlowGroupGetsLessNotZero(t *testing.T) {
	reps := make([]*simReplica, 14)
	for i := range reps {
		reps[i] = &simReplica{service: 20 * time.Millisecond, conc: 4}
		if i%2 == 1 {
			reps[i].service = 40 * time.Millisecond
		}
	}
	// Capacity: 7×200 + 7×100 = 2100 rps.
	p := newPolicy(t, NamePrequal, 0, nil)
	picks := simulate(t, p, reps, 0.7*2100, 12*time.Second, 2*time.Second, 0)
	var fast, slow uint64
	for i, c := range picks {
		if i%2 == 1 {
			slow += c
		} else {
			fast += c
		}
	}
	share := float64(slow) / float64(slow+fast)
	t.Logf("picks per replica: %v; slow share %.3f", picks, share)
	if share <= 0.02 || share >= 0.5 {
		t.Errorf("slow group share = %.3f, want less than the fast group's but above 2%%", share)
	}
	for i, c := range picks {
		if i%2 == 1 && c == 0 {
			t.Errorf("slow replica %d got no traffic", i)
		}
	}
}
