// Package scenario is the schema of a benchmark scenario: the workload
// (routes and their backend groups), the load (open-loop phases or
// closed-loop users), the protocol (algorithms, repetitions, warmup, reset,
// order) and the ingress (replicas and policy parameters).
//
// A scenario is YAML. Decode with Parse, which rejects unknown fields and
// wrong types, applies the defaults (in one place, applyDefaults) and runs
// Validate, which returns every problem at once, each naming the field path
// and what is allowed.
package scenario

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prequalbench/prequalbench/load"
)

// Scenario is one benchmark scenario.
type Scenario struct {
	// Name identifies the scenario (lower case letters, digits and '-').
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Workload    Workload `json:"workload"`
	Load        Load     `json:"load"`
	Protocol    Protocol `json:"protocol"`
	Ingress     Ingress  `json:"ingress"`
	// Simulation tunes --env sim (see Simulation); real environments
	// reject it.
	Simulation *Simulation `json:"simulation,omitempty"`
	// Churn scales a backend group up and down during the measured
	// window (see Churn); environments that cannot scale reject it.
	Churn *Churn `json:"churn,omitempty"`
}

// Workload is what the ingress routes to.
type Workload struct {
	Routes []Route `json:"routes"`
}

// Route is one ingress route and the backends behind it.
type Route struct {
	// Name is the route key (the routes-file name on the local env).
	Name string `json:"name"`
	// Host is the Host header to match; empty matches any host.
	Host string `json:"host,omitempty"`
	// Path is the path prefix (or exact path) routed; default /work.
	Path string `json:"path,omitempty"`
	// PathType is Prefix (default) or Exact.
	PathType string `json:"pathType,omitempty"`
	// Weight is the route's share of the load relative to the other
	// routes; default 1.
	Weight float64 `json:"weight,omitempty"`
	// Iterations is the work per request (?iterations=N); default 1000,
	// which is one service time.
	Iterations int `json:"iterations,omitempty"`
	// Backends are the groups of replicas behind the route.
	Backends []BackendGroup `json:"backends"`
}

// BackendGroup is a set of identical backend replicas.
type BackendGroup struct {
	// Name is unique across the scenario (it names Deployments).
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
	// Mode is cpu, io (default), sleep (the seed's unlimited fixed sleep)
	// or cpu-share (replicas sharing machines' CPU with antagonists, see
	// CPUShare; --env sim and --env local).
	Mode string `json:"mode,omitempty"`
	// ServiceTime is the mean service time of 1000 iterations (io, sleep).
	ServiceTime Duration `json:"serviceTime,omitempty"`
	// Distribution of service times: fixed (default), exp or normal
	// (N(mu, sigma=mu) truncated at 0, as in the paper).
	Distribution string `json:"distribution,omitempty"`
	// Slow multiplies the work; default 1.
	Slow float64 `json:"slow,omitempty"`
	// Concurrency is the number of requests served at once (0 =
	// unlimited); default 4. The rest wait FIFO.
	Concurrency *int `json:"concurrency,omitempty"`
	// QueueLimit caps waiting requests (overflow answers 503); default 1024.
	QueueLimit *int `json:"queueLimit,omitempty"`
	// CPURounds is the hash rounds per iteration in cpu mode; default 1.
	CPURounds int `json:"cpuRounds,omitempty"`
	// Antagonists drop the group's capacity on a schedule.
	Antagonists []Antagonist `json:"antagonists,omitempty"`
	// CPUShare places the replicas on machines (mode cpu-share only; there
	// concurrency caps the requests served at once, default 0 = all).
	CPUShare *CPUShare `json:"cpuShare,omitempty"`
	// ProbeFault is none (default), timeout, 500, malformed or stale_timestamp.
	ProbeFault string `json:"probeFault,omitempty"`
	// WorkFault is none (default), fail_fast or hang.
	WorkFault string `json:"workFault,omitempty"`
	// LatencyWindow is the age after which the backend's latency samples
	// stop counting in its probe answers; empty keeps the backend's
	// default (0s: by count, each RIF bucket's newest samples however old).
	// A replica whose samples have all aged out reports an unknown latency.
	LatencyWindow Duration `json:"latencyWindow,omitempty"`
	// LatencyIdleMaxAge is the backend's --latency-idle-max-age: with the
	// estimate by count, an idle replica's samples older than it do not
	// count, so a replica avoided since a slow spell is explored again.
	// Empty keeps the backend's default (5s); 0s turns it off.
	LatencyIdleMaxAge Duration `json:"latencyIdleMaxAge,omitempty"`
}

// CPUShare says how cpu-share replicas sit on machines: each has Share
// of its machine's CPU, PerMachine of them per machine, may borrow the
// machine's idle CPU (limit soft, default) or not (hard), and runs one
// request on at most one of Cores cores (0: no such cap). Antagonist is
// the co-tenant on each machine. sim/README.md has the model.
type CPUShare struct {
	Share      float64      `json:"share"`
	PerMachine int          `json:"perMachine"`
	Limit      string       `json:"limit,omitempty"`
	Cores      int          `json:"cores,omitempty"`
	Antagonist *MachineLoad `json:"antagonist,omitempty"`
}

// MachineLoad is an antagonist's CPU demand as a fraction of its machine:
// Levels[k] held for Hold[k], in a cycle staggered across machines, or,
// with Random, for exponential times of mean Hold[k].
type MachineLoad struct {
	Levels []float64  `json:"levels"`
	Hold   []Duration `json:"hold"`
	Random bool       `json:"random,omitempty"`
}

// Antagonist drops a replica's capacity to Capacity slots for For, starting
// At after the backend starts, and again Every after that (if set).
type Antagonist struct {
	At       Duration `json:"at"`
	For      Duration `json:"for"`
	Capacity int      `json:"capacity"`
	Every    Duration `json:"every,omitempty"`
}

// Load is the offered load: open-loop phases, or closed-loop users.
type Load struct {
	// Open lists the open-loop phases, run one after the other.
	Open []Phase `json:"open,omitempty"`
	// Users is the number of closed-loop virtual users (instead of Open).
	Users int `json:"users,omitempty"`
	// Duration of a closed-loop run.
	Duration Duration `json:"duration,omitempty"`
	// Timeout of one request; default 10s.
	Timeout Duration `json:"timeout,omitempty"`
	// MaxWorkers caps concurrent open-loop requests; 0 lets the load
	// engine choose.
	MaxWorkers int `json:"maxWorkers,omitempty"`
	// Connections caps idle connections per ingress replica; 0 lets the
	// load engine choose.
	Connections int `json:"connections,omitempty"`
	// MaxConnections caps the load generator's open connections, in total
	// over all ingress replicas (split evenly between them); sends beyond
	// it wait for a connection (their latency still counts from the
	// intended send time, and run.json counts them in conn_cap_bound).
	// 0 sizes the cap from the scenario (see ConnectionCap) so that it
	// binds only when the run is failing anyway. Without a cap an
	// overloaded open loop opens a connection for every overdue send, and
	// the connection storm, not the policy, decides the outcome.
	MaxConnections int `json:"maxConnections,omitempty"`
	// Generators is where the load comes from on a cluster (kind, kube):
	// N >= 1 sends it from N generator Jobs inside the cluster to the
	// ingress Service, their accounting merged exactly; 0 sends it from
	// the machine running the campaign, through the published NodePort,
	// a LoadBalancer or --proxy-url. Unset: 1 on kind, 0 on kube (see
	// GeneratorsFor); --generators overrides it. Other environments send
	// the load from the campaign's machine whatever it says.
	Generators *int `json:"generators,omitempty"`
}

// MaxGenerators bounds load.generators and --generators.
const MaxGenerators = 1000

// CheckGenerators says whether the load's bounds split over n generator
// Jobs: each needs at least one of the load workers (load.maxWorkers, or
// the engine's default) and one connection under the connection cap
// (ConnectionCap), or the merged bound would exceed the run's.
func (l Load) CheckGenerators(n int) error {
	if n <= 1 {
		return nil
	}
	workers := l.MaxWorkers
	if workers <= 0 {
		workers = load.DefaultMaxWorkers
	}
	if n > workers {
		return fmt.Errorf("%d generators cannot split %d load workers (load.maxWorkers): use at most %d", n, workers, workers)
	}
	if c := l.ConnectionCap(); n > c {
		return fmt.Errorf("%d generators cannot split the cap of %d connections (load.maxConnections, or sized from the peak rate and timeout): use at most %d generators or raise load.maxConnections", n, c, c)
	}
	return nil
}

// GeneratorsFor is the number of in-cluster generator Jobs a campaign on
// environment envName runs with: load.generators when set, else 1 on
// kind (its node runs beside the CLI, and the load then starts inside
// the cluster as on a real one) and 0 elsewhere (kube: from the CLI's
// machine unless asked; local, external and sim have no cluster).
func (l Load) GeneratorsFor(envName string) int {
	if envName != "kind" && envName != "kube" {
		return 0
	}
	if l.Generators != nil {
		return *l.Generators
	}
	if envName == "kind" {
		return 1
	}
	return 0
}

// Phase kinds.
const (
	PhaseConstant = "constant"
	PhaseRamp     = "ramp"
	PhaseSteps    = "steps"
	PhaseBurst    = "burst"
)

// Phase is one open-loop phase.
type Phase struct {
	// Kind is constant, ramp, steps or burst.
	Kind     string   `json:"kind"`
	Duration Duration `json:"duration"`
	// Rate (constant) in requests per second.
	Rate float64 `json:"rate,omitempty"`
	// From and To (ramp, steps): the rate goes linearly (ramp) or in Steps
	// equal steps (steps) from From to To.
	From  float64 `json:"from,omitempty"`
	To    float64 `json:"to,omitempty"`
	Steps int     `json:"steps,omitempty"`
	// High, Low, HighFor, LowFor (burst): High rps for HighFor, then Low
	// rps for LowFor, repeated for Duration.
	High    float64  `json:"high,omitempty"`
	Low     float64  `json:"low,omitempty"`
	HighFor Duration `json:"highFor,omitempty"`
	LowFor  Duration `json:"lowFor,omitempty"`
}

// Reset modes.
const (
	ResetAdmin   = "admin"
	ResetRestart = "restart"
)

// Orders of the plan.
const (
	OrderShuffle    = "shuffle"
	OrderRotate     = "rotate"
	OrderSequential = "sequential"
)

// Protocol is how the algorithms are compared.
type Protocol struct {
	// Algorithms compared; default prequal, round-robin, least-request.
	Algorithms []string `json:"algorithms,omitempty"`
	// Sweep runs an algorithm parameter at several values, each as a
	// variant beside the algorithms: "prequal:qrif=0.5,0.7,0.84,0.95,1"
	// adds prequal{qrif=0.5} ... prequal{qrif=1} to Algorithms (the
	// resolved scenario lists them) and the report adds a Sweeps table and
	// a plot of each headline metric against the parameter. Each entry is
	// ALGORITHM:PARAMETER=V1,V2,... (SweepSyntax) with at least two
	// distinct values; ALGORITHM may be a variant fixing other parameters
	// ("prequal{probes=2}:qrif=0.5,0.9"); one sweep per algorithm and
	// parameter. --sweep replaces this list. The values are not tested
	// against one another: each variant is compared with the reference
	// only (README, "Parameter sweeps").
	Sweep []string `json:"sweep,omitempty"`
	// Reference is the algorithm the others are compared against;
	// default prequal if present, else the first algorithm.
	Reference string `json:"reference,omitempty"`
	// PrimaryMetric is the metric verdicts are made on (PrimaryMetrics);
	// default pessimistic_p99_ms. Every other metric is descriptive.
	PrimaryMetric string `json:"primaryMetric,omitempty"`
	// Reps is the number of repetitions of every algorithm; default the
	// fewest that can reach a verdict on the primary metric (RepsForVerdict),
	// at least 3.
	Reps int `json:"reps,omitempty"`
	// Warmup before each measured window (discarded); default 10s.
	Warmup *Duration `json:"warmup,omitempty"`
	// Cooldown after each measured window; default 2s.
	Cooldown *Duration `json:"cooldown,omitempty"`
	// Reset is admin (default: reset through the admin API) or restart
	// (restart the ingress processes).
	Reset string `json:"reset,omitempty"`
	// Order is shuffle (default: a seeded shuffle per rep), rotate or
	// sequential (not interleaved; drift then biases the comparison).
	Order string `json:"order,omitempty"`
	// Seed drives the plan and the load; default 1.
	Seed uint64 `json:"seed,omitempty"`
	// HostBound marks a scenario that measures what the host itself can
	// do: CPU-bound backends on the campaign's own machine under a closed
	// loop, where every policy saturates the CPU and what a policy burns
	// (its probes) comes straight out of the backends' throughput. The
	// run-validity check then does not count busy host seconds against a
	// run (it would reject every run); the other checks stay.
	HostBound bool `json:"hostBound,omitempty"`
}

// Ingress is the ingress deployment and its policy parameters.
type Ingress struct {
	// Replicas of the ingress; the load is spread evenly over them. Default 1.
	Replicas int `json:"replicas,omitempty"`
	// Policy holds Prequal's parameters; unset ones keep the ingress's
	// defaults.
	Policy Policy `json:"policy,omitempty"`
	// ProbeTimeout, ProbeWorkers, ProbeQueueSize tune the prober.
	ProbeTimeout   Duration `json:"probeTimeout,omitempty"`
	ProbeWorkers   int      `json:"probeWorkers,omitempty"`
	ProbeQueueSize int      `json:"probeQueueSize,omitempty"`
	// Retry is the ingress's --retry: besides a failed connect, which the
	// ingress always retries once on another endpoint, it also retries
	// idempotent requests without a body whose exchange failed before
	// the response headers.
	Retry bool `json:"retry,omitempty"`
	// Routing is the API the routes are declared in: RoutingIngress
	// (empty means it) or RoutingGateway (an HTTPRoute per route behind a
	// Gateway of the ingress's GatewayClass).
	Routing string `json:"routing,omitempty"`
}

// Routing APIs (Ingress.Routing).
const (
	RoutingIngress = "ingress"
	RoutingGateway = "gateway"
)

// UsesGateway reports whether the routes are HTTPRoutes.
func (in Ingress) UsesGateway() bool { return in.Routing == RoutingGateway }

// Policy is Prequal's parameters (flags --prequal-*).
type Policy struct {
	ProbesPerQuery    *float64 `json:"probesPerQuery,omitempty"`
	PoolSize          int      `json:"poolSize,omitempty"`
	MaxAge            Duration `json:"maxAge,omitempty"`
	QRIF              *float64 `json:"qrif,omitempty"`
	RemovePerQuery    *float64 `json:"removePerQuery,omitempty"`
	Delta             *float64 `json:"delta,omitempty"`
	IdleProbeInterval Duration `json:"idleProbeInterval,omitempty"`
	MinProbes         *int     `json:"minProbes,omitempty"`
	LatencyMemory     Duration `json:"latencyMemory,omitempty"`
}

// Duration is a Go duration string ("30s", "500ms"). It stays a string in
// the schema so that Validate can name the field of a bad value.
type Duration string

// Std returns the parsed duration, 0 when empty or invalid (Validate
// reports invalid ones).
func (d Duration) Std() time.Duration {
	v, err := time.ParseDuration(string(d))
	if err != nil {
		return 0
	}
	return v
}

// Dur formats d as a Duration.
func Dur(d time.Duration) Duration { return Duration(d.String()) }

func ptr[T any](v T) *T { return &v }

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
