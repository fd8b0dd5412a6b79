package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prequalbench/prequalbench/load/remote"
	"github.com/prequalbench/prequalbench/manifests"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels of the generator Jobs and their pods.
const (
	LoadgenName     = "prequal-loadgen"
	LoadgenRunLabel = "prequalbench.dev/loadgen-run"
	LoadgenShard    = "prequalbench.dev/loadgen-shard"
	// LoadgenContainer is the container whose log holds the report.
	LoadgenContainer = "loadgen"
	// BackendApp is the backend pods' app.kubernetes.io/name (the
	// manifests' workload), which AvoidBackends keeps generators from.
	BackendApp = "prequal-backend"
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
	// Placement puts the generator pods on chosen nodes.
	Placement LoadgenPlacement
}

// LoadgenPlacement chooses the generators' nodes. By default they only
// prefer distinct nodes, and so may land beside the backends they load.
type LoadgenPlacement struct {
	// NodeSelector restricts them to nodes with these labels
	// (--generator-node-selector).
	NodeSelector map[string]string `json:"node_selector,omitempty"`
	// Tolerations let them onto tainted nodes (--generator-toleration).
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// OnePerNode requires distinct nodes (required pod anti-affinity on
	// the hostname) instead of preferring them: with fewer eligible nodes
	// than generators the surplus stays Pending and the run fails.
	OnePerNode bool `json:"one_per_node,omitempty"`
	// AvoidBackends keeps them off the nodes running backend pods of
	// their namespace (required anti-affinity), so the load is not sent
	// from the machines it measures.
	AvoidBackends bool `json:"avoid_backends,omitempty"`
}

// Validate checks the labels and tolerations as the API server would,
// naming the flag of each bad entry.
func (p LoadgenPlacement) Validate() error {
	var errs []error
	for k, v := range p.NodeSelector {
		for _, m := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("--generator-node-selector: key %q: %s", k, m))
		}
		for _, m := range validation.IsValidLabelValue(v) {
			errs = append(errs, fmt.Errorf("--generator-node-selector: value %q of %s: %s", v, k, m))
		}
	}
	for _, t := range p.Tolerations {
		if t.Key != "" {
			for _, m := range validation.IsQualifiedName(t.Key) {
				errs = append(errs, fmt.Errorf("--generator-toleration: key %q: %s", t.Key, m))
			}
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, fmt.Errorf("--generator-toleration: effect %q, want NoSchedule, PreferNoSchedule or NoExecute", t.Effect))
		}
		if t.Operator == corev1.TolerationOpEqual {
			for _, m := range validation.IsValidLabelValue(t.Value) {
				errs = append(errs, fmt.Errorf("--generator-toleration: value %q of %s: %s", t.Value, t.Key, m))
			}
		}
	}
	return errors.Join(errs...)
}

// Describe says where the generators go, for campaign.json.
func (p LoadgenPlacement) Describe() string {
	var parts []string
	if p.OnePerNode {
		parts = append(parts, "one per node (required)")
	} else {
		parts = append(parts, "preferring distinct nodes")
	}
	if p.AvoidBackends {
		parts = append(parts, "off the backends' nodes")
	}
	if len(p.NodeSelector) > 0 {
		var sel []string
		for k, v := range p.NodeSelector {
			sel = append(sel, k+"="+v)
		}
		slices.Sort(sel)
		parts = append(parts, "on nodes labelled "+strings.Join(sel, ","))
	}
	for _, t := range p.Tolerations {
		what := "every taint"
		switch {
		case t.Key != "" && t.Operator == corev1.TolerationOpEqual:
			what = t.Key + "=" + t.Value
		case t.Key != "":
			what = t.Key
		}
		if t.Effect != "" {
			what += ":" + string(t.Effect)
		}
		parts = append(parts, "tolerating "+what)
	}
	return strings.Join(parts, ", ")
}

// ParseToleration reads KEY[=VALUE][:EFFECT] (a toleration of the taint
// with that key and value, or of any value without one) or "*" (every
// taint), as --generator-toleration takes it.
func ParseToleration(s string) (corev1.Toleration, error) {
	if s == "*" {
		return corev1.Toleration{Operator: corev1.TolerationOpExists}, nil
	}
	rest, effect, _ := strings.Cut(s, ":")
	key, value, hasValue := strings.Cut(rest, "=")
	if key == "" {
		return corev1.Toleration{}, fmt.Errorf("--generator-toleration: %q: want KEY[=VALUE][:EFFECT] or *", s)
	}
	t := corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffect(effect)}
	if hasValue {
		t.Operator, t.Value = corev1.TolerationOpEqual, value
	}
	return t, LoadgenPlacement{Tolerations: []corev1.Toleration{t}}.Validate()
}

// affinity keeps one run's generators apart: required with OnePerNode,
// else preferred.
func (p LoadgenPlacement) affinity(run string) *corev1.Affinity {
	term := corev1.PodAffinityTerm{
		TopologyKey:   corev1.LabelHostname,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LoadgenRunLabel: run}},
	}
	aa := &corev1.PodAntiAffinity{}
	if p.OnePerNode {
		aa.RequiredDuringSchedulingIgnoredDuringExecution = []corev1.PodAffinityTerm{term}
	} else {
		aa.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: term}}
	}
	if p.AvoidBackends {
		aa.RequiredDuringSchedulingIgnoredDuringExecution = append(aa.RequiredDuringSchedulingIgnoredDuringExecution, corev1.PodAffinityTerm{
			TopologyKey:   corev1.LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{manifests.LabelName: BackendApp}},
		})
	}
	return &corev1.Affinity{PodAntiAffinity: aa}
}

// LoadgenJobs renders one Job per shard. A Job never retries
// (backoffLimit 0): a second attempt would send its shard again and the
// merged accounting would no longer be one schedule's. Pods prefer (or,
// with Placement.OnePerNode, require) distinct nodes, so N generators are
// N machines' worth of sending.
func LoadgenJobs(o LoadgenOptions) ([]*batchv1.Job, error) {
	if o.Namespace == "" || o.Image == "" || o.Run == "" || len(o.Specs) == 0 {
		return nil, errors.New("deploy: loadgen jobs need a namespace, an image, a run name and specs")
	}
	if o.Deadline <= 0 {
		return nil, errors.New("deploy: loadgen jobs need a deadline")
	}
	if err := o.Placement.Validate(); err != nil {
		return nil, err
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
							// Its clock, for the campaign's offset
							// measurement through the pod proxy.
							Ports: []corev1.ContainerPort{{Name: "clock", ContainerPort: remote.ClockPort, Protocol: corev1.ProtocolTCP}},
							SecurityContext: &corev1.SecurityContext{
								AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
								Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							},
							Env: []corev1.EnvVar{{Name: "PREQUALBENCH_LOADGEN_SPEC", Value: string(raw)}},
							Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
								corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
							}},
						}},
						Affinity:     o.Placement.affinity(o.Run),
						NodeSelector: o.Placement.NodeSelector,
						Tolerations:  o.Placement.Tolerations,
					},
				},
			},
		})
	}
	return jobs, nil
}
