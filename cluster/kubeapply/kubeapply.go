// Package kubeapply applies objects to a Kubernetes API with server-side
// apply (field manager "prequalbench"), prunes what a previous apply left,
// waits for Deployment rollouts and restarts Deployments. It is the only
// code that writes to a cluster; what to write comes from manifests/.
package kubeapply

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager owns every field prequalbench applies.
const FieldManager = "prequalbench"

// RestartAnnotation is the pod-template annotation a restart sets, the
// same one `kubectl rollout restart` uses.
const RestartAnnotation = "kubectl.kubernetes.io/restartedAt"

// Client applies objects and watches rollouts.
type Client struct {
	Kube    kubernetes.Interface
	dynamic dynamic.Interface
	mapper  meta.ResettableRESTMapper
	// Progress, if set, receives one line per step ("applied Deployment
	// prequalbench/fast", "waiting for ...").
	Progress func(string)
	// Poll is the interval between rollout checks; default 500 ms.
	Poll time.Duration
}

// New builds a Client from a REST configuration.
func New(cfg *rest.Config) (*Client, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeapply: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeapply: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeapply: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	return &Client{Kube: kube, dynamic: dyn, mapper: mapper}, nil
}

func (c *Client) progress(format string, args ...any) {
	if c.Progress != nil {
		c.Progress(fmt.Sprintf(format, args...))
	}
}

func (c *Client) resource(gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, bool, error) {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		// A kind installed since the mapper's first lookup (rare): refresh once.
		c.mapper.Reset()
		m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, false, fmt.Errorf("kubeapply: %s: %w", gvk, err)
		}
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if namespace == "" {
			return nil, false, fmt.Errorf("kubeapply: %s: namespaced kind without metadata.namespace", gvk.Kind)
		}
		return c.dynamic.Resource(m.Resource).Namespace(namespace), true, nil
	}
	return c.dynamic.Resource(m.Resource), false, nil
}

// Apply server-side applies objs in order, forcing ownership of the
// fields prequalbench sets (it is the only writer of these objects).
// Applying the same objects twice changes nothing.
func (c *Client) Apply(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		ri, _, err := c.resource(o.GroupVersionKind(), o.GetNamespace())
		if err != nil {
			return err
		}
		body, err := json.Marshal(o.Object)
		if err != nil {
			return fmt.Errorf("kubeapply: encode %s: %w", describe(o), err)
		}
		force := true
		if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: FieldManager, Force: &force}); err != nil {
			return fmt.Errorf("kubeapply: apply %s: %w", describe(o), err)
		}
		c.progress("applied %s", describe(o))
	}
	return nil
}

// Get reads the live version of o.
func (c *Client) Get(ctx context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, _, err := c.resource(o.GroupVersionKind(), o.GetNamespace())
	if err != nil {
		return nil, err
	}
	got, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubeapply: get %s: %w", describe(o), err)
	}
	return got, nil
}

func describe(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetKind() + " " + o.GetName()
	}
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// Prune deletes the objects of the given kinds in namespace that match
// selector but are not in keep: what the previous scenario deployed and
// this one does not. It returns what it deleted ("Kind name"), sorted.
func (c *Client) Prune(ctx context.Context, namespace, selector string, kinds []schema.GroupVersionKind, keep []*unstructured.Unstructured) ([]string, error) {
	kept := map[string]bool{}
	for _, o := range keep {
		kept[o.GroupVersionKind().GroupKind().String()+"/"+o.GetNamespace()+"/"+o.GetName()] = true
	}
	var deleted []string
	for _, gvk := range kinds {
		ri, _, err := c.resource(gvk, namespace)
		if meta.IsNoMatchError(err) {
			continue // the cluster does not serve the kind: nothing to prune
		}
		if err != nil {
			return deleted, err
		}
		list, err := ri.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return deleted, fmt.Errorf("kubeapply: list %s in %s: %w", gvk.Kind, namespace, err)
		}
		for _, item := range list.Items {
			if kept[gvk.GroupKind().String()+"/"+item.GetNamespace()+"/"+item.GetName()] {
				continue
			}
			policy := metav1.DeletePropagationBackground
			if err := ri.Delete(ctx, item.GetName(), metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil && !apierrors.IsNotFound(err) {
				return deleted, fmt.Errorf("kubeapply: delete %s %s/%s: %w", gvk.Kind, namespace, item.GetName(), err)
			}
			name := gvk.Kind + " " + item.GetNamespace() + "/" + item.GetName()
			c.progress("deleted %s (not in this scenario)", name)
			deleted = append(deleted, name)
		}
	}
	sort.Strings(deleted)
	return deleted, nil
}

// RolloutStatus says whether a Deployment's current spec is fully rolled
// out, as `kubectl rollout status` decides it, and if not, why. It returns
// an error when the rollout cannot finish (progress deadline exceeded).
func RolloutStatus(d *appsv1.Deployment) (done bool, why string, err error) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	if st.ObservedGeneration < d.Generation {
		return false, fmt.Sprintf("controller has not seen generation %d yet", d.Generation), nil
	}
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return false, "", fmt.Errorf("kubeapply: deployment %s/%s exceeded its progress deadline: %s", d.Namespace, d.Name, c.Message)
		}
	}
	switch {
	case st.UpdatedReplicas < want:
		return false, fmt.Sprintf("%d of %d replicas updated", st.UpdatedReplicas, want), nil
	case st.Replicas > st.UpdatedReplicas:
		return false, fmt.Sprintf("%d old replicas pending termination", st.Replicas-st.UpdatedReplicas), nil
	case st.AvailableReplicas < st.UpdatedReplicas:
		return false, fmt.Sprintf("%d of %d updated replicas available", st.AvailableReplicas, st.UpdatedReplicas), nil
	}
	return true, fmt.Sprintf("%d replicas ready", want), nil
}

// WaitRollouts waits until every named Deployment in namespace is rolled
// out, reporting progress when a Deployment's state changes.
func (c *Client) WaitRollouts(ctx context.Context, namespace string, names ...string) error {
	poll := c.Poll
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	pending := append([]string(nil), names...)
	last := map[string]string{}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		var still []string
		for _, n := range pending {
			d, err := c.Kube.AppsV1().Deployments(namespace).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("kubeapply: waiting for deployment %s/%s: %w", namespace, n, ctx.Err())
				}
				return fmt.Errorf("kubeapply: deployment %s/%s: %w", namespace, n, err)
			}
			done, why, err := RolloutStatus(d)
			if err != nil {
				return err
			}
			if why != last[n] {
				c.progress("deployment %s/%s: %s", namespace, n, why)
				last[n] = why
			}
			if !done {
				still = append(still, n)
			}
		}
		if len(still) == 0 {
			return nil
		}
		pending = still
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubeapply: waiting for rollout of %s in %s: %w (%s)", strings.Join(pending, ", "), namespace, ctx.Err(), last[pending[0]])
		case <-tick.C:
		}
	}
}

// Restart rolls a Deployment's pods (as `kubectl rollout restart` does)
// and waits until the new pods are ready and the old ones gone.
func (c *Client) Restart(ctx context.Context, namespace, name string, now time.Time) error {
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, RestartAnnotation, now.UTC().Format(time.RFC3339Nano))
	if _, err := c.Kube.AppsV1().Deployments(namespace).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: FieldManager + "-restart"}); err != nil {
		return fmt.Errorf("kubeapply: restart deployment %s/%s: %w", namespace, name, err)
	}
	c.progress("restarted deployment %s/%s", namespace, name)
	return c.WaitRollouts(ctx, namespace, name)
}

// crdResource is apiextensions.k8s.io/v1 CustomResourceDefinitions.
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// WaitEstablished waits until every named CustomResourceDefinition is
// Established (its kind is served), so objects of it can be applied next.
func (c *Client) WaitEstablished(ctx context.Context, names ...string) error {
	poll := c.Poll
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	pending := slices.Clone(names)
	for {
		var still []string
		for _, n := range pending {
			u, err := c.dynamic.Resource(crdResource).Get(ctx, n, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("kubeapply: CustomResourceDefinition %s: %w", n, err)
			}
			if err != nil || !established(u) {
				still = append(still, n)
			}
		}
		if len(still) == 0 {
			c.mapper.Reset() // the new kinds are served now
			return nil
		}
		pending = still
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubeapply: waiting for CustomResourceDefinitions %s to be established: %w", strings.Join(pending, ", "), ctx.Err())
		case <-tick.C:
		}
	}
}

func established(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
