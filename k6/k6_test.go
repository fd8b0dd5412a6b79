package k6

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/scenario"
)

const phases = `name: k6phases
description: every phase kind
workload:
  routes:
    - name: a
      host: a.local
      weight: 3
      iterations: 500
      backends: [{name: g, replicas: 1}]
    - name: b
      path: /b
      weight: 1
      backends: [{name: h, replicas: 1}]
load:
  timeout: 4s
  open:
    - {kind: constant, duration: 2s, rate: 50}
    - {kind: ramp, duration: 4s, from: 50, to: 150}
    - {kind: steps, duration: 3s, from: 10, to: 30, steps: 3}
    - {kind: burst, duration: 5s, high: 100, low: 0, highFor: 1s, lowFor: 1500ms}
protocol:
  algorithms: [prequal]
  warmup: 1s
`

func ms(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// requests integrates an executor's arrival rate (iterations per
// timeUnit) over its duration.
func requests(t *testing.T, e Executor) float64 {
	unit := ms(t, e.TimeUnit).Seconds()
	switch e.Executor {
	case "constant-arrival-rate":
		return float64(e.Rate) / unit * ms(t, e.Duration).Seconds()
	case "ramping-arrival-rate":
		var n float64
		r := float64(e.StartRate)
		for _, s := range e.Stages {
			n += (r + float64(s.Target)) / 2 / unit * ms(t, s.Duration).Seconds()
			r = float64(s.Target)
		}
		return n
	}
	t.Fatalf("executor %s", e.Executor)
	return 0
}

// The exported executors follow the scenario's phases back to back,
// each offering the requests its phase offers, the warmup first.
func TestExecutorsFollowThePhases(t *testing.T) {
	s, err := scenario.Parse([]byte(phases))
	if err != nil {
		t.Fatal(err)
	}
	ex := Executors(s)
	want := []struct {
		executor, start string
		phase           string
		reqs            float64
	}{
		{"constant-arrival-rate", "0ms", PhaseWarmup, 50 * 1},
		{"constant-arrival-rate", "1000ms", PhaseWindow, 50 * 2},
		{"ramping-arrival-rate", "3000ms", PhaseWindow, 100 * 4},
		{"ramping-arrival-rate", "7000ms", PhaseWindow, 10 + 20 + 30},
		{"ramping-arrival-rate", "10000ms", PhaseWindow, 100 * 2}, // 1 s high at 0 s and 2.5 s; the third burst starts at 5 s, the end
	}
	if len(ex) != len(want) {
		t.Fatalf("%d executors, want %d: %+v", len(ex), len(want), ex)
	}
	for i, w := range want {
		e := ex[i]
		if e.Executor != w.executor || e.StartTime != w.start || e.Tags["phase"] != w.phase {
			t.Errorf("executor %d: %s at %s (%s), want %s at %s (%s)", i, e.Executor, e.StartTime, e.Tags["phase"], w.executor, w.start, w.phase)
		}
		if got := requests(t, e); math.Abs(got-w.reqs) > 1e-9 {
			t.Errorf("executor %d offers %v requests, want %v", i, got, w.reqs)
		}
		if e.MaxVUs < e.PreAllocatedVUs || e.PreAllocatedVUs < 1 {
			t.Errorf("executor %d: VUs %d..%d", i, e.PreAllocatedVUs, e.MaxVUs)
		}
	}
}

// k6 takes whole iterations per timeUnit (its rate, startRate and stage
// targets are integers: a script with 12.5 does not load), so fractional
// rates go per 1000 s and still offer the phase's requests.
func TestExecutorsFractionalRates(t *testing.T) {
	y := strings.Replace(phases, phases[strings.Index(phases, "  open:"):strings.Index(phases, "protocol:")], `  open:
    - {kind: constant, duration: 2s, rate: 12.5}
    - {kind: ramp, duration: 4s, from: 0.5, to: 10}
    - {kind: steps, duration: 3s, from: 100, to: 200, steps: 4}
    - {kind: burst, duration: 5s, high: 7.25, low: 0, highFor: 1s, lowFor: 1500ms}
`, 1)
	s, err := scenario.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Export(&b, s, "http://127.0.0.1:8080"); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)export const options = (\{.*?\n\});`).FindStringSubmatch(b.String())
	if m == nil {
		t.Fatal("no options object")
	}
	// k6's executor configs, with its integer fields.
	var opts struct {
		Scenarios map[string]struct {
			Rate      *int64 `json:"rate"`
			StartRate *int64 `json:"startRate"`
			Stages    []struct {
				Target int64 `json:"target"`
			} `json:"stages"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal([]byte(m[1]), &opts); err != nil {
		t.Fatalf("k6 would not read the script's scenarios: %v", err)
	}
	want := []float64{12.5 * 1, 12.5 * 2, (0.5 + 10) / 2 * 4, 0.75*100 + 0.75*133.333333 + 0.75*166.666667 + 0.75*200, 7.25 * 2}
	ex := Executors(s)
	if len(ex) != len(want) {
		t.Fatalf("%d executors, want %d", len(ex), len(want))
	}
	for i, w := range want {
		if got := requests(t, ex[i]); math.Abs(got-w) > 0.01 {
			t.Errorf("executor %d (%s per %s) offers %v requests, want %v", i, ex[i].Executor, ex[i].TimeUnit, got, w)
		}
	}
}

// A closed loop is constant-vus with the scenario's users.
func TestExecutorsClosedLoop(t *testing.T) {
	y := strings.Replace(phases, phases[strings.Index(phases, "  open:"):strings.Index(phases, "protocol:")], "  users: 8\n  duration: 3s\n", 1)
	s, err := scenario.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	ex := Executors(s)
	if len(ex) != 2 || ex[1].Executor != "constant-vus" || ex[1].VUs != 8 || ex[1].Duration != "3000ms" || ex[1].StartTime != "1000ms" {
		t.Errorf("closed loop: %+v", ex)
	}
}

// The script carries the routes (paths, weights, Host headers), the
// timeout and the executors, and is valid JavaScript (node --check when
// node is installed, k6 inspect when k6 is).
func TestExportScript(t *testing.T) {
	s, err := scenario.Parse([]byte(phases))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Export(&b, s, "http://127.0.0.1:8080/"); err != nil {
		t.Fatal(err)
	}
	js := b.String()
	for _, want := range []string{`"path":"/work?iterations=500","host":"a.local","weight":3`, `"path":"/b?iterations=1000","weight":1`,
		`timeout: "4000ms"`, `const BASE = __ENV.BASE_URL || "http://127.0.0.1:8080"`, `"http_reqs{phase:window}"`} {
		if !strings.Contains(js, want) {
			t.Errorf("script lacks %s in\n%s", want, js[:min(len(js), 900)])
		}
	}
	m := regexp.MustCompile(`(?s)export const options = (\{.*?\n\});`).FindStringSubmatch(js)
	if m == nil {
		t.Fatal("no options object")
	}
	var opts struct {
		Scenarios map[string]Executor `json:"scenarios"`
	}
	if err := json.Unmarshal([]byte(m[1]), &opts); err != nil {
		t.Fatal(err)
	}
	if len(opts.Scenarios) != len(Executors(s)) {
		t.Errorf("%d k6 scenarios in the script", len(opts.Scenarios))
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "script.mjs")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if node, err := exec.LookPath("node"); err == nil {
		if out, err := exec.Command(node, "--check", p).CombinedOutput(); err != nil {
			t.Errorf("node --check: %v\n%s", err, out)
		}
	}
	if k6, err := exec.LookPath("k6"); err == nil {
		if out, err := exec.Command(k6, "inspect", p).CombinedOutput(); err != nil {
			t.Errorf("k6 inspect: %v\n%s", err, out)
		}
	} else {
		t.Log("k6 not installed: k6 inspect not run")
	}
}

func fixtureScenario(t *testing.T) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Lookup(filepath.Join("testdata", "scenario.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func importFixture(t *testing.T, s *scenario.Scenario) (artifacts.LoadResult, []string, error) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return Import(f, s)
}

// The committed summary fixture imports with the window's counts and
// k6's estimates, and every approximation is stated.
func TestImportFixture(t *testing.T) {
	l, reasons, err := importFixture(t, fixtureScenario(t))
	if err != nil {
		t.Fatal(err)
	}
	if l.Model != "open" || l.Duration != 10*time.Second || l.Sent != 2000 || l.Errors != 12 || l.Succeeded != 1988 || l.Dropped != 3 || l.Goodput != 198.8 {
		t.Errorf("counts: %+v", l)
	}
	if l.P50 != 6.3 || l.P99 != 20.9 || l.Success.Count != 1988 || l.Pessimistic.P999 != 4990.1 {
		t.Errorf("percentiles: success %+v, all %+v", l.Success, l.Pessimistic)
	}
	run := Run("prequal", l, reasons)
	if run.Validity.Valid || len(run.Validity.Reasons) != len(Approximations)+1 || run.Imported != artifacts.ImportedK6 || run.Index != 0 {
		t.Errorf("run %+v", run)
	}
	joined := strings.Join(reasons, "\n")
	for _, want := range []string{"estimates", "coordinated omission", "3 iterations dropped"} {
		if !strings.Contains(joined, want) {
			t.Errorf("reasons do not say %q", want)
		}
	}
	if _, _, err := Import(strings.NewReader(`{"metrics":{"http_reqs":{"count":1}}}`), nil); err == nil {
		t.Error("a summary without the window's metrics was imported")
	}
}

// Without a scenario the window is k6's whole test (warmup included), and
// the reasons say so.
func TestImportWithoutScenario(t *testing.T) {
	l, reasons, err := importFixture(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.Duration != 12004500*time.Microsecond || l.Model != "open" {
		t.Errorf("window %v, model %s", l.Duration, l.Model)
	}
	if !strings.Contains(strings.Join(reasons, "\n"), "no scenario given") {
		t.Errorf("reasons: %q", reasons)
	}
}

// The scenario must be the one exported, at the same --duration-scale:
// at another scale the window, and every rate, would be off by that
// factor, so the import is refused.
func TestImportRefusesAnotherScale(t *testing.T) {
	// 0.5: the fixture ran 12 s; half of its 2 s + 10 s plus the 5 s
	// timeout's graceful stop would still have covered that.
	for _, f := range []float64{10, 0.1, 0.5} {
		s := fixtureScenario(t)
		s.Scale(f)
		if _, _, err := importFixture(t, s); err == nil || !strings.Contains(err.Error(), "--duration-scale") {
			t.Errorf("scale %v: %v, want a refusal naming --duration-scale", f, err)
		}
	}
	s := fixtureScenario(t)
	s.Scale(1.1) // within what k6's start and graceful stop explain
	if _, _, err := importFixture(t, s); err != nil {
		t.Errorf("scale 1.1: %v", err)
	}
}

// A closed-loop scenario's import is a closed loop with its users.
func TestImportClosedLoop(t *testing.T) {
	y, err := os.ReadFile(filepath.Join("testdata", "scenario.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	closed := strings.Replace(string(y), "  open:\n    - {kind: constant, duration: 10s, rate: 200}\n", "  users: 8\n  duration: 10s\n", 1)
	s, err := scenario.Parse([]byte(closed))
	if err != nil {
		t.Fatal(err)
	}
	l, _, err := importFixture(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if l.Model != "closed" || l.Users != 8 || l.TargetRate != 0 {
		t.Errorf("model %s, users %d, target %v; want closed, 8, 0", l.Model, l.Users, l.TargetRate)
	}
}
