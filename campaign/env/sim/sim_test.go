package sim

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress/adminapi"
	"github.com/prequalbench/prequalbench/load"
	"github.com/prequalbench/prequalbench/scenario"
	core "github.com/prequalbench/prequalbench/sim"
)

const tiny = `
name: tiny-sim
workload:
  routes:
    - name: work
      host: bench.local
      backends:
        - name: fast
          replicas: 4
          serviceTime: 20ms
          distribution: normal
          concurrency: 2
        - name: slow
          replicas: 4
          serviceTime: 20ms
          distribution: normal
          slow: 2
          concurrency: 2
          antagonists:
            - {at: 1s, for: 2s, capacity: 1, every: 10s}
load:
  open:
    - kind: constant
      duration: 3s
      rate: 400
ingress:
  replicas: 3
simulation:
  networkDelay: 200us
`

func newEnv(t *testing.T, yaml string) *Env {
	t.Helper()
	s, err := scenario.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(s, 7, "")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func loadConfig(e *Env, seed uint64) load.Config {
	cfg := load.Config{Timeout: 10 * time.Second, Seed: seed}
	for _, t := range e.LoadTargets() {
		cfg.Targets = append(cfg.Targets, load.Target{URL: t.URL, Host: t.Host, Weight: t.Weight})
	}
	for _, p := range e.s.Load.Open {
		cfg.Open = append(cfg.Open, load.Phase{Kind: p.Kind, Duration: p.Duration.Std(), Rate: p.Rate})
	}
	return cfg
}

// protocol runs the runner's sequence for one run (warmup and window in one
// load, snapshots at the window's boundaries) and returns the result and
// everything it produced, JSON-encoded.
func protocol(t *testing.T, e *Env, alg string, seed uint64) (*load.Result, []byte) {
	t.Helper()
	ctx := context.Background()
	if err := e.SetAlgorithm(ctx, alg); err != nil {
		t.Fatal(err)
	}
	v, err := e.Reset(ctx, scenario.ResetAdmin)
	if err != nil || !v.Verified {
		t.Fatalf("reset: %v %+v", err, v)
	}
	cfg := loadConfig(e, seed)
	cfg.Warmup, cfg.WarmupRate = time.Second, cfg.Open[0].Rate
	var before, after []adminapi.State
	snap := func(dst *[]adminapi.State) func() {
		return func() {
			st, err := e.Snapshot(ctx)
			if err != nil {
				t.Error(err)
			}
			*dst = st
		}
	}
	cfg.OnWindowStart, cfg.OnWindowEnd = snap(&before), snap(&after)
	res, err := e.RunLoad(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if before == nil || after == nil {
		t.Fatal("a window boundary callback was not called")
	}
	var picks uint64
	for i := range after {
		picks += after[i].Routes[0].Policy.Picks - before[i].Routes[0].Policy.Picks
	}
	if picks != res.Sent {
		t.Errorf("%s: %d picks between the snapshots, %d sends in the window", alg, picks, res.Sent)
	}
	b, err := json.Marshal([]any{before, after, res.Summary(), res.Series})
	if err != nil {
		t.Fatal(err)
	}
	return res, b
}

func TestEnv_RunLikeTheRunner(t *testing.T) {
	e := newEnv(t, tiny)
	if got := len(e.Backends()); got != 8 {
		t.Fatalf("%d backends, want 8", got)
	}
	if got := len(e.LoadTargets()); got != 3 {
		t.Fatalf("%d targets, want one per ingress replica", got)
	}
	if f := e.Facts(); f.Name != "sim" || f.IngressReplicas != 3 || !strings.Contains(f.Topology, "200µs") {
		t.Errorf("facts = %+v", f)
	}
	res, _ := protocol(t, e, "prequal", 1)
	if res.Sent != 1200 || res.Completed != 1200 || res.Succeeded != 1200 || res.Errors != 0 {
		t.Errorf("sent %d completed %d errors %d, want 1200, 1200, 0", res.Sent, res.Completed, res.Errors)
	}
	if len(res.Series) != 3 {
		t.Errorf("%d series rows, want 3", len(res.Series))
	}
	s := res.Summary()
	if !(s.P50 > 20 && s.P50 < 60) {
		t.Errorf("p50 = %v ms, want between the fast and the slow service time", s.P50)
	}
	if s.Success.Count != 1200 || s.Pessimistic.Count != 1200 || s.SendLag.Count != 1200 || s.SendLag.Max != 0 || s.Goodput != 400 || s.ErrorRate != 0 {
		t.Errorf("summary %+v", s)
	}
	st, err := e.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var picks, requests uint64
	for _, in := range st {
		r := in.Routes[0]
		if r.Algorithm != "prequal" || r.Host != "bench.local" {
			t.Errorf("route state %+v", r)
		}
		picks += r.Policy.Picks
		requests += r.Requests
		if r.Policy.ProbeOutcomes["ok"] == 0 {
			t.Errorf("no probe answers: %+v", r.Policy.ProbeOutcomes)
		}
	}
	if picks != 1600 || requests != 1600 {
		t.Errorf("picks %d, requests %d over the replicas, want 400 in the warmup + 1200", picks, requests)
	}
}

// TestEnv_SameSeedSameBytes: the run's artifacts depend on the seeds only.
func TestEnv_SameSeedSameBytes(t *testing.T) {
	_, a := protocol(t, newEnv(t, tiny), "prequal", 3)
	_, b := protocol(t, newEnv(t, tiny), "prequal", 3)
	_, c := protocol(t, newEnv(t, tiny), "prequal", 4)
	if string(a) != string(b) {
		t.Error("same seeds, different bytes")
	}
	if string(a) == string(c) {
		t.Error("different load seeds, same bytes")
	}
}

// TestEnv_EveryAlgorithmRuns: every policy the ingress offers runs here,
// and on this fleet the capacity-blind ones do worse than prequal.
func TestEnv_EveryAlgorithmRuns(t *testing.T) {
	e := newEnv(t, tiny)
	p99 := map[string]float64{}
	for _, alg := range []string{"prequal", "round-robin", "least-request", "p2c", "random", "peak-ewma"} {
		res, _ := protocol(t, e, alg, 1)
		if res.Completed != res.Sent {
			t.Errorf("%s: %d of %d completed", alg, res.Completed, res.Sent)
		}
		p99[alg] = res.Summary().P99
	}
	t.Logf("p99 ms: %v", p99)
	if p99["round-robin"] <= p99["prequal"] {
		t.Errorf("round-robin p99 %v <= prequal %v on a fleet where half the replicas are half as fast", p99["round-robin"], p99["prequal"])
	}
}

func TestEnv_RejectsForeignTargets(t *testing.T) {
	e := newEnv(t, tiny)
	if err := e.SetAlgorithm(context.Background(), "prequal"); err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(e, 1)
	cfg.Targets[0].URL = "http://127.0.0.1:1/work"
	if _, err := e.RunLoad(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "targets[0]") {
		t.Errorf("err = %v, want one naming targets[0]", err)
	}
	if err := e.SetAlgorithm(context.Background(), "fastest"); err == nil {
		t.Error("unknown algorithm accepted")
	}
}

func TestConfig_MapsTheScenario(t *testing.T) {
	s, err := scenario.Parse([]byte(strings.Replace(tiny, "ingress:\n  replicas: 3\n", `ingress:
  replicas: 3
  probeTimeout: 50ms
  probeWorkers: 4
  policy:
    probesPerQuery: 2
    poolSize: 32
    maxAge: 700ms
    qrif: 0.6
    removePerQuery: 0.5
    delta: 2
    idleProbeInterval: 40ms
    minProbes: 3
    latencyMemory: 2s
`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	cfg, ignored, err := Config(s)
	if err != nil {
		t.Fatal(err)
	}
	q := cfg.Policy.Prequal
	if cfg.ProbeTimeout != 50*time.Millisecond || q.ProbesPerQuery != 2 || q.PoolSize != 32 || q.RIFWindow <= 32 ||
		q.MaxAge != 700*time.Millisecond || q.QRIF != 0.6 || q.RemovePerQuery != 0.5 || q.Delta != 2 ||
		q.IdleProbeInterval != 40*time.Millisecond || q.MinProbes != 3 || q.LatencyMemory != 2*time.Second {
		t.Errorf("config %+v", cfg)
	}
	if cfg.Network.Delay != 200*time.Microsecond || cfg.Network.Jitter != 100*time.Microsecond {
		t.Errorf("network %+v", cfg.Network)
	}
	if !reflect.DeepEqual(ignored, []string{"ingress.probeWorkers"}) {
		t.Errorf("ignored = %v", ignored)
	}
	g := cfg.Routes[0].Groups[1]
	if g.Slow != 2 || g.Concurrency != 2 || g.QueueLimit != 1024 || g.Distribution != "normal" {
		t.Errorf("group %+v", g)
	}
	want := []core.Antagonist{{At: time.Second, For: 2 * time.Second, Capacity: 1, Every: 10 * time.Second}}
	if !reflect.DeepEqual(g.Antagonists, want) {
		t.Errorf("antagonists %+v, want %+v", g.Antagonists, want)
	}
}

// TestEnv_EachIngressReplicaGetsItsShare: the route's load is split evenly
// over the ingress replicas, as the load engine spreads it over real ones.
func TestEnv_EachIngressReplicaGetsItsShare(t *testing.T) {
	e := newEnv(t, strings.Replace(tiny, "      host: bench.local\n", "      host: bench.local\n      weight: 6\n", 1))
	ts := e.LoadTargets()
	if len(ts) != 3 {
		t.Fatalf("%d targets, want one per ingress replica", len(ts))
	}
	for i, tg := range ts {
		if tg.Weight != 2 {
			t.Errorf("target %d weight %v, want the route's 6 over 3 replicas", i, tg.Weight)
		}
	}
	protocol(t, e, "round-robin", 1)
	st, err := e.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range st {
		// 1 s warmup + 3 s window at 400 rps: 1,600 requests, about 533 each.
		if got := r.Routes[0].Requests; got < 450 || got > 620 {
			t.Errorf("ingress replica %d routed %d of %d requests, want about a third", i, got, 1600)
		}
	}
}

// TestConfig_CPUShareReachesTheSimulator: a cpu-share group's machine
// placement, limit, cores, thread cap (concurrency) and antagonist reach
// the simulator as the scenario states them.
func TestConfig_CPUShareReachesTheSimulator(t *testing.T) {
	s, err := scenario.Parse([]byte(`
name: share
workload:
  routes:
    - name: work
      backends:
        - name: s
          replicas: 8
          mode: cpu-share
          concurrency: 3
          cpuShare:
            share: 0.1
            perMachine: 4
            limit: hard
            cores: 10
            antagonist: {levels: [0.1, 0.6], hold: [4s, 1s], random: true}
load:
  open:
    - {kind: constant, duration: 2s, rate: 50}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := Config(s)
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Routes[0].Groups[0]
	want := &core.CPUShare{Share: 0.1, PerMachine: 4, Hard: true, Threads: 3, Cores: 10,
		Antagonist: core.MachineLoad{Levels: []float64{0.1, 0.6}, Hold: []time.Duration{4 * time.Second, time.Second}, Random: true}}
	if g.Mode != "cpu-share" || g.Concurrency != 0 || !reflect.DeepEqual(g.CPUShare, want) {
		t.Errorf("group mode %s, concurrency %d, cpuShare %+v; want cpu-share, 0, %+v", g.Mode, g.Concurrency, g.CPUShare, want)
	}
}
