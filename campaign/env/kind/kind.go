// Package kind is the campaign environment on a kind cluster made by
// `prequalbench cluster up`: the kube environment, reached through the
// NodePorts the kind config publishes on 127.0.0.1.
package kind

import (
	"context"
	"fmt"

	"github.com/prequalbench/prequalbench/campaign/env/kube"
	clusterkind "github.com/prequalbench/prequalbench/cluster/kind"
	"github.com/prequalbench/prequalbench/scenario"
	"k8s.io/client-go/tools/clientcmd"
)

// Options select the cluster.
type Options struct {
	// Cluster is the kind cluster name; default clusterkind.DefaultName.
	Cluster string
	// Namespace of the workload; default what `cluster up -n` recorded.
	Namespace string
	// Images override what `cluster up` recorded.
	IngressImage, BackendImage string
	Scenario                   *scenario.Scenario
	RepoDir                    string
	Progress                   func(string)
	// Provider defaults to the kind library over Docker.
	Provider clusterkind.ClusterProvider
}

// New connects to the kind cluster and returns its environment.
func New(ctx context.Context, o Options) (*kube.Env, error) {
	if o.Cluster == "" {
		o.Cluster = clusterkind.DefaultName
	}
	if o.Provider == nil {
		o.Provider = clusterkind.RealDeps().Provider
	}
	kc, err := o.Provider.KubeConfig(o.Cluster)
	if err != nil {
		return nil, fmt.Errorf("kind env: cluster %q: %w (run `prequalbench cluster up --name %s`)", o.Cluster, err, o.Cluster)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kc))
	if err != nil {
		return nil, fmt.Errorf("kind env: kubeconfig of %s: %w", o.Cluster, err)
	}
	return kube.ForCluster(ctx, kube.ClusterOptions{
		Config: cfg, Scenario: o.Scenario, Name: "kind", Namespace: o.Namespace, RepoDir: o.RepoDir, Progress: o.Progress,
		IngressImage: o.IngressImage, BackendImage: o.BackendImage,
	})
}
