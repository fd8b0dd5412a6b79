package manifests

import (
	"github.com/prequalbench/prequalbench/dashboards"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ConfigMaps filled from dashboards/.
const (
	PrometheusRulesConfigMap = "prometheus-rules"
	GrafanaDashboardsMap     = "grafana-dashboards"
)

// Observability renders Prometheus and Grafana for the system namespace,
// with the project's rules and dashboards provisioned from ConfigMaps.
// Apply it after Ingress (it mounts the admin token Secret to scrape).
func Observability() ([]*unstructured.Unstructured, error) {
	objs, err := decodeDir("observability")
	if err != nil {
		return nil, err
	}
	rules, err := dashboards.Rules()
	if err != nil {
		return nil, err
	}
	boards, err := dashboards.Dashboards()
	if err != nil {
		return nil, err
	}
	ruleData := map[string]any{}
	for _, r := range rules {
		ruleData[r.Name] = string(r.Data)
	}
	boardData := map[string]any{}
	for _, b := range boards {
		boardData[b.Name] = string(b.Data)
	}
	cms := []*unstructured.Unstructured{
		configMap(PrometheusRulesConfigMap, "prometheus", ruleData),
		configMap(GrafanaDashboardsMap, "grafana", boardData),
	}
	// ConfigMaps first: the Deployments mount them.
	return append(cms, objs...), nil
}

func configMap(name, app string, data map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":      name,
			"namespace": SystemNamespace,
			"labels":    map[string]any{LabelName: app, LabelPartOf: ManagedBy, LabelManagedBy: ManagedBy},
		},
		"data": data,
	}}
}

// ClusterInfo is what `cluster up` records in the ClusterInfoName
// ConfigMap, so later commands know the topology and the images.
type ClusterInfo struct {
	Topology Topology
	// Namespace is the workload namespace (`cluster up -n`).
	Namespace     string
	IngressImage  string
	BackendImage  string
	BackendID     string // content ID of the backend image, if known
	Observability bool
}

// ClusterInfoObject renders info as the ClusterInfoName ConfigMap.
func ClusterInfoObject(info ClusterInfo) *unstructured.Unstructured {
	obs := "false"
	if info.Observability {
		obs = "true"
	}
	return configMap(ClusterInfoName, "prequalbench", map[string]any{
		"topology":      string(info.Topology),
		"namespace":     info.Namespace,
		"ingress-image": info.IngressImage,
		"backend-image": info.BackendImage,
		"backend-id":    info.BackendID,
		"observability": obs,
	})
}

// ParseClusterInfo reads the ClusterInfoName ConfigMap's data.
func ParseClusterInfo(data map[string]string) ClusterInfo {
	return ClusterInfo{
		Topology:      Topology(data["topology"]),
		Namespace:     data["namespace"],
		IngressImage:  data["ingress-image"],
		BackendImage:  data["backend-image"],
		BackendID:     data["backend-id"],
		Observability: data["observability"] == "true",
	}
}
