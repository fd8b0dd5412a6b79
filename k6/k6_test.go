package k6

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
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
		`timeout: "4000ms"`, `const BASE = __ENV.BASE_URL || "http://127.0.0.1:8080"`, `"http_reqs{phase:window}"`,
		`"name":"a"`, `tags: { route: r.name }`, `"count>=0"`, `"dropped_iterations{scenario:warmup_0}"`,
		`"http_reqs{phase:window,route:a}"`, `"http_reqs{phase:window,route:b}"`} {
		if !strings.Contains(js, want) {
			t.Errorf("script lacks %s in\n%s", want, js[:min(len(js), 900)])
		}
	}
	if strings.Contains(js, `\u00`) {
		t.Errorf("the script escapes characters for HTML:\n%s", js)
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

// k6 refuses a constant-arrival-rate or constant-vus executor under 1 s,
// so the export does, saying which and by how much to scale; a ramping
// one of any length is k6's to take.
func TestExportRefusesShortExecutors(t *testing.T) {
	closed := strings.Replace(phases, phases[strings.Index(phases, "  open:"):strings.Index(phases, "protocol:")], "  users: 8\n  duration: 3s\n", 1)
	cases := []struct {
		yaml     string
		scale    float64
		executor string
		window   bool
	}{
		{phases, 0.5, "constant-arrival-rate", false},                                                // the 1 s warmup
		{phases, 0.9, "constant-arrival-rate", false},                                                // 900 ms
		{closed, 0.3, "constant-vus", false},                                                         // 300 ms warmup
		{strings.Replace(phases, "warmup: 1s", "warmup: 4s", 1), 0.4, "constant-arrival-rate", true}, // 2 s constant phase at 0.4
	}
	for i, c := range cases {
		s, err := scenario.Parse([]byte(c.yaml))
		if err != nil {
			t.Fatal(err)
		}
		s.Scale(c.scale)
		err = Export(io.Discard, s, "http://127.0.0.1:8080")
		var short *ShortExecutorError
		if !errors.As(err, &short) || short.Executor != c.executor || short.Duration >= time.Second ||
			!strings.Contains(err.Error(), "--duration-scale at least") || strings.Contains(err.Error(), "window phase") != c.window {
			t.Errorf("case %d: %v", i, err)
			continue
		}
		s.Scale(short.Factor())
		if err := Export(io.Discard, s, "http://127.0.0.1:8080"); err != nil {
			t.Errorf("case %d scaled by the factor the error gave: %v", i, err)
		}
	}
	s, err := scenario.Parse([]byte(phases))
	if err != nil {
		t.Fatal(err)
	}
	s.Protocol.Warmup = nil
	s.Load.Open = s.Load.Open[1:] // ramp, steps and burst only
	s.Scale(0.1)
	if err := Export(io.Discard, s, "http://127.0.0.1:8080"); err != nil {
		t.Errorf("ramping executors only, at 0.1: %v", err)
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

func readSummary(t *testing.T, name string) *Summary {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sum, err := ParseSummary(name, f)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// fixtureWith is a fixture with edit applied to its JSON, parsed.
func fixtureWith(t *testing.T, name string, edit func(m map[string]any)) (*Summary, error) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err = json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return ParseSummary(name, bytes.NewReader(b))
}

func importOne(t *testing.T, s *scenario.Scenario, name string) (Result, error) {
	t.Helper()
	return Import(s, []*Summary{readSummary(t, name)})
}

// The --summary-export fixture (k6 deletes its state) imports with the
// window's counts and k6's percentiles, the test's length read from its
// counters, and every approximation stated.
func TestImportSummaryExport(t *testing.T) {
	sum := readSummary(t, "summary-export.json")
	if sum.Shape != ShapeSummaryExport || sum.RunMs != 0 {
		t.Errorf("shape %s, state %v", sum.Shape, sum.RunMs)
	}
	if d := sum.TestRun() - 12031246*time.Microsecond; d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("test run %v, want 12.031246s from count/rate", sum.TestRun())
	}
	res, err := Import(fixtureScenario(t), []*Summary{sum})
	if err != nil {
		t.Fatal(err)
	}
	l := res.Total
	if l.Model != "open" || l.Duration != 10*time.Second || l.Sent != 1998 || l.Errors != 12 || l.Succeeded != 1986 || l.Dropped != 2 || l.Goodput != 198.6 {
		t.Errorf("counts: %+v", l)
	}
	if l.P50 != 6.3058 || l.P99 != 20.9338 || l.Success.Count != 1986 || l.Pessimistic.P999 != 4990.1233 || l.Pessimistic.Count != 1998 {
		t.Errorf("percentiles: success %+v, all %+v", l.Success, l.Pessimistic)
	}
	runs := res.Runs("prequal")
	if len(runs) != 1 || res.Runners != nil {
		t.Fatalf("%d runs for one runner", len(runs))
	}
	run := runs[0]
	if run.Validity.Valid || run.Imported != artifacts.ImportedK6 || run.Index != 0 || run.Dir != "runs/k6-prequal" {
		t.Errorf("run %+v", run)
	}
	joined := strings.Join(run.Validity.Reasons, "\n")
	for _, want := range []string{"over every sample", "leaves out DNS lookup, connection and TLS", "coordinated omission", "2 iterations dropped (k6 ran out of VUs), in the window"} {
		if !strings.Contains(joined, want) {
			t.Errorf("reasons do not say %q:\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "estimate") {
		t.Errorf("reasons call k6's exact percentiles estimates:\n%s", joined)
	}
}

// handleSummary's data (metrics with type, contains and values; state
// with testRunDurationMs) imports as the same run's --summary-export.
func TestImportHandleSummary(t *testing.T) {
	sum := readSummary(t, "handlesummary.json")
	if sum.Shape != ShapeHandleSummary || sum.TestRun() != 12031246100*time.Nanosecond {
		t.Errorf("shape %s, test run %v", sum.Shape, sum.TestRun())
	}
	a, err := importOne(t, fixtureScenario(t), "handlesummary.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := importOne(t, fixtureScenario(t), "summary-export.json")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("handleSummary import\n%+v\ndiffers from --summary-export's\n%+v", a.Total, b.Total)
	}
	if a.Total.Sent != 1998 || a.Total.P99 != 20.9338 {
		t.Errorf("handleSummary: %+v", a.Total)
	}
	// state is read first: the test's length with every counter's rate
	// gone is still known.
	noRates, err := fixtureWith(t, "handlesummary.json", func(m map[string]any) {
		for _, v := range m["metrics"].(map[string]any) {
			if v.(map[string]any)["type"] == "counter" {
				v.(map[string]any)["values"].(map[string]any)["rate"] = 0
			}
		}
	})
	if err != nil || noRates.TestRun() != sum.TestRun() {
		t.Errorf("handleSummary without counter rates: test run %v, %v; want state's %v", noRates.TestRun(), err, sum.TestRun())
	}
	// k6 divides every counter by state's duration: a state that
	// disagrees with them (half the test) is refused.
	_, err = fixtureWith(t, "handlesummary.json", func(m map[string]any) {
		m["state"].(map[string]any)["testRunDurationMs"] = 6015.6
	})
	if err == nil || !strings.Contains(err.Error(), "state.testRunDurationMs is 6015.6, but data_received count / rate is 12031.2 ms") {
		t.Errorf("a state the counters contradict: %v", err)
	}
}

// Another --duration-scale is refused, in both shapes: the window, and
// every rate, would be off by its factor.
func TestImportRefusesAnotherScale(t *testing.T) {
	for _, name := range []string{"summary-export.json", "handlesummary.json"} {
		for _, f := range []float64{0.5, 2, 0.9, 1.1, 10, 0.1} {
			s := fixtureScenario(t)
			s.Scale(f)
			if _, err := importOne(t, s, name); err == nil || !strings.Contains(err.Error(), "--duration-scale") {
				t.Errorf("%s at scale %v: %v, want a refusal naming --duration-scale", name, f, err)
			}
		}
	}
}

// Another open-loop scenario of the same length is refused by its
// window's requests; a catalogue scenario by its length.
func TestImportRefusesAnotherScenario(t *testing.T) {
	y, err := os.ReadFile(filepath.Join("testdata", "scenario.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, rate := range []string{"100", "300", "66"} {
		s, err := scenario.Parse([]byte(strings.Replace(string(y), "rate: 200", "rate: "+rate, 1)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = importOne(t, s, "summary-export.json")
		if err == nil || !strings.Contains(err.Error(), "--scenario") || !strings.Contains(err.Error(), "http_reqs{phase:window}") {
			t.Errorf("rate %s: %v, want a refusal naming http_reqs{phase:window} and --scenario", rate, err)
		}
	}
	for _, name := range []string{"quickstart", "c1-small-cpu"} {
		s, err := scenario.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := importOne(t, s, "summary-export.json"); err == nil || !strings.Contains(err.Error(), "--scenario") {
			t.Errorf("%s: %v, want a refusal naming --scenario", name, err)
		}
	}
	if _, err := Import(nil, []*Summary{readSummary(t, "summary-export.json")}); err == nil || !strings.Contains(err.Error(), "--scenario is required") {
		t.Errorf("no scenario: %v", err)
	}
}

// An empty window, a test of 0 s, a file that is not a k6 summary, a
// missing window metric or trend statistic, k6's other machine-readable
// format and mixed shapes are each refused, naming what is wrong.
func TestImportRefusesWhatIsNotThisRun(t *testing.T) {
	metrics := func(m map[string]any) map[string]any { return m["metrics"].(map[string]any) }
	cases := []struct {
		name, file string
		edit       func(m map[string]any)
		want       string
	}{
		{"empty window", "summary-export.json", func(m map[string]any) {
			metrics(m)["http_reqs{phase:window}"] = map[string]any{"count": 0, "rate": 0}
		}, "is empty: http_reqs{phase:window} count is 0"},
		{"empty window, handleSummary", "handlesummary.json", func(m map[string]any) {
			metrics(m)["http_reqs{phase:window}"].(map[string]any)["values"] = map[string]any{"count": 0, "rate": 0}
		}, "is empty: http_reqs{phase:window} count is 0"},
		{"zero test run", "summary-export.json", func(m map[string]any) {
			for _, v := range metrics(m) {
				if c, ok := v.(map[string]any)["rate"]; ok && c != nil {
					if _, isCounter := v.(map[string]any)["count"]; isCounter {
						v.(map[string]any)["rate"] = 0
					}
				}
			}
		}, "the test ran 0 s"},
		{"zero test run, handleSummary", "handlesummary.json", func(m map[string]any) {
			m["state"].(map[string]any)["testRunDurationMs"] = 0
			for _, v := range metrics(m) {
				if v.(map[string]any)["type"] == "counter" {
					v.(map[string]any)["values"].(map[string]any)["rate"] = 0
				}
			}
		}, "the test ran 0 s"},
		{"no metrics", "summary-export.json", func(m map[string]any) { m["metrics"] = map[string]any{} }, `"metrics" is missing or empty`},
		{"no window metric", "summary-export.json", func(m map[string]any) { delete(metrics(m), "http_req_failed{phase:window}") },
			"has no http_req_failed{phase:window}"},
		{"no p(99)", "handlesummary.json", func(m map[string]any) {
			delete(metrics(m)["http_req_duration{phase:window}"].(map[string]any)["values"].(map[string]any), "p(99)")
		}, `http_req_duration{phase:window} has no "p(99)"`},
		{"new machine-readable summary", "summary-export.json", func(m map[string]any) {
			m["version"], m["results"] = "1.0.0", map[string]any{"metrics": []any{}}
		}, "--new-machine-readable-summary"},
		{"mixed shapes", "summary-export.json", func(m map[string]any) {
			metrics(m)["vus"] = map[string]any{"type": "gauge", "contains": "default", "values": map[string]any{"value": 1}}
		}, "not one k6 summary"},
	}
	for _, c := range cases {
		sum, err := fixtureWith(t, c.file, c.edit)
		if err == nil {
			_, err = Import(fixtureScenario(t), []*Summary{sum})
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// Two runners' summaries (--execution-segment halves) sum their counts
// exactly; their percentiles stay each runner's, in runs that say which
// is which, and the whole test's run has none.
func TestImportRunners(t *testing.T) {
	res, err := Import(fixtureScenario(t), []*Summary{readSummary(t, "runner1.json"), readSummary(t, "runner2.json")})
	if err != nil {
		t.Fatal(err)
	}
	l := res.Total
	if l.Sent != 1998 || l.Errors != 12 || l.Succeeded != 1986 || l.Dropped != 2 || l.Goodput != 198.6 || l.Duration != 10*time.Second {
		t.Errorf("summed counts: %+v", l)
	}
	if l.Success.Count != 0 || l.P99 != 0 || l.Pessimistic.Count != 0 {
		t.Errorf("the whole test's run carries percentiles, merged from runners: %+v", l.Success)
	}
	if len(res.Runners) != 2 || res.Runners[0].Load.P99 != 19.8873 || res.Runners[1].Load.P99 != 22.1194 ||
		res.Runners[0].Load.Sent != 1000 || res.Runners[1].Load.Goodput != 99 {
		t.Errorf("runners: %+v", res.Runners)
	}
	runs := res.Runs("nginx-rr")
	if len(runs) != 3 {
		t.Fatalf("%d runs, want the whole test's and two runners'", len(runs))
	}
	want := []struct{ dir, label, says string }{
		{"runs/k6-nginx-rr", "nginx-rr", "counts summed exactly over 2 runners; no percentiles"},
		{"runs/k6-nginx-rr-runner1", "nginx-rr (k6 runner 1 of 2)", "runner 1 of 2 (runner1.json) only"},
		{"runs/k6-nginx-rr-runner2", "nginx-rr (k6 runner 2 of 2)", "runner 2 of 2 (runner2.json) only"},
	}
	for i, w := range want {
		r := runs[i]
		if r.Dir != w.dir || r.Algorithm != w.label || r.Validity.Valid || r.Imported != artifacts.ImportedK6 ||
			!strings.Contains(strings.Join(r.Validity.Reasons, "\n"), w.says) {
			t.Errorf("run %d: %s %q, reasons %q; want %s %q saying %q", i, r.Dir, r.Algorithm, r.Validity.Reasons, w.dir, w.label, w.says)
		}
	}
	// Each runner ran the whole load, not its segment: twice the
	// scenario's requests.
	other, err := fixtureWith(t, "summary-export.json", func(m map[string]any) {
		m["metrics"].(map[string]any)["http_req_duration{phase:window}"].(map[string]any)["p(99)"] = 21.7046
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Import(fixtureScenario(t), []*Summary{readSummary(t, "summary-export.json"), other})
	if err == nil || !strings.Contains(err.Error(), "--execution-segment") || !strings.Contains(err.Error(), "2.00x") {
		t.Errorf("two whole loads: %v, want a refusal naming --execution-segment", err)
	}
	// A runner at another scale is refused by its own test run.
	r2, err := fixtureWith(t, "runner2.json", func(m map[string]any) {
		for _, v := range m["metrics"].(map[string]any) {
			if r, ok := v.(map[string]any)["rate"].(float64); ok {
				v.(map[string]any)["rate"] = r * 2
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Import(fixtureScenario(t), []*Summary{readSummary(t, "runner1.json"), r2}); err == nil || !strings.Contains(err.Error(), "runner2.json: the test ran 6.021s") {
		t.Errorf("a runner at another scale: %v", err)
	}
}

// A closed-loop scenario's import is a closed loop with its users (its
// window's requests are not fixed, so only the test's length is checked).
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
	res, err := importOne(t, s, "summary-export.json")
	if err != nil {
		t.Fatal(err)
	}
	if l := res.Total; l.Model != "closed" || l.Users != 8 || l.TargetRate != 0 {
		t.Errorf("model %s, users %d, target %v; want closed, 8, 0", l.Model, l.Users, l.TargetRate)
	}
	s.Scale(0.5)
	if _, err := importOne(t, s, "summary-export.json"); err == nil || !strings.Contains(err.Error(), "--duration-scale") {
		t.Errorf("closed loop at another scale: %v", err)
	}
}

// The fixture's scenario offers the 2000 window requests the fixtures
// hold (sent and dropped).
func TestOffered(t *testing.T) {
	if n := Offered(Executors(fixtureScenario(t))); n != 2000 {
		t.Errorf("offered %v, want 2000", n)
	}
}

// A summary k6 could not have written is refused, naming the field: k6
// counts every request once in http_reqs, http_req_failed and
// http_req_duration with the same tags, as whole numbers from 0, and
// the warmup's drops are some of all the drops.
func TestImportRefusesImpossibleCounts(t *testing.T) {
	win := func(m map[string]any, metric string) map[string]any {
		return m["metrics"].(map[string]any)[metric].(map[string]any)
	}
	cases := []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"more failed than sent", func(m map[string]any) { win(m, "http_req_failed{phase:window}")["passes"] = 5000 },
			"http_req_failed{phase:window} passes + fails = 6986, but http_reqs{phase:window} count = 1998"},
		{"negative failed", func(m map[string]any) { win(m, "http_req_failed{phase:window}")["passes"] = -3 },
			"http_req_failed{phase:window} passes is -3: want a whole number"},
		{"negative sent", func(m map[string]any) { win(m, "http_reqs{phase:window}")["count"] = -5 },
			"http_reqs{phase:window} count is -5: want a whole number"},
		{"fractional sent", func(m map[string]any) { win(m, "http_reqs{phase:window}")["count"] = 1997.5 },
			"http_reqs{phase:window} count is 1997.5: want a whole number"},
		{"huge sent", func(m map[string]any) { win(m, "http_reqs{phase:window}")["count"] = 1e30 },
			"http_reqs{phase:window} count is 1e+30: want a whole number"},
		{"negative drops", func(m map[string]any) { win(m, "dropped_iterations")["count"] = -1e6 },
			"dropped_iterations count is -1e+06"},
		{"more warmup drops than drops", func(m map[string]any) { win(m, "dropped_iterations{scenario:warmup_0}")["count"] = 4 },
			"dropped_iterations{scenario:warmup_0} count 4 is more than dropped_iterations count 3"},
		{"fewer requests than the window's", func(m map[string]any) { win(m, "http_reqs")["count"] = 1000 },
			"http_reqs count 1000 is less than http_reqs{phase:window} count 1998"},
		{"trend of other requests", func(m map[string]any) { win(m, "http_req_duration{phase:window}")["count"] = 500 },
			"http_req_duration{phase:window} count is 500, but the window's requests of that kind (http_req_failed{phase:window}) are 1998"},
		{"success trend of other requests", func(m map[string]any) {
			win(m, "http_req_duration{phase:window,expected_response:true}")["count"] = 1998
		}, "http_req_duration{phase:window,expected_response:true} count is 1998, but the window's requests of that kind (http_req_failed{phase:window}) are 1986"},
		{"negative latency", func(m map[string]any) { win(m, "http_req_duration{phase:window}")["p(99)"] = -1 },
			"http_req_duration{phase:window} p(99) is -1: want milliseconds"},
		{"all requests timed less than the window's", func(m map[string]any) { win(m, "http_req_duration")["avg"] = 1 },
			"http_req_duration avg × count (2.397s) is less than http_req_duration{phase:window}'s (18.15s)"},
		{"all requests' trend of other requests", func(m map[string]any) { win(m, "http_req_duration")["count"] = 2000 },
			"http_req_duration count is 2000, but http_reqs count is 2397"},
	}
	for _, c := range cases {
		sum, err := fixtureWith(t, "summary-export.json", c.edit)
		if err == nil {
			_, err = Import(fixtureScenario(t), []*Summary{sum})
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// One summary given twice, or one run's summary in both shapes, would
// pass for two runners' halves of the load: it is refused.
func TestImportRefusesTheSameSummaryTwice(t *testing.T) {
	for _, pair := range [][2]string{{"runner1.json", "runner1.json"}, {"runner2.json", "runner2.json"}, {"summary-export.json", "handlesummary.json"}} {
		s := fixtureScenario(t)
		if pair[0] == "summary-export.json" {
			s.Load.Open[0].Rate = 400 // the whole load twice fits 400/s
		}
		_, err := Import(s, []*Summary{readSummary(t, pair[0]), readSummary(t, pair[1])})
		if err == nil || !strings.Contains(err.Error(), "are the same run's summary") {
			t.Errorf("%s and %s: %v, want a refusal saying they are the same", pair[0], pair[1], err)
		}
	}
}

// An open loop's requests outside the window are the warmup's: a
// summary of another warmup (or none) is refused by them, even where
// the test's length alone would pass.
func TestImportRefusesAnotherWarmup(t *testing.T) {
	for _, w := range []string{"1s", "1500ms", "0s"} {
		s := fixtureScenario(t)
		d := scenario.Duration(w)
		s.Protocol.Warmup = &d
		for _, name := range []string{"summary-export.json", "handlesummary.json"} {
			_, err := importOne(t, s, name)
			if err == nil || !strings.Contains(err.Error(), "outside the window") || !strings.Contains(err.Error(), "warmup offers") {
				t.Errorf("warmup %s, %s: %v, want a refusal naming the requests outside the window", w, name, err)
			}
		}
	}
	s := fixtureScenario(t)
	if _, err := Import(s, []*Summary{readSummary(t, "runner1.json"), readSummary(t, "runner2.json")}); err != nil {
		t.Errorf("the runners' warmups, summed: %v", err)
	}
}

// A closed loop's window holds no fixed number of requests, but its
// users can spend no more than the window (and their last request) on
// them, nor more than the warmup on the warmup's: a summary of a longer
// window or warmup (a smaller scale given than exported, another
// warmup) or of more users is refused by the time its requests took,
// where the test's length alone would pass.
func TestImportClosedLoopHoldsItsRequests(t *testing.T) {
	y, err := os.ReadFile(filepath.Join("testdata", "scenario.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	closedYAML := strings.Replace(string(y), "  open:\n    - {kind: constant, duration: 10s, rate: 200}\n", "  users: 8\n  duration: 10s\n", 1)
	// 8 users busy 9.9 s each in the window with requests of 39.64 ms on
	// average, and 1.98 s each in the warmup (all 2397 requests: 39.6507
	// ms); the longest iteration 120 ms. At scale 0.95 or 0.96 the test's
	// length (12.03 s against 11.4 s or 11.52 s, plus 120 ms and 1 s)
	// passes, and so does a warmup of 1 s (11 s).
	sum, err := fixtureWith(t, "summary-export.json", func(m map[string]any) {
		ms := m["metrics"].(map[string]any)
		ms["http_req_duration{phase:window}"].(map[string]any)["avg"] = 39.64
		ms["http_req_duration"].(map[string]any)["avg"] = (1998*39.64 + 8*1980) / 2397
		ms["iteration_duration"].(map[string]any)["max"] = 120
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		scale         float64
		users, warmup string
		refusedBy     string // "" to accept
	}{
		{1, "8", "2s", ""}, {1.005, "8", "2s", ""}, {1, "9", "2s", ""},
		{0.95, "8", "2s", "http_req_duration{phase:window}: its 1998 requests took 1m19.201s in all (avg × count), 9.9s for each of scenario k6-fixture's 8 users, more than its 9.5s window"},
		{0.96, "8", "2s", "http_req_duration{phase:window}: its 1998 requests took"},
		{1, "7", "2s", "the warmup's 399 requests took 15.84s in all, 2.263s for each of scenario k6-fixture's 7 users, more than its 2s warmup"},
		{1, "4", "2s", "the warmup's 399 requests took"},
		{1, "8", "1s", "the warmup's 399 requests took 15.84s in all, 1.98s for each of scenario k6-fixture's 8 users, more than its 1s warmup"},
		{1, "8", "1500ms", "more than its 1.5s warmup"},
	} {
		s, err := scenario.Parse([]byte(strings.Replace(strings.Replace(closedYAML, "users: 8", "users: "+c.users, 1), "warmup: 2s", "warmup: "+c.warmup, 1)))
		if err != nil {
			t.Fatal(err)
		}
		s.Scale(c.scale)
		_, err = Import(s, []*Summary{sum})
		if c.refusedBy == "" && err != nil || c.refusedBy != "" && (err == nil || !strings.Contains(err.Error(), c.refusedBy)) {
			t.Errorf("scale %v, %s users, warmup %s: %v, want refused by %q", c.scale, c.users, c.warmup, err, c.refusedBy)
		}
	}
}

// Two summaries in one file (cat runner1.json runner2.json) are refused,
// not read as the first alone; so is a file too large to be a summary,
// before it is read past the limit.
func TestParseSummaryRefusesMoreThanOne(t *testing.T) {
	a, err := os.ReadFile(filepath.Join("testdata", "runner1.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("testdata", "runner2.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ParseSummary("both.json", bytes.NewReader(append(a, b...)))
	if err == nil || !strings.Contains(err.Error(), "more follows the summary's JSON object") {
		t.Errorf("two summaries in one file: %v", err)
	}
	if _, err := ParseSummary("one.json", bytes.NewReader(append(a, " \n\t"...))); err != nil {
		t.Errorf("one summary and white space: %v", err)
	}
	huge := io.MultiReader(strings.NewReader(`{"metrics": {"x": {"count": 1, "rate": 1, "pad": "`), io.LimitReader(endless{}, 65<<20))
	if _, err := ParseSummary("huge.json", huge); err == nil || !strings.Contains(err.Error(), "larger than 64 MiB") {
		t.Errorf("an endless file: %v", err)
	}
}

// endless reads as an endless run of 'a'.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// The script counts the window's requests by route: a summary of a
// scenario with other routes, or other weights, at the same rate and
// lengths is refused by them.
func TestImportRefusesAnotherRouteMix(t *testing.T) {
	y, err := os.ReadFile(filepath.Join("testdata", "scenario.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	two := func(wWork, wB string) *scenario.Scenario {
		s, err := scenario.Parse([]byte(strings.Replace(string(y), "      backends: [{name: b, replicas: 3}]\n",
			"      weight: "+wWork+"\n      backends: [{name: b, replicas: 3}]\n    - name: b\n      weight: "+wB+"\n      backends: [{name: c, replicas: 1}]\n", 1)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	split := func(work, b int) *Summary {
		sum, err := fixtureWith(t, "summary-export.json", func(m map[string]any) {
			ms := m["metrics"].(map[string]any)
			ms[RouteMetric("work")].(map[string]any)["count"] = work
			if b >= 0 {
				ms[RouteMetric("b")] = map[string]any{"count": b, "rate": float64(b) / 12.0312461}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	renamed, err := scenario.Parse([]byte(strings.Replace(string(y), "name: work", "name: other", 1)))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		s    *scenario.Scenario
		sum  *Summary
		want string // "" to accept
	}{
		{"as exported", fixtureScenario(t), readSummary(t, "summary-export.json"), ""},
		{"another route", renamed, readSummary(t, "summary-export.json"), "has no http_reqs{phase:window,route:other}"},
		{"a route more", two("1", "1"), readSummary(t, "summary-export.json"), "has no http_reqs{phase:window,route:b}"},
		{"even split of 1:1", two("1", "1"), split(1050, 948), ""},
		{"all on one of 1:1", two("1", "1"), split(1998, 0), "counts 1998 of the window's 1998 requests (100.0%), but scenario k6-fixture weighs route work at 50.0%"},
		{"even split of 3:1", two("3", "1"), split(1050, 948), "weighs route work at 75.0%"},
		{"3:1 split of 3:1", two("3", "1"), split(1500, 498), ""},
		{"routes short of the window", fixtureScenario(t), split(1990, -1), "add up to 1990, but http_reqs{phase:window} count is 1998"},
		{"no request by route", fixtureScenario(t), split(0, -1), "add up to 0"},
	}
	for _, c := range cases {
		_, err := Import(c.s, []*Summary{c.sum})
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
