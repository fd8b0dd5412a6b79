package kubesource

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// The fields of gateway.networking.k8s.io/v1 objects this source reads and
// writes, decoded from the dynamic informers' unstructured objects (the
// module's own Go types would move k8s.io/* to a newer minor). Field names
// and JSON tags are the API's.

type gwClass struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ControllerName string `json:"controllerName"`
	} `json:"spec"`
	Status struct {
		Conditions []metav1.Condition `json:"conditions,omitempty"`
	} `json:"status"`
}

type gwGateway struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		GatewayClassName string       `json:"gatewayClassName"`
		Listeners        []gwListener `json:"listeners"`
		Addresses        []any        `json:"addresses,omitempty"`
	} `json:"spec"`
	Status gwGatewayStatus `json:"status"`
}

type gwListener struct {
	Name          string  `json:"name"`
	Hostname      *string `json:"hostname,omitempty"`
	Port          int32   `json:"port"`
	Protocol      string  `json:"protocol"`
	AllowedRoutes *struct {
		Namespaces *struct {
			From *string `json:"from,omitempty"`
		} `json:"namespaces,omitempty"`
		Kinds []gwRouteGroupKind `json:"kinds,omitempty"`
	} `json:"allowedRoutes,omitempty"`
}

type gwRouteGroupKind struct {
	Group *string `json:"group,omitempty"`
	Kind  string  `json:"kind"`
}

type gwGatewayStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	Listeners  []gwListenerStatus `json:"listeners,omitempty"`
}

type gwListenerStatus struct {
	Name           string             `json:"name"`
	SupportedKinds []gwRouteGroupKind `json:"supportedKinds"`
	AttachedRoutes int32              `json:"attachedRoutes"`
	Conditions     []metav1.Condition `json:"conditions"`
}

type gwHTTPRoute struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ParentRefs []gwParentRef `json:"parentRefs,omitempty"`
		Hostnames  []string      `json:"hostnames,omitempty"`
		Rules      []gwRule      `json:"rules,omitempty"`
	} `json:"spec"`
	Status struct {
		Parents []gwRouteParentStatus `json:"parents"`
	} `json:"status"`
}

type gwParentRef struct {
	Group       *string `json:"group,omitempty"`
	Kind        *string `json:"kind,omitempty"`
	Namespace   *string `json:"namespace,omitempty"`
	Name        string  `json:"name"`
	SectionName *string `json:"sectionName,omitempty"`
	Port        *int32  `json:"port,omitempty"`
}

type gwRule struct {
	Name        *string        `json:"name,omitempty"`
	Matches     []gwMatch      `json:"matches,omitempty"`
	Filters     []any          `json:"filters,omitempty"`
	BackendRefs []gwBackendRef `json:"backendRefs,omitempty"`
}

type gwMatch struct {
	Path *struct {
		Type  *string `json:"type,omitempty"`
		Value *string `json:"value,omitempty"`
	} `json:"path,omitempty"`
	Headers []struct {
		Type  *string `json:"type,omitempty"`
		Name  string  `json:"name"`
		Value string  `json:"value"`
	} `json:"headers,omitempty"`
	QueryParams []any   `json:"queryParams,omitempty"`
	Method      *string `json:"method,omitempty"`
}

type gwBackendRef struct {
	Group     *string `json:"group,omitempty"`
	Kind      *string `json:"kind,omitempty"`
	Name      string  `json:"name"`
	Namespace *string `json:"namespace,omitempty"`
	Port      *int32  `json:"port,omitempty"`
	Weight    *int32  `json:"weight,omitempty"`
	Filters   []any   `json:"filters,omitempty"`
}

type gwRouteParentStatus struct {
	ParentRef      gwParentRef        `json:"parentRef"`
	ControllerName string             `json:"controllerName"`
	Conditions     []metav1.Condition `json:"conditions"`
}

// fromUnstructured decodes an informer's object into one of the types above.
func fromUnstructured(obj any, into any) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return errUnexpected(obj)
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
