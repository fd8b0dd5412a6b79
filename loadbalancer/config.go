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
	// bound as n approaches m·r_probe/(r_probe − r_remove) from above.
	MaxReuse int `json:"max_reuse"`
	// LatencyMemory is how long the policy remembers a replica's last known
	// latency and uses it when the replica's probe reports none. It patches
	// backends whose estimate has a time window (--latency-window DUR): a
	// replica that gets little traffic (because it is slow) has its history
	// age out and would look "unknown" again and win on RIF. 0 (the
	// default) disables it: the backend's default estimate is recent by
	// count and never forgets, and a memory that ignores RIF held a fast
	// replica's idle latency while its queue grew (64-replica fleet
	// simulation with a 1 s window: p99 0.6 s without memory, 2.3 s with
	// 10 s).
	LatencyMemory time.Duration `json:"latency_memory"`
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
			MaxReuse:          2,
			LatencyMemory:     0,
		},
		PeakEWMA: PeakEWMAConfig{
			Decay:      10 * time.Second,
			DefaultRTT: 30 * time.Millisecond,
		},
		P2C: P2CConfig{Choices: 2},
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
	if p.MinProbes < 1 || (p.PoolSize >= 1 && p.MinProbes > p.PoolSize) {
		bad("Prequal.MinProbes", fmt.Sprintf("in [1, PoolSize=%d]", p.PoolSize), p.MinProbes)
	}
	if p.IdleProbeInterval < 0 {
		bad("Prequal.IdleProbeInterval", ">= 0 (0 disables idle probes)", p.IdleProbeInterval)
	}
	if p.LatencyMemory < 0 {
		bad("Prequal.LatencyMemory", ">= 0 (0 disables the memory)", p.LatencyMemory)
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
	return errors.Join(errs...)
}
