package kube

import (
	"context"
	"fmt"

	"github.com/prequalbench/prequalbench/cluster/deploy"
	"github.com/prequalbench/prequalbench/cluster/kind"
	"github.com/prequalbench/prequalbench/cluster/kubeapply"
	"github.com/prequalbench/prequalbench/manifests"
	"github.com/prequalbench/prequalbench/scenario"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ClusterOptions say how to reach a cluster and what to put on it.
type ClusterOptions struct {
	Config   *rest.Config
	Scenario *scenario.Scenario
	// Name is "kind" or "kube"; with "kind" the ingress is reached through
	// the published NodePorts, otherwise through port-forwarding.
	Name string
	// Namespace of the workload; default what `cluster up -n` recorded,
	// else manifests.WorkloadNamespace.
	Namespace string
	// Images default to what `cluster up` recorded, else the dev tags.
	IngressImage, BackendImage string
	// ProxyURLs (kube only) are where the load goes; empty means the
	// address the ingress's Services publish (see ProxyURLs).
	ProxyURLs []string
	// LoadBalancer (kube only) also installs a LoadBalancer Service for
	// the proxy port.
	LoadBalancer bool
	RepoDir      string
	Progress     func(string)
}

// ForCluster builds an Env for a cluster: it reads the topology and images
// `cluster up` recorded (if any) and the admin token (creating one if
// there is none yet; Setup then installs it with the ingress).
func ForCluster(ctx context.Context, o ClusterOptions) (*Env, error) {
	c, err := kubeapply.New(o.Config)
	if err != nil {
		return nil, err
	}
	c.Progress = o.Progress
	kube, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	if o.Name == "kind" && (len(o.ProxyURLs) > 0 || o.LoadBalancer) {
		return nil, fmt.Errorf("kube: --proxy-url and --service-type are for --env kube; kind publishes the proxy on 127.0.0.1:%d", manifests.ProxyNodePort)
	}
	d := deploy.Options{Namespace: o.Namespace, IngressImage: o.IngressImage, BackendImage: o.BackendImage, LoadBalancer: o.LoadBalancer}
	cm, err := kube.CoreV1().ConfigMaps(manifests.SystemNamespace).Get(ctx, manifests.ClusterInfoName, metav1.GetOptions{})
	switch {
	case err == nil:
		info := manifests.ParseClusterInfo(cm.Data)
		d.Topology = info.Topology
		if d.Namespace == "" {
			d.Namespace = info.Namespace
		}
		if d.IngressImage == "" {
			d.IngressImage = info.IngressImage
		}
		if d.BackendImage == "" {
			d.BackendImage, d.BackendImageID = info.BackendImage, info.BackendID
		}
	case apierrors.IsNotFound(err):
		if o.Name == "kind" {
			return nil, fmt.Errorf("kube: the kind cluster has no prequalbench install; run `prequalbench cluster up` first")
		}
	default:
		return nil, fmt.Errorf("kube: read cluster info: %w", err)
	}
	if d.IngressImage == "" {
		d.IngressImage = kind.DefaultIngressImage
	}
	if d.BackendImage == "" {
		d.BackendImage = kind.DefaultBackendImage
	}
	// Keep the ingress Deployment's image ID annotation as cluster up set it.
	if dep, err := kube.AppsV1().Deployments(manifests.SystemNamespace).Get(ctx, manifests.IngressName, metav1.GetOptions{}); err == nil {
		if len(dep.Spec.Template.Spec.Containers) > 0 && dep.Spec.Template.Spec.Containers[0].Image == d.IngressImage {
			d.IngressImageID = dep.Spec.Template.Annotations[manifests.ImageIDAnnotation]
		}
	}
	if d.AdminToken, err = kind.AdminToken(ctx, c); err != nil {
		return nil, err
	}
	fwd := &PortForward{Config: o.Config, Kube: kube}
	var access Access = &ServiceAddress{URLs: o.ProxyURLs, Kube: kube, Forward: fwd}
	if o.Name == "kind" {
		access = &NodePorts{Forward: fwd}
	}
	return New(Options{Scenario: o.Scenario, Client: c, Deploy: d, Access: access, Name: o.Name, RepoDir: o.RepoDir})
}
