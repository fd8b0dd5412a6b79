package manifests

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/prequalbench/prequalbench/manifests/gatewayapi"
	"github.com/prequalbench/prequalbench/scenario"
)

// GatewayName is the Gateway a scenario with routing: gateway puts in its
// workload namespace; every route's HTTPRoute attaches to it.
const GatewayName = "prequal"

// Gateway API kinds the workload renders.
var (
	GatewayKind   = gatewayapi.GroupVersion.WithKind("Gateway")
	HTTPRouteKind = gatewayapi.GroupVersion.WithKind("HTTPRoute")
)

// GatewayAPI returns what `cluster up` installs for the Gateway API: the
// standard-channel CRDs (and their admission policy) of gatewayapi.Version,
// then the GatewayClass of the ingress.
func GatewayAPI() ([]*unstructured.Unstructured, error) {
	objs, err := gatewayapi.Install()
	if err != nil {
		return nil, err
	}
	return append(objs, gatewayapi.GatewayClass(ControllerName)), nil
}

// routeGateway is the scenario's Gateway: one HTTP listener admitting the
// HTTPRoutes of its namespace. Its port is nominal: the ingress serves
// every Gateway of its class on its own proxy port.
func routeGateway(s *scenario.Scenario, o WorkloadOptions) *unstructured.Unstructured {
	labels := workloadLabels(s, "")
	delete(labels, LabelRoute)
	return gwObject(GatewayKind, GatewayName, o.Namespace, labels, nil, map[string]any{
		"gatewayClassName": gatewayapi.GatewayClassName,
		"listeners": []any{map[string]any{
			"name": "http", "port": int64(80), "protocol": "HTTP",
		}},
	})
}

// HTTPRoute is the HTTPRoute of one scenario route: its host and path to
// its Service (port BackendPort), attached to the Gateway GatewayName,
// with the algorithm annotation unless algorithm is empty. The kind
// environment applies it; the local one writes it into the routes file.
func HTTPRoute(s *scenario.Scenario, r scenario.Route, namespace, algorithm string) *unstructured.Unstructured {
	path := r.Path
	if path == "" {
		path = "/work"
	}
	pathType := "PathPrefix"
	if r.PathType == "Exact" {
		pathType = "Exact"
	}
	spec := map[string]any{
		"parentRefs": []any{map[string]any{"name": GatewayName}},
		"rules": []any{map[string]any{
			"matches":     []any{map[string]any{"path": map[string]any{"type": pathType, "value": path}}},
			"backendRefs": []any{map[string]any{"name": r.Name, "port": int64(BackendPort)}},
		}},
	}
	if r.Host != "" {
		spec["hostnames"] = []any{r.Host}
	}
	var ann map[string]string
	if algorithm != "" {
		ann = map[string]string{AlgorithmAnnotation: algorithm}
	}
	return gwObject(HTTPRouteKind, r.Name, namespace, workloadLabels(s, r.Name), ann, spec)
}

func gwObject(gvk schema.GroupVersionKind, name, namespace string, labels, annotations map[string]string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetName(name)
	u.SetNamespace(namespace)
	u.SetLabels(labels)
	if annotations != nil {
		u.SetAnnotations(annotations)
	}
	return u
}
