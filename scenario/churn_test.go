package scenario

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const churnBase = minimal + `churn:
  group: fast
  min: 2
  max: 16
  every: 10s
`

func TestChurn_ParsesWithDefaultPattern(t *testing.T) {
	s, err := Parse([]byte(churnBase))
	if err != nil {
		t.Fatal(err)
	}
	want := &Churn{Group: "fast", Min: 2, Max: 16, Every: "10s", Pattern: ChurnAlternate}
	if diff := cmp.Diff(want, s.Churn); diff != "" {
		t.Errorf("churn (-want +got):\n%s", diff)
	}
	s.Scale(0.1)
	if s.Churn.Every != "1s" {
		t.Errorf("scaled every = %s, want 1s", s.Churn.Every)
	}
}

// Each bad value is reported under its own field, saying what is allowed.
func TestChurn_BadFieldsAreNamed(t *testing.T) {
	for _, tc := range []struct {
		name, churn, field, want string
	}{
		{"unknown group", "group: nope\n  min: 2\n  max: 16\n  every: 10s", "churn.group", "fast"},
		{"min zero", "group: fast\n  min: 0\n  max: 16\n  every: 10s", "churn.min", ">= 1"},
		{"max not above min", "group: fast\n  min: 2\n  max: 2\n  every: 10s", "churn.max", "more than min"},
		{"every missing", "group: fast\n  min: 2\n  max: 16", "churn.every", "missing"},
		{"every zero", "group: fast\n  min: 2\n  max: 16\n  every: 0s", "churn.every", "> 0"},
		{"bad pattern", "group: fast\n  min: 2\n  max: 16\n  every: 1s\n  pattern: zigzag", "churn.pattern", "alternate, doubling"},
		{"start outside bounds", "group: fast\n  min: 3\n  max: 16\n  every: 1s", "churn.group", "starts with 2 replicas"},
		{"unknown field", "group: fast\n  min: 2\n  max: 16\n  every: 1s\n  step: 3", "churn.step", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(minimal + "churn:\n  " + tc.churn + "\n"))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to name %s and say %q", err, tc.field, tc.want)
			}
		})
	}
}

// A cpu-share group's replicas live on machines placed at setup: scaling
// one would have to move a machine, so the scenario is refused.
func TestChurn_CPUShareGroupRefused(t *testing.T) {
	s, err := Catalogue("paper-fig7-90-small")
	if err != nil {
		t.Fatal(err)
	}
	s.Churn = &Churn{Group: "share", Min: 4, Max: 8, Every: "5s"}
	err = s.Validate()
	if err == nil || !strings.Contains(err.Error(), "churn.group") || !strings.Contains(err.Error(), "cpu-share") {
		t.Errorf("error %v, want one naming churn.group and cpu-share", err)
	}
}

func TestChurn_Steps(t *testing.T) {
	alt := Churn{Min: 2, Max: 16, Pattern: ChurnAlternate}
	if got, want := alt.Steps(2, 4), []int{16, 2, 16, 2}; !cmp.Equal(got, want) {
		t.Errorf("alternate from 2: %v, want %v", got, want)
	}
	if got, want := alt.Steps(8, 3), []int{16, 2, 16}; !cmp.Equal(got, want) {
		t.Errorf("alternate from 8: %v, want %v", got, want)
	}
	dbl := Churn{Min: 2, Max: 16, Pattern: ChurnDoubling}
	if got, want := dbl.Steps(2, 8), []int{4, 8, 16, 8, 4, 2, 4, 8}; !cmp.Equal(got, want) {
		t.Errorf("doubling from 2: %v, want %v", got, want)
	}
	if got, want := (Churn{Min: 3, Max: 10, Pattern: ChurnDoubling}).Steps(3, 5), []int{6, 10, 5, 3, 6}; !cmp.Equal(got, want) {
		t.Errorf("doubling 3..10: %v, want %v", got, want)
	}
}

func TestIngressRetry_BecomesTheFlag(t *testing.T) {
	if got := (Ingress{Retry: true}).Args(); !cmp.Equal(got, []string{"--retry"}) {
		t.Errorf("args %q, want --retry", got)
	}
	if got := (Ingress{}).Args(); len(got) != 0 {
		t.Errorf("args %q, want none", got)
	}
}
