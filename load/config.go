package load

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/openloop"
)

// Phase kinds of the open loop (openloop's).
const (
	KindConstant = openloop.KindConstant
	KindRamp     = openloop.KindRamp
	KindSteps    = openloop.KindSteps
	KindBurst    = openloop.KindBurst
)

// Defaults applied by Run when the field is zero.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultMaxWorkers  = 10000
	DefaultConnections = 10000
	// MaxRate bounds any phase rate, so the schedule's interval stays well
	// above a nanosecond.
	MaxRate = 1e6
)

// Target is one destination of the load. Each request picks a target with
// probability proportional to its Weight, from a seeded source.
type Target struct {
	URL string
	// Host, when set, overrides the Host header (routing by virtual host
	// while connecting to URL's address).
	Host   string
	Method string // default GET
	Body   []byte
	Header http.Header
	// Weight is the relative share of requests; 0 counts as 1.
	Weight float64
}

// Phase is one segment of an open-loop schedule.
type Phase = openloop.Phase

// Config describes one load run: open loop when Open is set, closed loop
// when Users > 0.
type Config struct {
	Targets []Target
	// Open lists the open-loop phases, run in sequence.
	Open []Phase
	// Users is the number of closed-loop users, each looping
	// request → response → ThinkTime for Duration.
	Users     int
	Duration  time.Duration
	ThinkTime time.Duration
	// Timeout bounds each request (default DefaultTimeout).
	Timeout time.Duration
	// MaxWorkers bounds concurrent open-loop requests (default
	// DefaultMaxWorkers). When every worker is busy, sends wait and are
	// counted late; their latency still runs from the intended time.
	MaxWorkers int
	// Connections is the number of idle keep-alive connections kept per
	// host by NewClient (default DefaultConnections).
	Connections int
	// MaxConnections caps the connections per host opened by NewClient
	// (0 = no cap, as in vegeta). Requests beyond it wait inside the
	// client for a free connection, their latency still running from the
	// intended time. A cap stops a CPU-starved sender from falling into a
	// storm of new connections, each making it later still.
	MaxConnections int
	Seed           uint64
	// Client, when set, is used instead of a fresh NewClient(cfg); pass
	// the same one to a warmup run and the measured run to reuse
	// connections.
	Client *http.Client
	// OnSecond, when set, is called once per elapsed second with that
	// second's row, from a goroutine of Run; warmup seconds come with
	// Second.Warmup set and are not part of the series.
	OnSecond func(Second)

	// Warmup is load offered before the measured window, in the same
	// schedule and without a pause, so the window starts from the state
	// the warmup built (queues, pools, estimates) rather than from drained
	// ones. Requests whose intended send time falls in the warmup are sent
	// and answered but not counted. Open loop: a constant WarmupRate;
	// closed loop: the same users, running through.
	Warmup     time.Duration
	WarmupRate float64
	// OnWindowStart and OnWindowEnd, when set, are called once each, from
	// a goroutine of Run while the load goes on, when the clock reaches
	// the first and the last intended send time of the window; Run returns
	// only after they did. A cancelled run may skip them.
	OnWindowStart func()
	OnWindowEnd   func()
	// SampleCPU, when set, is called at the start of the window and at
	// the end of each of its seconds; each call returns the CPU use since
	// the previous one, which goes into that second's row (Second.CPU).
	SampleCPU func() *CPU

	// Start, when set, is the schedule's time zero: Run waits for it, or,
	// when it has passed, sends the hits already due at once (late, their
	// latency counted from their intended times). Generators that share a
	// start then share their seconds, whenever each one got going.
	Start time.Time

	// Shard and Shards split one run over Shards generators (in-cluster
	// load generator pods): this one sends only the open-loop hits k
	// (numbered over the whole schedule, warmup included) with
	// k % Shards == Shard, and runs only the closed-loop users u with
	// u % Shards == Shard. Every generator draws the target of every hit,
	// so the union of the shards is exactly the hits and targets one
	// generator would send, and Merge of their Results accounts for the
	// same requests. Shards 0 or 1 is the whole run.
	Shard, Shards int
	// SecondHistograms keeps each second's success histogram in its row
	// (Second.Histogram), so per-second percentiles of several
	// generators merge exactly.
	SecondHistograms bool
}

// mine reports whether hit or user k belongs to this shard.
func (c Config) mine(k uint64) bool {
	return c.Shards <= 1 || k%uint64(c.Shards) == uint64(c.Shard)
}

// CPU is the processor use over one second, in percent: HostIdle of all
// CPUs (100 = idle), the others of one CPU (150 = one and a half cores).
// A NaN field was not measurable.
type CPU struct {
	HostIdle, Generator, Ingress, Backends float64
}

// MaxTimeout is the longest request timeout Validate accepts: half the
// latency histogram's ceiling, leaving as much again for send lag before a
// latency (timed from the intended send) would be clamped.
const MaxTimeout = time.Duration(artifacts.HistogramHighest) * time.Microsecond / 2

// Closed reports whether c describes a closed loop.
func (c Config) Closed() bool { return c.Users > 0 && len(c.Open) == 0 }

// Window returns the planned length of the measured window: the sum of
// the phases (open loop) or Duration (closed loop), the warmup excluded.
func (c Config) Window() time.Duration {
	if c.Closed() {
		return c.Duration
	}
	var d time.Duration
	for _, p := range c.Open {
		d += p.Duration
	}
	return d
}

// openPhases is the whole open-loop schedule: the warmup (when there is
// one) as a constant first phase, then the window's phases.
func (c Config) openPhases() []Phase {
	if c.Warmup <= 0 {
		return c.Open
	}
	return append([]Phase{{Kind: KindConstant, Rate: c.WarmupRate, Duration: c.Warmup}}, c.Open...)
}

// Validate checks c and returns every problem found, each naming the field.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("load: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if len(c.Targets) == 0 {
		bad("targets", "must list at least one target")
	}
	for i, t := range c.Targets {
		f := fmt.Sprintf("targets[%d]", i)
		u, err := url.Parse(t.URL)
		switch {
		case t.URL == "":
			bad(f+".url", "must be set")
		case err != nil:
			bad(f+".url", "must be a valid URL: %v", err)
		case u.Scheme != "http" && u.Scheme != "https":
			bad(f+".url", "scheme must be http or https, got %q", u.Scheme)
		case u.Host == "":
			bad(f+".url", "must name a host")
		}
		if t.Method != "" && !validMethod(t.Method) {
			bad(f+".method", "must be an HTTP method token, got %q", t.Method)
		}
		if strings.ContainsAny(t.Host, " \t\r\n/") {
			bad(f+".host", "must be a host[:port], got %q", t.Host)
		}
		if !(t.Weight >= 0) || math.IsInf(t.Weight, 0) {
			bad(f+".weight", "must be a finite number >= 0, got %v", t.Weight)
		}
	}
	switch {
	case len(c.Open) > 0 && c.Users > 0:
		bad("users", "must be 0 with open-loop phases (choose open or closed loop)")
	case len(c.Open) == 0 && c.Users <= 0:
		bad("open", "must list phases, or set users > 0 for a closed loop")
	}
	if c.Users < 0 {
		bad("users", "must be >= 0, got %d", c.Users)
	}
	if c.Closed() {
		if c.Duration <= 0 {
			bad("duration", "must be > 0 for a closed loop, got %v", c.Duration)
		}
		if c.ThinkTime < 0 {
			bad("think_time", "must be >= 0, got %v", c.ThinkTime)
		}
	} else {
		if c.Duration != 0 {
			bad("duration", "only for a closed loop; open-loop phases carry their own durations")
		}
		if c.ThinkTime != 0 {
			bad("think_time", "only for a closed loop")
		}
	}
	for i, p := range c.Open {
		errs = append(errs, validatePhase(p, fmt.Sprintf("open[%d]", i))...)
	}
	if c.Timeout < 0 {
		bad("timeout", "must be >= 0 (0 = %v), got %v", DefaultTimeout, c.Timeout)
	}
	if c.Timeout > MaxTimeout {
		bad("timeout", "must be <= %v (half the %v latency histogram ceiling, so late sends are not clamped), got %v",
			MaxTimeout, 2*MaxTimeout, c.Timeout)
	}
	if c.Warmup < 0 {
		bad("warmup", "must be >= 0, got %v", c.Warmup)
	}
	switch {
	case c.Closed() && c.WarmupRate != 0:
		bad("warmup_rate", "only for an open loop (closed-loop users run through the warmup)")
	case !c.Closed() && c.Warmup > 0 && !(c.WarmupRate > 0 && c.WarmupRate <= MaxRate):
		bad("warmup_rate", "must be > 0 and <= %v requests/s with a warmup, got %v", MaxRate, c.WarmupRate)
	case !c.Closed() && c.Warmup == 0 && c.WarmupRate != 0:
		bad("warmup_rate", "must be 0 without a warmup, got %v", c.WarmupRate)
	}
	if c.MaxWorkers < 0 {
		bad("max_workers", "must be >= 0 (0 = %d), got %d", DefaultMaxWorkers, c.MaxWorkers)
	}
	if c.MaxConnections < 0 {
		bad("max_connections", "must be >= 0 (0 = no cap), got %d", c.MaxConnections)
	}
	if c.Shards < 0 || c.Shard < 0 || (c.Shards > 0 && c.Shard >= c.Shards) || (c.Shards == 0 && c.Shard != 0) {
		bad("shard", "want 0 <= shard < shards, got shard %d of %d", c.Shard, c.Shards)
	}
	if c.Connections < 0 {
		bad("connections", "must be >= 0 (0 = %d), got %d", DefaultConnections, c.Connections)
	}
	return errors.Join(errs...)
}

// validatePhase checks p, naming its fields under f.
func validatePhase(p Phase, f string) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("load: %s.%s: %s", f, field, fmt.Sprintf(format, args...)))
	}
	rate := func(field string, v float64, zeroOK bool) {
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			bad(field, "must be a finite rate, got %v", v)
		case v > MaxRate:
			bad(field, "must be <= %v requests/s, got %v", MaxRate, v)
		case zeroOK && v < 0:
			bad(field, "must be >= 0, got %v", v)
		case !zeroOK && v <= 0:
			bad(field, "must be > 0, got %v", v)
		}
	}
	unused := func(field string, set bool) {
		if set {
			bad(field, "not used by kind %q", p.Kind)
		}
	}
	if p.Duration <= 0 {
		bad("duration", "must be > 0, got %v", p.Duration)
	}
	var usesRate, usesFromTo, usesSteps, usesBurst bool
	switch p.Kind {
	case KindConstant:
		usesRate = true
		rate("rate", p.Rate, false)
	case KindRamp:
		usesFromTo = true
		rate("from", p.From, false)
		rate("to", p.To, false)
	case KindSteps:
		usesFromTo, usesSteps = true, true
		rate("from", p.From, false)
		rate("to", p.To, false)
		if p.Steps < 2 {
			bad("steps", "must be >= 2, got %d", p.Steps)
		} else if p.Duration > 0 && p.Duration/time.Duration(p.Steps) < time.Millisecond {
			bad("steps", "each step must last at least 1ms, got %d steps over %v", p.Steps, p.Duration)
		}
	case KindBurst:
		usesBurst = true
		rate("high", p.High, false)
		rate("low", p.Low, true)
		if p.HighFor <= 0 {
			bad("high_for", "must be > 0, got %v", p.HighFor)
		}
		if p.LowFor <= 0 {
			bad("low_for", "must be > 0, got %v", p.LowFor)
		}
	default:
		bad("kind", "must be one of %s, %s, %s, %s; got %q", KindConstant, KindRamp, KindSteps, KindBurst, p.Kind)
		return errs
	}
	if !usesRate {
		unused("rate", p.Rate != 0)
	}
	if !usesFromTo {
		unused("from", p.From != 0)
		unused("to", p.To != 0)
	}
	if !usesSteps {
		unused("steps", p.Steps != 0)
	}
	if !usesBurst {
		unused("high", p.High != 0)
		unused("low", p.Low != 0)
		unused("high_for", p.HighFor != 0)
		unused("low_for", p.LowFor != 0)
	}
	return errs
}

// validMethod reports whether m is an RFC 9110 token.
func validMethod(m string) bool {
	for _, r := range m {
		if r >= 0x80 || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) || r == 0x7f {
			return false
		}
	}
	return m != ""
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxWorkers == 0 {
		c.MaxWorkers = DefaultMaxWorkers
	}
	if c.Connections == 0 {
		c.Connections = DefaultConnections
	}
	return c
}
