package loadbalancer

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Config holds the parameters of every policy. Each policy reads only its own
// section; the zero value is not valid, start from DefaultConfig.
type Config struct {
	Prequal  PrequalConfig  `json:"prequal"`
	PeakEWMA PeakEWMAConfig `json:"peak_ewma"`
	P2C      P2CConfig      `json:"p2c"`
	WRR      WRRConfig      `json:"wrr"`
	YARP     YARPConfig     `json:"yarp_po2c"`
	Linear   LinearConfig   `json:"linear"`
	C3       C3Config       `json:"c3"`
	Sync     SyncConfig     `json:"prequal_sync"`
	EWMA     EWMAConfig     `json:"ewma"`
}

// WRRConfig holds gRPC weighted_round_robin's knobs (gRFC A58), with its
// defaults.
type WRRConfig struct {
	// Penalty is error_utilization_penalty: weight = qps / (utilization +
	// penalty·eps/qps).
	Penalty float64 `json:"penalty"`
	// Blackout is how long a weight must have been reported before it is
	// used (an endpoint's first reports are noisy).
	Blackout time.Duration `json:"blackout"`
	// Expiry drops a weight not refreshed for this long.
	Expiry time.Duration `json:"expiry"`
	// Period is both the per-endpoint probe period (the load reports)
	// and how often the scheduler's weights are recomputed.
	Period time.Duration `json:"period"`
}

// YARPConfig holds the YARP-Po2C baseline's knob.
type YARPConfig struct {
	// Poll is how often each endpoint's RIF is polled (the paper: 500 ms,
	// 30x faster than YARP's default).
	Poll time.Duration `json:"poll"`
}

// LinearConfig holds the Linear rule's weight (see linearRule).
type LinearConfig struct {
	// Weight is the RIF coefficient: score = Weight·RIF + latency/a, a
	// the processing time at one request in flight (see linearRule); 1 is
	// the paper's equal weighting.
	Weight float64 `json:"weight"`
}

// C3Config holds C3's knobs (Suresh et al., NSDI '15).
type C3Config struct {
	// Clients is n in the concurrency compensation q̂ = 1 + os·n + q̄:
	// how many clients (ingress replicas) share the servers. The ingress
	// takes it from --c3-clients, which the campaign sets to the
	// scenario's ingress replicas; the simulator uses its clients.
	Clients int `json:"clients"`
	// Alpha is the EWMAs' weight of the newest sample (C3's Cassandra
	// ScoreTracker: 0.9).
	Alpha float64 `json:"alpha"`
}

// SyncConfig holds synchronous Prequal's knobs (the paper's sync mode).
type SyncConfig struct {
	// D is the probes sent per query; the pick waits for D−1 answers, so
	// D >= 2 (the paper's d; with 1 the pick would be the one replica
	// probed, a random pick that waited for a probe).
	D int `json:"d"`
	// Timeout bounds the wait; the pick then uses what has answered (the
	// paper: 1 ms at Google, 3 ms for YouTube Homepage).
	Timeout time.Duration `json:"timeout"`
}

// EWMAConfig holds ingress-nginx's EWMA balancer's knob.
type EWMAConfig struct {
	// Decay is DECAY_TIME: weight e^(−Δt/Decay).
	Decay time.Duration `json:"decay"`
}

// P2CConfig holds the power-of-d-choices baseline's knob.
type P2CConfig struct {
	// Choices is d, the endpoints drawn (without replacement) per pick;
	// the one with the fewest requests in flight wins. 2 is Envoy's
	// LEAST_REQUEST default.
	Choices int `json:"choices"`
}

// PrequalConfig holds Prequal's knobs, named after the paper (§4).
type PrequalConfig struct {
	// ProbesPerQuery is r_probe: probes triggered by each query. Fractional
	// values are rounded per query to floor or ceil so the long-run mean is
	// exact. Probe targets of one query are distinct (at most n).
	ProbesPerQuery float64 `json:"probes_per_query"`
	// PoolSize is m, the most probes kept; the oldest is evicted on overflow.
	PoolSize int `json:"pool_size"`
	// MaxAge is how long a probe stays usable, counted from its local
	// receipt time.
	MaxAge time.Duration `json:"max_age"`
	// Delta is δ in Eq. 1, the net rate at which the pool should fill.
	Delta float64 `json:"delta"`
	// RemovePerQuery is r_remove: probes removed per query, alternating
	// oldest and worst. Fractional values accumulate (0.25 = one removal
	// every fourth query).
	RemovePerQuery float64 `json:"remove_per_query"`
	// QRIF is the quantile of recent probe RIFs above which a probe is hot.
	QRIF float64 `json:"q_rif"`
	// MinProbes is the fewest usable probes for an HCL choice; with fewer,
	// the pick is uniformly random and counted as a fallback.
	MinProbes int `json:"min_probes"`
	// IdleProbeInterval is the minimum probe rate: when no query has
	// triggered a probe for this long, one idle probe is sent. 0 disables
	// idle probing.
	IdleProbeInterval time.Duration `json:"idle_probe_interval"`
	// RIFWindow is how many recent probe RIFs feed the Q_RIF quantile. It
	// must exceed PoolSize so the threshold is not just a pool member (which
	// would make "all probes hot" impossible).
	RIFWindow int `json:"rif_window"`
	// MaxReuse caps the reuse budget b_reuse of Eq. 1, which grows without
	// bound as n approaches m·r_probe/(r_probe − r_remove) from above (16,
	// as prequal-rs; near that pole the budget also rises by at most one
	// per replica, see reuseBudget).
	MaxReuse int `json:"max_reuse"`
	// LatencyMemory is how long the policy remembers a replica's last known
	// latency and uses it when the replica's probe reports none. It patches
	// backends whose estimate has a time window (--latency-window DUR): a
	// replica that gets little traffic (because it is slow) has its history
	// age out and would look "unknown" again and win on RIF. 0 (the
	// default) disables it: the backend's default estimate is recent by
	// count and forgets only while idle (see SlowMemory), and a memory that
	// ignores RIF held a fast
	// replica's idle latency while its queue grew (64-replica fleet
	// simulation with a 1 s window: p99 0.6 s without memory, 2.3 s with
	// 10 s).
	LatencyMemory time.Duration `json:"latency_memory"`
	// SlowMemory is how long, from its last known answer, a replica's last
	// known latency stands in when its probe reports none, if that latency
	// was learned idle (RIF <= 1) and was at least SlowFactor times the
	// median of the pool's fresh answers. The backend's idle max age makes
	// an idle replica answer "unknown" so that it is explored again;
	// exploring a replica far slower than the fleet costs a whole slow
	// request (C2's 16x pair, p99.9) and happens about once per SlowMemory
	// plus the backend's age, while one only somewhat slower is explored at
	// the backend's pace. 0 disables it.
	SlowMemory time.Duration `json:"slow_memory"`
	// SlowFactor is how many times the median of the pool's fresh answers
	// a remembered latency must be for SlowMemory to hold it. 6: C2's pair
	// is 16x; at 4 a 3x-slow group with wide service times (N(mu, mu))
	// had one replica held (picks max/min 110 in sim, against 4.9 at 6).
	SlowFactor float64 `json:"slow_factor"`
	// LatencyTolerance makes cold probes whose latencies are within this
	// fraction of the fastest one's a tie, broken by the lower RIF, then at
	// random. The paper picks the lowest latency outright; estimates from
	// real replicas differ by noise (sleeping 50 ms reads 50.1 on one and
	// 50.4 on another), and an exact ranking then sent most picks to the
	// replica that happened to read lowest until it turned hot (the seed's
	// C2 on loopback: fast-group max/min 41). 0 ranks exactly. With
	// ColdRIFWeight the tolerance applies to that key, not the latency.
	LatencyTolerance float64 `json:"latency_tolerance"`
	// ReuseLatency is how many requests' worth of latency (the fleet's
	// latency at RIF 1) each use adds to a reused probe's latency, beside
	// the paper's +1 RIF. The paper adds RIF only and says it would
	// ideally raise the latency too; 0 is the paper's rule, 1 (the
	// default) adds one request's worth (see the compensation in Pick).
	ReuseLatency float64 `json:"reuse_latency"`
	// ColdRIFWeight w ranks cold probes by latency·(1 + w·RIF) instead of
	// latency. The paper's rule (0) sends each request where it will be
	// fastest and ignores the delay it adds to the requests queued behind
	// it: on capacity-limited heterogeneous fleets the fast group runs
	// queued until its latency meets the slow group's, and the median
	// rises (p50 1.1-1.5x least-request's in sim). For an M/M/1 queue the
	// cost of one more arrival to everyone is the latency times (1 + queue
	// length), which w = 1 ranks by.
	ColdRIFWeight float64 `json:"cold_rif_weight,omitempty"`
	// CompletionRIF lowers a pool entry's RIF by one when a request of
	// this client to its replica finishes, as least-request's count does
	// behind one ingress. The paper's compensation only adds (+1 per use),
	// so an entry counts this client's requests long after they are done.
	// A request is taken off only if the entry counted it: in flight when
	// the answer arrived, or added by compensation (one that reached the
	// replica after it answered, picked before the answer arrived, is
	// taken off uncounted; RIF is floored at 0). Retries, random
	// fallbacks, timeouts and unknown-latency entries (RIF above 0 marks
	// an exploration) are left alone; compensation's latency is not undone.
	CompletionRIF bool `json:"completion_rif,omitempty"`
}

// PeakEWMAConfig holds the Linkerd/Finagle peak-EWMA baseline's knobs.
type PeakEWMAConfig struct {
	// Decay is τ: an estimate decays with weight e^(−Δt/τ).
	Decay time.Duration `json:"decay"`
	// DefaultRTT is the estimate of an endpoint with no observed latency.
	DefaultRTT time.Duration `json:"default_rtt"`
}

// DefaultConfig returns the paper's testbed defaults for Prequal and the
// linkerd2-proxy defaults for peak-EWMA.
//
// IdleProbeInterval is 100 ms: with MaxAge 1 s an idle route then keeps about
// ten live probes, so the first query after a quiet spell finds at least
// MinProbes and needs no fallback, at a cost of ten probes a second per route.
func DefaultConfig() Config {
	return Config{
		Prequal: PrequalConfig{
			ProbesPerQuery:    3,
			PoolSize:          16,
			MaxAge:            time.Second,
			Delta:             1,
			RemovePerQuery:    1,
			QRIF:              math.Exp2(-0.25),
			MinProbes:         2,
			IdleProbeInterval: 100 * time.Millisecond,
			RIFWindow:         64,
			MaxReuse:          16,
			LatencyMemory:     0,
			SlowMemory:        30 * time.Second,
			SlowFactor:        6,
			LatencyTolerance:  0.05,
			ReuseLatency:      1,
		},
		PeakEWMA: PeakEWMAConfig{
			Decay:      10 * time.Second,
			DefaultRTT: 30 * time.Millisecond,
		},
		P2C:    P2CConfig{Choices: 2},
		WRR:    WRRConfig{Penalty: 1, Blackout: 10 * time.Second, Expiry: 3 * time.Minute, Period: time.Second},
		YARP:   YARPConfig{Poll: 500 * time.Millisecond},
		Linear: LinearConfig{Weight: 1},
		C3:     C3Config{Clients: 1, Alpha: 0.9},
		Sync:   SyncConfig{D: 3, Timeout: 3 * time.Millisecond},
		EWMA:   EWMAConfig{Decay: 10 * time.Second},
	}
}

// Limits that keep a configuration sane; each is far beyond any useful value.
const (
	maxProbesPerQuery = 100
	maxPoolSize       = 4096
	maxRIFWindow      = 1 << 16
	maxReuseLimit     = 1 << 20
	maxRemovePerQuery = 100
	maxDelta          = 1000
	maxChoices        = 100
	maxSyncProbes     = 64
	maxReuseLatency   = 100
	maxColdRIFWeight  = 100
	maxSlowFactor     = 1000
)

// Validate reports every invalid field, each named with its allowed range.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, want string, got any) {
		errs = append(errs, fmt.Errorf("loadbalancer: %s must be %s, got %v", field, want, got))
	}
	p := c.Prequal
	if !(p.ProbesPerQuery > 0 && p.ProbesPerQuery <= maxProbesPerQuery) {
		bad("Prequal.ProbesPerQuery", fmt.Sprintf("in (0, %d]", maxProbesPerQuery), p.ProbesPerQuery)
	}
	if p.PoolSize < 1 || p.PoolSize > maxPoolSize {
		bad("Prequal.PoolSize", fmt.Sprintf("in [1, %d]", maxPoolSize), p.PoolSize)
	}
	if p.MaxAge <= 0 {
		bad("Prequal.MaxAge", "> 0", p.MaxAge)
	}
	if !(p.Delta >= 0 && p.Delta <= maxDelta) {
		bad("Prequal.Delta", fmt.Sprintf("in [0, %d]", maxDelta), p.Delta)
	}
	if !(p.RemovePerQuery >= 0 && p.RemovePerQuery <= maxRemovePerQuery) {
		bad("Prequal.RemovePerQuery", fmt.Sprintf("in [0, %d]", maxRemovePerQuery), p.RemovePerQuery)
	}
	if !(p.QRIF >= 0 && p.QRIF <= 1) {
		bad("Prequal.QRIF", "in [0, 1]", p.QRIF)
	}
	if !(p.ColdRIFWeight >= 0 && p.ColdRIFWeight <= maxColdRIFWeight) {
		bad("Prequal.ColdRIFWeight", fmt.Sprintf("in [0, %d]", maxColdRIFWeight), p.ColdRIFWeight)
	}
	if !(p.LatencyTolerance >= 0 && p.LatencyTolerance <= 1) {
		bad("Prequal.LatencyTolerance", "in [0, 1]", p.LatencyTolerance)
	}
	if !(p.ReuseLatency >= 0 && p.ReuseLatency <= maxReuseLatency) {
		bad("Prequal.ReuseLatency", fmt.Sprintf("in [0, %d]", maxReuseLatency), p.ReuseLatency)
	}
	if p.MinProbes < 1 || (p.PoolSize >= 1 && p.MinProbes > p.PoolSize) {
		bad("Prequal.MinProbes", fmt.Sprintf("in [1, PoolSize=%d]", p.PoolSize), p.MinProbes)
	}
	if p.IdleProbeInterval < 0 {
		bad("Prequal.IdleProbeInterval", ">= 0 (0 disables idle probes)", p.IdleProbeInterval)
	}
	if p.LatencyMemory < 0 {
		bad("Prequal.LatencyMemory", ">= 0 (0 disables the memory)", p.LatencyMemory)
	}
	if p.SlowMemory < 0 {
		bad("Prequal.SlowMemory", ">= 0 (0 disables it)", p.SlowMemory)
	}
	if !(p.SlowFactor >= 1 && p.SlowFactor <= maxSlowFactor) {
		bad("Prequal.SlowFactor", fmt.Sprintf("in [1, %d]", maxSlowFactor), p.SlowFactor)
	}
	if p.RIFWindow <= p.PoolSize || p.RIFWindow > maxRIFWindow {
		bad("Prequal.RIFWindow", fmt.Sprintf("in (PoolSize=%d, %d]", p.PoolSize, maxRIFWindow), p.RIFWindow)
	}
	if p.MaxReuse < 1 || p.MaxReuse > maxReuseLimit {
		bad("Prequal.MaxReuse", fmt.Sprintf("in [1, %d]", maxReuseLimit), p.MaxReuse)
	}
	e := c.PeakEWMA
	if e.Decay <= 0 {
		bad("PeakEWMA.Decay", "> 0", e.Decay)
	}
	if e.DefaultRTT <= 0 {
		bad("PeakEWMA.DefaultRTT", "> 0", e.DefaultRTT)
	}
	if c.P2C.Choices < 2 || c.P2C.Choices > maxChoices {
		bad("P2C.Choices", fmt.Sprintf("in [2, %d]", maxChoices), c.P2C.Choices)
	}
	w := c.WRR
	if !(w.Penalty >= 0 && w.Penalty <= 1000) {
		bad("WRR.Penalty", "in [0, 1000]", w.Penalty)
	}
	if w.Blackout < 0 {
		bad("WRR.Blackout", ">= 0", w.Blackout)
	}
	if w.Expiry <= 0 {
		bad("WRR.Expiry", "> 0", w.Expiry)
	}
	if w.Period <= 0 {
		bad("WRR.Period", "> 0", w.Period)
	}
	if c.YARP.Poll <= 0 {
		bad("YARP.Poll", "> 0", c.YARP.Poll)
	}
	if !(c.Linear.Weight >= 0 && c.Linear.Weight <= 1e6) {
		bad("Linear.Weight", "in [0, 1e6]", c.Linear.Weight)
	}
	if c.C3.Clients < 1 || c.C3.Clients > 1<<20 {
		bad("C3.Clients", "in [1, 1048576]", c.C3.Clients)
	}
	if !(c.C3.Alpha > 0 && c.C3.Alpha <= 1) {
		bad("C3.Alpha", "in (0, 1]", c.C3.Alpha)
	}
	if c.Sync.D < 2 || c.Sync.D > maxSyncProbes {
		bad("Sync.D", fmt.Sprintf("in [2, %d] (the pick waits for d - 1 answers)", maxSyncProbes), c.Sync.D)
	}
	if c.Sync.Timeout <= 0 {
		bad("Sync.Timeout", "> 0", c.Sync.Timeout)
	}
	if c.EWMA.Decay <= 0 {
		bad("EWMA.Decay", "> 0", c.EWMA.Decay)
	}
	return errors.Join(errs...)
}

// IdleProbeTick is the period at which a host of policies (the ingress,
// the simulator) asks them for the probes they owe without traffic: a
// quarter of the shortest probe interval configured (Prequal's idle probe
// interval when set, WRR's period, YARP's poll), so no idle probe is late
// by more than that, and at least 5 ms.
func IdleProbeTick(cfg Config) time.Duration {
	every := min(cfg.WRR.Period, cfg.YARP.Poll)
	if p := cfg.Prequal.IdleProbeInterval; p > 0 {
		every = min(every, p)
	}
	return max(every/4, 5*time.Millisecond)
}
