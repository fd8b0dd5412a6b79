// Package gatewayapi holds the Gateway API's standard-channel install
// (CRDs and the safe-upgrades admission policy) as released in
// sigs.k8s.io/gateway-api Version, copied byte for byte from that module's
// config/crd/standard/ by hack/gateway-api-crds.sh, and the names the
// ingress and the installers share. The module itself is not a dependency:
// its Go types would pull k8s.io/* to a newer minor than the rest of the
// project builds with.
package gatewayapi

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
)

// Version is the Gateway API release the embedded files come from.
const Version = "v1.6.3"

// Group and the resources of it the ingress reads.
const (
	Group = "gateway.networking.k8s.io"
	// GatewayClassName is the GatewayClass `cluster up` installs for the
	// ingress (controllerName ControllerName).
	GatewayClassName = "prequal"
)

// GroupVersion is the API version the ingress watches and writes status in.
var GroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

// Resources of GroupVersion.
var (
	GatewayClasses = GroupVersion.WithResource("gatewayclasses")
	Gateways       = GroupVersion.WithResource("gateways")
	HTTPRoutes     = GroupVersion.WithResource("httproutes")
)

//go:embed crds/*.yaml
var files embed.FS

// Install returns the standard-channel objects in apply order: every
// CustomResourceDefinition (by file name), then the rest.
func Install() ([]*unstructured.Unstructured, error) {
	names, err := fs.Glob(files, "crds/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var crds, rest []*unstructured.Unstructured
	for _, n := range names {
		raw, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		objs, err := decode(raw)
		if err != nil {
			return nil, fmt.Errorf("gatewayapi: %s: %w", path.Base(n), err)
		}
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				crds = append(crds, o)
			} else {
				rest = append(rest, o)
			}
		}
	}
	return append(crds, rest...), nil
}

// CRDs returns only the CustomResourceDefinitions of Install.
func CRDs() ([]*unstructured.Unstructured, error) {
	objs, err := Install()
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			out = append(out, o)
		}
	}
	return out, nil
}

func decode(raw []byte) ([]*unstructured.Unstructured, error) {
	dec := yamlutil.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// GatewayClass is the GatewayClass that names the ingress's controller.
func GatewayClass(controllerName string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": GroupVersion.String(),
		"kind":       "GatewayClass",
		"metadata": map[string]any{
			"name": GatewayClassName,
			"labels": map[string]any{
				"app.kubernetes.io/part-of":    "prequalbench",
				"app.kubernetes.io/managed-by": "prequalbench",
			},
		},
		"spec": map[string]any{"controllerName": controllerName},
	}}
}
