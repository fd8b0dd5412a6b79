package deploy

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/load"
	"github.com/prequalbench/prequalbench/load/remote"
	corev1 "k8s.io/api/core/v1"
)

// Each shard's Job runs `loadgen` with its own spec, never retries (a
// retry would send the shard twice), is bounded by its deadline and
// carries the run and shard labels the campaign finds its pods by.
func TestLoadgenJobs(t *testing.T) {
	cfg := load.Config{Targets: []load.Target{{URL: "http://prequal-ingress.prequalbench-system.svc:8080/work"}},
		Open: []load.Phase{{Kind: load.KindConstant, Rate: 100, Duration: time.Second}}}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	specs := []remote.Spec{remote.NewSpec(cfg, 0, 3, start), remote.NewSpec(cfg, 1, 3, start), remote.NewSpec(cfg, 2, 3, start)}
	jobs, err := LoadgenJobs(LoadgenOptions{Namespace: "ns", Image: "img:latest", Run: "r1", Specs: specs, Deadline: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 3 {
		t.Fatalf("%d jobs", len(jobs))
	}
	for i, j := range jobs {
		if *j.Spec.BackoffLimit != 0 || *j.Spec.ActiveDeadlineSeconds != 91 || j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("job %d: backoff %d, deadline %d, restart %s", i, *j.Spec.BackoffLimit, *j.Spec.ActiveDeadlineSeconds, j.Spec.Template.Spec.RestartPolicy)
		}
		if j.Spec.Template.Labels[LoadgenRunLabel] != "r1" || j.Spec.Template.Labels[LoadgenShard] != []string{"0", "1", "2"}[i] {
			t.Errorf("job %d: labels %v", i, j.Spec.Template.Labels)
		}
		c := j.Spec.Template.Spec.Containers[0]
		var s remote.Spec
		if err := json.Unmarshal([]byte(c.Env[0].Value), &s); err != nil {
			t.Fatal(err)
		}
		// An image loaded into kind is used as loaded, even tagged latest
		// (whose default policy is Always), and the pod passes the
		// restricted Pod Security level.
		ps := j.Spec.Template.Spec
		if c.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("job %d: image pull policy %q", i, c.ImagePullPolicy)
		}
		if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken || ps.SecurityContext == nil ||
			ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot || ps.SecurityContext.SeccompProfile == nil ||
			c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation ||
			c.SecurityContext.Capabilities == nil || len(c.SecurityContext.Capabilities.Drop) != 1 {
			t.Errorf("job %d: pod security %+v, container %+v", i, ps.SecurityContext, c.SecurityContext)
		}
		if c.Image != "img:latest" || strings.Join(c.Args, " ") != "loadgen" || s.Shard != i || s.Shards != 3 || !s.StartAt.Equal(start) {
			t.Errorf("job %d: image %s, args %v, spec shard %d/%d from %v", i, c.Image, c.Args, s.Shard, s.Shards, s.StartAt)
		}
	}
	if _, err := LoadgenJobs(LoadgenOptions{Namespace: "ns", Image: "i", Run: "r", Specs: specs[1:], Deadline: time.Minute}); err == nil {
		t.Error("specs out of shard order accepted")
	}
}
