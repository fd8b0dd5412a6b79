package loadbalancer

import (
	"slices"
	"testing"
	"time"
)

// fullPool returns a pool policy (prequal, linear, rif-only) over n
// endpoints whose pool holds PoolSize probes with mixed RIFs and
// latencies, and a copy of that pool.
func fullPool(tb testing.TB, name string, n int) (*prequal, []probeEntry) {
	p := newPolicy(tb, name, n, nil).(*prequal)
	for i := range 64 { // fill the RIF window too
		p.ProbeResult(t0, p.eps[i%n].addr, known(i%7, time.Duration(5+i%11)*time.Millisecond))
	}
	if len(p.pool) != p.cfg.PoolSize {
		tb.Fatalf("pool = %d, want full", len(p.pool))
	}
	return p, append([]probeEntry(nil), p.pool...)
}

func fullPrequal(tb testing.TB, n int) (*prequal, []probeEntry) { return fullPool(tb, NamePrequal, n) }

// BenchmarkPick measures Pick followed by Done over 100 endpoints. For the
// pool policies the pool is restored to its full 16 probes before each
// pick (a copy of 16 entries, included in the time), since every pick
// drains it. Policies that read load reports or polled RIFs have one of
// each endpoint's. wrr's blackout is 0 and its picks run past the first
// scheduler rebuild (a Period after the reports), so its weights are in
// force: before it every endpoint weighs the same and the scheduler never
// skips (the benchmark measured round-robin). wrr/skewed has one
// endpoint reporting a weight far above the rest, clamped to 10× the
// mean: the stride scheduler's worst case, most turns skipped. c3 gets
// its feedback before Done, as the ingress hands it in. prequal-sync is
// measured both as Pick (its fallback) and as the two-phase pick it is
// meant for: PlanSync, PickSync over d − 1 answers, Done.
func BenchmarkPick(b *testing.B) {
	for _, name := range Names() {
		b.Run(name, func(b *testing.B) {
			rng := newRNG()
			now := at(10)
			switch name {
			case NamePrequal, NameLinear, NameRIFOnly:
				p, snap := fullPool(b, name, 100)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					p.pool = append(p.pool[:0], snap...)
					pk, _ := p.Pick(now, rng)
					p.Done(now, pk, time.Millisecond, 200)
				}
				return
			case NameC3:
				p := newPolicy(b, name, 100, nil)
				fu := p.(FeedbackUser)
				b.ReportAllocs()
				b.ResetTimer()
				i := 0
				for b.Loop() {
					i++
					pk, _ := p.Pick(now, rng)
					fu.ServerFeedback(now, pk, ServerFeedback{Known: true, QueueSize: i % 5, ServiceTime: time.Duration(1+i%7) * time.Millisecond})
					p.Done(now, pk, time.Duration(2+i%9)*time.Millisecond, 200)
				}
				return
			}
			p := newPolicy(b, name, 100, func(c *Config) { c.WRR.Blackout = 0 })
			for i, a := range addrs(100) {
				p.ProbeResult(t0, a, ProbeReply{RIF: i % 7, QPS: float64(50 + i%13), Utilization: 0.3 + float64(i%5)/10, LoadKnown: true})
			}
			if name == NameWRR {
				now = wrrWeighted(b, p)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				pk, _ := p.Pick(now, rng)
				p.Done(now, pk, time.Millisecond, 200)
			}
		})
	}
	b.Run(NameWRR+"/skewed", func(b *testing.B) {
		p := newPolicy(b, NameWRR, 100, func(c *Config) { c.WRR.Blackout = 0 })
		for i, a := range addrs(100) {
			util := 0.5
			if i == 0 {
				util = 0.0001 // weight 5e5 against 100: clamped to 10× the mean
			}
			p.ProbeResult(t0, a, ProbeReply{QPS: 50, Utilization: util, LoadKnown: true})
		}
		now := wrrWeighted(b, p)
		rng := newRNG()
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			pk, _ := p.Pick(now, rng)
			p.Done(now, pk, time.Millisecond, 200)
		}
	})
	b.Run(NamePrequalSync+"/PickSync", func(b *testing.B) {
		p := newPolicy(b, NamePrequalSync, 100, nil)
		sp := p.(SyncPicker)
		rng := newRNG()
		now := at(10)
		plan := make([]string, 0, 8)
		ans := make([]SyncAnswer, 0, 8)
		// The answers' RIFs and latencies cycle through 77 replies, made
		// before the clock starts (building them is the caller's work).
		var replies [77]ProbeReply
		for k := range replies {
			replies[k] = known(k%7, time.Duration(5+k%11)*time.Millisecond)
		}
		k := 0
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			plan = sp.PlanSync(now, rng, plan[:0])
			ans = ans[:0]
			for _, e := range plan[:len(plan)-1] { // d − 1 answers
				if k++; k == len(replies) {
					k = 0
				}
				ans = append(ans, SyncAnswer{Endpoint: e, Reply: replies[k], OK: true})
			}
			pk, _ := sp.PickSync(now, rng, ans)
			p.Done(now, pk, time.Millisecond, 200)
		}
	})
}

// wrrWeighted returns a time past wrr's first scheduler rebuild after
// reports at t0, and checks that the weights are in force there.
func wrrWeighted(tb testing.TB, p Policy) time.Time {
	tb.Helper()
	w := p.(*wrr)
	now := t0.Add(w.cfg.Period + time.Millisecond)
	w.Pick(now, newRNG()) // rebuilds
	if !slices.ContainsFunc(w.sched, func(x uint16) bool { return x != wrrMaxWeight }) {
		tb.Fatalf("wrr: every weight at the maximum after the rebuild: the weights are not in force")
	}
	return now
}

// BenchmarkPickCycle is one query's full conversation with prequal: Pick,
// ProbesDue, the r_probe probe answers, Done; the pool refills itself.
func BenchmarkPickCycle(b *testing.B) {
	p, _ := fullPrequal(b, 100)
	rng := newRNG()
	due := make([]string, 0, 16)
	i := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		i++
		now := t0.Add(time.Duration(i) * 100 * time.Microsecond)
		pk, _ := p.Pick(now, rng)
		due = p.ProbesDue(now, rng, due[:0])
		for j, d := range due {
			p.ProbeResult(now, d, known((i+j)%9, time.Duration(5+(i+j)%13)*time.Millisecond))
		}
		p.Done(now, pk, time.Millisecond, 200)
	}
}

// slowThenUnknown answers for addr with a slow latency, then with none, so
// prequal's slow memory is consulted (farSlower) in the measured cycle.
func slowThenUnknown(p Policy, now time.Time, addr string) {
	p.ProbeResult(now, addr, known(0, 500*time.Millisecond))
	p.ProbeResult(now.Add(time.Microsecond), addr, ProbeReply{})
}

// TestSteadyState_NoAllocations: the per-request calls must not allocate.
func TestSteadyState_NoAllocations(t *testing.T) {
	for _, name := range append(Names(), "prequal{coldrif=1,donerif=1}", "linear{donerif=1}") {
		p := newPolicy(t, name, 100, nil)
		rng := newRNG()
		due := make([]string, 0, 16)
		i := 0
		cycle := func() {
			i++
			now := t0.Add(time.Duration(i) * 100 * time.Microsecond)
			pk, err := p.Pick(now, rng)
			if err != nil {
				t.Fatal(err)
			}
			due = p.ProbesDue(now, rng, due[:0])
			for j, d := range due {
				p.ProbeResult(now, d, known((i+j)%9, time.Duration(5+(i+j)%13)*time.Millisecond))
			}
			p.ProbeFailed(now, p.Stats().Endpoints[0].Address, ProbeTimeout)
			slowThenUnknown(p, now, p.Stats().Endpoints[0].Address)
			p.Done(now, pk, time.Millisecond, 200)
		}
		for range 200 { // warm up: fill the pool and the RIF window
			cycle()
		}
		stats := p.Stats() // Stats may allocate; keep it out of the measured loop
		addr := stats.Endpoints[0].Address
		measured := func() {
			i++
			now := t0.Add(time.Duration(i) * 100 * time.Microsecond)
			pk, _ := p.Pick(now, rng)
			due = p.ProbesDue(now, rng, due[:0])
			for j, d := range due {
				p.ProbeResult(now, d, known((i+j)%9, time.Duration(5+(i+j)%13)*time.Millisecond))
			}
			p.ProbeFailed(now, addr, ProbeTimeout)
			slowThenUnknown(p, now, addr)
			p.Done(now, pk, time.Millisecond, 200)
		}
		if a := testing.AllocsPerRun(500, measured); a != 0 {
			t.Errorf("%s: %v allocations per request cycle, want 0", name, a)
		}
	}
}
