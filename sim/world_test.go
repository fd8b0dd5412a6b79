package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

// erlangC is the probability that an arrival waits in an M/M/c queue with
// offered load a = λ/μ.
func erlangC(c int, a float64) float64 {
	sum, term := 0.0, 1.0
	for k := range c {
		if k > 0 {
			term *= a / float64(k)
		}
		sum += term
	}
	last := term * a / float64(c) // a^c / c!
	rho := a / float64(c)
	top := last / (1 - rho)
	return top / (sum + top)
}

// TestServer_MMcMeanResponse drives one simulated replica (c slots, FIFO,
// exponential service) with Poisson arrivals and compares the mean
// response time with Erlang C: W = C(c, a)/(cμ − λ) + 1/μ. Tolerance 3%:
// 300,000 arrivals at ρ = 0.8 give a standard error near 1% here.
func TestServer_MMcMeanResponse(t *testing.T) {
	const (
		slots   = 4
		service = 20 * time.Millisecond
		rho     = 0.8
		n       = 300_000
	)
	cfg := Config{
		Seed: 3, Clients: 1, Algorithm: loadbalancer.NameRoundRobin, Policy: loadbalancer.DefaultConfig(),
		Network: Network{},
		Routes: []Route{{Name: "r", Groups: []Group{{
			Name: "s", Replicas: 1, Mode: "io", ServiceTime: service, Distribution: "exp",
			Concurrency: slots, QueueLimit: 1 << 30,
		}}}},
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mu := 1 / service.Seconds()
	lambda := rho * slots * mu
	res := poissonRun(t, w, lambda, n)
	a := lambda / mu
	want := erlangC(slots, a)/(slots*mu-lambda) + 1/mu
	got := res.Success.Mean() / 1e6 // µs → s
	t.Logf("mean response %.3f ms, Erlang C %.3f ms (P(wait) %.3f); %d answers", got*1e3, want*1e3, erlangC(slots, a), res.Completed)
	if math.Abs(got-want)/want > 0.03 {
		t.Errorf("mean response %.3f ms, want %.3f ms ± 3%%", got*1e3, want*1e3)
	}
	if res.Succeeded != n {
		t.Errorf("%d successes of %d", res.Succeeded, n)
	}
}

// poissonRun offers n Poisson arrivals at lambda per second to client 0,
// route 0, and drains.
func poissonRun(t *testing.T, w *World, lambda float64, n int) *Result {
	t.Helper()
	lr := &loadRun{l: Load{Timeout: time.Hour}, timeout: int64(time.Hour), start: w.now, winFrom: w.now, winTo: maxTime}
	w.rec = newRecorder(lr, 0)
	rng := rand.New(rand.NewPCG(11, 12))
	at := w.now
	for range n {
		at += int64(rng.ExpFloat64() / lambda * 1e9)
		for w.q.len() > 0 && w.q.peek() <= at {
			w.step()
		}
		w.now = at
		w.send(0, at, -1, true)
	}
	w.rec.sendsDone = true
	for !w.rec.finished() {
		w.step()
	}
	return w.rec.result()
}

func paperLikeConfig(seed uint64, alg string) Config {
	return Config{
		Seed: seed, Clients: 10, Algorithm: alg, Policy: loadbalancer.DefaultConfig(), Network: DefaultNetwork,
		Routes: []Route{{Name: "work", Groups: []Group{
			{Name: "fast", Replicas: 8, Mode: "io", ServiceTime: 20 * time.Millisecond, Distribution: "normal", Concurrency: 4, QueueLimit: 1024},
			{Name: "slow", Replicas: 8, Mode: "io", ServiceTime: 20 * time.Millisecond, Distribution: "normal", Slow: 2, Concurrency: 4, QueueLimit: 1024,
				Antagonists: []Antagonist{{At: time.Second, For: 500 * time.Millisecond, Capacity: 1, Every: 2 * time.Second}}},
		}}},
	}
}

func evenTargets(clients int) []Target {
	ts := make([]Target, clients)
	for i := range ts {
		ts[i] = Target{Client: i, Weight: 1}
	}
	return ts
}

func runTwice(t *testing.T, cfg Config, l Load) (*World, *Result) {
	t.Helper()
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
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
	return w, res
}

// TestWorld_SameSeedSameBytes: two worlds with one seed give identical
// histograms, series and policy counters; another seed does not.
func TestWorld_SameSeedSameBytes(t *testing.T) {
	l := Load{Open: []Phase{{Kind: KindConstant, Duration: 3 * time.Second, Rate: 1800}}, Timeout: 10 * time.Second, Targets: evenTargets(10), Seed: 5}
	enc := func(seed uint64) []byte {
		w, res := runTwice(t, paperLikeConfig(seed, loadbalancer.NamePrequal), l)
		var b bytes.Buffer
		for _, h := range []*hdrhistogram.Histogram{res.Success, res.Pessimistic} {
			e, err := artifacts.EncodeHistogram(h)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(e)
		}
		j, err := json.Marshal([]any{res.Series, res.StatusCodes, w.Snapshot()})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(j)
		return b.Bytes()
	}
	a, b, c := enc(1), enc(1), enc(2)
	if !bytes.Equal(a, b) {
		t.Error("same seed, different results")
	}
	if bytes.Equal(a, c) {
		t.Error("different seeds, same results: the seed is not used")
	}
}

// TestWorld_WarmupIsNotCounted: one schedule, warmup then window; only the
// window's sends count, the boundary callbacks fire once each, in order, at
// the window's start and end, and warmup seconds are progress, not rows.
func TestWorld_WarmupIsNotCounted(t *testing.T) {
	w, err := New(paperLikeConfig(1, loadbalancer.NameLeastRequest))
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	var at []time.Duration
	var warmRows, rows int
	l := Load{
		Open: []Phase{{Kind: KindConstant, Duration: 2 * time.Second, Rate: 500}}, Timeout: 10 * time.Second, Targets: evenTargets(10), Seed: 1,
		Warmup: 3 * time.Second, WarmupRate: 1000,
		OnWindowStart: func() { calls = append(calls, "start"); at = append(at, w.Now()) },
		OnWindowEnd:   func() { calls = append(calls, "end"); at = append(at, w.Now()) },
		OnSecond: func(s Second) {
			if s.Warmup {
				warmRows++
			} else {
				rows++
			}
		},
	}
	res, err := w.Run(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 1000 || res.Completed != 1000 {
		t.Errorf("sent %d, completed %d; want the window's 1000 only", res.Sent, res.Completed)
	}
	var picks uint64
	for _, c := range w.Snapshot() {
		picks += c.Routes[0].Stats.Picks
	}
	if picks != 4000 {
		t.Errorf("%d picks, want 3000 in the warmup + 1000", picks)
	}
	if len(calls) != 2 || calls[0] != "start" || calls[1] != "end" {
		t.Fatalf("callbacks %v, want start then end", calls)
	}
	if at[0] < 3*time.Second || at[0] > 3*time.Second+time.Microsecond || at[1] < 5*time.Second || at[1] > 5*time.Second+time.Millisecond {
		t.Errorf("callbacks at %v, want 3s and 5s", at)
	}
	if warmRows != 2 || rows != 2 || len(res.Series) != 2 {
		t.Errorf("%d warmup seconds, %d rows (%d in the series), want 2, 2", warmRows, rows, len(res.Series))
	}
}

// TestWorld_HangTimesOutAt504: a hanging replica never answers; the
// ingress gives up at its upstream timeout (504, counted per route), the
// replica's RIF drops when the client leaves, and the policy hears status 0.
func TestWorld_HangTimesOutAt504(t *testing.T) {
	cfg := Config{
		Seed: 1, Clients: 1, Algorithm: loadbalancer.NameRoundRobin, Policy: loadbalancer.DefaultConfig(),
		UpstreamTimeout: time.Second,
		Routes: []Route{{Name: "r", Groups: []Group{
			{Name: "ok", Replicas: 1, ServiceTime: 10 * time.Millisecond, Concurrency: 4, QueueLimit: 100},
			{Name: "hang", Replicas: 1, ServiceTime: 10 * time.Millisecond, Concurrency: 4, QueueLimit: 100, WorkFault: "hang"},
		}}},
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.Run(context.Background(), Load{Open: []Phase{{Kind: KindConstant, Duration: 2 * time.Second, Rate: 100}}, Timeout: 10 * time.Second, Targets: evenTargets(1), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	st := w.Snapshot()[0].Routes[0]
	// Every request sent to the hanging replica is a 504 and every other
	// one succeeds, however often the policy avoids it.
	var hung uint64
	for _, ep := range st.Stats.Endpoints {
		if ep.Address == "hang-0.sim:80" {
			hung = ep.Picks
		}
	}
	if hung == 0 || res.Failed5xx != hung || res.StatusCodes[504] != hung || st.UpstreamErrors != hung || res.Succeeded != 200-hung {
		t.Errorf("5xx %d (504: %d, counted %d), successes %d; want %d picks of the hanging replica as 504s and the other %d as successes",
			res.Failed5xx, res.StatusCodes[504], st.UpstreamErrors, res.Succeeded, hung, 200-hung)
	}
	if p := res.Pessimistic.Max(); p < 10_000_000 {
		t.Errorf("pessimistic max %d µs, want failures at the 10 s request timeout", p)
	}
	for _, s := range w.servers {
		if s.rif != 0 {
			t.Errorf("%s: RIF %d after the run, want 0", s.addr, s.rif)
		}
	}
}

// TestWorld_ProbeFaultsReachThePolicy: each backend probe fault arrives as
// the outcome the ingress's prober gives it, and a network slower than the
// probe timeout turns every probe into a timeout.
func TestWorld_ProbeFaultsReachThePolicy(t *testing.T) {
	g := func(name, fault string) Group {
		return Group{Name: name, Replicas: 2, ServiceTime: 10 * time.Millisecond, Concurrency: 4, QueueLimit: 100, ProbeFault: fault}
	}
	cfg := Config{
		Seed: 1, Clients: 1, Algorithm: loadbalancer.NamePrequal, Policy: loadbalancer.DefaultConfig(),
		Routes: []Route{{Name: "r", Groups: []Group{g("ok", "none"), g("slowprobe", "timeout"), g("e500", "500"), g("bad", "malformed"), g("stale", "stale_timestamp")}}},
	}
	outcomes := func(cfg Config) map[loadbalancer.ProbeOutcome]uint64 {
		w, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Run(context.Background(), Load{Open: []Phase{{Kind: KindConstant, Duration: 2 * time.Second, Rate: 200}}, Timeout: 10 * time.Second, Targets: evenTargets(1), Seed: 1}); err != nil {
			t.Fatal(err)
		}
		return w.Snapshot()[0].Routes[0].Stats.ProbeOutcomes
	}
	got := outcomes(cfg)
	for _, o := range []loadbalancer.ProbeOutcome{loadbalancer.ProbeOK, loadbalancer.ProbeTimeout, loadbalancer.ProbeStatus, loadbalancer.ProbeMalformed, loadbalancer.ProbeStale} {
		if got[o] == 0 {
			t.Errorf("no %q outcomes: %v", o, got)
		}
	}
	cfg.Network = Network{Delay: 60 * time.Millisecond} // 120 ms round trip > 100 ms
	got = outcomes(cfg)
	if got[loadbalancer.ProbeOK] != 0 || got[loadbalancer.ProbeTimeout] == 0 {
		t.Errorf("with a 120 ms round trip: %v, want only timeouts", got)
	}
}

// TestWorld_WindowBoundariesAlwaysSignalled: a load whose last answer
// comes before the window's end (a closed loop thinking past it, an open
// loop whose last send is early) still gets both boundary callbacks, in
// order, at the window's start and end, and one series row per second;
// the next Run on the same world sees none of its leftovers. The runner
// fails a run without both (no state snapshots).
func TestWorld_WindowBoundariesAlwaysSignalled(t *testing.T) {
	loads := map[string]Load{
		"closed, 2 s think time": {Users: 1, Duration: 3 * time.Second, ThinkTime: 2 * time.Second},
		"open, 0.4 rps":          {Open: []Phase{{Kind: KindConstant, Duration: 3 * time.Second, Rate: 0.4}}},
	}
	for name, l := range loads {
		t.Run(name, func(t *testing.T) {
			w, err := New(paperLikeConfig(1, loadbalancer.NamePrequal))
			if err != nil {
				t.Fatal(err)
			}
			for run := range 2 {
				var calls []string
				start := w.Now()
				l := l
				l.Timeout, l.Targets, l.Seed = 10*time.Second, evenTargets(10), uint64(run+1)
				l.OnWindowStart = func() { calls = append(calls, fmt.Sprintf("start@%v", w.Now()-start)) }
				l.OnWindowEnd = func() { calls = append(calls, fmt.Sprintf("end@%v", (w.Now()-start).Round(time.Millisecond))) }
				res, err := w.Run(context.Background(), l)
				if err != nil {
					t.Fatal(err)
				}
				if want := []string{"start@0s", "end@3s"}; fmt.Sprint(calls) != fmt.Sprint(want) {
					t.Errorf("run %d: callbacks %v, want %v", run, calls, want)
				}
				if len(res.Series) != 3 || res.Sent == 0 || res.Completed != res.Sent {
					t.Errorf("run %d: %d series rows, %d sent, %d completed; want 3 rows and every send answered", run, len(res.Series), res.Sent, res.Completed)
				}
			}
		})
	}
}

// TestWorld_IdleTickIsTheIngresss: every client of a probing policy ticks
// at loadbalancer.IdleProbeTick, as the ingress does, so wrr and
// yarp-po2c get their polls even with Prequal's idle probing off.
func TestWorld_IdleTickIsTheIngresss(t *testing.T) {
	pol := loadbalancer.DefaultConfig()
	pol.Prequal.IdleProbeInterval = 0
	w, err := New(Config{Seed: 1, Clients: 3, Algorithm: loadbalancer.NameWRR, Policy: pol,
		Routes: []Route{{Name: "r", Groups: []Group{{Name: "s", Replicas: 2, Mode: "io", ServiceTime: time.Millisecond, Distribution: "fixed"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	ticks := 0
	for _, he := range w.q.heap.h {
		e := he.val
		if e.kind == evIdleTick {
			ticks++
			if e.x != int64(loadbalancer.IdleProbeTick(pol)) {
				t.Errorf("client %d ticks every %v, want %v", e.a, time.Duration(e.x), loadbalancer.IdleProbeTick(pol))
			}
		}
	}
	if ticks != 3 {
		t.Errorf("%d clients tick, want 3", ticks)
	}
}
