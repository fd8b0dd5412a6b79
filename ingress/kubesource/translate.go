package kubesource

import (
	"errors"
	"fmt"
	"log/slog"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/manifests/gatewayapi"
)

// Resolver maps an HTTPRoute's backendRef (its namespace, Service name
// and port) to a route key and endpoints; ok false is a missing Service.
type Resolver func(namespace, name string, port int32) (key string, endpoints []string, ok bool)

// fileGateway names the implicit Gateway TranslateHTTPRoutes attaches
// routes to.
const fileGateway = "routes-file"

// TranslateHTTPRoutes maps HTTPRoute objects onto the route model with the
// same code that serves them from a cluster, for the routes file: each is
// attached to an implicit Gateway of ours with one HTTP listener admitting
// every namespace (parentRefs are replaced), a route without a namespace
// is in "default", and backendRefs resolve through resolve. Where a
// cluster would get a status condition that is not True, this returns an
// error naming the route, the condition and its message.
func TranslateHTTPRoutes(objs []*unstructured.Unstructured, resolve Resolver) ([]route.Spec, error) {
	s := &Source{log: slog.New(slog.DiscardHandler), warned: map[string]bool{}}
	gwNS := "routes-file-system"
	class := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gatewayapi.GroupVersion.String(), "kind": "GatewayClass",
		"metadata": map[string]any{"name": fileGateway},
		"spec":     map[string]any{"controllerName": ControllerName},
	}}
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gatewayapi.GroupVersion.String(), "kind": "Gateway",
		"metadata": map[string]any{"name": fileGateway, "namespace": gwNS},
		"spec": map[string]any{"gatewayClassName": fileGateway, "listeners": []any{map[string]any{
			"name": "http", "port": int64(80), "protocol": "HTTP",
			"allowedRoutes": map[string]any{"namespaces": map[string]any{"from": "All"}},
		}}},
	}}
	snap := gwSnapshot{classes: []*unstructured.Unstructured{class}, gateways: []*unstructured.Unstructured{gw}}
	var errs []error
	for i, o := range objs {
		if o.GetAPIVersion() != gatewayapi.GroupVersion.String() || o.GetKind() != kindHTTPRoute {
			errs = append(errs, fmt.Errorf("httpRoutes[%d]: apiVersion %q kind %q: want %s %s", i, o.GetAPIVersion(), o.GetKind(), gatewayapi.GroupVersion, kindHTTPRoute))
			continue
		}
		if o.GetName() == "" {
			errs = append(errs, fmt.Errorf("httpRoutes[%d]: metadata.name is required", i))
			continue
		}
		o = o.DeepCopy()
		if o.GetNamespace() == "" {
			o.SetNamespace("default")
		}
		if err := unstructured.SetNestedSlice(o.Object, []any{map[string]any{"name": fileGateway, "namespace": gwNS}}, "spec", "parentRefs"); err != nil {
			errs = append(errs, fmt.Errorf("httpRoutes[%d]: %w", i, err))
			continue
		}
		unstructured.RemoveNestedField(o.Object, "status")
		snap.routes = append(snap.routes, o)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var specs []route.Spec
	be := &backends{memo: map[string][]string{}, static: resolve}
	updates := s.computeGateway(snap, be, &specs)
	for _, u := range updates {
		if u.resource != gatewayapi.HTTPRoutes {
			continue
		}
		parents, _, _ := unstructured.NestedSlice(u.obj.Object, "status", "parents")
		for _, p := range parents {
			conds, _, _ := unstructured.NestedSlice(p.(map[string]any), "conditions")
			for _, c := range conds {
				m := c.(map[string]any)
				if m["status"] != "True" {
					errs = append(errs, fmt.Errorf("HTTPRoute %s/%s: %v %v (%v): %v", u.obj.GetNamespace(), u.obj.GetName(), m["type"], m["status"], m["reason"], m["message"]))
				}
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return specs, nil
}
