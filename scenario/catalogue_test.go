package scenario

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

func TestCatalogue_EveryScenarioParses(t *testing.T) {
	want := []string{"quickstart", "c1-small-cpu", "c2-hetero-open", "c3-hetero-ramp", "c4-multi-route",
		"c4-multi-route-8", "c5-soak", "c6-overload", "c6-burst", "paper-70", "paper-90", "paper-90-single"}
	names := Names()
	for _, n := range want {
		if !slices.Contains(names, n) {
			t.Errorf("catalogue lacks %s (has %v)", n, names)
		}
	}
	for _, n := range names {
		s, err := Catalogue(n)
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if s.Name != n {
			t.Errorf("%s.yaml has name %q", n, s.Name)
		}
		if s.Description == "" {
			t.Errorf("%s has no description", n)
		}
	}
}

// The paper scenarios promise a load at a fraction of the fleet's capacity;
// the rates in the files must keep that promise.
func TestCatalogue_PaperLoadsMatchCapacity(t *testing.T) {
	for name, frac := range map[string]float64{"paper-70": 0.7, "paper-90": 0.9, "paper-90-single": 0.9} {
		s, err := Catalogue(name)
		if err != nil {
			t.Fatal(err)
		}
		capacity := s.Workload.Routes[0].EffectiveCapacity()
		rate := s.Load.Open[0].Rate
		if got := rate / capacity; math.Abs(got-frac) > 0.01 {
			t.Errorf("%s: rate %v is %.3f of effective capacity %.0f, want %.2f", name, rate, got, capacity, frac)
		}
		if nominal := s.Workload.Routes[0].Capacity(); nominal != 2400 {
			t.Errorf("%s: nominal capacity %v, want 2400", name, nominal)
		}
	}
	if s, _ := Catalogue("paper-90-single"); s.Ingress.Replicas != 1 {
		t.Errorf("paper-90-single has %d ingress replicas, want 1", s.Ingress.Replicas)
	}
	if s, _ := Catalogue("paper-90"); s.Ingress.Replicas != 4 {
		t.Errorf("paper-90 has %d ingress replicas, want 4", s.Ingress.Replicas)
	}
	s, _ := Catalogue("c6-overload")
	if got := s.Load.Open[0].Rate / s.Workload.Routes[0].Capacity(); math.Abs(got-1.7) > 0.01 {
		t.Errorf("c6-overload at %.2fx capacity, want 1.7x", got)
	}
}

func TestLookup_UnknownNameListsCatalogue(t *testing.T) {
	_, err := Lookup("nope")
	if err == nil || !strings.Contains(err.Error(), "quickstart") {
		t.Errorf("Lookup(nope) = %v, want an error listing the catalogue", err)
	}
}

// The paper scenarios default to the paper's Fig. 7 comparison set
// (issue 14): RR, Random, WRR, LeastLoaded, LL-Po2C, YARP-Po2C, Linear,
// C3 and Prequal, by base name (variants such as c3{clients=4} count).
func TestCatalogue_PaperScenariosCompareTheFullSet(t *testing.T) {
	want := []string{"prequal", "round-robin", "random", "wrr", "least-request", "p2c", "yarp-po2c", "linear", "c3"}
	for _, name := range []string{"paper-70", "paper-90", "sim-paper-70", "sim-paper-90"} {
		s, err := Catalogue(name)
		if err != nil {
			t.Fatal(err)
		}
		bases := map[string]bool{}
		for _, a := range s.Protocol.Algorithms {
			b, _, err := loadbalancer.SplitVariant(a)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			bases[b] = true
		}
		for _, w := range want {
			if !bases[w] {
				t.Errorf("%s does not compare %s (algorithms %v)", name, w, s.Protocol.Algorithms)
			}
		}
	}
}

// Every catalogue scenario's default reps can reach a verdict on its
// primary metric: the Holm family over its primary comparisons can pass
// with the reps it runs, unless it declares itself descriptive.
func TestCatalogue_DefaultRepsCanReachAVerdict(t *testing.T) {
	for _, n := range Names() {
		s, err := Catalogue(n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if w := RepsShortfall(s.Protocol); w != "" {
			t.Errorf("%s: %s", n, w)
		}
	}
}
