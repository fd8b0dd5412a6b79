package loadbalancer

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNames_StableOrder(t *testing.T) {
	want := []string{"prequal", "round-robin", "least-request", "p2c", "random", "peak-ewma",
		"wrr", "yarp-po2c", "linear", "rif-only", "c3", "prequal-sync", "ewma"}
	if diff := cmp.Diff(want, Names()); diff != "" {
		t.Errorf("Names() (-want +got):\n%s", diff)
	}
	Names()[0] = "mutated"
	if Names()[0] != "prequal" {
		t.Error("Names() returns shared storage")
	}
}

func TestCanonical_Aliases(t *testing.T) {
	tests := map[string]string{
		"prequal": "prequal", "Prequal": "prequal",
		"rr": "round-robin", "roundrobin": "round-robin", "round_robin": "round-robin", "ROUND-ROBIN": "round-robin",
		"least-connections": "least-request", "leastconn": "least-request", "least_request": "least-request", "least-request": "least-request",
		"power-of-two": "p2c", "p2c": "p2c", "po2": "p2c",
		"random":    "random",
		"peak-ewma": "peak-ewma", "peak_ewma": "peak-ewma", "ewma": "ewma", "nginx-ewma": "ewma",
		"weighted_round_robin": "wrr", "YARP_PO2C": "yarp-po2c", "pq-sync": "prequal-sync", "C3": "c3",
	}
	for in, want := range tests {
		got, err := Canonical(in)
		if err != nil || got != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "  ", "weighted"} {
		if _, err := Canonical(bad); err == nil || !strings.Contains(err.Error(), "prequal, round-robin") {
			t.Errorf("Canonical(%q) error = %v, want one listing the names", bad, err)
		}
	}
}

// TestCanonical_RetiredYARPAlias: "yarp" named the paper's polled
// YARP-Po2C, not YARP's shipped balancer; it is refused with an error
// that says so and names the spelling for each (yarp-po2c, and p2c for
// YARP's PowerOfTwoChoices), in any case and as a variant.
func TestCanonical_RetiredYARPAlias(t *testing.T) {
	for _, in := range []string{"yarp", "YARP", "yarp{poll=1s}"} {
		_, err := Canonical(in)
		if err == nil || !strings.Contains(err.Error(), `write "yarp-po2c"`) || !strings.Contains(err.Error(), "not YARP's shipped balancer") ||
			!strings.Contains(err.Error(), `"p2c" for YARP's PowerOfTwoChoices`) {
			t.Errorf("Canonical(%q) error = %v, want one naming yarp-po2c", in, err)
		}
		if _, err := New(in, DefaultConfig()); err == nil {
			t.Errorf("New(%q) accepted a retired name", in)
		}
	}
}

func TestUsesProbes_DeclaredCapability(t *testing.T) {
	probers := map[string]bool{"prequal": true, "wrr": true, "yarp-po2c": true, "linear": true, "rif-only": true}
	for _, n := range Names() {
		if got, want := UsesProbes(n), probers[n]; got != want {
			t.Errorf("UsesProbes(%q) = %v, want %v", n, got, want)
		}
	}
	if UsesProbes("nonsense") {
		t.Error("UsesProbes(unknown) = true")
	}
}

func TestNew_EveryNameAndErrors(t *testing.T) {
	for _, n := range Names() {
		p, err := New(n, DefaultConfig())
		if err != nil {
			t.Fatalf("New(%q): %v", n, err)
		}
		if p.Name() != n {
			t.Errorf("New(%q).Name() = %q", n, p.Name())
		}
		if _, err := p.Pick(t0, newRNG()); !errors.Is(err, ErrNoEndpoints) {
			t.Errorf("%s: Pick with no endpoints = %v, want ErrNoEndpoints", n, err)
		}
	}
	if p, err := New("least-connections", DefaultConfig()); err != nil || p.Name() != "least-request" {
		t.Errorf("New(alias) = %v, %v", p, err)
	}
	if _, err := New("nope", DefaultConfig()); err == nil {
		t.Error("New(unknown) = nil error")
	}
	bad := DefaultConfig()
	bad.Prequal.PoolSize = 0
	if _, err := New("prequal", bad); err == nil || !strings.Contains(err.Error(), "PoolSize") {
		t.Errorf("New(invalid config) error = %v", err)
	}
}
