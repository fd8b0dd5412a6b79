package manifests

import (
	"slices"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/scenario"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestWorkload_BackendShutdownSequence checks the rendered pod: a preStop
// hook that sleeps with the backend binary itself (distroless: no shell),
// the backend's grace and drain as flags, and a termination grace period
// longer than the three together, read back from the rendered values.
func TestWorkload_BackendShutdownSequence(t *testing.T) {
	s, err := scenario.Catalogue("quickstart")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Workload(s, WorkloadOptions{Image: "b:1", Algorithm: "prequal"})
	if err != nil {
		t.Fatal(err)
	}
	deployments := 0
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			continue
		}
		deployments++
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
			t.Fatal(err)
		}
		spec := d.Spec.Template.Spec
		c := spec.Containers[0]
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil {
			t.Fatalf("%s: no preStop exec hook: %+v", d.Name, c.Lifecycle)
		}
		cmd := c.Lifecycle.PreStop.Exec.Command
		if len(cmd) != 3 || cmd[0] != "/prequal-backend" || cmd[1] != "--sleep" {
			t.Fatalf("%s: preStop %q, want /prequal-backend --sleep DUR", d.Name, cmd)
		}
		sleep := duration(t, cmd[2])
		grace := duration(t, flagValue(t, c.Args, "--shutdown-grace"))
		drain := duration(t, flagValue(t, c.Args, "--drain-timeout"))
		if sleep < 2*time.Second || grace <= 0 || drain <= 0 {
			t.Errorf("%s: preStop sleep %v, grace %v, drain %v: want a sleep of seconds and positive grace and drain", d.Name, sleep, grace, drain)
		}
		if spec.TerminationGracePeriodSeconds == nil {
			t.Fatalf("%s: no termination grace period", d.Name)
		}
		if total := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second; total <= sleep+grace+drain {
			t.Errorf("%s: termination grace %v does not cover preStop %v + grace %v + drain %v", d.Name, total, sleep, grace, drain)
		}
	}
	if deployments == 0 {
		t.Fatal("no Deployment rendered")
	}
}

func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("args %q lack %s", args, name)
	}
	return args[i+1]
}

func duration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return d
}
