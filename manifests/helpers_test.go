package manifests

import (
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func unstructuredMap(obj map[string]any, fields ...string) (map[string]any, bool, error) {
	return unstructured.NestedMap(obj, fields...)
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
