package manifests

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// toTyped converts an unstructured object into a typed one.
func toTyped(u *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		return fmt.Errorf("manifests: %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// toUnstructured converts a typed object for server-side apply, dropping
// the fields a typed struct always carries but an apply must not set
// (status, a null creationTimestamp).
func toUnstructured(obj any, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("manifests: %s: %w", gvk.Kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	return u, nil
}

func find(objs []*unstructured.Unstructured, kind, name string) (int, *unstructured.Unstructured) {
	for i, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return i, o
		}
	}
	return -1, nil
}

func mergeLabels(dst map[string]string, src map[string]string) map[string]string {
	if dst == nil {
		dst = map[string]string{}
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}
