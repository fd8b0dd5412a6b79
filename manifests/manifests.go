// Package manifests holds the embedded kind cluster configurations (E-A,
// E-B) and the Kubernetes manifests of the ingress and of the observability
// stack, and renders them, with the per-install settings (images, token,
// placement, workload namespace), into objects ready for server-side apply.
// Scenario workloads are rendered here too (workload.go), so every object
// prequalbench ever applies comes from this package.
package manifests

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

//go:embed kind/*.yaml ingress/*.yaml observability/*.yaml
var files embed.FS

// Names every other package shares.
const (
	SystemNamespace     = "prequalbench-system"
	WorkloadNamespace   = "prequalbench"
	IngressName         = "prequal-ingress"
	IngressClassName    = "prequal"
	ControllerName      = "prequalbench.dev/ingress"
	AlgorithmAnnotation = "prequalbench.dev/load-balance"
	AdminTokenSecret    = "prequal-admin-token"
	AdminTokenKey       = "token"
	// ClusterInfoName is the ConfigMap in SystemNamespace where `cluster up`
	// records the topology and images, for `cluster status` and the kind
	// environment.
	ClusterInfoName = "prequalbench-cluster"
	FieldManager    = "prequalbench"

	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelPartOf    = "app.kubernetes.io/part-of"
	LabelName      = "app.kubernetes.io/name"
	ManagedBy      = "prequalbench"
)

// NodePorts published on 127.0.0.1 by the kind configs.
const (
	ProxyNodePort      = 31080
	AdminNodePort      = 31081
	PrometheusNodePort = 31090
	GrafanaNodePort    = 31300
)

// Container ports inside the pods.
const (
	ProxyPort   = 8080
	AdminPort   = 8081
	BackendPort = 8080
)

// Topology is where things run.
type Topology string

// Topologies. TopologyNone is any existing cluster: no placement rules.
const (
	TopologyEA   Topology = "e-a"
	TopologyEB   Topology = "e-b"
	TopologyNone Topology = ""
)

// ParseTopology accepts e-a, e-b (any case, with or without the dash).
func ParseTopology(s string) (Topology, error) {
	switch strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-") {
	case "e-a", "ea":
		return TopologyEA, nil
	case "e-b", "eb":
		return TopologyEB, nil
	}
	return "", fmt.Errorf("manifests: topology %q: want e-a or e-b", s)
}

// KindConfig returns the raw kind configuration of a topology.
func KindConfig(t Topology) ([]byte, error) {
	if t != TopologyEA && t != TopologyEB {
		return nil, fmt.Errorf("manifests: kind config for topology %q: want e-a or e-b", t)
	}
	return files.ReadFile("kind/" + string(t) + ".yaml")
}

// ParseKindConfig decodes a kind configuration strictly into kind's own
// v1alpha4 type (the one the kind library creates clusters from).
func ParseKindConfig(raw []byte) (*v1alpha4.Cluster, error) {
	var c v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(raw, &c); err != nil {
		return nil, fmt.Errorf("manifests: kind config: %w", err)
	}
	if c.Kind != "Cluster" || c.APIVersion != "kind.x-k8s.io/v1alpha4" {
		return nil, fmt.Errorf("manifests: kind config: kind %q apiVersion %q: want Cluster kind.x-k8s.io/v1alpha4", c.Kind, c.APIVersion)
	}
	return &c, nil
}

// decodeDir reads every YAML document of the embedded folder, in file
// order, as unstructured objects.
func decodeDir(dir string) ([]*unstructured.Unstructured, error) {
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		return nil, fmt.Errorf("manifests: %w", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	var out []*unstructured.Unstructured
	for _, n := range names {
		raw, err := files.ReadFile(path.Join(dir, n))
		if err != nil {
			return nil, fmt.Errorf("manifests: %w", err)
		}
		objs, err := Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("manifests: %s/%s: %w", dir, n, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// Decode splits a multi-document YAML stream into unstructured objects,
// skipping empty documents. Every object must have apiVersion, kind and
// metadata.name.
func Decode(raw []byte) ([]*unstructured.Unstructured, error) {
	r := yamlutil.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(js)) == 0 || string(bytes.TrimSpace(js)) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, err
		}
		if u.GetName() == "" {
			return nil, fmt.Errorf("%s without metadata.name", u.GetKind())
		}
		out = append(out, u)
	}
}
