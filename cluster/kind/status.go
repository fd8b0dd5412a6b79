package kind

import (
	"context"
	"fmt"

	"github.com/prequalbench/prequalbench/cluster/kubeapply"
	"github.com/prequalbench/prequalbench/manifests"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterStatus is what `cluster status` prints.
type ClusterStatus struct {
	Name          string             `json:"name"`
	Exists        bool               `json:"exists"`
	Topology      manifests.Topology `json:"topology,omitempty"`
	Namespace     string             `json:"namespace,omitempty"`
	Nodes         []Node             `json:"nodes"`
	IngressImage  string             `json:"ingress_image,omitempty"`
	BackendImage  string             `json:"backend_image,omitempty"`
	IngressReady  bool               `json:"ingress_ready"`
	IngressDetail string             `json:"ingress_detail"`
	Pods          []PodStatus        `json:"ingress_pods"`
	ProxyURL      string             `json:"proxy_url,omitempty"`
	AdminURL      string             `json:"admin_url,omitempty"`
	PrometheusURL string             `json:"prometheus_url,omitempty"`
	GrafanaURL    string             `json:"grafana_url,omitempty"`
}

// PodStatus is one ingress pod.
type PodStatus struct {
	Name  string `json:"name"`
	Node  string `json:"node"`
	Phase string `json:"phase"`
	Ready bool   `json:"ready"`
}

// Status reports the cluster's nodes, the ingress's readiness and the
// published URLs. A missing cluster is not an error (Exists is false).
func Status(ctx context.Context, d Deps, name string) (ClusterStatus, error) {
	if name == "" {
		name = DefaultName
	}
	st := ClusterStatus{Name: name, Nodes: []Node{}, Pods: []PodStatus{}}
	names, err := d.Provider.List()
	if err != nil {
		return st, fmt.Errorf("kind: list clusters: %w", err)
	}
	for _, n := range names {
		st.Exists = st.Exists || n == name
	}
	if !st.Exists {
		st.IngressDetail = "no such cluster"
		return st, nil
	}
	if st.Nodes, err = d.Provider.Nodes(name); err != nil {
		return st, fmt.Errorf("kind: nodes of %s: %w", name, err)
	}
	kubeconfig, err := d.Provider.KubeConfig(name)
	if err != nil {
		return st, fmt.Errorf("kind: kubeconfig of %s: %w", name, err)
	}
	c, _, err := d.connect(kubeconfig)
	if err != nil {
		return st, err
	}
	return st, fillStatus(ctx, c, &st)
}

func fillStatus(ctx context.Context, c *kubeapply.Client, st *ClusterStatus) error {
	cm, err := c.Kube.CoreV1().ConfigMaps(manifests.SystemNamespace).Get(ctx, manifests.ClusterInfoName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		st.IngressDetail = "ingress not installed (run cluster up)"
		return nil
	}
	if err != nil {
		return fmt.Errorf("kind: cluster info: %w", err)
	}
	info := manifests.ParseClusterInfo(cm.Data)
	st.Topology, st.IngressImage, st.BackendImage = info.Topology, info.IngressImage, info.BackendImage
	st.Namespace = info.Namespace
	dep, err := c.Kube.AppsV1().Deployments(manifests.SystemNamespace).Get(ctx, manifests.IngressName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("kind: ingress deployment: %w", err)
	}
	done, why, err := kubeapply.RolloutStatus(dep)
	if err != nil {
		why = err.Error()
	}
	st.IngressReady, st.IngressDetail = done, why
	pods, err := c.Kube.CoreV1().Pods(manifests.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: manifests.LabelName + "=" + manifests.IngressName})
	if err != nil {
		return fmt.Errorf("kind: ingress pods: %w", err)
	}
	for _, p := range pods.Items {
		ready := false
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		st.Pods = append(st.Pods, PodStatus{Name: p.Name, Node: p.Spec.NodeName, Phase: string(p.Status.Phase), Ready: ready})
	}
	st.ProxyURL = fmt.Sprintf("http://127.0.0.1:%d", manifests.ProxyNodePort)
	st.AdminURL = fmt.Sprintf("http://127.0.0.1:%d", manifests.AdminNodePort)
	if info.Observability {
		st.PrometheusURL = fmt.Sprintf("http://127.0.0.1:%d", manifests.PrometheusNodePort)
		st.GrafanaURL = fmt.Sprintf("http://127.0.0.1:%d", manifests.GrafanaNodePort)
	}
	return nil
}
