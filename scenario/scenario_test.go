package scenario

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const minimal = `
name: tiny
workload:
  routes:
    - name: work
      backends:
        - name: fast
          replicas: 2
load:
  open:
    - kind: constant
      duration: 2s
      rate: 50
`

func TestParse_AppliesDefaults(t *testing.T) {
	s, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	g := s.Workload.Routes[0].Backends[0]
	if g.Mode != "io" || g.ServiceTime != "20ms" || g.Distribution != "fixed" || g.Slow != 1 || *g.Concurrency != 4 || *g.QueueLimit != 1024 {
		t.Errorf("group defaults not applied: %+v", g)
	}
	r := s.Workload.Routes[0]
	if r.Path != "/work" || r.PathType != "Prefix" || r.Weight != 1 || r.Iterations != 1000 {
		t.Errorf("route defaults not applied: %+v", r)
	}
	p := s.Protocol
	if diff := cmp.Diff(DefaultAlgorithms, p.Algorithms); diff != "" {
		t.Errorf("algorithms (-want +got):\n%s", diff)
	}
	if p.Reference != "prequal" || p.Reps != 5 || p.PrimaryMetric != DefaultPrimaryMetric || *p.Warmup != "10s" || p.Reset != ResetAdmin || p.Order != OrderShuffle || p.Seed != 1 {
		t.Errorf("protocol defaults not applied: %+v", p)
	}
	if s.Ingress.Replicas != 1 || s.Load.Timeout != "10s" {
		t.Errorf("ingress/load defaults not applied")
	}
}

func TestParse_ErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		field string
		want  string // substring of the message
	}{
		{"unknown top-level field", minimal + "bogus: 1\n", "bogus", "allowed: churn, description, ingress, load, name, protocol, simulation, workload"},
		{"unknown nested field", strings.Replace(minimal, "replicas: 2", "replicas: 2\n          servicetime: 5ms", 1),
			"workload.routes[0].backends[0].servicetime", "unknown field; allowed:"},
		{"bad mode", strings.Replace(minimal, "replicas: 2", "replicas: 2\n          mode: disk", 1),
			"workload.routes[0].backends[0].mode", "allowed: cpu, cpu-share, io, sleep"},
		{"cpu-share without cpuShare", strings.Replace(minimal, "replicas: 2", "replicas: 2\n          mode: cpu-share", 1),
			"workload.routes[0].backends[0].cpuShare", "needs cpuShare"},
		{"cpuShare on an io group", strings.Replace(minimal, "replicas: 2", "replicas: 2\n          cpuShare: {share: 0.1, perMachine: 1}", 1),
			"workload.routes[0].backends[0].cpuShare", "only with mode cpu-share"},
		{"overallocated machine", strings.Replace(minimal, "replicas: 2", "replicas: 2\n          mode: cpu-share\n          cpuShare: {share: 0.3, perMachine: 4}", 1),
			"workload.routes[0].backends[0].cpuShare.perMachine", "want <= 1"},
		{"bad share limit", strings.Replace(minimal, "replicas: 2", "replicas: 2\n          mode: cpu-share\n          cpuShare: {share: 0.1, perMachine: 4, limit: loose}", 1),
			"workload.routes[0].backends[0].cpuShare.limit", "allowed: soft, hard"},
		{"antagonist level above the machine", strings.Replace(minimal, "replicas: 2", "replicas: 2\n          mode: cpu-share\n          cpuShare: {share: 0.1, perMachine: 4, antagonist: {levels: [0.5, 1.2], hold: [1s, 1s]}}", 1),
			"workload.routes[0].backends[0].cpuShare.antagonist.levels[1]", "in [0, 1]"},
		{"antagonist without holds", strings.Replace(minimal, "replicas: 2", "replicas: 2\n          mode: cpu-share\n          cpuShare: {share: 0.1, perMachine: 4, antagonist: {levels: [0.5]}}", 1),
			"workload.routes[0].backends[0].cpuShare.antagonist", "one hold per level"},
		{"bad distribution", strings.Replace(minimal, "replicas: 2", "replicas: 2\n          distribution: pareto", 1),
			"workload.routes[0].backends[0].distribution", "allowed: fixed, exp, normal"},
		{"bad duration", strings.Replace(minimal, "duration: 2s", "duration: soon", 1),
			"load.open[0].duration", "want a duration such as 30s"},
		{"wrong type", strings.Replace(minimal, "replicas: 2", "replicas: two", 1),
			"workload.routes[0].backends[0].replicas", "want a number"},
		{"fractional int", strings.Replace(minimal, "replicas: 2", "replicas: 2.5", 1),
			"workload.routes[0].backends[0].replicas", "whole number"},
		{"zero replicas", strings.Replace(minimal, "replicas: 2", "replicas: 0", 1),
			"workload.routes[0].backends[0].replicas", ">= 1"},
		{"bad phase kind", strings.Replace(minimal, "kind: constant", "kind: sine", 1),
			"load.open[0].kind", "allowed: constant, ramp, steps, burst"},
		{"field unused by phase", strings.Replace(minimal, "rate: 50", "rate: 50\n      to: 9", 1),
			"load.open[0].to", "not used by a constant phase"},
		{"open and closed", minimal + "  users: 3\n", "load", "not both"},
		{"bad order", minimal + "protocol:\n  order: random\n", "protocol.order", "allowed: shuffle, rotate, sequential"},
		{"bad reset", minimal + "protocol:\n  reset: reboot\n", "protocol.reset", "allowed: admin, restart"},
		{"reference not compared", minimal + "protocol:\n  algorithms: [round-robin]\n  reference: prequal\n", "protocol.reference", "one of the algorithms"},
		{"duplicate algorithm", minimal + "protocol:\n  algorithms: [prequal, pq]\n", "protocol.algorithms[1]", "duplicate"},
		{"unknown algorithm", minimal + "protocol:\n  algorithms: [prequal, magic]\n", "protocol.algorithms[1]", "allowed: prequal, round-robin, least-request"},
		{"qrif out of range", minimal + "ingress:\n  policy:\n    qrif: 1.5\n", "ingress.policy.qrif", "between 0 and 1"},
		{"bad probe fault", strings.Replace(minimal, "replicas: 2", "replicas: 2\n          probeFault: slow", 1),
			"workload.routes[0].backends[0].probeFault", "allowed: none, timeout, 500, malformed, stale_timestamp"},
		{"bad name", strings.Replace(minimal, "name: tiny", "name: Tiny Scenario", 1), "name", "lower-case"},
		{"negative connection cap", minimal + "  maxConnections: -1\n", "load.maxConnections", ">= 0"},
		{"negative generators", minimal + "  generators: -1\n", "load.generators", "want 0 (load from the campaign's machine) to 1000"},
		{"too many generators", minimal + "  generators: 1001\n", "load.generators", "to 1000 in-cluster generator Jobs"},
		{"fractional generators", minimal + "  generators: 1.5\n", "load.generators", "whole number"},
		{"generators above the connection cap", minimal + "  maxConnections: 8\n  generators: 9\n", "load.generators", "cannot split the cap of 8 connections"},
		{"generators above the workers", minimal + "  maxWorkers: 2\n  generators: 3\n", "load.generators", "cannot split 2 load workers (load.maxWorkers)"},
		{"timeout beyond the histogram", minimal + "  timeout: 45s\n", "load.timeout", "want at most 30s"},
		{"negative latency memory", minimal + "ingress:\n  policy:\n    latencyMemory: -1s\n", "ingress.policy.latencyMemory", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse error = %v, want Errors", err)
			}
			for _, e := range errs {
				if e.Field == tc.field && strings.Contains(e.Msg, tc.want) {
					return
				}
			}
			t.Errorf("no error for field %q containing %q; got %v", tc.field, tc.want, err)
		})
	}
}

func TestParse_ReportsAllErrors(t *testing.T) {
	y := strings.Replace(strings.Replace(minimal, "replicas: 2", "replicas: 0\n          mode: disk", 1), "rate: 50", "rate: -1", 1)
	_, err := Parse([]byte(y))
	var errs Errors
	if !errors.As(err, &errs) || len(errs) < 3 {
		t.Fatalf("want at least 3 errors, got %v", err)
	}
}

func TestParse_CanonicalAlgorithmNames(t *testing.T) {
	s, err := Parse([]byte(minimal + "protocol:\n  algorithms: [RR, least-connections, pq]\n  reference: rr\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"round-robin", "least-request", "prequal"}, s.Protocol.Algorithms); diff != "" {
		t.Errorf("algorithms (-want +got):\n%s", diff)
	}
	if s.Protocol.Reference != "round-robin" {
		t.Errorf("reference = %q, want round-robin", s.Protocol.Reference)
	}
}

func TestBackendGroup_Args(t *testing.T) {
	g := BackendGroup{
		Name: "slow", Replicas: 2, Mode: "io", ServiceTime: "40ms", Distribution: "normal", Slow: 2,
		Concurrency: ptr(4), QueueLimit: ptr(100), CPURounds: 1,
		Antagonists: []Antagonist{{At: "10s", For: "5s", Capacity: 1, Every: "30s"}},
		ProbeFault:  "timeout", WorkFault: "none",
	}
	want := []string{"--mode", "io", "--service-time", "40ms", "--distribution", "normal", "--slow", "2",
		"--concurrency", "4", "--queue-limit", "100", "--antagonist", "at=10s,for=5s,capacity=1,every=30s",
		"--probe-fault", "timeout"}
	if diff := cmp.Diff(want, g.Args()); diff != "" {
		t.Errorf("Args (-want +got):\n%s", diff)
	}
}

// TestBackendGroup_ArgsCPUShare: a cpu-share group's machine reaches the
// backend as flags; the environment adds --replicas and the machine's
// index (placement is its business).
func TestBackendGroup_ArgsCPUShare(t *testing.T) {
	s, err := Catalogue("paper-fig7-90-small")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--mode", "cpu-share", "--service-time", "20ms", "--distribution", "normal", "--slow", "1",
		"--concurrency", "0", "--queue-limit", "1024",
		"--share", "0.1", "--cpu-limit", "soft", "--cores", "10", "--machine-load", "levels=0.1/0.6,hold=4s/1s,random"}
	if diff := cmp.Diff(want, s.Workload.Routes[0].Backends[0].Args()); diff != "" {
		t.Errorf("Args (-want +got):\n%s", diff)
	}
}

func TestIngress_Args(t *testing.T) {
	in := Ingress{Replicas: 4, Policy: Policy{ProbesPerQuery: ptr(3.0), PoolSize: 16, MaxAge: "1s", QRIF: ptr(0.84)}, ProbeWorkers: 8}
	want := []string{"--prequal-probes-per-query", "3", "--prequal-pool-size", "16", "--prequal-max-age", "1s",
		"--prequal-qrif", "0.84", "--c3-clients", "4", "--probe-workers", "8"}
	if diff := cmp.Diff(want, in.Args()); diff != "" {
		t.Errorf("Args (-want +got):\n%s", diff)
	}
	// c3's n is the ingress replicas in every environment, as in the
	// simulator; one replica keeps the ingress's default (1).
	if got := (Ingress{Replicas: 1}).Args(); slices.Contains(got, "--c3-clients") {
		t.Errorf("one replica: Args = %v, want no --c3-clients", got)
	}
}

func TestCapacity(t *testing.T) {
	r := Route{Iterations: 1000, Backends: []BackendGroup{
		{Replicas: 8, Mode: "io", ServiceTime: "20ms", Slow: 1, Concurrency: ptr(4)},
		{Replicas: 8, Mode: "io", ServiceTime: "20ms", Slow: 2, Concurrency: ptr(4)},
	}}
	if got := r.Capacity(); math.Abs(got-2400) > 1e-6 {
		t.Errorf("Capacity = %v, want 2400", got)
	}
	r.Backends[0].Mode = "sleep"
	if got := r.Capacity(); got != 0 {
		t.Errorf("Capacity with an unlimited group = %v, want 0", got)
	}
}

func TestScale(t *testing.T) {
	s, err := Parse([]byte(minimal + "protocol:\n  warmup: 10s\n  cooldown: 0s\n"))
	if err != nil {
		t.Fatal(err)
	}
	s.Scale(0.2)
	if got := s.Load.Open[0].Duration.Std(); got != 400*time.Millisecond {
		t.Errorf("phase duration = %v, want 400ms", got)
	}
	if got := s.Protocol.Warmup.Std(); got != 2*time.Second {
		t.Errorf("warmup = %v, want 2s", got)
	}
	if got := s.Protocol.Cooldown.Std(); got != 0 {
		t.Errorf("cooldown = %v, want 0", got)
	}
	if got := s.Load.Timeout.Std(); got != 10*time.Second {
		t.Errorf("timeout = %v, want unscaled 10s", got)
	}
	if errs := s.Validate(); len(errs) > 0 {
		t.Errorf("scaled scenario invalid: %v", errs)
	}
}

func TestMarshal_RoundTrips(t *testing.T) {
	s, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := Parse(b)
	if err != nil {
		t.Fatalf("resolved YAML does not parse: %v\n%s", err, b)
	}
	if diff := cmp.Diff(s, s2); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte("name: x\nload: {users: 3}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err == nil && len(s.Validate()) > 0 {
			t.Fatalf("Parse accepted an invalid scenario")
		}
	})
}

// load.generators: unset is 1 on kind and 0 on kube; set, it is taken on
// both; the other environments have no cluster and send from the CLI.
func TestLoad_GeneratorsFor(t *testing.T) {
	s, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	for env, want := range map[string]int{"kind": 1, "kube": 0, "local": 0, "external": 0, "sim": 0} {
		if got := s.Load.GeneratorsFor(env); got != want {
			t.Errorf("unset, %s: %d, want %d", env, got, want)
		}
	}
	s, err = Parse([]byte(minimal + "  generators: 4\n"))
	if err != nil {
		t.Fatal(err)
	}
	for env, want := range map[string]int{"kind": 4, "kube": 4, "local": 0} {
		if got := s.Load.GeneratorsFor(env); got != want {
			t.Errorf("generators 4, %s: %d, want %d", env, got, want)
		}
	}
	s, err = Parse([]byte(minimal + "  generators: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Load.GeneratorsFor("kind"); got != 0 {
		t.Errorf("generators 0 on kind: %d, want 0 (from the CLI's machine)", got)
	}
	b, err := Marshal(s)
	if err != nil || !strings.Contains(string(b), "generators: 0") {
		t.Errorf("an explicit 0 is not kept in the resolved YAML (%v):\n%s", err, b)
	}
}

func TestValidate_PrimaryMetricMustCountFailures(t *testing.T) {
	for _, tc := range []struct{ metric, want string }{
		{"p99_ms", "a latency of successes only"},
		{"latency", "want one of pessimistic_p99_ms"},
	} {
		s, err := Parse([]byte("name: x\nworkload:\n  routes:\n    - name: r\n      host: h.local\n      backends:\n        - name: b\n          replicas: 1\n" +
			"load:\n  open:\n    - kind: constant\n      duration: 10s\n      rate: 10\nprotocol:\n  primaryMetric: " + tc.metric + "\n"))
		if err == nil {
			t.Fatalf("primaryMetric %q accepted: %+v", tc.metric, s.Protocol)
		}
		if !strings.Contains(err.Error(), "protocol.primaryMetric") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("primaryMetric %q: error %q does not name the field and %q", tc.metric, err, tc.want)
		}
	}
}

func TestValidate_GoodputNeedsAnOpenLoop(t *testing.T) {
	const head = "name: x\nworkload:\n  routes:\n    - name: r\n      host: h.local\n      backends:\n        - name: b\n          replicas: 1\n"
	_, err := Parse([]byte(head + "load:\n  users: 3\n  duration: 10s\nprotocol:\n  primaryMetric: goodput_rps\n"))
	if err == nil || !strings.Contains(err.Error(), "protocol.primaryMetric") || !strings.Contains(err.Error(), "closed-loop") {
		t.Fatalf("goodput_rps with a closed loop: error %v, want one naming protocol.primaryMetric and the closed loop", err)
	}
	if _, err := Parse([]byte(head + "load:\n  open:\n    - kind: constant\n      duration: 10s\n      rate: 10\nprotocol:\n  primaryMetric: goodput_rps\n")); err != nil {
		t.Fatalf("goodput_rps with an open loop: %v", err)
	}
}

func TestRepsShortfall_SaysWhatTheFamilyNeeds(t *testing.T) {
	p := Protocol{Algorithms: []string{"prequal", "round-robin", "least-request"}, Reference: "prequal", Reps: 3, PrimaryMetric: DefaultPrimaryMetric}
	if w := RepsShortfall(p); !strings.Contains(w, "needs 5 valid runs") {
		t.Errorf("3 reps of 3 algorithms: %q", w)
	}
	p.Reps = 5
	if w := RepsShortfall(p); w != "" {
		t.Errorf("5 reps of 3 algorithms: %q", w)
	}
	p.Algorithms, p.Reps = p.Algorithms[:2], 4
	if w := RepsShortfall(p); w != "" {
		t.Errorf("4 reps of 2 algorithms: %q", w)
	}
}

// TestValidate_Routing: ingress.routing picks the routing API; anything
// else is refused naming the field and the allowed values.
func TestValidate_Routing(t *testing.T) {
	const head = "name: x\nworkload:\n  routes:\n    - name: r\n      host: h.local\n      backends:\n        - name: b\n          replicas: 1\n" +
		"load:\n  open:\n    - kind: constant\n      duration: 10s\n      rate: 10\n"
	for _, r := range []string{"", "ingress", "gateway"} {
		doc := head
		if r != "" {
			doc += "ingress:\n  routing: " + r + "\n"
		}
		s, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("routing %q: %v", r, err)
		}
		if s.Ingress.UsesGateway() != (r == "gateway") {
			t.Errorf("routing %q: UsesGateway %v", r, s.Ingress.UsesGateway())
		}
	}
	_, err := Parse([]byte(head + "ingress:\n  routing: httproute\n"))
	if err == nil || !strings.Contains(err.Error(), "ingress.routing") || !strings.Contains(err.Error(), "ingress, gateway") {
		t.Fatalf("routing httproute: error %v, want one naming ingress.routing and the allowed values", err)
	}
}
