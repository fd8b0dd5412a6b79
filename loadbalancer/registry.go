package loadbalancer

import (
	"fmt"
	"strings"
)

// Canonical policy names, as returned by Names and Policy.Name.
const (
	NamePrequal      = "prequal"
	NameRoundRobin   = "round-robin"
	NameLeastRequest = "least-request"
	NameP2C          = "p2c"
	NameRandom       = "random"
	NamePeakEWMA     = "peak-ewma"
	NameWRR          = "wrr"
	NameYARPPo2C     = "yarp-po2c"
	NameLinear       = "linear"
	NameRIFOnly      = "rif-only"
	NameC3           = "c3"
	NamePrequalSync  = "prequal-sync"
	NameEWMA         = "ewma"
)

var names = []string{NamePrequal, NameRoundRobin, NameLeastRequest, NameP2C, NameRandom, NamePeakEWMA,
	NameWRR, NameYARPPo2C, NameLinear, NameRIFOnly, NameC3, NamePrequalSync, NameEWMA}

// aliases maps a normalized spelling (lower case, '_' and ' ' as '-') to
// its canonical name.
var aliases = map[string]string{
	"prequal": NamePrequal, "pq": NamePrequal,

	"round-robin": NameRoundRobin, "roundrobin": NameRoundRobin, "rr": NameRoundRobin,

	"least-request": NameLeastRequest, "leastrequest": NameLeastRequest,
	"least-requests": NameLeastRequest, "least-connections": NameLeastRequest,
	"least-connection": NameLeastRequest, "leastconn": NameLeastRequest,
	"least-conn": NameLeastRequest, "leastconnections": NameLeastRequest,
	"lc": NameLeastRequest, "lr": NameLeastRequest, "least-loaded": NameLeastRequest,

	"p2c": NameP2C, "power-of-two": NameP2C, "power-of-two-choices": NameP2C,
	"po2": NameP2C, "po2c": NameP2C, "pow2": NameP2C, "two-choices": NameP2C,
	"least-request-p2c": NameP2C, "ll-po2c": NameP2C,

	"random": NameRandom, "rand": NameRandom,

	// "ewma" was peak-ewma's alias until ingress-nginx's own EWMA
	// balancer arrived under that name.
	"peak-ewma": NamePeakEWMA, "peakewma": NamePeakEWMA, "p2c-peak-ewma": NamePeakEWMA,

	"wrr": NameWRR, "weighted-round-robin": NameWRR, "weightedroundrobin": NameWRR, "grpc-wrr": NameWRR,

	// The paper's polled YARP-Po2C, not YARP's shipped balancer (see retired).
	"yarp-po2c": NameYARPPo2C, "yarp-p2c": NameYARPPo2C, "yarppo2c": NameYARPPo2C,

	"linear": NameLinear,

	"rif-only": NameRIFOnly, "rifonly": NameRIFOnly, "rif": NameRIFOnly,

	// C3's replica ranking alone, without its rate control (c3.go).
	"c3": NameC3,

	"prequal-sync": NamePrequalSync, "prequalsync": NamePrequalSync, "pq-sync": NamePrequalSync,
	"sync-prequal": NamePrequalSync, "sync": NamePrequalSync,

	"ewma": NameEWMA, "nginx-ewma": NameEWMA, "ingress-nginx-ewma": NameEWMA,
}

// retired names once accepted, with why they are not and what to write.
var retired = map[string]string{
	// The policy is the paper's polled comparison (server RIF every 500 ms,
	// 30x faster than YARP's default); YARP as shipped balances on
	// proxy-local counts, so "yarp" promised a policy that is not here.
	// Neither is made the alias: either meaning would surprise someone.
	"yarp": `it named the paper's YARP-Po2C comparison (p2c on the server's RIF polled every 500 ms), not YARP's shipped balancer; ` +
		`write "yarp-po2c" for that, or "p2c" for YARP's PowerOfTwoChoices (two random destinations, the one with fewer requests in flight as the proxy counts them)`,
}

// Names lists the canonical policy names in a stable order.
func Names() []string { return append([]string(nil), names...) }

// canonicalBase maps a policy name or alias ("rr", "least-connections",
// "power-of-two", ...) to its canonical name. Case, '_' and '-' are not
// significant.
func canonicalBase(name string) (string, error) {
	key := strings.ToLower(strings.TrimSpace(name))
	key = strings.NewReplacer("_", "-", " ", "-").Replace(key)
	if key == "" {
		return "", fmt.Errorf("loadbalancer: empty algorithm name, want one of %s", strings.Join(names, ", "))
	}
	if c, ok := aliases[key]; ok {
		return c, nil
	}
	if why, ok := retired[key]; ok {
		return "", fmt.Errorf("loadbalancer: algorithm %q is no longer accepted: %s", name, why)
	}
	return "", fmt.Errorf("loadbalancer: unknown algorithm %q, want one of %s", name, strings.Join(names, ", "))
}

// Canonical maps an algorithm name to its canonical spelling: a policy name
// or alias ("rr", "least-connections", "power-of-two", ...; case, '_' and
// '-' are not significant) to its canonical name, and a variant
// ("PQ{qrif=0.60, probes=2}") to its canonical variant
// ("prequal{probes=2,qrif=0.6}"; see variants.go). The error names the
// parameter at fault and what it expects.
func Canonical(name string) (string, error) {
	v, err := parseVariant(name)
	if err != nil {
		return "", err
	}
	return v.String(), nil
}

// Caps are the capabilities a policy declares; the ingress and the
// simulator drive only what a policy declares.
type Caps struct {
	// Probes: the policy plans probes (ProbesDue) and reads their answers.
	Probes bool
	// Feedback: the policy implements FeedbackUser and reads the server
	// feedback piggybacked on responses.
	Feedback bool
	// Sync: the policy implements SyncPicker (two-phase synchronous
	// probing).
	Sync bool
}

// Capable is implemented by every policy of this package.
type Capable interface {
	Caps() Caps
}

// CapsOf returns the capabilities of the named algorithm (variants
// accepted), as the policy built from it with DefaultConfig declares them;
// the zero Caps for an unknown name.
func CapsOf(name string) Caps {
	p, err := New(name, DefaultConfig())
	if err != nil {
		return Caps{}
	}
	if c, ok := p.(Capable); ok {
		return c.Caps()
	}
	return Caps{}
}

// UsesProbes reports whether the named policy (variants accepted) wants
// probes sent, so the ingress probes only for the policies that read them:
// the capability the policy declares. Unknown names do not.
func UsesProbes(name string) bool { return CapsOf(name).Probes }

// New builds the named policy (any alias accepted, and variants, whose
// parameters override cfg's for that policy) with cfg, which must be
// valid. The policy has no endpoints until SetEndpoints; its Name is the
// canonical spelling of name.
func New(name string, cfg Config) (Policy, error) {
	v, err := parseVariant(name)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	v.apply(&cfg)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("loadbalancer: %s: parameters conflict with the configuration: %w", v, err)
	}
	var p Policy
	switch v.base {
	case NamePrequal:
		p = newPrequal(cfg.Prequal)
	case NameRoundRobin:
		p = newRoundRobin()
	case NameLeastRequest:
		p = newLeastRequest()
	case NameP2C:
		p = newP2C(cfg.P2C)
	case NameRandom:
		p = newRandom()
	case NamePeakEWMA:
		p = newPeakEWMA(cfg.PeakEWMA)
	case NameWRR:
		p = newWRR(cfg.WRR)
	case NameYARPPo2C:
		p = newYARPPo2c(cfg.YARP)
	case NameLinear:
		p = newPoolPolicy(NameLinear, cfg.Prequal, linearRule(cfg.Linear.Weight))
	case NameRIFOnly:
		p = newPoolPolicy(NameRIFOnly, cfg.Prequal, rifOnly())
	case NameC3:
		p = newC3(cfg.C3)
	case NamePrequalSync:
		p = newPrequalSync(cfg.Prequal, cfg.Sync)
	case NameEWMA:
		p = newNginxEWMA(cfg.EWMA)
	default:
		return nil, fmt.Errorf("loadbalancer: algorithm %q has no constructor", v.base)
	}
	if n, ok := p.(interface{ setName(string) }); ok {
		n.setName(v.String())
	}
	return p, nil
}
