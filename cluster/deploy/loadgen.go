package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prequalbench/prequalbench/load/remote"
	"github.com/prequalbench/prequalbench/manifests"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels of the generator Jobs and their pods.
const (
	LoadgenName     = "prequal-loadgen"
	LoadgenRunLabel = "prequalbench.dev/loadgen-run"
	LoadgenShard    = "prequalbench.dev/loadgen-shard"
	// LoadgenContainer is the container whose log holds the report.
	LoadgenContainer = "loadgen"
)

// LoadgenOptions describe one run's generator Jobs.
type LoadgenOptions struct {
	Namespace string
	// Image is the project's own image (the prequalbench binary): the
	// ingress image.
	Image string
	// Run names the run (a DNS label part); every Job carries it.
	Run string
	// Specs is one per generator, shard i at index i.
	Specs []remote.Spec
	// Deadline bounds each Job (activeDeadlineSeconds): the lead time,
	// the warmup, the window and the drain.
	Deadline time.Duration
}

// LoadgenJobs renders one Job per shard. A Job never retries
// (backoffLimit 0): a second attempt would send its shard again and the
// merged accounting would no longer be one schedule's. Pods prefer
// distinct nodes, so N generators are N machines' worth of sending.
func LoadgenJobs(o LoadgenOptions) ([]*batchv1.Job, error) {
	if o.Namespace == "" || o.Image == "" || o.Run == "" || len(o.Specs) == 0 {
		return nil, errors.New("deploy: loadgen jobs need a namespace, an image, a run name and specs")
	}
	if o.Deadline <= 0 {
		return nil, errors.New("deploy: loadgen jobs need a deadline")
	}
	var jobs []*batchv1.Job
	for i, s := range o.Specs {
		if s.Shard != i || s.Shards != len(o.Specs) {
			return nil, fmt.Errorf("deploy: spec %d is shard %d of %d, want %d of %d", i, s.Shard, s.Shards, i, len(o.Specs))
		}
		raw, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		labels := map[string]string{
			manifests.LabelName: LoadgenName, manifests.LabelPartOf: "prequalbench", manifests.LabelManagedBy: manifests.ManagedBy,
			LoadgenRunLabel: o.Run, LoadgenShard: strconv.Itoa(i),
		}
		zero, deadline, ttl := int32(0), int64(o.Deadline/time.Second)+1, int32(600)
		no, yes, uid := false, true, int64(65532)
		jobs = append(jobs, &batchv1.Job{
			TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", LoadgenName, o.Run, i), Namespace: o.Namespace, Labels: labels},
			Spec: batchv1.JobSpec{
				BackoffLimit:            &zero,
				ActiveDeadlineSeconds:   &deadline,
				TTLSecondsAfterFinished: &ttl,
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						// The generator talks to the ingress Service only,
						// and runs as the ingress does (the distroless
						// nonroot user), so a namespace enforcing the
						// restricted Pod Security level admits it.
						AutomountServiceAccountToken: &no,
						SecurityContext: &corev1.PodSecurityContext{
							RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid,
							SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						},
						Containers: []corev1.Container{{
							Name:  LoadgenContainer,
							Image: o.Image,
							// As the ingress Deployment: an image loaded
							// into kind's nodes (even one tagged latest,
							// which defaults to Always) is never pulled.
							ImagePullPolicy: corev1.PullIfNotPresent,
							Args:            []string{"loadgen"},
							SecurityContext: &corev1.SecurityContext{
								AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
								Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							},
							Env: []corev1.EnvVar{{Name: "PREQUALBENCH_LOADGEN_SPEC", Value: string(raw)}},
							Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
								corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
							}},
						}},
						Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
							PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
								Weight: 100,
								PodAffinityTerm: corev1.PodAffinityTerm{
									TopologyKey:   corev1.LabelHostname,
									LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LoadgenRunLabel: o.Run}},
								},
							}},
						}},
					},
				},
			},
		})
	}
	return jobs, nil
}
