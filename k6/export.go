// Package k6 bridges to k6 without linking it (go.k6.io/k6 is AGPL): it
// writes a k6 script that reproduces a scenario's load, and reads k6's
// --summary-export JSON into the run accounting, saying what k6's
// summary cannot carry (it has trend estimates, not histograms).
package k6

import (
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
	if w := s.Protocol.Warmup.Std(); w > 0 {
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

// dur formats d for k6 ("1500ms").
func dur(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }

// route is one weighted route of the script.
type route struct {
	Path   string  `json:"path"`
	Host   string  `json:"host,omitempty"`
	Weight float64 `json:"weight"`
}

// Export writes a k6 script for s: the executors above, the routes
// picked by weight with their Host headers, the request timeout, and
// thresholds that make k6's summary carry the window's own metrics
// (tagged phase:window; successes via expected_response:true). The
// target is $BASE_URL (default baseURL).
func Export(w io.Writer, s *scenario.Scenario, baseURL string) error {
	ex := Executors(s)
	scen := map[string]Executor{}
	for _, e := range ex {
		scen[e.Name] = e
	}
	var routes []route
	for _, r := range s.Workload.Routes {
		routes = append(routes, route{Path: fmt.Sprintf("%s?iterations=%d", r.Path, r.Iterations), Host: r.Host, Weight: r.Weight})
	}
	win := "{phase:" + PhaseWindow + "}"
	options := map[string]any{
		"discardResponseBodies": true,
		"summaryTrendStats":     TrendStats,
		"scenarios":             scen,
		// Thresholds that always pass: they make the summary export the
		// window's sub-metrics.
		"thresholds": map[string][]string{
			"http_reqs" + win:         {"count>=0"},
			"http_req_failed" + win:   {"rate>=0"},
			"http_req_duration" + win: {"max>=0"},
			"http_req_duration{phase:" + PhaseWindow + ",expected_response:true}": {"max>=0"},
		},
	}
	ob, err := json.MarshalIndent(options, "", "  ")
	if err != nil {
		return err
	}
	rb, err := json.Marshal(routes)
	if err != nil {
		return err
	}
	timeout := s.Load.Timeout.Std()
	var b strings.Builder
	fmt.Fprintf(&b, "// k6 script written by `prequalbench campaign export --k6` for scenario %s.\n", s.Name)
	b.WriteString("// Run: k6 run --summary-export summary.json -e BASE_URL=http://INGRESS:PORT script.js\n")
	fmt.Fprintf(&b, "// then: prequalbench k6 import summary.json --algorithm LABEL --scenario %s\n", s.Name)
	b.WriteString("// (with the --duration-scale this script was exported with, if any). k6 times\n")
	b.WriteString("// each request from its actual send and summarises trends, so the import is\n")
	b.WriteString("// an approximation.\n")
	b.WriteString("import http from 'k6/http';\n\n")
	fmt.Fprintf(&b, "const BASE = __ENV.BASE_URL || %q;\n", strings.TrimSuffix(baseURL, "/"))
	fmt.Fprintf(&b, "const ROUTES = %s;\n", rb)
	b.WriteString("const TOTAL = ROUTES.reduce((s, r) => s + r.weight, 0);\n\n")
	fmt.Fprintf(&b, "export const options = %s;\n\n", ob)
	b.WriteString("export default function () {\n")
	b.WriteString("  let x = Math.random() * TOTAL;\n")
	b.WriteString("  let r = ROUTES[ROUTES.length - 1];\n")
	b.WriteString("  for (const c of ROUTES) { x -= c.weight; if (x < 0) { r = c; break; } }\n")
	fmt.Fprintf(&b, "  http.get(BASE + r.path, { headers: r.host ? { Host: r.host } : {}, timeout: %q });\n", dur(timeout))
	b.WriteString("}\n")
	_, err = io.WriteString(w, b.String())
	return err
}
