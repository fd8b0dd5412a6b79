package manifests

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Placement labels and taints of kind's control-plane node.
const (
	ControlPlaneLabel = "node-role.kubernetes.io/control-plane"
	// ImageIDAnnotation on a pod template carries the image's content ID,
	// so loading a rebuilt image under the same tag rolls the pods, and
	// applying the same image again changes nothing.
	ImageIDAnnotation = "prequalbench.dev/image-id"
)

// IngressOptions are the per-install settings of the ingress.
type IngressOptions struct {
	Topology Topology
	// Image is the ingress image (required).
	Image string
	// ImageID is the image's content ID, if known (see ImageIDAnnotation).
	ImageID string
	// Replicas of the ingress; default 1.
	Replicas int
	// WorkloadNamespace is where the backends, Services and Ingresses
	// live; the ingress watches only it. Default WorkloadNamespace.
	WorkloadNamespace string
	// AdminToken guards the admin API on its non-loopback listener
	// (required; stored in the AdminTokenSecret).
	AdminToken string
	// Args are extra `prequalbench ingress` flags (the scenario's policy
	// and prober settings).
	Args []string
	// LoadBalancer adds the Service LoadBalancerServiceName of type
	// LoadBalancer with only the proxy port, for clusters where the load
	// generator cannot reach a node address. The admin port stays on the
	// NodePort Service (and port-forwarding), off the public address.
	LoadBalancer bool
}

// LoadBalancerServiceName is the proxy-only LoadBalancer Service.
const LoadBalancerServiceName = IngressName + "-lb"

func (o *IngressOptions) normalize() error {
	if o.Image == "" {
		return errors.New("manifests: ingress image: want an image reference")
	}
	if o.AdminToken == "" || strings.ContainsAny(o.AdminToken, " \t\r\n") {
		return errors.New("manifests: admin token: want a non-empty token without whitespace")
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Replicas < 0 {
		return fmt.Errorf("manifests: ingress replicas %d: want >= 1", o.Replicas)
	}
	if o.WorkloadNamespace == "" {
		o.WorkloadNamespace = WorkloadNamespace
	}
	if errs := validation.IsDNS1123Label(o.WorkloadNamespace); len(errs) > 0 {
		return fmt.Errorf("manifests: namespace %q: %s", o.WorkloadNamespace, strings.Join(errs, "; "))
	}
	if o.WorkloadNamespace == SystemNamespace {
		return fmt.Errorf("manifests: namespace %q: the workload needs its own namespace, not %s", o.WorkloadNamespace, SystemNamespace)
	}
	switch o.Topology {
	case TopologyEA, TopologyEB, TopologyNone:
	default:
		return fmt.Errorf("manifests: topology %q: want e-a, e-b or none", o.Topology)
	}
	for _, a := range o.Args {
		if !strings.HasPrefix(a, "--") && strings.HasPrefix(a, "-") {
			return fmt.Errorf("manifests: ingress arg %q: want --flag or a value", a)
		}
	}
	return nil
}

// Ingress renders everything the ingress needs, in apply order: the two
// namespaces, RBAC, the IngressClass, the admin token Secret, the
// Deployment and the NodePort Service.
func Ingress(o IngressOptions) ([]*unstructured.Unstructured, error) {
	if err := o.normalize(); err != nil {
		return nil, err
	}
	objs, err := decodeDir("ingress")
	if err != nil {
		return nil, err
	}
	for _, u := range objs {
		switch {
		case u.GetKind() == "Namespace" && u.GetName() == WorkloadNamespace:
			u.SetName(o.WorkloadNamespace)
		case (u.GetKind() == "Role" || u.GetKind() == "RoleBinding") && u.GetNamespace() == WorkloadNamespace:
			u.SetNamespace(o.WorkloadNamespace)
		}
	}
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata": map[string]any{
			"name":      AdminTokenSecret,
			"namespace": SystemNamespace,
			"labels": map[string]any{
				LabelName: IngressName, LabelPartOf: ManagedBy, LabelManagedBy: ManagedBy,
			},
		},
		"type": "Opaque",
		"data": map[string]any{AdminTokenKey: base64.StdEncoding.EncodeToString([]byte(o.AdminToken))},
	}}
	i, dep := find(objs, "Deployment", IngressName)
	if dep == nil {
		return nil, errors.New("manifests: embedded ingress manifests lack the Deployment")
	}
	var d appsv1.Deployment
	if err := toTyped(dep, &d); err != nil {
		return nil, err
	}
	replicas := int32(o.Replicas)
	d.Spec.Replicas = &replicas
	c := &d.Spec.Template.Spec.Containers[0]
	c.Image = o.Image
	for j, a := range c.Args {
		if strings.HasPrefix(a, "--namespace=") {
			c.Args[j] = "--namespace=" + o.WorkloadNamespace
		}
	}
	c.Args = append(c.Args, o.Args...)
	if o.ImageID != "" {
		d.Spec.Template.Annotations = mergeLabels(d.Spec.Template.Annotations, map[string]string{ImageIDAnnotation: o.ImageID})
	}
	if o.Topology == TopologyEB {
		pinToControlPlane(&d.Spec.Template.Spec)
	} else if o.Topology == TopologyEA {
		// kind removes the control-plane taint of a single-node cluster;
		// the toleration keeps the pod schedulable if a user keeps it.
		d.Spec.Template.Spec.Tolerations = controlPlaneTolerations()
	}
	typed, err := toUnstructured(&d, appsv1.SchemeGroupVersion.WithKind("Deployment"))
	if err != nil {
		return nil, err
	}
	objs[i] = typed
	// The Secret goes before the Deployment that mounts it.
	out := make([]*unstructured.Unstructured, 0, len(objs)+2)
	out = append(out, objs[:i]...)
	out = append(out, secret)
	out = append(out, objs[i:]...)
	if o.LoadBalancer {
		out = append(out, loadBalancerService())
	}
	return out, nil
}

// loadBalancerService publishes only the proxy port; externalTrafficPolicy
// Local keeps the client address and skips the extra node hop.
func loadBalancerService() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Service",
		"metadata": map[string]any{
			"name":      LoadBalancerServiceName,
			"namespace": SystemNamespace,
			"labels":    map[string]any{LabelName: IngressName, LabelPartOf: ManagedBy, LabelManagedBy: ManagedBy},
		},
		"spec": map[string]any{
			"type":                  "LoadBalancer",
			"externalTrafficPolicy": "Local",
			"selector":              map[string]any{LabelName: IngressName},
			"ports": []any{map[string]any{
				"name": "proxy", "port": int64(ProxyPort), "targetPort": "proxy", "protocol": "TCP",
			}},
		},
	}}
}

func controlPlaneTolerations() []corev1.Toleration {
	return []corev1.Toleration{{Key: ControlPlaneLabel, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
}

// pinToControlPlane puts a pod on the control-plane node (E-B).
func pinToControlPlane(spec *corev1.PodSpec) {
	spec.NodeSelector = mergeLabels(spec.NodeSelector, map[string]string{ControlPlaneLabel: ""})
	spec.Tolerations = controlPlaneTolerations()
}
