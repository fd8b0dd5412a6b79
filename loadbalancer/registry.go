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
)

var names = []string{NamePrequal, NameRoundRobin, NameLeastRequest, NameP2C, NameRandom, NamePeakEWMA}

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

	"peak-ewma": NamePeakEWMA, "peakewma": NamePeakEWMA, "ewma": NamePeakEWMA,
	"p2c-peak-ewma": NamePeakEWMA,
}

// Names lists the canonical policy names in a stable order.
func Names() []string { return append([]string(nil), names...) }

// Canonical maps a policy name or alias ("rr", "least-connections",
// "power-of-two", ...) to its canonical name. Case, '_' and '-' are not
// significant.
func Canonical(name string) (string, error) {
	key := strings.ToLower(strings.TrimSpace(name))
	key = strings.NewReplacer("_", "-", " ", "-").Replace(key)
	if key == "" {
		return "", fmt.Errorf("loadbalancer: empty algorithm name, want one of %s", strings.Join(names, ", "))
	}
	if c, ok := aliases[key]; ok {
		return c, nil
	}
	return "", fmt.Errorf("loadbalancer: unknown algorithm %q, want one of %s", name, strings.Join(names, ", "))
}

// UsesProbes reports whether the named policy wants probes sent, so the
// ingress probes only for the policies that read them. Unknown names do not.
func UsesProbes(name string) bool {
	c, err := Canonical(name)
	return err == nil && c == NamePrequal
}

// New builds the named policy (any alias accepted) with cfg, which must be
// valid. The policy has no endpoints until SetEndpoints.
func New(name string, cfg Config) (Policy, error) {
	c, err := Canonical(name)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch c {
	case NamePrequal:
		return newPrequal(cfg.Prequal), nil
	case NameRoundRobin:
		return newRoundRobin(), nil
	case NameLeastRequest:
		return newLeastRequest(), nil
	case NameP2C:
		return newP2C(), nil
	case NameRandom:
		return newRandom(), nil
	case NamePeakEWMA:
		return newPeakEWMA(cfg.PeakEWMA), nil
	}
	return nil, fmt.Errorf("loadbalancer: algorithm %q has no constructor", c)
}
