package scenario

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSweep_Canonical(t *testing.T) {
	tests := []struct {
		spec string
		want Sweep
	}{
		{"prequal:qrif=0.5,0.7,0.84,0.95,1", Sweep{Base: "prequal", Param: "qrif", Values: []string{"0.5", "0.7", "0.84", "0.95", "1"},
			Variants: []string{"prequal{qrif=0.5}", "prequal{qrif=0.7}", "prequal{qrif=0.84}", "prequal{qrif=0.95}", "prequal{qrif=1}"}}},
		// Aliases, case, spaces and number spellings are canonicalised.
		{" pq : QRIF = 0.50, 1.0 ", Sweep{Base: "prequal", Param: "qrif", Values: []string{"0.5", "1"},
			Variants: []string{"prequal{qrif=0.5}", "prequal{qrif=1}"}}},
		// A base variant fixes the other parameters; its commas and colon-free braces parse.
		{"prequal{qrif=0.6,probes=2}:pool=4,16", Sweep{Base: "prequal{probes=2,qrif=0.6}", Param: "pool", Values: []string{"4", "16"},
			Variants: []string{"prequal{pool=4,probes=2,qrif=0.6}", "prequal{pool=16,probes=2,qrif=0.6}"}}},
		// Durations in ASCII: the micro signs read, "us" written.
		{"prequal-sync:timeout=500µs,0.75ms,1ms", Sweep{Base: "prequal-sync", Param: "timeout", Values: []string{"500us", "750us", "1ms"},
			Variants: []string{"prequal-sync{timeout=500us}", "prequal-sync{timeout=750us}", "prequal-sync{timeout=1ms}"}}},
		{"power-of-two:choices=2,3,4", Sweep{Base: "p2c", Param: "choices", Values: []string{"2", "3", "4"},
			Variants: []string{"p2c{choices=2}", "p2c{choices=3}", "p2c{choices=4}"}}},
	}
	for _, tc := range tests {
		got, err := ParseSweep(tc.spec)
		if err != nil {
			t.Errorf("ParseSweep(%q): %v", tc.spec, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseSweep(%q) (-want +got):\n%s", tc.spec, diff)
		}
		// The canonical spelling parses to itself.
		again, err := ParseSweep(got.String())
		if err != nil || again.String() != got.String() {
			t.Errorf("ParseSweep(%q) = %q, %v; want it unchanged", got.String(), again.String(), err)
		}
	}
}

func TestParseSweep_ErrorsNameTheParameterAndWhatIsExpected(t *testing.T) {
	tests := []struct{ spec, want string }{
		{"prequal", "want ALGORITHM:PARAMETER=V1,V2,..."},
		{"prequal:qrif", "no PARAMETER=VALUES"},
		{":qrif=0.5,1", "no algorithm before ':'"},
		{"prequal:=0.5,1", "no PARAMETER=VALUES"},
		{"magic:qrif=0.5,1", `unknown algorithm "magic"`},
		{"prequal:qrif=0.5", `parameter "qrif" of prequal: got 1 value(s), want at least two`},
		{"prequal:qrif=0.5,,1", `parameter "qrif" of prequal: value 2 is empty`},
		{"prequal:qrif=0.5,2", `parameter "qrif": want a number in [0, 1], got "2"`},
		{"prequal:qrif=0.5,x", `parameter "qrif": want a number in [0, 1], got "x"`},
		{"prequal:bogus=1,2", `unknown parameter "bogus", known: coldrif, donerif, maxage, pool, probes, qrif, remove, reuse`},
		{"round-robin:weight=1,2", `round-robin takes none`},
		{"prequal:qrif=0.5,0.50", `value "0.50" is the same as value "0.5"`},
		{"prequal{qrif=0.6}:qrif=0.5,1", `parameter "qrif": prequal{qrif=0.6} already sets it; sweep it on prequal instead`},
	}
	for _, tc := range tests {
		_, err := ParseSweep(tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSweep(%q) = %v, want an error containing %q", tc.spec, err, tc.want)
		}
	}
}

func TestParse_SweepExpandsBesideTheAlgorithms(t *testing.T) {
	s, err := Parse([]byte(minimal + "protocol:\n  sweep: [\"pq:qrif=0.50,1\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := s.Protocol
	want := append(append([]string{}, DefaultAlgorithms...), "prequal{qrif=0.5}", "prequal{qrif=1}")
	if diff := cmp.Diff(want, p.Algorithms); diff != "" {
		t.Errorf("algorithms (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"prequal:qrif=0.5,1"}, p.Sweep); diff != "" {
		t.Errorf("sweep not canonical (-want +got):\n%s", diff)
	}
	if p.Reference != "prequal" {
		t.Errorf("reference = %q, want prequal", p.Reference)
	}
	// The resolved scenario (campaign.json) parses back to the same
	// algorithms: a resume must not add the variants twice.
	y, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(y)
	if err != nil {
		t.Fatalf("resolved scenario does not parse: %v\n%s", err, y)
	}
	if diff := cmp.Diff(p.Algorithms, again.Protocol.Algorithms); diff != "" {
		t.Errorf("algorithms after a round trip (-first +second):\n%s", diff)
	}
}

func TestParse_VariantAlgorithms(t *testing.T) {
	s, err := Parse([]byte(minimal + "protocol:\n  algorithms: [\"prequal{qrif=0.6, probes=2}\", rr]\n  reference: \"pq{probes=2,qrif=0.60}\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"prequal{probes=2,qrif=0.6}", "round-robin"}, s.Protocol.Algorithms); diff != "" {
		t.Errorf("algorithms (-want +got):\n%s", diff)
	}
	if s.Protocol.Reference != "prequal{probes=2,qrif=0.6}" {
		t.Errorf("reference = %q, want the canonical variant", s.Protocol.Reference)
	}
}

func TestParse_SweepAndVariantErrorsNameTheField(t *testing.T) {
	tests := []struct{ name, yaml, field, want string }{
		{"bad value", "protocol:\n  sweep: [\"prequal:qrif=0.5,1.5\"]\n", "protocol.sweep[0]", `parameter "qrif": want a number in [0, 1], got "1.5"`},
		{"not a sweep", "protocol:\n  sweep: [prequal]\n", "protocol.sweep[0]", "want ALGORITHM:PARAMETER=V1,V2,..."},
		{"same parameter twice", "protocol:\n  sweep: [\"prequal:qrif=0.5,1\", \"pq:qrif=0.6,0.7\"]\n", "protocol.sweep[1]", "sweeps qrif of prequal again (protocol.sweep[0])"},
		{"bad variant", "protocol:\n  algorithms: [prequal, \"prequal{qrif=2}\"]\n", "protocol.algorithms[1]", `prequal: parameter "qrif": want a number in [0, 1], got "2"`},
		{"unknown parameter", "protocol:\n  algorithms: [\"p2c{choice=3}\"]\n", "protocol.algorithms[0]", `unknown parameter "choice", known: choices`},
		{"duplicate variant", "protocol:\n  algorithms: [\"prequal{qrif=0.5}\", \"prequal{qrif=0.50}\"]\n", "protocol.algorithms[1]", "duplicate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(minimal + tc.yaml))
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse error = %v, want Errors", err)
			}
			for _, e := range errs {
				if e.Field == tc.field && strings.Contains(e.Msg, tc.want) {
					return
				}
			}
			t.Errorf("no error for field %q containing %q; got %v", tc.field, tc.want, err)
		})
	}
}

func TestSetSweeps_ReplacesTheOldVariants(t *testing.T) {
	s, err := Parse([]byte(minimal + "protocol:\n  algorithms: [prequal, round-robin]\n  sweep: [\"prequal:qrif=0.5,1\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := &s.Protocol
	p.SetSweeps([]string{"p2c:choices=2,3"})
	want := []string{"prequal", "round-robin", "p2c{choices=2}", "p2c{choices=3}"}
	if diff := cmp.Diff(want, p.Algorithms); diff != "" {
		t.Errorf("algorithms (-want +got):\n%s", diff)
	}
	if errs := s.Validate(); len(errs) > 0 {
		t.Errorf("after SetSweeps: %v", errs)
	}
	// A command line that replaces the algorithms keeps the sweep.
	p.Algorithms = []string{"round-robin"}
	p.Reference = "round-robin"
	p.ExpandSweeps()
	if diff := cmp.Diff([]string{"round-robin", "p2c{choices=2}", "p2c{choices=3}"}, p.Algorithms); diff != "" {
		t.Errorf("algorithms after ExpandSweeps (-want +got):\n%s", diff)
	}
}

func TestJoinAlgorithmArgs(t *testing.T) {
	got := JoinAlgorithmArgs([]string{"prequal{qrif=0.6", "probes=2}", "round-robin", "p2c{choices=3}"})
	want := []string{"prequal{qrif=0.6,probes=2}", "round-robin", "p2c{choices=3}"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestSplitVariantName(t *testing.T) {
	tests := []struct {
		name   string
		base   string
		params map[string]string
		ok     bool
	}{
		{"prequal", "prequal", map[string]string{}, true},
		{"prequal{probes=2,qrif=0.6}", "prequal", map[string]string{"probes": "2", "qrif": "0.6"}, true},
		{"prequal{qrif=0.6", "prequal{qrif=0.6", nil, false},
		{"prequal{qrif}", "prequal", nil, false},
		{"prequal{qrif=1,qrif=2}", "prequal", nil, false},
	}
	for _, tc := range tests {
		base, params, ok := SplitVariantName(tc.name)
		if base != tc.base || ok != tc.ok || !cmp.Equal(params, tc.params) {
			t.Errorf("SplitVariantName(%q) = %q, %v, %v; want %q, %v, %v", tc.name, base, params, ok, tc.base, tc.params, tc.ok)
		}
	}
}
