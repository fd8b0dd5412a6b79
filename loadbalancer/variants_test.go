package loadbalancer

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCanonical_Variants(t *testing.T) {
	tests := map[string]string{
		"prequal{qrif=0.6, probes=2}":       "prequal{probes=2,qrif=0.6}",
		" PQ { QRIF = 0.60 , probes=2.0 } ": "prequal{probes=2,qrif=0.6}",
		"prequal{}":                         "prequal",
		"prequal":                           "prequal",
		"prequal{maxage=1000ms,pool=16}":    "prequal{maxage=1s,pool=16}",
		"prequal{qrif=0.84089641525371}":    "prequal{qrif=0.84089641525371}",
		"prequal{remove=0.25,reuse=3}":      "prequal{remove=0.25,reuse=3}",
		"power_of_two{choices=3}":           "p2c{choices=3}",
		"peak-ewma{decay=1m30s}":            "peak-ewma{decay=1m30s}",
		"prequal{qrif=1e0}":                 "prequal{qrif=1}",
		"prequal{probes=1e-3}":              "prequal{probes=0.001}",
		// Negative zero is zero: one variant, one spelling.
		"prequal{qrif=-0}":     "prequal{qrif=0}",
		"wrr{penalty=-0.0}":    "wrr{penalty=0}",
		"linear{weight=-0e5}":  "linear{weight=0}",
		"prequal{remove=+0.5}": "prequal{remove=0.5}",
	}
	for in, want := range tests {
		got, err := Canonical(in)
		if err != nil || got != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", in, got, err, want)
		}
		// Canonical is a fixed point.
		if again, err := Canonical(got); err != nil || again != got {
			t.Errorf("Canonical(Canonical(%q)) = %q, %v", in, again, err)
		}
	}
}

func TestCanonical_VariantErrors(t *testing.T) {
	tests := map[string]string{
		"prequal{qrif=x}":   `loadbalancer: prequal: parameter "qrif": want a number in [0, 1], got "x"`,
		"prequal{qrif=1.5}": `parameter "qrif": want a number in [0, 1], got "1.5"`,
		"prequal{probes=0}": `parameter "probes": want a number in (0, 100], got "0"`,
		"prequal{pool=2.5}": `parameter "pool": want an integer in [1, 4096], got "2.5"`,
		"prequal{maxage=1}": `parameter "maxage": want a duration like 500ms in (0s, 1h0m0s], got "1"`,
		"prequal{nope=1}":   `loadbalancer: prequal: unknown parameter "nope", known: coldrif, donerif, maxage, pool, probes, qrif, remove, reuse, reuselat, slowmem, slowx, tol`,
		"round-robin{x=1}":  `round-robin: unknown parameter "x": round-robin takes none`,
		// coldrif ranks HCL's cold probes; linear's score has none.
		"linear{coldrif=1}":        `linear: unknown parameter "coldrif"`,
		"rif-only{coldrif=1}":      `rif-only: unknown parameter "coldrif"`,
		"prequal{qrif=0.5,qrif=1}": `parameter "qrif" given twice`,
		"prequal{qrif}":            `parameter "qrif": want key=value`,
		"prequal{qrif=0.5":         `must end with '}'`,
		"nope{qrif=0.5}":           `unknown algorithm "nope"`,
		"p2c{choices=1}":           `parameter "choices": want an integer in [2, 100], got "1"`,
		// The paper's sync mode waits for d − 1 answers: d = 1 waits for
		// none and picks the one replica probed.
		"prequal-sync{d=1}": `loadbalancer: prequal-sync: parameter "d": want an integer in [2, 64], got "1"`,
		"prequal-sync{d=0}": `parameter "d": want an integer in [2, 64], got "0"`,
	}
	for in, want := range tests {
		_, err := Canonical(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Canonical(%q) error = %v, want it to contain %q", in, err, want)
		}
		if _, err := New(in, DefaultConfig()); err == nil {
			t.Errorf("New(%q) accepted it", in)
		}
	}
}

func TestSplitVariant(t *testing.T) {
	base, ps, err := SplitVariant("prequal{probes=2,qrif=0.6}")
	if err != nil || base != "prequal" {
		t.Fatalf("SplitVariant = %q, %v, %v", base, ps, err)
	}
	if diff := cmp.Diff(map[string]string{"probes": "2", "qrif": "0.6"}, ps); diff != "" {
		t.Errorf("params (-want +got):\n%s", diff)
	}
	base, ps, err = SplitVariant("rr")
	if err != nil || base != "round-robin" || ps != nil {
		t.Errorf("SplitVariant(rr) = %q, %v, %v", base, ps, err)
	}
}

func TestParams_DefaultsMatchDefaultConfig(t *testing.T) {
	got := map[string]string{}
	for _, p := range Params("pq") {
		got[p.Name] = p.Default
		if p.Doc == "" {
			t.Errorf("%s has no doc", p.Name)
		}
	}
	want := map[string]string{"coldrif": "0", "donerif": "0", "probes": "3", "remove": "1", "qrif": "0.8408964152537146", "pool": "16", "maxage": "1s", "reuse": "16", "tol": "0.05", "reuselat": "1", "slowmem": "30s", "slowx": "6"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Params(prequal) defaults (-want +got):\n%s", diff)
	}
	if Params("round-robin") != nil || Params("nope") != nil {
		t.Error("Params of a policy without parameters is not nil")
	}
	// Every default spelled as a variant builds the default policy.
	for _, n := range Names() {
		var kv []string
		for _, p := range Params(n) {
			kv = append(kv, p.Name+"="+p.Default)
		}
		name := n
		if len(kv) > 0 {
			name += "{" + strings.Join(kv, ",") + "}"
		}
		if _, err := New(name, DefaultConfig()); err != nil {
			t.Errorf("New(%q): %v", name, err)
		}
	}
}

func TestNew_VariantAppliesParameters(t *testing.T) {
	p, err := New("prequal{qrif=0.5,pool=4,maxage=250ms,probes=1.5,remove=0.5,reuse=3}", DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "prequal{maxage=250ms,pool=4,probes=1.5,qrif=0.5,remove=0.5,reuse=3}" {
		t.Errorf("Name() = %q", p.Name())
	}
	c := p.(*prequal).cfg
	want := DefaultConfig().Prequal
	want.QRIF, want.PoolSize, want.MaxAge, want.ProbesPerQuery, want.RemovePerQuery, want.MaxReuse = 0.5, 4, 250*time.Millisecond, 1.5, 0.5, 3
	if c != want {
		t.Errorf("cfg = %+v\nwant %+v", c, want)
	}
	// A pool of 1 lowers MinProbes with it, a pool past the RIF window
	// raises the window: the variant stays valid.
	for _, v := range []string{"prequal{pool=1}", "prequal{pool=100}"} {
		if _, err := New(v, DefaultConfig()); err != nil {
			t.Errorf("New(%q): %v", v, err)
		}
	}
	if e := newPolicy(t, "peak-ewma{decay=1s}", 2, nil).(*peakEWMA); e.cfg.Decay != time.Second {
		t.Errorf("peak-ewma decay = %v", e.cfg.Decay)
	}
}

func TestUsesProbes_VariantAware(t *testing.T) {
	if !UsesProbes("prequal{qrif=0.6}") || UsesProbes("p2c{choices=3}") || UsesProbes("prequal{qrif=7}") {
		t.Error("UsesProbes does not follow the variant's base policy")
	}
}

// p2c{choices=d}: the pick is the least loaded of d distinct draws, so
// with d = n it is always the global least loaded, and with d = 3 of 4
// the busiest endpoint is never chosen.
func TestP2C_DChoices(t *testing.T) {
	rng := newRNG()
	eps := addrs(4)
	load := map[string]int{eps[0]: 3, eps[1]: 1, eps[2]: 2, eps[3]: 0}
	p := newPolicy(t, "p2c{choices=4}", 4, nil)
	pp := p.(*p2c)
	for i, a := range eps {
		pp.gates[i].inFlight = load[a]
	}
	for range 50 {
		pk := mustPick(t, p, at(0), rng)
		if pk.Endpoint != eps[3] {
			t.Fatalf("choices=4 of 4 picked %s, want the idle %s", pk.Endpoint, eps[3])
		}
		p.Done(at(0), pk, time.Millisecond, 200)
	}
	p = newPolicy(t, "p2c{choices=3}", 4, nil)
	pp = p.(*p2c)
	for i := range eps {
		pp.gates[i].inFlight = 10 * i // eps[3] busiest
	}
	seen := map[string]int{}
	for range 400 {
		pk := mustPick(t, p, at(0), rng)
		seen[pk.Endpoint]++
		p.Done(at(0), pk, time.Millisecond, 200)
	}
	if seen[eps[3]] != 0 || seen[eps[2]] != 0 {
		t.Errorf("choices=3 of 4 picked the two busiest: %v", seen)
	}
	if seen[eps[1]] == 0 {
		t.Errorf("choices=3 of 4 never picked the second least loaded (drawn without the first 1/4 of the time): %v", seen)
	}
}

// Canonical names are ASCII: a duration below a millisecond is spelled
// "us", as Go prints it otherwise ("µs" broke the external env's hook
// substitution), and both micro signs are still read.
func TestCanonical_DurationsAreASCII(t *testing.T) {
	tests := map[string]string{
		"prequal-sync{timeout=500us}":    "prequal-sync{timeout=500us}",
		"prequal-sync{timeout=500µs}":    "prequal-sync{timeout=500us}", // U+00B5 micro sign
		"prequal-sync{timeout=500μs}":    "prequal-sync{timeout=500us}", // U+03BC Greek mu
		"prequal-sync{timeout=1.5ms}":    "prequal-sync{timeout=1.5ms}",
		"prequal-sync{timeout=1500ns}":   "prequal-sync{timeout=1.5us}",
		"prequal{maxage=250000ns}":       "prequal{maxage=250us}",
		"wrr{blackout=0,expiry=999us}":   "wrr{blackout=0s,expiry=999us}",
		"ewma{decay=0.0005s}":            "ewma{decay=500us}",
		"peak-ewma{decay=1h}":            "peak-ewma{decay=1h0m0s}",
		"yarp-po2c{poll=1ms}":            "yarp-po2c{poll=1ms}",
		"prequal-sync{d=2,timeout=3ms}":  "prequal-sync{d=2,timeout=3ms}",
		"prequal-sync{timeout=10.25µs}":  "prequal-sync{timeout=10.25us}",
		"prequal{maxage=1m0.5ms}":        "prequal{maxage=1m0.0005s}",
		"prequal-sync{timeout=500us }":   "prequal-sync{timeout=500us}",
		"prequal-sync{timeout=0.5ms}":    "prequal-sync{timeout=500us}",
		"prequal-sync{timeout=999999ns}": "prequal-sync{timeout=999.999us}",
	}
	for in, want := range tests {
		got, err := Canonical(in)
		if err != nil || got != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", in, got, err, want)
			continue
		}
		for _, r := range got {
			if r > 0x7e {
				t.Errorf("Canonical(%q) = %q holds non-ASCII %q", in, got, r)
			}
		}
		// The canonical spelling reads back to itself, and to the same
		// configuration as the input.
		if again, err := Canonical(got); err != nil || again != got {
			t.Errorf("Canonical(%q) = %q, %v: not a fixed point", got, again, err)
		}
		c1, err1 := ConfigFor(in, DefaultConfig())
		c2, err2 := ConfigFor(got, DefaultConfig())
		if err1 != nil || err2 != nil || !cmp.Equal(c1, c2) {
			t.Errorf("%q and its canonical %q configure differently (%v, %v)", in, got, err1, err2)
		}
	}
	// Every parameter's default is spelled in ASCII too.
	for _, name := range Names() {
		for _, p := range Params(name) {
			for _, r := range p.Default {
				if r > 0x7e {
					t.Errorf("%s: parameter %s default %q holds non-ASCII %q", name, p.Name, p.Default, r)
				}
			}
		}
	}
}

func TestParamValue_VariantOverConfig(t *testing.T) {
	def := DefaultConfig()
	set := DefaultConfig()
	set.Prequal.QRIF = 0.6
	tests := []struct {
		name, param string
		cfg         Config
		want        string
		ok          bool
	}{
		{"prequal", "qrif", def, "0.8408964152537146", true}, // 2^-0.25
		{"pq", "QRIF", def, "0.8408964152537146", true},
		{"prequal", "qrif", set, "0.6", true},
		{"prequal{qrif=0.9}", "qrif", set, "0.9", true},
		{"prequal{probes=2}", "qrif", def, "0.8408964152537146", true},
		{"prequal-sync", "timeout", def, "3ms", true},
		{"prequal-sync{timeout=500µs}", "timeout", def, "500us", true},
		{"round-robin", "qrif", def, "", false},
		{"prequal", "nope", def, "", false},
		{"nope", "qrif", def, "", false},
	}
	for _, tc := range tests {
		got, ok := ParamValue(tc.name, tc.param, tc.cfg)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParamValue(%q, %q) = %q, %v; want %q, %v", tc.name, tc.param, got, ok, tc.want, tc.ok)
		}
	}
}
