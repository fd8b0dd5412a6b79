package scenario

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

// SweepSyntax is how a sweep is written, for error messages.
const SweepSyntax = "ALGORITHM:PARAMETER=V1,V2,... (e.g. prequal:qrif=0.5,0.7,0.84)"

// Sweep is one algorithm parameter run at several values: each value is a
// variant of the algorithm, run beside the others in the same interleaved
// protocol. Written "ALGORITHM:PARAMETER=V1,V2,...", where ALGORITHM may
// itself be a variant that fixes other parameters
// ("prequal{probes=2}:qrif=0.5,0.9").
type Sweep struct {
	// Base is the canonical algorithm the values vary.
	Base string
	// Param is the swept parameter's canonical name.
	Param string
	// Values in the order given, each in its canonical spelling.
	Values []string
	// Variants are the canonical algorithm names, one per value.
	Variants []string
}

// String is the sweep's canonical spelling.
func (s Sweep) String() string {
	return s.Base + ":" + s.Param + "=" + strings.Join(s.Values, ",")
}

// SplitSweep splits a sweep into its parts without checking them against
// the algorithms (a report reads recorded sweeps this way, so an old
// campaign stays readable whatever the algorithms accept today).
func SplitSweep(spec string) (base, param string, values []string, err error) {
	depth, colon := 0, -1
	for i, r := range spec {
		switch r {
		case '{':
			depth++
		case '}':
			depth--
		case ':':
			if depth == 0 && colon < 0 {
				colon = i
			}
		}
	}
	if colon < 0 {
		return "", "", nil, fmt.Errorf("got %q, want %s", spec, SweepSyntax)
	}
	base = strings.TrimSpace(spec[:colon])
	param, list, ok := strings.Cut(spec[colon+1:], "=")
	param = strings.TrimSpace(param)
	switch {
	case base == "":
		return "", "", nil, fmt.Errorf("got %q: no algorithm before ':', want %s", spec, SweepSyntax)
	case !ok || param == "":
		return "", "", nil, fmt.Errorf("got %q: no PARAMETER=VALUES after ':', want %s", spec, SweepSyntax)
	}
	for _, v := range strings.Split(list, ",") {
		values = append(values, strings.TrimSpace(v))
	}
	return base, param, values, nil
}

// ParseSweep checks a sweep against the algorithms and returns it in
// canonical form. Its errors name the parameter and what was expected.
func ParseSweep(spec string) (Sweep, error) {
	base, param, values, err := SplitSweep(spec)
	if err != nil {
		return Sweep{}, err
	}
	cbase, err := loadbalancer.Canonical(base)
	if err != nil {
		return Sweep{}, err
	}
	baseName, baseParams, _ := SplitVariantName(cbase)
	if _, fixed := baseParams[strings.ToLower(param)]; fixed {
		return Sweep{}, fmt.Errorf("parameter %q: %s already sets it; sweep it on %s instead", param, cbase, baseName)
	}
	if len(values) < 2 {
		return Sweep{}, fmt.Errorf("parameter %q of %s: got %d value(s), want at least two, comma-separated (a single value is the algorithm %s{%s=...}, not a sweep)",
			param, cbase, len(values), baseName, param)
	}
	s := Sweep{Base: cbase}
	for i, v := range values {
		if v == "" {
			return Sweep{}, fmt.Errorf("parameter %q of %s: value %d is empty, want %s", param, cbase, i+1, SweepSyntax)
		}
		variant, err := loadbalancer.Canonical(variantName(baseName, baseParams, param, v))
		if err != nil {
			return Sweep{}, err
		}
		_, ps, ok := SplitVariantName(variant)
		key := ""
		for k := range ps {
			if _, fixed := baseParams[k]; !fixed {
				key = k
			}
		}
		switch {
		case !ok:
			return Sweep{}, fmt.Errorf("parameter %q of %s: the variant %q does not read back", param, cbase, variant)
		case key == "":
			// The base already fixes the swept parameter.
			return Sweep{}, fmt.Errorf("parameter %q: %s already sets it; sweep it on %s instead", param, cbase, baseName)
		case s.Param != "" && key != s.Param:
			return Sweep{}, fmt.Errorf("parameter %q of %s: values name different parameters (%s, %s)", param, cbase, s.Param, key)
		}
		s.Param = key
		if j := slices.Index(s.Values, ps[key]); j >= 0 {
			return Sweep{}, fmt.Errorf("parameter %q of %s: value %q is the same as value %q, want distinct values", param, cbase, v, values[j])
		}
		s.Values = append(s.Values, ps[key])
		s.Variants = append(s.Variants, variant)
	}
	return s, nil
}

// variantName writes base{params..., param=value} for Canonical to check
// and put in order.
func variantName(base string, params map[string]string, param, value string) string {
	parts := make([]string, 0, len(params)+1)
	for k, v := range params {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	parts = append(parts, param+"="+value)
	return base + "{" + strings.Join(parts, ",") + "}"
}

// SplitVariantName splits an algorithm name "base{k=v,...}" into its base
// and parameters by syntax alone; a plain name has no parameters. ok is
// false when the braces or pairs are malformed.
func SplitVariantName(name string) (base string, params map[string]string, ok bool) {
	open := strings.IndexByte(name, '{')
	if open < 0 {
		return name, map[string]string{}, !strings.ContainsAny(name, "}=,")
	}
	if !strings.HasSuffix(name, "}") {
		return name, nil, false
	}
	base, inner := name[:open], name[open+1:len(name)-1]
	params = map[string]string{}
	if strings.TrimSpace(inner) == "" {
		return base, params, true
	}
	for _, kv := range strings.Split(inner, ",") {
		k, v, found := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !found || k == "" || strings.ContainsAny(k+v, "{}") {
			return base, nil, false
		}
		if _, dup := params[k]; dup {
			return base, nil, false
		}
		params[k] = v
	}
	return base, params, true
}

// JoinAlgorithmArgs undoes a comma split inside braces: a comma-separated
// flag value "prequal{qrif=0.6,probes=2},round-robin" arrives as
// ["prequal{qrif=0.6", "probes=2}", "round-robin"] and leaves as
// ["prequal{qrif=0.6,probes=2}", "round-robin"].
func JoinAlgorithmArgs(parts []string) []string {
	var out []string
	depth := 0
	for _, p := range parts {
		if depth > 0 {
			out[len(out)-1] += "," + p
		} else {
			out = append(out, p)
		}
		depth += strings.Count(p, "{") - strings.Count(p, "}")
		if depth < 0 {
			depth = 0
		}
	}
	return out
}

// expandSweeps canonicalises the sweeps it can read and adds their
// variants to the algorithms, after the ones listed and without repeats.
// It runs on every Parse, so it must be idempotent: a recorded scenario
// already holds its variants. Unreadable sweeps stay as written for
// Validate to report.
func (p *Protocol) expandSweeps() {
	for i, spec := range p.Sweep {
		s, err := ParseSweep(spec)
		if err != nil {
			continue
		}
		p.Sweep[i] = s.String()
		for _, v := range s.Variants {
			if !slices.Contains(p.Algorithms, v) {
				p.Algorithms = append(p.Algorithms, v)
			}
		}
	}
}

// ExpandSweeps adds the sweeps' variants to the algorithms (after a
// command line replaced the algorithms, for instance).
func (p *Protocol) ExpandSweeps() { p.expandSweeps() }

// SetSweeps replaces the sweeps: the old sweeps' variants leave the
// algorithms, unless the reference is one of them, and the new ones' join.
// Each spec must pass ParseSweep.
func (p *Protocol) SetSweeps(specs []string) {
	drop := map[string]bool{}
	for _, spec := range p.Sweep {
		if s, err := ParseSweep(spec); err == nil {
			for _, v := range s.Variants {
				drop[v] = v != p.Reference
			}
		}
	}
	p.Algorithms = slices.DeleteFunc(p.Algorithms, func(a string) bool { return drop[a] })
	p.Sweep = slices.Clone(specs)
	p.expandSweeps()
}

// sweeps reports unreadable sweeps, sweeps of the same parameter
// twice and variants missing from the algorithms.
func (v *validator) sweeps(p *Protocol) {
	seen := map[string]int{}
	for i, spec := range p.Sweep {
		f := fmt.Sprintf("protocol.sweep[%d]", i)
		s, err := ParseSweep(spec)
		if err != nil {
			v.add(f, "%s", strings.TrimPrefix(err.Error(), "loadbalancer: "))
			continue
		}
		key := s.Base + ":" + s.Param
		if j, dup := seen[key]; dup {
			v.add(f, "sweeps %s of %s again (protocol.sweep[%d]); give every value in one sweep", s.Param, s.Base, j)
			continue
		}
		seen[key] = i
		for _, name := range s.Variants {
			if !slices.Contains(p.Algorithms, name) {
				v.add(f, "variant %s is not in protocol.algorithms", name)
			}
		}
	}
}
