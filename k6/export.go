// Package k6 bridges to k6 without linking it (go.k6.io/k6 is AGPL): it
// writes a k6 script that reproduces a scenario's load, and reads what
// k6 writes at the end of that script's run (its --summary-export JSON,
// or the data object handleSummary() is given, from one runner or from
// several) into the run accounting, refusing a summary that does not fit
// the scenario and saying what k6's summary cannot carry.
package k6

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/prequalbench/prequalbench/scenario"
)

// Tag values of the script's "phase" tag: the summary's window metrics
// are the ones tagged phase:window.
const (
	PhaseWarmup = "warmup"
	PhaseWindow = "window"
)

// TrendStats are the statistics the script asks k6 to summarise.
var TrendStats = []string{"avg", "min", "med", "max", "p(90)", "p(99)", "p(99.9)", "count"}

// Executor is one k6 scenario of the script.
type Executor struct {
	Name            string            `json:"-"`
	Executor        string            `json:"executor"`
	StartTime       string            `json:"startTime"`
	Rate            int64             `json:"rate,omitempty"`
	StartRate       int64             `json:"startRate,omitempty"`
	TimeUnit        string            `json:"timeUnit,omitempty"`
	Duration        string            `json:"duration,omitempty"`
	Stages          []Stage           `json:"stages,omitempty"`
	VUs             int               `json:"vus,omitempty"`
	PreAllocatedVUs int               `json:"preAllocatedVUs,omitempty"`
	MaxVUs          int               `json:"maxVUs,omitempty"`
	GracefulStop    string            `json:"gracefulStop,omitempty"`
	Tags            map[string]string `json:"tags"`
}

// Stage is one stage of a ramping-arrival-rate executor.
type Stage struct {
	Target   int64  `json:"target"`
	Duration string `json:"duration"`
}

// unitFor is the timeUnit an executor's rates are given in, and the
// factor that turns a rate per second into iterations per that unit: k6
// takes whole iterations per timeUnit (rate, startRate and targets are
// integers; 12.5 fails the script), so fractional rates go per 1000 s,
// as the engine's own pacer takes them.
func unitFor(rates ...float64) (string, float64) {
	for _, r := range rates {
		if r != math.Trunc(r) {
			return "1000s", 1000
		}
	}
	return "1s", 1
}

func perUnit(r, scale float64) int64 { return int64(math.Round(r * scale)) }

// Executors maps the scenario's load onto k6 executors: the warmup as a
// constant-arrival-rate, then per open-loop phase constant-arrival-rate
// (constant), ramping-arrival-rate (ramp; steps and bursts as instant
// jumps of 0 s stages), or constant-vus for a closed loop. Each starts
// where the previous ends.
func Executors(s *scenario.Scenario) []Executor {
	l := s.Load
	timeout := l.Timeout.Std()
	var out []Executor
	at := time.Duration(0)
	vus := func(rate float64) (int, int) {
		// Little's law at the timeout bounds the VUs an arrival rate needs.
		pre := max(1, int(math.Ceil(rate*0.1)))
		return pre, max(pre, int(math.Ceil(rate*timeout.Seconds()))+1)
	}
	add := func(e Executor, d time.Duration, phase string) {
		e.StartTime = dur(at)
		e.GracefulStop = dur(timeout)
		e.Tags = map[string]string{"phase": phase}
		e.Name = fmt.Sprintf("%s_%d", phase, len(out))
		out = append(out, e)
		at += d
	}
	if w := warmupOf(s); w > 0 {
		if l.Users > 0 {
			add(Executor{Executor: "constant-vus", VUs: l.Users, Duration: dur(w)}, w, PhaseWarmup)
		} else {
			r := l.StartRate()
			pre, mx := vus(r)
			unit, sc := unitFor(r)
			add(Executor{Executor: "constant-arrival-rate", Rate: perUnit(r, sc), TimeUnit: unit, Duration: dur(w), PreAllocatedVUs: pre, MaxVUs: mx}, w, PhaseWarmup)
		}
	}
	if l.Users > 0 {
		d := l.Duration.Std()
		add(Executor{Executor: "constant-vus", VUs: l.Users, Duration: dur(d)}, d, PhaseWindow)
		return out
	}
	for _, p := range l.Open {
		d := p.Duration.Std()
		switch p.Kind {
		case scenario.PhaseConstant:
			pre, mx := vus(p.Rate)
			unit, sc := unitFor(p.Rate)
			add(Executor{Executor: "constant-arrival-rate", Rate: perUnit(p.Rate, sc), TimeUnit: unit, Duration: dur(d), PreAllocatedVUs: pre, MaxVUs: mx}, d, PhaseWindow)
		case scenario.PhaseRamp:
			pre, mx := vus(max(p.From, p.To))
			unit, sc := unitFor(p.From, p.To)
			add(Executor{Executor: "ramping-arrival-rate", StartRate: perUnit(p.From, sc), TimeUnit: unit, PreAllocatedVUs: pre, MaxVUs: mx,
				Stages: []Stage{{Target: perUnit(p.To, sc), Duration: dur(d)}}}, d, PhaseWindow)
		case scenario.PhaseSteps:
			pre, mx := vus(max(p.From, p.To))
			steps := max(p.Steps, 1)
			step := d / time.Duration(steps)
			rates := make([]float64, steps)
			for i := range rates {
				rates[i] = p.From
				if steps > 1 { // one step would divide 0 by 0: it is From
					rates[i] += (p.To - p.From) * float64(i) / float64(steps-1)
				}
			}
			unit, sc := unitFor(rates...)
			var st []Stage
			for i, r := range rates {
				sd := step
				if i == steps-1 {
					sd = d - step*time.Duration(steps-1)
				}
				st = append(st, Stage{Target: perUnit(r, sc), Duration: "0s"}, Stage{Target: perUnit(r, sc), Duration: dur(sd)})
			}
			add(Executor{Executor: "ramping-arrival-rate", StartRate: perUnit(p.From, sc), TimeUnit: unit, PreAllocatedVUs: pre, MaxVUs: mx, Stages: st}, d, PhaseWindow)
		case scenario.PhaseBurst:
			pre, mx := vus(p.High)
			hi, lo := p.HighFor.Std(), p.LowFor.Std()
			unit, sc := unitFor(p.High, p.Low)
			high, low := perUnit(p.High, sc), perUnit(p.Low, sc)
			var st []Stage
			for t := time.Duration(0); t < d; {
				h := min(hi, d-t)
				st = append(st, Stage{Target: high, Duration: "0s"}, Stage{Target: high, Duration: dur(h)})
				t += h
				if t >= d {
					break
				}
				lw := min(lo, d-t)
				st = append(st, Stage{Target: low, Duration: "0s"}, Stage{Target: low, Duration: dur(lw)})
				t += lw
			}
			add(Executor{Executor: "ramping-arrival-rate", StartRate: high, TimeUnit: unit, PreAllocatedVUs: pre, MaxVUs: mx, Stages: st}, d, PhaseWindow)
		}
	}
	return out
}

// MinExecutorDuration is the shortest duration k6 accepts for a
// constant-arrival-rate or constant-vus executor (its executors'
// minDuration): a shorter one fails the script before it runs.
const MinExecutorDuration = time.Second

// ShortExecutorError is an executor shorter than k6 accepts: its phase
// (warmup or window) and its duration.
type ShortExecutorError struct {
	Name     string
	Executor string
	Duration time.Duration
}

func (e *ShortExecutorError) Error() string {
	what := "the warmup"
	if e.Name != "" && !strings.HasPrefix(e.Name, PhaseWarmup) {
		what = "window phase " + e.Name
	}
	return fmt.Sprintf("k6 export: %s lasts %v, but k6 refuses a %s executor shorter than %v: "+
		"give a --duration-scale at least %g times this one", what, e.Duration, e.Executor, MinExecutorDuration,
		e.Factor())
}

// Factor is how much longer every duration must be for k6 to accept the
// executor, rounded up to hundredths.
func (e *ShortExecutorError) Factor() float64 {
	return math.Ceil(100*float64(MinExecutorDuration)/float64(max(e.Duration, time.Millisecond))) / 100
}

// checkDurations refuses an executor k6 would refuse.
func checkDurations(ex []Executor) error {
	for _, e := range ex {
		if e.Executor != "constant-arrival-rate" && e.Executor != "constant-vus" {
			continue
		}
		if d, err := time.ParseDuration(e.Duration); err == nil && d < MinExecutorDuration {
			return &ShortExecutorError{Name: e.Name, Executor: e.Executor, Duration: d}
		}
	}
	return nil
}

// marshal is json.Marshal without HTML escaping: k6 reads the script as
// JavaScript, where "count>=0" should read as written, not "count\u003e=0".
func marshal(v any, indent string) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if indent != "" {
		e.SetIndent("", indent)
	}
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// warmupOf is s's warmup, 0 when it has none.
func warmupOf(s *scenario.Scenario) time.Duration {
	if s.Protocol.Warmup == nil {
		return 0
	}
	return s.Protocol.Warmup.Std()
}

// dur formats d for k6 ("1500ms").
func dur(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }

// route is one weighted route of the script.
type route struct {
	Name   string  `json:"name"`
	Path   string  `json:"path"`
	Host   string  `json:"host,omitempty"`
	Weight float64 `json:"weight"`
}

// DroppedWarmup is the summary's metric of the iterations k6 dropped in
// the warmup executor: k6 tags dropped iterations with the k6 scenario's
// name only (not its tags), so the window's drops are the total less
// these.
func DroppedWarmup(ex []Executor) string {
	for _, e := range ex {
		if e.Tags["phase"] == PhaseWarmup {
			return "dropped_iterations{scenario:" + e.Name + "}"
		}
	}
	return ""
}

// RouteMetric is the summary's metric of the window's requests to one
// route (route names are DNS labels, so they fit k6's submetric syntax).
func RouteMetric(route string) string {
	return "http_reqs{phase:" + PhaseWindow + ",route:" + route + "}"
}

// Export writes a k6 script for s: the executors above, the routes
// picked by weight with their Host headers, each request tagged with its
// route (tag "route"), the request timeout, and thresholds that make
// k6's summary carry the window's own metrics (tagged phase:window;
// successes via expected_response:true) and the warmup's dropped
// iterations, and each route's window requests. The target is $BASE_URL (default baseURL). An executor k6
// would refuse (a constant one under 1 s, e.g. a 2 s warmup at
// --duration-scale 0.3) is an error, a *ShortExecutorError.
func Export(w io.Writer, s *scenario.Scenario, baseURL string) error {
	ex := Executors(s)
	if err := checkDurations(ex); err != nil {
		return err
	}
	scen := map[string]Executor{}
	for _, e := range ex {
		scen[e.Name] = e
	}
	var routes []route
	for _, r := range s.Workload.Routes {
		routes = append(routes, route{Name: r.Name, Path: fmt.Sprintf("%s?iterations=%d", r.Path, r.Iterations), Host: r.Host, Weight: r.Weight})
	}
	win := "{phase:" + PhaseWindow + "}"
	// Thresholds that always pass: they make the summary export the
	// window's sub-metrics.
	thresholds := map[string][]string{
		"http_reqs" + win:         {"count>=0"},
		"http_req_failed" + win:   {"rate>=0"},
		"http_req_duration" + win: {"max>=0"},
		"http_req_duration{phase:" + PhaseWindow + ",expected_response:true}": {"max>=0"},
	}
	if d := DroppedWarmup(ex); d != "" {
		thresholds[d] = []string{"count>=0"}
	}
	for _, r := range s.Workload.Routes {
		thresholds[RouteMetric(r.Name)] = []string{"count>=0"}
	}
	options := map[string]any{
		"discardResponseBodies": true,
		"summaryTrendStats":     TrendStats,
		"scenarios":             scen,
		"thresholds":            thresholds,
	}
	ob, err := marshal(options, "  ")
	if err != nil {
		return err
	}
	rb, err := marshal(routes, "")
	if err != nil {
		return err
	}
	base, err := marshal(strings.TrimSuffix(baseURL, "/"), "")
	if err != nil {
		return err
	}
	timeout := s.Load.Timeout.Std()
	var b strings.Builder
	fmt.Fprintf(&b, "// k6 script written by `prequalbench k6 export` for scenario %s.\n", s.Name)
	b.WriteString("// Run: k6 run --summary-export summary.json -e BASE_URL=http://INGRESS:PORT script.js\n")
	fmt.Fprintf(&b, "// then: prequalbench k6 import summary.json --algorithm LABEL --scenario %s\n", s.Name)
	b.WriteString("// (with the --duration-scale this script was exported with, if any). The JSON\n")
	b.WriteString("// handleSummary(data) is given imports too. For N runners, split the load with\n")
	b.WriteString("// k6's --execution-segment and import the N summaries together. k6 times each\n")
	b.WriteString("// request from its actual send and leaves DNS and connect time out, so the\n")
	b.WriteString("// import is an approximation.\n")
	b.WriteString("import http from 'k6/http';\n\n")
	fmt.Fprintf(&b, "const BASE = __ENV.BASE_URL || %s;\n", base)
	fmt.Fprintf(&b, "const ROUTES = %s;\n", rb)
	b.WriteString("const TOTAL = ROUTES.reduce((s, r) => s + r.weight, 0);\n\n")
	fmt.Fprintf(&b, "export const options = %s;\n\n", ob)
	b.WriteString("export default function () {\n")
	b.WriteString("  let x = Math.random() * TOTAL;\n")
	b.WriteString("  let r = ROUTES[ROUTES.length - 1];\n")
	b.WriteString("  for (const c of ROUTES) { x -= c.weight; if (x < 0) { r = c; break; } }\n")
	fmt.Fprintf(&b, "  http.get(BASE + r.path, { headers: r.host ? { Host: r.host } : {}, timeout: %q, tags: { route: r.name } });\n", dur(timeout))
	b.WriteString("}\n")
	_, err = io.WriteString(w, b.String())
	return err
}
