package scenario

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestLatencyIdleMaxAge: a group's latencyIdleMaxAge becomes the backend's
// --latency-idle-max-age (0s, off, included); without it no flag is passed
// and the backend's default applies; a negative or unparsable age is
// rejected naming the field.
func TestLatencyIdleMaxAge(t *testing.T) {
	with := func(age string) string {
		return strings.Replace(minimal, "          replicas: 2\n", "          replicas: 2\n          latencyIdleMaxAge: "+age+"\n", 1)
	}
	for _, age := range []string{"30s", "0s"} {
		s, err := Parse([]byte(with(age)))
		if err != nil {
			t.Fatal(err)
		}
		args := s.Workload.Routes[0].Backends[0].Args()
		if i := slices.Index(args, "--latency-idle-max-age"); i < 0 || i+1 >= len(args) || args[i+1] != age {
			t.Errorf("latencyIdleMaxAge %s: args %v", age, args)
		}
	}
	s, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if args := s.Workload.Routes[0].Backends[0].Args(); slices.Contains(args, "--latency-idle-max-age") {
		t.Errorf("no latencyIdleMaxAge: args %v", args)
	}
	for _, bad := range []string{"-1s", "soon"} {
		_, err := Parse([]byte(with(bad)))
		var errs Errors
		if !errors.As(err, &errs) || !strings.Contains(err.Error(), "latencyIdleMaxAge") {
			t.Errorf("latencyIdleMaxAge %s: err %v, want one naming the field", bad, err)
		}
	}
}
