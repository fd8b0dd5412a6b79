package sim

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

// TestWorld_NewPoliciesFavourTheFastGroup runs every policy of issue 14 on
// a heterogeneous fleet (4 fast replicas, 4 with 2x work, 4 slots each;
// capacity share of the fast group 2/3) at 70% load behind 3 ingress
// replicas, and asserts the direction of each one's behaviour: the fast
// group gets more than round-robin's half, and prequal-sync picks from
// its answers (the simulator drives its two-phase pick), not at random.
func TestWorld_NewPoliciesFavourTheFastGroup(t *testing.T) {
	for _, alg := range []string{"wrr{blackout=1s}", "yarp-po2c", "linear", "rif-only", "c3", "prequal-sync", "ewma", "round-robin"} {
		cfg := Config{
			Seed: 7, Clients: 3, Algorithm: alg, Policy: loadbalancer.DefaultConfig(), Network: DefaultNetwork,
			Routes: []Route{{Name: "work", Groups: []Group{
				{Name: "fast", Replicas: 4, Mode: "io", ServiceTime: 20 * time.Millisecond, Distribution: "normal", Concurrency: 4, QueueLimit: 1024},
				{Name: "slow", Replicas: 4, Mode: "io", ServiceTime: 20 * time.Millisecond, Distribution: "normal", Slow: 2, Concurrency: 4, QueueLimit: 1024},
			}}},
		}
		l := Load{Open: []Phase{{Kind: KindConstant, Duration: 4 * time.Second, Rate: 840}}, Timeout: 10 * time.Second, Targets: evenTargets(3), Seed: 3}
		w, res := runTwice(t, cfg, l)
		var fast, all, fallbacks, picks uint64
		for _, c := range w.Snapshot() {
			for _, r := range c.Routes {
				for _, e := range r.Stats.Endpoints {
					all += e.Picks
					if strings.HasPrefix(e.Address, "fast-") {
						fast += e.Picks
					}
				}
				fallbacks += r.Stats.Fallbacks
				picks += r.Stats.Picks
			}
		}
		share := float64(fast) / float64(all)
		t.Logf("%s: fast share %.3f, p99 %v, errors %d, fallbacks %d of %d", alg, share, time.Duration(res.Success.ValueAtQuantile(99))*time.Microsecond, res.Errors, fallbacks, picks)
		if res.Errors != 0 {
			t.Errorf("%s: %d errors", alg, res.Errors)
		}
		if alg == "round-robin" {
			if math.Abs(share-0.5) > 0.01 {
				t.Errorf("round-robin's fast share %.3f, want 0.5 (the harness's baseline)", share)
			}
			continue
		}
		if share < 0.55 {
			t.Errorf("%s: fast group got %.3f of the picks, want more than round-robin's 0.5", alg, share)
		}
		if alg == "prequal-sync" && float64(fallbacks) > 0.01*float64(picks) {
			t.Errorf("prequal-sync: %d fallbacks of %d picks: the simulator does not drive its sync probes", fallbacks, picks)
		}
	}
}

func TestLoadMeter_RatesAndUtilization(t *testing.T) {
	var m loadMeter
	sec := int64(time.Second)
	m.advance(0, 0, 4)
	// One of 4 slots busy for [0, 2 s], 10 answers a second, 2 of them 5xx.
	for k := range 20 {
		tt := int64(k) * sec / 10
		m.advance(tt, 1, 4)
		status := int32(200)
		if k%5 == 0 {
			status = 503
		}
		m.answered(tt, status)
	}
	qps, eps, util, ok := m.report(2*sec, 1, 4)
	if !ok || math.Abs(qps-10) > 1.2 || math.Abs(eps-2) > 1.1 || math.Abs(util-0.25) > 0.01 {
		t.Fatalf("report = qps %.2f eps %.2f util %.3f ok %v; want 10, 2, 0.25", qps, eps, util, ok)
	}
	if _, _, _, ok := m.report(2*sec, 1, unlimited); ok {
		t.Fatal("unlimited capacity reported a utilization")
	}
	// A second later with nothing answered and nothing busy: rates fall to 0.
	m.advance(2*sec, 0, 4)
	qps, _, util, _ = m.report(3*sec+sec/2, 0, 4)
	if qps != 0 || util != 0 {
		t.Fatalf("idle second later: qps %.2f util %.3f", qps, util)
	}
}

// TestWorld_NewPoliciesShiftOffAReplicaThatSlows: 4 equal replicas; at 3 s
// one loses 3 of its 4 slots for good, so its queue grows, its reported
// utilization rises and its answers slow down. Every policy of issue 14
// must send it a smaller share after the drop than before (wrr through
// its weights, c3 through the queue feedback, yarp-po2c through polled
// RIF, the pool policies and prequal-sync through probes, ewma through
// latency).
func TestWorld_NewPoliciesShiftOffAReplicaThatSlows(t *testing.T) {
	for _, alg := range []string{"wrr{blackout=1s}", "yarp-po2c", "linear", "c3", "prequal-sync", "ewma"} {
		cfg := Config{
			Seed: 11, Clients: 2, Algorithm: alg, Policy: loadbalancer.DefaultConfig(), Network: DefaultNetwork,
			Routes: []Route{{Name: "work", Groups: []Group{
				{Name: "ok", Replicas: 3, Mode: "io", ServiceTime: 20 * time.Millisecond, Distribution: "normal", Concurrency: 4, QueueLimit: 1024},
				{Name: "victim", Replicas: 1, Mode: "io", ServiceTime: 20 * time.Millisecond, Distribution: "normal", Concurrency: 4, QueueLimit: 1024,
					Antagonists: []Antagonist{{At: 3 * time.Second, For: time.Hour, Capacity: 1}}},
			}}},
		}
		w, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		victimShare := func(d time.Duration) float64 {
			before := victimPicks(w)
			l := Load{Open: []Phase{{Kind: KindConstant, Duration: d, Rate: 400}}, Timeout: 10 * time.Second, Targets: evenTargets(2), Seed: 5}
			if _, err := w.Run(context.Background(), l); err != nil {
				t.Fatal(err)
			}
			after := victimPicks(w)
			return float64(after[0]-before[0]) / float64(after[1]-before[1])
		}
		pre := victimShare(3 * time.Second)  // 0-3 s: equal replicas
		_ = victimShare(time.Second)         // 3-4 s: the drop settles in
		post := victimShare(4 * time.Second) // 4-8 s
		t.Logf("%s: victim's share %.3f before the drop, %.3f after", alg, pre, post)
		if !(post < 0.7*pre) {
			t.Errorf("%s: the slowed replica's share went %.3f -> %.3f, want it well down", alg, pre, post)
		}
	}
}

// victimPicks returns the picks of the "victim" group and of all, summed
// over every client.
func victimPicks(w *World) [2]uint64 {
	var v [2]uint64
	for _, c := range w.Snapshot() {
		for _, r := range c.Routes {
			for _, e := range r.Stats.Endpoints {
				v[1] += e.Picks
				if strings.HasPrefix(e.Address, "victim-") {
					v[0] += e.Picks
				}
			}
		}
	}
	return v
}

// C3's n in q̂ = 1 + os·n + q̄ is the number of clients sharing the
// servers: the world's ingress replicas unless the scenario or a variant
// says otherwise.
func TestWorld_C3CountsTheSimulatedClients(t *testing.T) {
	base := Config{Seed: 1, Clients: 5, Algorithm: "c3", Policy: loadbalancer.DefaultConfig(), Network: DefaultNetwork,
		Routes: []Route{{Name: "work", Groups: []Group{{Name: "a", Replicas: 2, Mode: "io", ServiceTime: time.Millisecond, Concurrency: 1, QueueLimit: 8}}}}}
	w, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.cfg.Policy.C3.Clients; got != 5 {
		t.Errorf("C3.Clients = %d with 5 simulated clients, want 5", got)
	}
	set := base
	set.Policy.C3.Clients = 7 // set by the scenario: kept
	if w, err = New(set); err != nil {
		t.Fatal(err)
	}
	if got := w.cfg.Policy.C3.Clients; got != 7 {
		t.Errorf("C3.Clients = %d after the scenario set 7, want 7", got)
	}
}

// TestWorld_C3DoesNotLearnFromShedAnswers: a small replica (1 slot, a
// queue of 2) among three of 4 slots at 60% load. When its queue is full
// it sheds with 503 and X-Prequal-Service-Us: 0; c3 must read that as a
// full queue, not as a zero service time (which made the cubic queue term
// vanish on exactly that replica, so it drew more picks and shed more).
func TestWorld_C3DoesNotLearnFromShedAnswers(t *testing.T) {
	cfg := Config{
		Seed: 5, Clients: 3, Algorithm: "c3", Policy: loadbalancer.DefaultConfig(), Network: DefaultNetwork,
		Routes: []Route{{Name: "work", Groups: []Group{
			{Name: "big", Replicas: 3, Mode: "io", ServiceTime: 20 * time.Millisecond, Distribution: "normal", Concurrency: 4, QueueLimit: 1024},
			{Name: "small", Replicas: 1, Mode: "io", ServiceTime: 20 * time.Millisecond, Distribution: "normal", Concurrency: 1, QueueLimit: 2},
		}}},
	}
	// Capacity 3·200 + 50 = 650 requests/s; 60% of it.
	l := Load{Open: []Phase{{Kind: KindConstant, Duration: 4 * time.Second, Rate: 390}}, Timeout: 10 * time.Second, Targets: evenTargets(3), Seed: 3}
	w, res := runTwice(t, cfg, l)
	var small, all uint64
	for _, c := range w.Snapshot() {
		for _, r := range c.Routes {
			for _, e := range r.Stats.Endpoints {
				all += e.Picks
				if strings.HasPrefix(e.Address, "small-") {
					small += e.Picks
				}
			}
		}
	}
	share := float64(small) / float64(all)
	t.Logf("small replica's share %.3f (capacity share %.3f), errors %d of %d", share, 50.0/650, res.Errors, res.Sent)
	// Seeds 1-6: 0.116-0.139 of the picks and 0.8-2.1% errors; learning
	// from the shed answers, 0.157-0.226 and 3.9-9.6%.
	if share > 0.15 {
		t.Errorf("the small replica got %.3f of the picks (capacity share %.3f): c3 learns from its shed answers", share, 50.0/650)
	}
	if float64(res.Errors) > 0.03*float64(res.Sent) {
		t.Errorf("%d errors of %d sent: the small replica sheds", res.Errors, res.Sent)
	}
}

// TestWorld_C3ReadsTheQueueFeedback: a replica with the others' service
// time but 1 slot and room for 2 waiting, among three of 4 slots, behind
// one ingress at 60% load. Its queue fills and it sheds, answering 503
// at once (no latency sample for c3) and, when it serves, after at most
// two service times of wait: its latency hardly tells, its queue size
// (X-Prequal-Queue, full on every shed answer) does. The same world
// without the feedback (backends that add no headers) must do worse: the
// replica takes more picks and sheds more. Were the feedback never
// delivered, the two runs would be the same. (Seeds 1-8: with the
// feedback 0.127-0.135 of the picks and 18-30 errors, without it
// 0.132-0.169 and 30-74; better with it in each seed.)
func TestWorld_C3ReadsTheQueueFeedback(t *testing.T) {
	cfg := Config{
		Seed: 1, Clients: 1, Algorithm: "c3", Policy: loadbalancer.DefaultConfig(), Network: DefaultNetwork,
		Routes: []Route{{Name: "work", Groups: []Group{
			{Name: "big", Replicas: 3, Mode: "io", ServiceTime: 20 * time.Millisecond, Distribution: "normal", Concurrency: 4, QueueLimit: 1024},
			{Name: "small", Replicas: 1, Mode: "io", ServiceTime: 20 * time.Millisecond, Distribution: "normal", Concurrency: 1, QueueLimit: 2},
		}}},
	}
	l := Load{Open: []Phase{{Kind: KindConstant, Duration: 4 * time.Second, Rate: 390}}, Timeout: 10 * time.Second, Targets: evenTargets(1), Seed: 3}
	run := func(feedback bool) (share float64, errors uint64) {
		w, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !feedback {
			for _, c := range w.clients {
				c.feedback = nil
			}
		}
		warm := l
		warm.Open = []Phase{{Kind: KindConstant, Duration: time.Second, Rate: l.Open[0].Rate}}
		if _, err := w.Run(context.Background(), warm); err != nil {
			t.Fatal(err)
		}
		res, err := w.Run(context.Background(), l)
		if err != nil {
			t.Fatal(err)
		}
		var small, all uint64
		for _, c := range w.Snapshot() {
			for _, r := range c.Routes {
				for _, e := range r.Stats.Endpoints {
					all += e.Picks
					if strings.HasPrefix(e.Address, "small-") {
						small += e.Picks
					}
				}
			}
		}
		return float64(small) / float64(all), res.Errors
	}
	with, withErr := run(true)
	without, withoutErr := run(false)
	t.Logf("small replica's share %.3f with the queue feedback, %.3f without; errors %d and %d", with, without, withErr, withoutErr)
	if !(with < without) || !(float64(withErr) < 0.75*float64(withoutErr)) {
		t.Errorf("with the queue feedback the shedding replica got %.3f of the picks and %d errors, without it %.3f and %d: want fewer of both with it",
			with, withErr, without, withoutErr)
	}
}

// planCheck wraps a client's SyncPicker and checks that every PickSync
// reads answers of one plan still waiting for its pick: the probes the
// simulator hands back must be the query's own, never a late answer of a
// query already picked.
type planCheck struct {
	loadbalancer.SyncPicker
	open       [][]string // plans not picked yet, oldest first
	picks, bad int
}

func (c *planCheck) PlanSync(now time.Time, rng *rand.Rand, dst []string) []string {
	dst = c.SyncPicker.PlanSync(now, rng, dst)
	c.open = append(c.open, append([]string(nil), dst...))
	return dst
}

func (c *planCheck) PickSync(now time.Time, rng *rand.Rand, answers []loadbalancer.SyncAnswer) (loadbalancer.Picked, error) {
	c.picks++
	match := -1
	for k, plan := range c.open {
		if everyIn(answers, plan) {
			match = k
			break
		}
	}
	if match < 0 {
		c.bad++
	} else {
		c.open = slices.Delete(c.open, match, match+1)
	}
	return c.SyncPicker.PickSync(now, rng, answers)
}

func everyIn(answers []loadbalancer.SyncAnswer, plan []string) bool {
	seen := map[string]bool{}
	for _, a := range answers {
		if !slices.Contains(plan, a.Endpoint) || seen[a.Endpoint] {
			return false
		}
		seen[a.Endpoint] = true
	}
	return true
}

// TestWorld_PrequalSyncNeverReadsAnOlderQuerysAnswer: prequal-sync picks
// at d − 1 = 2 of its 3 answers, so the third of nearly every query
// arrives after the pick. The simulator keeps a query's slot until every
// event of it is back; were the slot freed at the pick, the next query
// in it would take that late answer as its own (and pick on it). Every
// PickSync must read answers of a single plan still waiting for its pick.
func TestWorld_PrequalSyncNeverReadsAnOlderQuerysAnswer(t *testing.T) {
	cfg := paperLikeConfig(3, "prequal-sync")
	cfg.Clients = 2
	cfg.Network = Network{Delay: 200 * time.Microsecond, Jitter: 400 * time.Microsecond}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var checks []*planCheck
	for _, c := range w.clients {
		pc := &planCheck{SyncPicker: c.sync}
		c.sync = pc
		checks = append(checks, pc)
	}
	l := Load{Open: []Phase{{Kind: KindConstant, Duration: 2 * time.Second, Rate: 1500}}, Timeout: 10 * time.Second, Targets: evenTargets(2), Seed: 9}
	if _, err := w.Run(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	var picks, bad int
	for _, c := range checks {
		picks += c.picks
		bad += c.bad
	}
	if picks < 2000 {
		t.Fatalf("%d sync picks, want the load's 3000", picks)
	}
	if bad > 0 {
		t.Errorf("%d of %d sync picks read an answer that was not of their own waiting plan (a late answer of an earlier query)", bad, picks)
	}
}

// prequal-sync's counters name each failed probe's own outcome (a 500, a
// malformed body), not a timeout: the simulator hands the reason in.
func TestWorld_PrequalSyncCountsProbeFailuresByOutcome(t *testing.T) {
	cfg := Config{
		Seed: 2, Clients: 1, Algorithm: "prequal-sync", Policy: loadbalancer.DefaultConfig(), Network: DefaultNetwork,
		Routes: []Route{{Name: "work", Groups: []Group{
			{Name: "ok", Replicas: 4, Mode: "io", ServiceTime: 5 * time.Millisecond, Concurrency: 4, QueueLimit: 1024},
			{Name: "p500", Replicas: 1, Mode: "io", ServiceTime: 5 * time.Millisecond, Concurrency: 4, QueueLimit: 1024, ProbeFault: "500"},
			{Name: "bad", Replicas: 1, Mode: "io", ServiceTime: 5 * time.Millisecond, Concurrency: 4, QueueLimit: 1024, ProbeFault: "malformed"},
		}}},
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := Load{Open: []Phase{{Kind: KindConstant, Duration: time.Second, Rate: 200}}, Timeout: 10 * time.Second, Targets: evenTargets(1), Seed: 4}
	if _, err := w.Run(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	out := w.Snapshot()[0].Routes[0].Stats.ProbeOutcomes
	t.Logf("probe outcomes %v", out)
	if out[loadbalancer.ProbeStatus] == 0 || out[loadbalancer.ProbeMalformed] == 0 {
		t.Errorf("probe outcomes %v: want the 500s as status and the bad bodies as malformed", out)
	}
	if out[loadbalancer.ProbeTimeout] != 0 {
		t.Errorf("probe outcomes %v: %d timeouts where no probe timed out", out, out[loadbalancer.ProbeTimeout])
	}
}
