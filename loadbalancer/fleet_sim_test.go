package loadbalancer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The fleet simulation: several clients (each its own policy, as ingress
// replicas are) share one fleet of capacity-limited replicas in virtual
// time. It is deterministic for a seed and never reads the wall clock, so it
// measures policies without timing dependence.

// fleetReplica is a backend: slots and a FIFO queue, service times
// N(mean, σ = mean) clamped at 0.1 ms (the campaign backend's "normal"), and
// a latency estimator over its own finished requests.
type fleetReplica struct {
	mean    time.Duration
	fixed   bool // service time exactly mean (a sleep), else N(mean, σ = mean)
	slots   int  // 0 = unlimited
	group   int
	serving []fleetReq
	queue   []fleetReq
	est     fleetEstimator
	maxRIF  [4]int // max RIF seen in each quarter of the measured window
}

type fleetReq struct {
	client   int
	tok      Picked
	arrived  time.Time
	rif      int // RIF at arrival, before its own increment (as the backend records it)
	finishes time.Time
	service  time.Duration
}

func (r *fleetReplica) rif() int { return len(r.serving) + len(r.queue) }

// fleetEstimator models a backend's probe latency estimate: samples by arrival
// RIF; a query takes the exact RIF's samples, widening to neighbours until
// minSamples, and answers their median. window > 0 keeps only samples that
// finished within it (today's backend: 1 s); window 0 keeps the last perRIF
// samples of each RIF without a time cutoff. oracle answers what an arrival
// now would see (service × queue position), for comparison.
type fleetEstimator struct {
	window time.Duration
	// idleMaxAge > 0 (window 0 only): at RIF 0 samples older than it do
	// not count, as the backend's --latency-idle-max-age.
	idleMaxAge time.Duration
	perRIF     int
	minSamples int
	oracle     bool
	byRIF      map[int][]fleetSample
}

type fleetSample struct {
	lat time.Duration
	at  time.Time
}

func (e *fleetEstimator) record(rif int, lat time.Duration, now time.Time) {
	if e.byRIF == nil {
		e.byRIF = map[int][]fleetSample{}
	}
	rif = min(rif, 63) // the backend's exact buckets; enough here
	s := append(e.byRIF[rif], fleetSample{lat, now})
	if len(s) > e.perRIF {
		s = s[len(s)-e.perRIF:]
	}
	e.byRIF[rif] = s
}

func (e *fleetEstimator) estimate(r *fleetReplica, now time.Time, scratch []time.Duration) (time.Duration, bool, []time.Duration) {
	if e.oracle {
		l := r.mean
		if r.slots > 0 {
			if wait := r.rif() - r.slots + 1; wait > 0 {
				l += r.mean * time.Duration(wait) / time.Duration(r.slots)
			}
		}
		return l, true, scratch
	}
	vals := scratch[:0]
	window := e.window
	if e.window == 0 && r.rif() == 0 && e.idleMaxAge > 0 {
		window = e.idleMaxAge
	}
	take := func(rif int) {
		s := e.byRIF[rif]
		for i := len(s) - 1; i >= 0; i-- {
			if window > 0 && now.Sub(s[i].at) > window {
				break
			}
			vals = append(vals, s[i].lat)
		}
	}
	c := min(r.rif(), 63)
	take(c)
	for d := 1; len(vals) < e.minSamples && (c-d >= 0 || c+d <= 63); d++ {
		if c-d >= 0 {
			take(c - d)
		}
		if c+d <= 63 {
			take(c + d)
		}
	}
	if len(vals) == 0 {
		return 0, false, vals
	}
	slices.Sort(vals)
	n := len(vals)
	if n%2 == 1 {
		return vals[n/2], true, vals
	}
	return (vals[n/2-1] + vals[n/2]) / 2, true, vals
}

// fleetSetup describes one simulated run.
type fleetSetup struct {
	clients    int
	rps        float64
	dur        time.Duration // measured window, after warmup
	warmup     time.Duration
	probeDelay time.Duration // probe round trip
	seed       uint64
	// newPolicy builds one client's policy.
	newPolicy func() Policy
	// replicas builds the fleet (fresh for each run).
	replicas func() []*fleetReplica
	// hook, if set, runs at the start of every 1 ms step (to change the
	// fleet over time); onPick, if set, sees every pick.
	hook   func(ms int, reps []*fleetReplica, pols []Policy)
	onPick func(ms int, rep int, pk Picked)
}

// fleetResult summarises the measured window.
type fleetResult struct {
	p50, p99, p999 time.Duration
	groupShare     []float64 // share of picks per replica group
	fallbacks      float64   // share of picks
	hotPicks       float64   // share of picks
	maxRIF         [4]int    // max over replicas of the max RIF per quarter
	picks          []uint64  // per replica
	hotPicksOf     []uint64  // per replica: picks made with every probe hot
	probedPicksOf  []uint64  // per replica: picks made on a probe (not random fallbacks)
	reuseBudget    float64   // client 0's Stats().ReuseBudget
}

func (r fleetResult) String() string {
	return fmt.Sprintf("p50 %v p99 %v p99.9 %v shares %.3f fallbacks %.2f%% hot %.2f%% maxRIF/quarter %v",
		r.p50, r.p99, r.p999, r.groupShare, 100*r.fallbacks, 100*r.hotPicks, r.maxRIF)
}

// runFleet simulates in 1 ms steps. Arrivals are Poisson at rps, each sent
// by a uniformly random client; probes are answered after probeDelay with
// the replica's state at answer time.
func runFleet(tb testing.TB, s fleetSetup) fleetResult {
	tb.Helper()
	reps := s.replicas()
	a := addrs(len(reps))
	idx := make(map[string]int, len(a))
	for i, x := range a {
		idx[x] = i
	}
	env := rand.New(rand.NewPCG(s.seed, 99))
	pols := make([]Policy, s.clients)
	rngs := make([]*rand.Rand, s.clients)
	for c := range pols {
		pols[c] = s.newPolicy()
		pols[c].SetEndpoints(t0, a)
		rngs[c] = rand.New(rand.NewPCG(s.seed, uint64(c)+1))
	}
	type probe struct {
		due    time.Time
		client int
		rep    int
	}
	var probes []probe
	var due []string
	var lats []time.Duration
	var scratch []time.Duration
	hotOf := make([]uint64, len(reps))
	probedOf := make([]uint64, len(reps))
	total := s.warmup + s.dur
	next := 0.0
	steps := int(total / time.Millisecond)
	measuring := false
	for ms := 0; ms < steps; ms++ {
		now := at(ms)
		if s.hook != nil {
			s.hook(ms, reps, pols)
		}
		if !measuring && time.Duration(ms)*time.Millisecond >= s.warmup {
			measuring = true
			for _, p := range pols {
				p.Reset(now)
			}
		}
		quarter := 0
		if measuring {
			quarter = min(3, int(4*(time.Duration(ms)*time.Millisecond-s.warmup)/s.dur))
		}
		for _, r := range reps {
			kept := r.serving[:0]
			for _, q := range r.serving {
				if q.finishes.After(now) {
					kept = append(kept, q)
					continue
				}
				lat := now.Sub(q.arrived)
				pols[q.client].Done(now, q.tok, lat, 200)
				r.est.record(q.rif, lat, now)
				if measuring && q.arrived.Sub(t0) >= s.warmup {
					lats = append(lats, lat)
				}
			}
			r.serving = kept
			for len(r.queue) > 0 && (r.slots == 0 || len(r.serving) < r.slots) {
				q := r.queue[0]
				r.queue = r.queue[1:]
				q.finishes = now.Add(q.service)
				r.serving = append(r.serving, q)
			}
			if measuring {
				r.maxRIF[quarter] = max(r.maxRIF[quarter], r.rif())
			}
		}
		keep := probes[:0]
		for _, pr := range probes {
			if pr.due.After(now) {
				keep = append(keep, pr)
				continue
			}
			r := reps[pr.rep]
			var lat time.Duration
			var ok bool
			lat, ok, scratch = r.est.estimate(r, now, scratch)
			pols[pr.client].ProbeResult(now, a[pr.rep], ProbeReply{RIF: r.rif(), Latency: lat, LatencyKnown: ok})
		}
		probes = keep
		for next -= 1; next <= 0; next += env.ExpFloat64() * 1000 / s.rps {
			c := env.IntN(s.clients)
			pk, err := pols[c].Pick(now, rngs[c])
			if err != nil {
				tb.Fatal(err)
			}
			i := idx[pk.Endpoint]
			if s.onPick != nil {
				s.onPick(ms, i, pk)
			}
			r := reps[i]
			if measuring && pk.Hot {
				hotOf[i]++
			}
			if measuring && !pk.Fallback {
				probedOf[i]++
			}
			svc := r.mean
			if !r.fixed {
				svc = max(time.Duration(float64(r.mean)*(1+env.NormFloat64())), 100*time.Microsecond)
			}
			q := fleetReq{client: c, tok: pk, arrived: now, rif: r.rif(), service: svc}
			if r.slots == 0 || len(r.serving) < r.slots {
				q.finishes = now.Add(svc)
				r.serving = append(r.serving, q)
			} else {
				r.queue = append(r.queue, q)
			}
			due = pols[c].ProbesDue(now, rngs[c], due[:0])
			for _, d := range due {
				probes = append(probes, probe{due: now.Add(s.probeDelay), client: c, rep: idx[d]})
			}
		}
		for c, p := range pols {
			due = p.ProbesDue(now, rngs[c], due[:0])
			for _, d := range due {
				probes = append(probes, probe{due: now.Add(s.probeDelay), client: c, rep: idx[d]})
			}
		}
	}
	var res fleetResult
	groups := 0
	for _, r := range reps {
		groups = max(groups, r.group+1)
	}
	res.groupShare = make([]float64, groups)
	res.picks = make([]uint64, len(reps))
	res.hotPicksOf, res.probedPicksOf = hotOf, probedOf
	var picks, fb, hot uint64
	for _, p := range pols {
		st := p.Stats()
		picks += st.Picks
		fb += st.Fallbacks
		hot += st.HotPicks
		for _, e := range st.Endpoints {
			res.picks[idx[e.Address]] += e.Picks
		}
	}
	res.reuseBudget = pols[0].Stats().ReuseBudget
	for i, c := range res.picks {
		res.groupShare[reps[i].group] += float64(c) / float64(max(picks, 1))
	}
	res.fallbacks = float64(fb) / float64(max(picks, 1))
	res.hotPicks = float64(hot) / float64(max(picks, 1))
	for _, r := range reps {
		for q := range res.maxRIF {
			res.maxRIF[q] = max(res.maxRIF[q], r.maxRIF[q])
		}
	}
	slices.Sort(lats)
	pct := func(q float64) time.Duration {
		if len(lats) == 0 {
			return 0
		}
		return lats[min(len(lats)-1, int(math.Ceil(q*float64(len(lats))))-1)]
	}
	res.p50, res.p99, res.p999 = pct(0.5), pct(0.99), pct(0.999)
	return res
}

// halfSlowFleet is n replicas, the odd ones with 2x work, slots each; est
// builds each replica's estimator.
func halfSlowFleet(n, slots int, mean time.Duration, est func() fleetEstimator) func() []*fleetReplica {
	return func() []*fleetReplica {
		reps := make([]*fleetReplica, n)
		for i := range reps {
			reps[i] = &fleetReplica{mean: mean, slots: slots, est: est()}
			if i%2 == 1 {
				reps[i].mean, reps[i].group = 2*mean, 1
			}
		}
		return reps
	}
}

// halfSlowCapacity is the fleet's capacity in requests per second.
func halfSlowCapacity(n, slots int, mean time.Duration) float64 {
	fast := float64(slots) / mean.Seconds()
	return float64(n/2+n%2)*fast + float64(n/2)*fast/2
}

// backendWindow is today's backend estimator: a 1 s window, 64 samples per
// RIF, widened to 5 samples.
func backendWindow() fleetEstimator {
	return fleetEstimator{window: time.Second, perRIF: 64, minSamples: 5}
}

// recentByCount is the paper's "recent samples": the last 16 per RIF, no
// time cutoff, widened to 5.
func recentByCount() fleetEstimator {
	return fleetEstimator{perRIF: 16, minSamples: 5}
}

func policyMaker(tb testing.TB, name string, mod func(*PrequalConfig)) func() Policy {
	return func() Policy {
		cfg := DefaultConfig()
		if mod != nil {
			mod(&cfg.Prequal)
		}
		p, err := New(name, cfg)
		if err != nil {
			tb.Fatal(err)
		}
		return p
	}
}
