package kubesource

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig resolves a client configuration the way kubectl does: the
// explicit kubeconfig path if given, else $KUBECONFIG, else ~/.kube/config,
// else the in-cluster service account. context, when set, overrides the
// kubeconfig's current context.
func RESTConfig(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubesource: kubeconfig (--kubeconfig %q, --context %q): %w", kubeconfig, context, err)
	}
	cfg.UserAgent = "prequalbench-ingress"
	return cfg, nil
}
