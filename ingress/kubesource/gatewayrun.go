package kubesource

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/prequalbench/prequalbench/manifests/gatewayapi"
)

// mayWatchGatewayAPI asks the kube-apiserver whether the ingress may list
// and watch the three kinds: an informer it may not list never syncs, and
// the ingress would never turn ready. Without the permission (RBAC from
// before the Gateway API support) it warns and serves Ingresses only.
func (s *Source) mayWatchGatewayAPI(ctx context.Context) (bool, error) {
	for _, r := range []schema.GroupVersionResource{gatewayapi.GatewayClasses, gatewayapi.Gateways, gatewayapi.HTTPRoutes} {
		ns := s.namespace
		if r == gatewayapi.GatewayClasses {
			ns = ""
		}
		for _, verb := range []string{"list", "watch"} {
			review, err := s.client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: ns, Verb: verb, Group: r.Group, Resource: r.Resource,
				}},
			}, metav1.CreateOptions{})
			if err != nil {
				return false, fmt.Errorf("kubesource: access review for %s: %w", r.Resource, err)
			}
			if !review.Status.Allowed {
				s.log.Warn("the Gateway API is served but the ingress may not "+verb+" "+r.Resource+"; watching Ingresses only",
					"namespace", ns)
				return false, nil
			}
		}
	}
	return true, nil
}

// statusTimeout bounds one status write, so an unreachable kube-apiserver
// holds the reconcile loop up only briefly.
const statusTimeout = 5 * time.Second

// statusRetry is how long after a failed status write the source
// reconciles again to retry it.
const statusRetry = 2 * time.Second

// gatewayAPIServed asks discovery whether the kube-apiserver serves the
// three Gateway API resources the source watches, and whether the ingress
// may watch them. Without them (CRDs not installed) the source watches
// Ingresses only; installing them later needs a restart of the ingress.
// Other errors are retried until ctx ends.
func (s *Source) gatewayAPIServed(ctx context.Context) (bool, error) {
	for {
		served, err := s.gatewayAPIDiscovered()
		if err == nil && served {
			served, err = s.mayWatchGatewayAPI(ctx)
		}
		if err == nil {
			return served, nil
		}
		s.log.Warn("Gateway API discovery failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// gatewayAPIDiscovered: discovery lists the three resources.
func (s *Source) gatewayAPIDiscovered() (bool, error) {
	list, err := s.client.Discovery().ServerResourcesForGroupVersion(gatewayapi.GroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var names []string
	for _, r := range list.APIResources {
		names = append(names, r.Name)
	}
	for _, r := range []string{gatewayapi.GatewayClasses.Resource, gatewayapi.Gateways.Resource, gatewayapi.HTTPRoutes.Resource} {
		if !slices.Contains(names, r) {
			return false, nil
		}
	}
	return true, nil
}

// startGatewayInformers watches GatewayClasses (cluster-scoped), Gateways
// and HTTPRoutes (in the source's namespace, or all) with dynamic
// informers whose caches hold the objects stripped of managedFields.
func (s *Source) startGatewayInformers(ctx context.Context, wg *sync.WaitGroup, handler cache.ResourceEventHandler) (*gwStores, []cache.InformerSynced, error) {
	clusterF := dynamicinformer.NewDynamicSharedInformerFactory(s.dyn, 0)
	nsF := dynamicinformer.NewFilteredDynamicSharedInformerFactory(s.dyn, 0, s.namespace, nil)
	infs := []cache.SharedIndexInformer{
		clusterF.ForResource(gatewayapi.GatewayClasses).Informer(),
		nsF.ForResource(gatewayapi.Gateways).Informer(),
		nsF.ForResource(gatewayapi.HTTPRoutes).Informer(),
	}
	var synced []cache.InformerSynced
	for _, inf := range infs {
		if err := inf.SetTransform(stripForCache); err != nil {
			return nil, nil, fmt.Errorf("kubesource: gateway informer transform: %w", err)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, nil, fmt.Errorf("kubesource: gateway event handler: %w", err)
		}
		synced = append(synced, inf.HasSynced)
	}
	clusterF.Start(ctx.Done())
	nsF.Start(ctx.Done())
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		clusterF.Shutdown()
		nsF.Shutdown()
	}()
	return &gwStores{classes: infs[0].GetStore(), gateways: infs[1].GetStore(), routes: infs[2].GetStore()}, synced, nil
}

// writeStatus writes the status subresources a reconcile asked for. A
// write that fails (a conflict with a newer version, the kube-apiserver
// away) is retried by reconciling again a little later.
func (s *Source) writeStatus(ctx context.Context, updates []statusUpdate) {
	failed := false
	for _, u := range updates {
		wctx, cancel := context.WithTimeout(ctx, statusTimeout)
		ri := s.dyn.Resource(u.resource).Namespace(u.obj.GetNamespace())
		_, err := ri.UpdateStatus(wctx, u.obj, metav1.UpdateOptions{FieldManager: fieldManager})
		cancel()
		if err != nil && !apierrors.IsNotFound(err) {
			failed = true
			if !apierrors.IsConflict(err) {
				s.log.Warn("status write failed; retrying", "resource", u.resource.Resource,
					"object", u.obj.GetNamespace()+"/"+u.obj.GetName(), "err", err)
			}
		}
	}
	if failed && ctx.Err() == nil {
		time.AfterFunc(statusRetry, s.markDirty)
	}
}

// fieldManager names the ingress in the objects' managedFields.
const fieldManager = "prequalbench-ingress"
