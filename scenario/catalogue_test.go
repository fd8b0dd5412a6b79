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
		"c4-multi-route-8", "c5-soak", "c6-overload", "c6-burst", "hetero16-70", "hetero16-90", "hetero16-90-single",
		"paper-fig7-70", "paper-fig7-90", "paper-fig6-ramp", "paper-fig7-70-small", "paper-fig7-90-small", "paper-fig6-ramp-small",
		"sim-three-speeds-70", "sim-three-speeds-90", "sim-three-speeds-ramp"}
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
	for name, frac := range map[string]float64{"hetero16-70": 0.7, "hetero16-90": 0.9, "hetero16-90-single": 0.9} {
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
	if s, _ := Catalogue("hetero16-90-single"); s.Ingress.Replicas != 1 {
		t.Errorf("hetero16-90-single has %d ingress replicas, want 1", s.Ingress.Replicas)
	}
	if s, _ := Catalogue("hetero16-90"); s.Ingress.Replicas != 4 {
		t.Errorf("hetero16-90 has %d ingress replicas, want 4", s.Ingress.Replicas)
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
	for _, name := range []string{"hetero16-70", "hetero16-90", "sim-three-speeds-70", "sim-three-speeds-90", "paper-fig7-70", "paper-fig7-90", "paper-fig6-ramp"} {
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

// The paper-fig* scenarios load the cpu-share replicas at a fraction of
// their allocations (Fig. 7: 70% and 90%; Fig. 6: 0.75x to 1.74x in x10/9
// steps), at 100 x 100 and in their 16 x 8 twins.
func TestCatalogue_PaperFigureLoadsMatchTheAllocations(t *testing.T) {
	check := func(name string, clients, replicas int, fracs []float64) {
		t.Helper()
		s, err := Catalogue(name)
		if err != nil {
			t.Fatal(err)
		}
		g := s.Workload.Routes[0].Backends[0]
		if s.Ingress.Replicas != clients || g.Replicas != replicas || g.Mode != "cpu-share" {
			t.Errorf("%s: %d clients x %d %s replicas, want %d x %d cpu-share", name, s.Ingress.Replicas, g.Replicas, g.Mode, clients, replicas)
		}
		capacity := s.Workload.Routes[0].EffectiveCapacity()
		if len(s.Load.Open) != len(fracs) {
			t.Fatalf("%s: %d phases, want %d", name, len(s.Load.Open), len(fracs))
		}
		for k, p := range s.Load.Open {
			if got := p.Rate / capacity; math.Abs(got-fracs[k]) > 0.005 {
				t.Errorf("%s phase %d: %.3fx the allocations, want %.3fx", name, k, got, fracs[k])
			}
		}
		if s.Load.Timeout.Std().Seconds() != 5 {
			t.Errorf("%s: timeout %s, want the paper's 5s", name, s.Load.Timeout)
		}
	}
	var ramp []float64
	for k := range 9 {
		ramp = append(ramp, 0.75*math.Pow(10.0/9, float64(k)))
	}
	for _, sz := range []struct {
		suffix            string
		clients, replicas int
	}{{"", 100, 100}, {"-small", 16, 8}} {
		check("paper-fig7-70"+sz.suffix, sz.clients, sz.replicas, []float64{0.7})
		check("paper-fig7-90"+sz.suffix, sz.clients, sz.replicas, []float64{0.9})
		check("paper-fig6-ramp"+sz.suffix, sz.clients, sz.replicas, ramp)
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
