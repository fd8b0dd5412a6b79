// Package deploy puts a scenario on a cluster: the ingress with the
// scenario's replicas and policy flags, and the scenario's workload (a
// Deployment per backend group, a Service and an Ingress or HTTPRoute per
// route), all by
// server-side apply; it removes what the previous scenario left and waits
// for every rollout. The kind and kube environments share it.
package deploy

import (
	"context"
	"errors"
	"fmt"

	"github.com/prequalbench/prequalbench/cluster/kubeapply"
	"github.com/prequalbench/prequalbench/manifests"
	"github.com/prequalbench/prequalbench/scenario"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Options say where and with what images.
type Options struct {
	Topology manifests.Topology
	// Namespace of the workload; default manifests.WorkloadNamespace.
	Namespace      string
	IngressImage   string
	IngressImageID string
	BackendImage   string
	BackendImageID string
	// AdminToken for the ingress's admin API (see kind.AdminToken).
	AdminToken string
	// Algorithm every route starts with (canonical name).
	Algorithm string
	// LoadBalancer also publishes the proxy through a LoadBalancer Service
	// (see manifests.IngressOptions.LoadBalancer).
	LoadBalancer bool
}

// Result is what Scenario did.
type Result struct {
	// Deployments are the backend Deployments, in scenario order.
	Deployments []string
	// Deleted lists what the previous scenario had and this one does not.
	Deleted []string
}

// Scenario applies the ingress and the workload of s, prunes leftovers and
// waits until the ingress and every backend group are rolled out.
func Scenario(ctx context.Context, c *kubeapply.Client, s *scenario.Scenario, o Options) (Result, error) {
	if s == nil {
		return Result{}, errors.New("deploy: no scenario")
	}
	if o.Namespace == "" {
		o.Namespace = manifests.WorkloadNamespace
	}
	ing, err := manifests.Ingress(manifests.IngressOptions{
		Topology: o.Topology, Image: o.IngressImage, ImageID: o.IngressImageID,
		Replicas: s.Ingress.Replicas, WorkloadNamespace: o.Namespace, AdminToken: o.AdminToken,
		Args: s.Ingress.Args(), LoadBalancer: o.LoadBalancer,
	})
	if err != nil {
		return Result{}, err
	}
	wl, err := manifests.Workload(s, manifests.WorkloadOptions{
		Topology: o.Topology, Namespace: o.Namespace, Image: o.BackendImage, ImageID: o.BackendImageID, Algorithm: o.Algorithm,
	})
	if err != nil {
		return Result{}, err
	}
	if err := c.Apply(ctx, ing); err != nil {
		return Result{}, err
	}
	if s.Ingress.UsesGateway() {
		// cluster up installs it; a cluster made before it did gets it here.
		if err := GatewayAPI(ctx, c); err != nil {
			return Result{}, err
		}
	}
	var res Result
	if !o.LoadBalancer {
		// A LoadBalancer Service a previous campaign asked for costs money
		// on a cloud and would still attract the load; remove it.
		err := c.Kube.CoreV1().Services(manifests.SystemNamespace).Delete(ctx, manifests.LoadBalancerServiceName, metav1.DeleteOptions{})
		switch {
		case err == nil:
			res.Deleted = append(res.Deleted, "Service "+manifests.SystemNamespace+"/"+manifests.LoadBalancerServiceName)
		case !apierrors.IsNotFound(err):
			return res, fmt.Errorf("deploy: delete the LoadBalancer Service: %w", err)
		}
	}
	if err := c.Apply(ctx, wl); err != nil {
		return Result{}, err
	}
	pruned, err := c.Prune(ctx, o.Namespace, manifests.WorkloadSelector, manifests.WorkloadKinds, wl)
	res.Deleted = append(res.Deleted, pruned...)
	if err != nil {
		return res, err
	}
	for _, u := range wl {
		if u.GetKind() == "Deployment" {
			res.Deployments = append(res.Deployments, u.GetName())
		}
	}
	if err := c.WaitRollouts(ctx, manifests.SystemNamespace, manifests.IngressName); err != nil {
		return res, err
	}
	return res, c.WaitRollouts(ctx, o.Namespace, res.Deployments...)
}

// SetAlgorithm re-applies the workload's Ingresses (or HTTPRoutes) with a new algorithm
// annotation; the ingress's informers pick it up. The annotation (not the
// admin API) is the durable setting, so it survives an ingress restart.
func SetAlgorithm(ctx context.Context, c *kubeapply.Client, s *scenario.Scenario, o Options, algorithm string) error {
	if o.Namespace == "" {
		o.Namespace = manifests.WorkloadNamespace
	}
	o.Algorithm = algorithm
	wl, err := manifests.Workload(s, manifests.WorkloadOptions{
		Topology: o.Topology, Namespace: o.Namespace, Image: o.BackendImage, ImageID: o.BackendImageID, Algorithm: o.Algorithm,
	})
	if err != nil {
		return err
	}
	var ings = wl[:0:0]
	for _, u := range wl {
		if u.GetKind() == "Ingress" || u.GroupVersionKind() == manifests.HTTPRouteKind {
			ings = append(ings, u)
		}
	}
	return c.Apply(ctx, ings)
}

// GatewayAPI installs the Gateway API's standard CRDs (the embedded
// gatewayapi.Version), waits until they are served, then applies the rest
// of manifests.GatewayAPI (its admission policy and the ingress's
// GatewayClass). Applying it again changes nothing.
func GatewayAPI(ctx context.Context, c *kubeapply.Client) error {
	objs, err := manifests.GatewayAPI()
	if err != nil {
		return err
	}
	var crds, rest []*unstructured.Unstructured
	var names []string
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
			names = append(names, o.GetName())
		} else {
			rest = append(rest, o)
		}
	}
	if err := c.Apply(ctx, crds); err != nil {
		return err
	}
	if err := c.WaitEstablished(ctx, names...); err != nil {
		return err
	}
	return c.Apply(ctx, rest)
}
