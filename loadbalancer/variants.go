package loadbalancer

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Algorithm variants: a policy name may carry parameters,
// "prequal{qrif=0.6,probes=2}", so that a parameter study is one campaign
// of variants run side by side rather than one campaign per value. A
// variant's parameters override the matching Config fields for that policy
// only; everything else comes from the Config the caller passes to New.
//
// The canonical spelling is what artifacts and reports carry: the base name
// canonicalised, keys lower case and sorted, numbers in their shortest form
// (strconv 'g', -1), integers without a fraction, durations as Go prints
// them (time.Duration.String) but in ASCII: microseconds as "us", never
// "µs" (FormatDuration), since names travel through shells, file names and
// hook substitutions that refuse non-ASCII; "µs" and "μs" are still read.
// Parameters equal to their default are kept:
// a sweep that includes the default value must still name it. A plain name
// ("prequal") and empty braces both canonicalise to the plain name, so every
// artifact from before variants still reads.

// ParamInfo describes one parameter of a policy's variants.
type ParamInfo struct {
	Name    string // key in the variant spelling
	Doc     string // what it sets, with its range
	Default string // the value in DefaultConfig, canonical spelling
}

type paramKind int

const (
	kindNumber   paramKind = iota // float64 in [lo, hi]
	kindInt                       // integer in [lo, hi]
	kindDuration                  // time.Duration in [lo, hi] nanoseconds
)

// paramSpec is one parameter: its range and how it reads and writes Config.
type paramSpec struct {
	name, doc string
	kind      paramKind
	lo, hi    float64
	loOpen    bool // lo itself excluded
	get       func(*Config) float64
	set       func(*Config, float64)
}

// params lists each policy's parameters, sorted by name.
var params = map[string][]paramSpec{}

// registerParams installs a policy's parameter table (sorted by name).
func registerParams(policy string, ps ...paramSpec) {
	slices.SortFunc(ps, func(a, b paramSpec) int { return strings.Compare(a.name, b.name) })
	params[policy] = ps
}

func init() {
	registerParams(NamePrequal,
		paramSpec{name: "probes", doc: "r_probe, probes triggered per query (PrequalConfig.ProbesPerQuery)",
			kind: kindNumber, lo: 0, loOpen: true, hi: maxProbesPerQuery,
			get: func(c *Config) float64 { return c.Prequal.ProbesPerQuery },
			set: func(c *Config, v float64) { c.Prequal.ProbesPerQuery = v }},
		paramSpec{name: "remove", doc: "r_remove, probes removed per query (PrequalConfig.RemovePerQuery)",
			kind: kindNumber, lo: 0, hi: maxRemovePerQuery,
			get: func(c *Config) float64 { return c.Prequal.RemovePerQuery },
			set: func(c *Config, v float64) { c.Prequal.RemovePerQuery = v }},
		paramSpec{name: "qrif", doc: "Q_RIF, the RIF quantile above which a probe is hot; 1 = never hot (PrequalConfig.QRIF)",
			kind: kindNumber, lo: 0, hi: 1,
			get: func(c *Config) float64 { return c.Prequal.QRIF },
			set: func(c *Config, v float64) { c.Prequal.QRIF = v }},
		paramSpec{name: "pool", doc: "m, the most probes in the pool (PrequalConfig.PoolSize; MinProbes is lowered to it and RIFWindow raised to 4m when they conflict)",
			kind: kindInt, lo: 1, hi: maxPoolSize,
			get: func(c *Config) float64 { return float64(c.Prequal.PoolSize) },
			set: func(c *Config, v float64) {
				c.Prequal.PoolSize = int(v)
				c.Prequal.MinProbes = min(c.Prequal.MinProbes, int(v))
				if c.Prequal.RIFWindow <= int(v) {
					c.Prequal.RIFWindow = min(4*int(v), maxRIFWindow)
				}
			}},
		paramSpec{name: "maxage", doc: "how long a probe stays usable (PrequalConfig.MaxAge)",
			kind: kindDuration, lo: 0, loOpen: true, hi: float64(time.Hour),
			get: func(c *Config) float64 { return float64(c.Prequal.MaxAge) },
			set: func(c *Config, v float64) { c.Prequal.MaxAge = time.Duration(v) }},
		paramSpec{name: "reuse", doc: "the cap on Eq. 1's reuse budget b_reuse (PrequalConfig.MaxReuse)",
			kind: kindInt, lo: 1, hi: maxReuseLimit,
			get: func(c *Config) float64 { return float64(c.Prequal.MaxReuse) },
			set: func(c *Config, v float64) { c.Prequal.MaxReuse = int(v) }},
		paramSpec{name: "tol", doc: "latency tolerance: cold probes within this fraction of the best (by latency, or coldrif's key) tie, broken by RIF; 0 = exact (PrequalConfig.LatencyTolerance)",
			kind: kindNumber, lo: 0, hi: 1,
			get: func(c *Config) float64 { return c.Prequal.LatencyTolerance },
			set: func(c *Config, v float64) { c.Prequal.LatencyTolerance = v }},
		paramSpec{name: "coldrif", doc: "w in the cold rank latency·(1 + w·RIF): a larger w weighs the queue more, tol applies to this key; 0 = the paper's latency alone (PrequalConfig.ColdRIFWeight)",
			kind: kindNumber, lo: 0, hi: maxColdRIFWeight,
			get: func(c *Config) float64 { return c.Prequal.ColdRIFWeight },
			set: func(c *Config, v float64) { c.Prequal.ColdRIFWeight = v }},
		paramSpec{name: "donerif", doc: "1: a finished request lowers its replica's pool entry's RIF by one; 0 = the paper's compensation, which only adds (PrequalConfig.CompletionRIF)",
			kind: kindInt, lo: 0, hi: 1,
			get: func(c *Config) float64 { return b2f(c.Prequal.CompletionRIF) },
			set: func(c *Config, v float64) { c.Prequal.CompletionRIF = v != 0 }},
		paramSpec{name: "reuselat", doc: "requests' worth of latency (the fleet's at RIF 1) each use adds to a reused probe; 0 = the paper's RIF-only compensation (PrequalConfig.ReuseLatency)",
			kind: kindNumber, lo: 0, hi: maxReuseLatency,
			get: func(c *Config) float64 { return c.Prequal.ReuseLatency },
			set: func(c *Config, v float64) { c.Prequal.ReuseLatency = v }},
		paramSpec{name: "slowmem", doc: "how long a replica's last known latency stands in for an unknown answer when it was learned idle and at least slowx times the median of the pool's fresh answers; 0 = off (PrequalConfig.SlowMemory)",
			kind: kindDuration, lo: 0, hi: float64(time.Hour),
			get: func(c *Config) float64 { return float64(c.Prequal.SlowMemory) },
			set: func(c *Config, v float64) { c.Prequal.SlowMemory = time.Duration(v) }},
		paramSpec{name: "slowx", doc: "how many times the median of the pool's fresh answers a remembered latency must be for slowmem to hold it (PrequalConfig.SlowFactor)",
			kind: kindNumber, lo: 1, hi: maxSlowFactor,
			get: func(c *Config) float64 { return c.Prequal.SlowFactor },
			set: func(c *Config, v float64) { c.Prequal.SlowFactor = v }},
	)
	// linear and rif-only run prequal's pool: its parameters apply, except
	// coldrif, a rank of HCL's cold probes, which their scores replace.
	pool := slices.DeleteFunc(slices.Clone(params[NamePrequal]), func(s paramSpec) bool { return s.name == "coldrif" })
	registerParams(NameLinear, append(slices.Clone(pool),
		paramSpec{name: "weight", doc: "the RIF coefficient of score = weight·RIF + latency/a, a the latency at one request in flight; 1 = the paper's equal weighting (LinearConfig.Weight)",
			kind: kindNumber, lo: 0, hi: 1e6,
			get: func(c *Config) float64 { return c.Linear.Weight },
			set: func(c *Config, v float64) { c.Linear.Weight = v }})...)
	registerParams(NameRIFOnly, pool...)
	registerParams(NamePrequalSync,
		paramSpec{name: "d", doc: "probes per query; the pick waits for d-1 answers, so d >= 2 (d = 1 would pick the one replica it probed: random with a probe's delay) (SyncConfig.D)",
			kind: kindInt, lo: 2, hi: maxSyncProbes,
			get: func(c *Config) float64 { return float64(c.Sync.D) },
			set: func(c *Config, v float64) { c.Sync.D = int(v) }},
		paramSpec{name: "timeout", doc: "the longest wait for answers (SyncConfig.Timeout)",
			kind: kindDuration, lo: 0, loOpen: true, hi: float64(time.Minute),
			get: func(c *Config) float64 { return float64(c.Sync.Timeout) },
			set: func(c *Config, v float64) { c.Sync.Timeout = time.Duration(v) }},
		paramSpec{name: "qrif", doc: "Q_RIF, as prequal's (PrequalConfig.QRIF)",
			kind: kindNumber, lo: 0, hi: 1,
			get: func(c *Config) float64 { return c.Prequal.QRIF },
			set: func(c *Config, v float64) { c.Prequal.QRIF = v }},
		paramSpec{name: "coldrif", doc: "w in the cold rank latency·(1 + w·RIF), as prequal's (PrequalConfig.ColdRIFWeight)",
			kind: kindNumber, lo: 0, hi: maxColdRIFWeight,
			get: func(c *Config) float64 { return c.Prequal.ColdRIFWeight },
			set: func(c *Config, v float64) { c.Prequal.ColdRIFWeight = v }},
	)
	registerParams(NameWRR,
		paramSpec{name: "penalty", doc: "error_utilization_penalty in weight = qps/(utilization + penalty·eps/qps) (WRRConfig.Penalty)",
			kind: kindNumber, lo: 0, hi: 1000,
			get: func(c *Config) float64 { return c.WRR.Penalty },
			set: func(c *Config, v float64) { c.WRR.Penalty = v }},
		paramSpec{name: "blackout", doc: "how long a new weight waits before use (WRRConfig.Blackout)",
			kind: kindDuration, lo: 0, hi: float64(time.Hour),
			get: func(c *Config) float64 { return float64(c.WRR.Blackout) },
			set: func(c *Config, v float64) { c.WRR.Blackout = time.Duration(v) }},
		paramSpec{name: "expiry", doc: "a weight not refreshed for this long is dropped (WRRConfig.Expiry)",
			kind: kindDuration, lo: 0, loOpen: true, hi: float64(time.Hour),
			get: func(c *Config) float64 { return float64(c.WRR.Expiry) },
			set: func(c *Config, v float64) { c.WRR.Expiry = time.Duration(v) }},
		paramSpec{name: "period", doc: "load report (probe) period and weight update period (WRRConfig.Period)",
			kind: kindDuration, lo: float64(time.Millisecond), hi: float64(time.Hour),
			get: func(c *Config) float64 { return float64(c.WRR.Period) },
			set: func(c *Config, v float64) { c.WRR.Period = time.Duration(v) }},
	)
	registerParams(NameYARPPo2C,
		paramSpec{name: "poll", doc: "how often each endpoint's RIF is polled (YARPConfig.Poll)",
			kind: kindDuration, lo: float64(time.Millisecond), hi: float64(time.Hour),
			get: func(c *Config) float64 { return float64(c.YARP.Poll) },
			set: func(c *Config, v float64) { c.YARP.Poll = time.Duration(v) }},
	)
	registerParams(NameC3,
		paramSpec{name: "clients", doc: "n, the clients sharing the servers, in q̂ = 1 + os·n + q̄ (C3Config.Clients)",
			kind: kindInt, lo: 1, hi: 1 << 20,
			get: func(c *Config) float64 { return float64(c.C3.Clients) },
			set: func(c *Config, v float64) { c.C3.Clients = int(v) }},
	)
	registerParams(NameEWMA,
		paramSpec{name: "decay", doc: "DECAY_TIME, the EWMA's decay time (EWMAConfig.Decay)",
			kind: kindDuration, lo: 0, loOpen: true, hi: float64(time.Hour),
			get: func(c *Config) float64 { return float64(c.EWMA.Decay) },
			set: func(c *Config, v float64) { c.EWMA.Decay = time.Duration(v) }},
	)
	registerParams(NameP2C,
		paramSpec{name: "choices", doc: "endpoints drawn per pick, the least loaded wins (P2CConfig.Choices)",
			kind: kindInt, lo: 2, hi: maxChoices,
			get: func(c *Config) float64 { return float64(c.P2C.Choices) },
			set: func(c *Config, v float64) { c.P2C.Choices = int(v) }},
	)
	registerParams(NamePeakEWMA,
		paramSpec{name: "decay", doc: "τ, the estimate's decay time (PeakEWMAConfig.Decay)",
			kind: kindDuration, lo: 0, loOpen: true, hi: float64(time.Hour),
			get: func(c *Config) float64 { return float64(c.PeakEWMA.Decay) },
			set: func(c *Config, v float64) { c.PeakEWMA.Decay = time.Duration(v) }},
	)
}

// Params lists the parameters the named policy's variants take (any alias
// accepted; nil for an unknown name or one without parameters).
func Params(base string) []ParamInfo {
	c, err := canonicalBase(base)
	if err != nil {
		return nil
	}
	def := DefaultConfig()
	var out []ParamInfo
	for _, p := range params[c] {
		out = append(out, ParamInfo{Name: p.name, Doc: p.doc + ", " + p.want(), Default: p.format(p.get(&def))})
	}
	return out
}

// SplitVariant splits an algorithm name into its canonical base name and its
// parameters, each value in canonical spelling. A plain name has no
// parameters (a nil map).
func SplitVariant(name string) (base string, params map[string]string, err error) {
	v, err := parseVariant(name)
	if err != nil {
		return "", nil, err
	}
	if len(v.keys) == 0 {
		return v.base, nil, nil
	}
	params = make(map[string]string, len(v.keys))
	for i, k := range v.keys {
		params[k] = v.specs[i].format(v.vals[i])
	}
	return v.base, params, nil
}

// variant is a parsed algorithm name.
type variant struct {
	base  string
	keys  []string // sorted
	specs []*paramSpec
	vals  []float64
}

func (v variant) String() string {
	if len(v.keys) == 0 {
		return v.base
	}
	var b strings.Builder
	b.WriteString(v.base)
	b.WriteByte('{')
	for i, k := range v.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v.specs[i].format(v.vals[i]))
	}
	b.WriteByte('}')
	return b.String()
}

// apply writes the variant's parameters over cfg.
func (v variant) apply(cfg *Config) {
	for i := range v.keys {
		v.specs[i].set(cfg, v.vals[i])
	}
}

// parseVariant parses "base" or "base{k=v,...}", validating every value.
func parseVariant(name string) (variant, error) {
	s := strings.TrimSpace(name)
	open := strings.IndexByte(s, '{')
	if open < 0 {
		if strings.ContainsRune(s, '}') {
			return variant{}, fmt.Errorf("loadbalancer: algorithm %q: '}' without '{'", name)
		}
		c, err := canonicalBase(s)
		return variant{base: c}, err
	}
	if !strings.HasSuffix(s, "}") {
		return variant{}, fmt.Errorf("loadbalancer: algorithm %q: parameters must end with '}'", name)
	}
	c, err := canonicalBase(s[:open])
	if err != nil {
		return variant{}, err
	}
	body := strings.TrimSpace(s[open+1 : len(s)-1])
	if strings.ContainsAny(body, "{}") {
		return variant{}, fmt.Errorf("loadbalancer: algorithm %q: nested braces", name)
	}
	v := variant{base: c}
	if body == "" {
		return v, nil
	}
	type kv struct {
		k    string
		spec *paramSpec
		val  float64
	}
	var kvs []kv
	for _, part := range strings.Split(body, ",") {
		k, val, ok := strings.Cut(part, "=")
		k = strings.ToLower(strings.TrimSpace(k))
		val = strings.TrimSpace(val)
		if !ok || k == "" {
			return variant{}, fmt.Errorf("loadbalancer: %s: parameter %q: want key=value", c, strings.TrimSpace(part))
		}
		spec := findParam(c, k)
		if spec == nil {
			return variant{}, unknownParam(c, k)
		}
		for _, seen := range kvs {
			if seen.k == k {
				return variant{}, fmt.Errorf("loadbalancer: %s: parameter %q given twice", c, k)
			}
		}
		x, err := spec.parse(val)
		if err != nil {
			return variant{}, fmt.Errorf("loadbalancer: %s: parameter %q: want %s, got %q", c, k, spec.want(), val)
		}
		kvs = append(kvs, kv{k, spec, x})
	}
	slices.SortFunc(kvs, func(a, b kv) int { return strings.Compare(a.k, b.k) })
	for _, e := range kvs {
		v.keys = append(v.keys, e.k)
		v.specs = append(v.specs, e.spec)
		v.vals = append(v.vals, e.val)
	}
	return v, nil
}

func findParam(policy, key string) *paramSpec {
	ps := params[policy]
	for i := range ps {
		if ps[i].name == key {
			return &ps[i]
		}
	}
	return nil
}

func unknownParam(policy, key string) error {
	ps := params[policy]
	if len(ps) == 0 {
		return fmt.Errorf("loadbalancer: %s: unknown parameter %q: %s takes none", policy, key, policy)
	}
	known := make([]string, len(ps))
	for i, p := range ps {
		known[i] = p.name
	}
	return fmt.Errorf("loadbalancer: %s: unknown parameter %q, known: %s", policy, key, strings.Join(known, ", "))
}

// want describes the accepted values, for errors and docs.
func (p *paramSpec) want() string {
	lb := "["
	if p.loOpen {
		lb = "("
	}
	switch p.kind {
	case kindInt:
		return fmt.Sprintf("an integer in %s%g, %g]", lb, p.lo, p.hi)
	case kindDuration:
		return fmt.Sprintf("a duration like 500ms in %s%s, %s]", lb, FormatDuration(time.Duration(p.lo)), FormatDuration(time.Duration(p.hi)))
	}
	return fmt.Sprintf("a number in %s%g, %g]", lb, p.lo, p.hi)
}

// parse reads a value and checks its range.
func (p *paramSpec) parse(s string) (float64, error) {
	var x float64
	switch p.kind {
	case kindDuration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, err
		}
		x = float64(d)
	default:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, err
		}
		if p.kind == kindInt && f != math.Trunc(f) {
			return 0, fmt.Errorf("not an integer")
		}
		x = f
		if x == 0 {
			x = 0 // -0 would print as "-0": a second spelling of one variant
		}
	}
	if math.IsNaN(x) || x < p.lo || (p.loOpen && x == p.lo) || x > p.hi {
		return 0, fmt.Errorf("out of range")
	}
	return x, nil
}

// format is the canonical spelling of a value.
func (p *paramSpec) format(x float64) string {
	switch p.kind {
	case kindInt:
		return strconv.FormatInt(int64(x), 10)
	case kindDuration:
		return FormatDuration(time.Duration(x))
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// FormatDuration is d as time.Duration.String prints it, with "us" for
// microseconds instead of "µs": the canonical, ASCII spelling of a
// duration parameter (time.ParseDuration reads it back).
func FormatDuration(d time.Duration) string {
	return strings.Replace(d.String(), "µs", "us", 1)
}

// ConfigFor returns cfg with the parameters of the variant name written
// over it (cfg itself for a plain name): the configuration New builds the
// policy from, for callers that check it (the ingress's Eq. 1 warning).
func ConfigFor(name string, cfg Config) (Config, error) {
	v, err := parseVariant(name)
	if err != nil {
		return cfg, err
	}
	v.apply(&cfg)
	return cfg, nil
}

// ParamValue is the canonical spelling of parameter param of the policy
// name (a plain name or a variant) when it is built from cfg: the
// variant's own value if it sets param, else cfg's. ok is false when the
// name does not parse or its policy has no such parameter. A report uses
// it to place the plain algorithm of a sweep at its own value.
func ParamValue(name, param string, cfg Config) (value string, ok bool) {
	v, err := parseVariant(name)
	if err != nil {
		return "", false
	}
	spec := findParam(v.base, strings.ToLower(strings.TrimSpace(param)))
	if spec == nil {
		return "", false
	}
	v.apply(&cfg)
	return spec.format(spec.get(&cfg)), true
}

// b2f is a boolean knob's value: 1 for true.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
