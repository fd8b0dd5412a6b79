package campaign

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prequalbench/prequalbench/artifacts"
)

func order(plan []artifacts.PlannedRun) []string {
	out := make([]string, len(plan))
	for i, p := range plan {
		out[i] = fmt.Sprintf("%d:%s", p.Rep, p.Algorithm)
	}
	return out
}

var algos = []string{"prequal", "round-robin", "least-request"}

func TestPlan_ShuffleIsDeterministicPerSeed(t *testing.T) {
	a, warn, err := Plan(algos, 4, "shuffle", 7)
	if err != nil || warn != "" {
		t.Fatalf("Plan: %v %q", err, warn)
	}
	b, _, _ := Plan(algos, 4, "shuffle", 7)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, different plans (-a +b):\n%s", diff)
	}
	// Every rep holds every algorithm exactly once, reps in order.
	for rep := 1; rep <= 4; rep++ {
		seen := map[string]int{}
		for _, p := range a[(rep-1)*3 : rep*3] {
			if p.Rep != rep {
				t.Errorf("run %d is rep %d, want %d", p.Index, p.Rep, rep)
			}
			seen[p.Algorithm]++
		}
		for _, al := range algos {
			if seen[al] != 1 {
				t.Errorf("rep %d runs %s %d times", rep, al, seen[al])
			}
		}
	}
	// Some seed gives a different order (the shuffle is not the identity).
	differs := false
	for seed := uint64(1); seed < 20 && !differs; seed++ {
		c, _, _ := Plan(algos, 4, "shuffle", seed)
		differs = !cmp.Equal(order(a), order(c))
	}
	if !differs {
		t.Error("20 seeds all gave the same order")
	}
}

func TestPlan_IndexAndDir(t *testing.T) {
	plan, _, _ := Plan(algos, 2, "rotate", 1)
	for i, p := range plan {
		if p.Index != i+1 {
			t.Errorf("run %d has index %d", i, p.Index)
		}
		want := fmt.Sprintf("runs/%02d-rep%d-%s", p.Index, p.Rep, p.Algorithm)
		if p.Dir != want {
			t.Errorf("dir = %q, want %q", p.Dir, want)
		}
	}
}

func TestPlan_Rotate(t *testing.T) {
	plan, warn, err := Plan(algos, 4, "rotate", 1)
	if err != nil || warn != "" {
		t.Fatalf("Plan: %v %q", err, warn)
	}
	want := []string{
		"1:prequal", "1:round-robin", "1:least-request",
		"2:round-robin", "2:least-request", "2:prequal",
		"3:least-request", "3:prequal", "3:round-robin",
		"4:prequal", "4:round-robin", "4:least-request",
	}
	if diff := cmp.Diff(want, order(plan)); diff != "" {
		t.Errorf("rotate (-want +got):\n%s", diff)
	}
}

func TestPlan_SequentialWarns(t *testing.T) {
	plan, warn, err := Plan(algos, 2, "sequential", 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1:prequal", "2:prequal", "1:round-robin", "2:round-robin", "1:least-request", "2:least-request"}
	if diff := cmp.Diff(want, order(plan)); diff != "" {
		t.Errorf("sequential (-want +got):\n%s", diff)
	}
	if !strings.Contains(warn, "not interleaved") {
		t.Errorf("warning = %q, want one saying the order is not interleaved", warn)
	}
}

func TestPlan_BadInput(t *testing.T) {
	if _, _, err := Plan(algos, 1, "random", 1); err == nil || !strings.Contains(err.Error(), "shuffle, rotate, sequential") {
		t.Errorf("bad order error = %v", err)
	}
	if _, _, err := Plan(algos, 0, "shuffle", 1); err == nil {
		t.Error("reps 0 accepted")
	}
	if _, _, err := Plan(nil, 1, "shuffle", 1); err == nil {
		t.Error("no algorithms accepted")
	}
}

// A variant's braces, commas and equals signs stay out of the run's
// directory (a slug), the name itself stays in the plan; plain names keep
// the directory names existing campaigns have.
func TestPlan_VariantDirsArePathSafe(t *testing.T) {
	names := []string{"prequal{probes=2,qrif=0.6}", "prequal{maxage=1.5s,qrif=1}", "round-robin", "odd/../name {x=y}"}
	plan, _, err := Plan(names, 2, "shuffle", 3)
	if err != nil {
		t.Fatal(err)
	}
	safe := regexp.MustCompile(`^runs/[0-9]{2}-rep[0-9]+-[A-Za-z0-9._-]+$`)
	seen := map[string]bool{}
	for _, p := range plan {
		if !safe.MatchString(p.Dir) || strings.Contains(p.Dir, "/../") {
			t.Errorf("run %d (%s): dir %q is not path-safe", p.Index, p.Algorithm, p.Dir)
		}
		if seen[p.Dir] {
			t.Errorf("dir %q twice", p.Dir)
		}
		seen[p.Dir] = true
		want := map[string]string{
			"prequal{probes=2,qrif=0.6}":  "prequal_probes-2_qrif-0.6",
			"prequal{maxage=1.5s,qrif=1}": "prequal_maxage-1.5s_qrif-1",
			"round-robin":                 "round-robin",
			"odd/../name {x=y}":           "odd_.._name__x-y",
		}[p.Algorithm]
		if wantDir := fmt.Sprintf("runs/%02d-rep%d-%s", p.Index, p.Rep, want); p.Dir != wantDir {
			t.Errorf("run %d (%s): dir %q, want %q", p.Index, p.Algorithm, p.Dir, wantDir)
		}
	}
	if !slices.Contains(order(plan), "1:prequal{probes=2,qrif=0.6}") {
		t.Errorf("plan %v lost the variant's name", order(plan))
	}
}
