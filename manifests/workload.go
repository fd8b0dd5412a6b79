package manifests

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/prequalbench/prequalbench/scenario"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels of workload objects. LabelComponent=ComponentWorkload marks what
// Prune may delete when the next scenario no longer has it.
const (
	LabelComponent    = "prequalbench.dev/component"
	ComponentWorkload = "workload"
	LabelScenario     = "prequalbench.dev/scenario"
	LabelRoute        = "prequalbench.dev/route"
	LabelGroup        = "prequalbench.dev/group"
)

// WorkloadKinds are the kinds Workload renders (for Prune; a cluster
// without the Gateway API has none of its kinds to prune).
var WorkloadKinds = []schema.GroupVersionKind{
	networkingv1.SchemeGroupVersion.WithKind("Ingress"),
	HTTPRouteKind,
	GatewayKind,
	corev1.SchemeGroupVersion.WithKind("Service"),
	appsv1.SchemeGroupVersion.WithKind("Deployment"),
}

// WorkloadSelector selects every object Workload renders.
var WorkloadSelector = LabelManagedBy + "=" + ManagedBy + "," + LabelComponent + "=" + ComponentWorkload

// WorkloadOptions are the settings of a scenario's deployment.
type WorkloadOptions struct {
	Topology Topology
	// Namespace of the workload; default WorkloadNamespace.
	Namespace string
	// Image is the backend image (required); ImageID its content ID.
	Image   string
	ImageID string
	// Algorithm is written into every Ingress's AlgorithmAnnotation
	// (required; the canonical policy name).
	Algorithm string
}

// Workload renders a scenario: per backend group a Deployment of the Rust
// backend with the group's settings as flags; per route a Service over all
// of the route's groups and an Ingress of class prequal carrying the
// algorithm annotation, or, with ingress.routing: gateway, one Gateway of
// class prequal and an HTTPRoute per route carrying it. Deployments come
// first, then Services, then the routes, so a route never points at a
// missing Service.
func Workload(s *scenario.Scenario, o WorkloadOptions) ([]*unstructured.Unstructured, error) {
	if s == nil {
		return nil, errors.New("manifests: workload: no scenario")
	}
	if o.Namespace == "" {
		o.Namespace = WorkloadNamespace
	}
	if o.Image == "" {
		return nil, errors.New("manifests: backend image: want an image reference")
	}
	if o.Algorithm == "" {
		return nil, errors.New("manifests: algorithm: want a policy name")
	}
	var deps, svcs, ings []*unstructured.Unstructured
	seen := map[string]string{}
	for ri, r := range s.Workload.Routes {
		field := fmt.Sprintf("workload.routes[%d]", ri)
		if err := dnsName(field+".name", r.Name, seen, "route"); err != nil {
			return nil, err
		}
		for gi, g := range r.Backends {
			gfield := fmt.Sprintf("%s.backends[%d]", field, gi)
			if err := dnsName(gfield+".name", g.Name, seen, "group"); err != nil {
				return nil, err
			}
			u, err := backendDeployment(s, r, g, o)
			if err != nil {
				return nil, err
			}
			deps = append(deps, u)
		}
		svc, err := routeService(s, r, o)
		if err != nil {
			return nil, err
		}
		svcs = append(svcs, svc)
		if s.Ingress.UsesGateway() {
			ings = append(ings, HTTPRoute(s, r, o.Namespace, o.Algorithm))
			continue
		}
		ing, err := routeIngress(s, r, o)
		if err != nil {
			return nil, err
		}
		ings = append(ings, ing)
	}
	out := append(deps, svcs...)
	if s.Ingress.UsesGateway() {
		out = append(out, routeGateway(s, o))
	}
	return append(out, ings...), nil
}

// dnsName checks a name becomes a valid object name and is unique.
func dnsName(field, name string, seen map[string]string, what string) error {
	if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
		return fmt.Errorf("manifests: %s %q: want a DNS label (lower case letters, digits, '-', starting with a letter): %s", field, name, strings.Join(errs, "; "))
	}
	key := what + "/" + name
	if prev, ok := seen[key]; ok {
		return fmt.Errorf("manifests: %s %q: already used by %s", field, name, prev)
	}
	seen[key] = field
	return nil
}

func workloadLabels(s *scenario.Scenario, route string) map[string]string {
	return map[string]string{
		LabelManagedBy: ManagedBy,
		LabelPartOf:    ManagedBy,
		LabelComponent: ComponentWorkload,
		LabelScenario:  s.Name,
		LabelRoute:     route,
	}
}

// Shutdown of a backend pod, in order. At deletion the pod leaves the
// EndpointSlices while the preStop hook sleeps, so ingresses stop picking it
// before it is signalled; the distroless image has no shell or sleep, so
// the backend binary sleeps (--sleep), which works on any Kubernetes
// version, unlike the lifecycle sleep action (v1.30+). Then SIGTERM: the
// backend still accepts and serves for its shutdown grace (for ingresses
// that learn late), closes its listener and drains for up to its drain
// timeout. The termination grace period covers all three plus a margin.
const (
	backendBinary           = "/prequal-backend" // backend/Dockerfile's ENTRYPOINT
	backendPreStopSleep     = 5                  // seconds
	backendShutdownGrace    = 3                  // seconds, --shutdown-grace
	backendDrainTimeout     = 30                 // seconds, --drain-timeout
	backendTerminationGrace = backendPreStopSleep + backendShutdownGrace + backendDrainTimeout + 2
)

func backendDeployment(s *scenario.Scenario, r scenario.Route, g scenario.BackendGroup, o WorkloadOptions) (*unstructured.Unstructured, error) {
	labels := workloadLabels(s, r.Name)
	labels[LabelGroup] = g.Name
	labels[LabelName] = "prequal-backend"
	podLabels := map[string]string{LabelGroup: g.Name, LabelRoute: r.Name, LabelName: "prequal-backend", LabelPartOf: ManagedBy}
	replicas := int32(g.Replicas)
	args := append([]string{
		"--listen", "0.0.0.0:" + strconv.Itoa(BackendPort),
		"--shutdown-grace", strconv.Itoa(backendShutdownGrace) + "s",
		"--drain-timeout", strconv.Itoa(backendDrainTimeout) + "s",
	}, g.Args()...)
	nonRoot := true
	uid := int64(65532)
	noEsc := false
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: g.Name, Namespace: o.Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelGroup: g.Name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken:  &noEsc,
					TerminationGracePeriodSeconds: ptr(int64(backendTerminationGrace)),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: &nonRoot, RunAsUser: &uid, RunAsGroup: &uid,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:            "backend",
						Image:           o.Image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Args:            args,
						Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: BackendPort, Protocol: corev1.ProtocolTCP}},
						Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
							Command: []string{backendBinary, "--sleep", strconv.Itoa(backendPreStopSleep) + "s"},
						}}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
							PeriodSeconds: 2,
						},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
						},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: &noEsc,
							ReadOnlyRootFilesystem:   &nonRoot,
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				},
			},
		},
	}
	if o.ImageID != "" {
		d.Spec.Template.Annotations = map[string]string{ImageIDAnnotation: o.ImageID}
	}
	if o.Topology == TopologyEB {
		spreadOverWorkers(&d.Spec.Template.Spec, g.Name)
	}
	return toUnstructured(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))
}

// spreadOverWorkers keeps backends off the control-plane node (where the
// ingress runs on E-B) and spreads each group evenly over the workers.
func spreadOverWorkers(spec *corev1.PodSpec, group string) {
	spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: ControlPlaneLabel, Operator: corev1.NodeSelectorOpDoesNotExist,
			}}}},
		},
	}}
	honor := corev1.NodeInclusionPolicyHonor
	spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew:            1,
		TopologyKey:        "kubernetes.io/hostname",
		WhenUnsatisfiable:  corev1.DoNotSchedule,
		LabelSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{LabelGroup: group}},
		NodeAffinityPolicy: &honor,
		NodeTaintsPolicy:   &honor,
	}}
}

func routeService(s *scenario.Scenario, r scenario.Route, o WorkloadOptions) (*unstructured.Unstructured, error) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: o.Namespace, Labels: workloadLabels(s, r.Name)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{LabelRoute: r.Name, LabelName: "prequal-backend"},
			Ports: []corev1.ServicePort{{
				Name: "http", Port: BackendPort, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
	return toUnstructured(svc, corev1.SchemeGroupVersion.WithKind("Service"))
}

func routeIngress(s *scenario.Scenario, r scenario.Route, o WorkloadOptions) (*unstructured.Unstructured, error) {
	path := r.Path
	if path == "" {
		path = "/work"
	}
	pt := networkingv1.PathTypePrefix
	if r.PathType == "Exact" {
		pt = networkingv1.PathTypeExact
	}
	class := IngressClassName
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{
			Name: r.Name, Namespace: o.Namespace, Labels: workloadLabels(s, r.Name),
			Annotations: map[string]string{AlgorithmAnnotation: o.Algorithm},
		},
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			Rules: []networkingv1.IngressRule{{
				Host: r.Host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{
						Path: path, PathType: &pt,
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
							Name: r.Name, Port: networkingv1.ServiceBackendPort{Number: BackendPort},
						}},
					}},
				}},
			}},
		},
	}
	return toUnstructured(ing, networkingv1.SchemeGroupVersion.WithKind("Ingress"))
}

func ptr[T any](v T) *T { return &v }
