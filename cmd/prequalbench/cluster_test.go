package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClusterEnvFlags: the kind and kube flags exist on `campaign run`
// and `cluster up`, and bad values are refused (exit 2, naming the flag)
// before any cluster is contacted.
func TestClusterEnvFlags(t *testing.T) {
	run := newCampaignRunCommand()
	for _, name := range []string{"proxy-url", "service-type", "ingress-image", "backend-image", "namespace", "cluster"} {
		if run.Flags().Lookup(name) == nil {
			t.Errorf("campaign run lacks --%s", name)
		}
	}
	up := newClusterUpCommand()
	if f := up.Flags().ShorthandLookup("n"); f == nil || f.Name != "namespace" {
		t.Errorf("cluster up lacks -n/--namespace")
	}

	// A kubeconfig that loads but points nowhere: nothing may dial it.
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  string
		f    campaignRunFlags
		want string
	}{
		{"kube", campaignRunFlags{kubeconfig: kc, serviceType: "NodePort", proxyURLs: []string{"10.0.0.1:31080"}}, "--proxy-url"},
		{"kube", campaignRunFlags{kubeconfig: kc, serviceType: "ClusterIP"}, "--service-type"},
		{"kind", campaignRunFlags{serviceType: "NodePort", proxyURLs: []string{"http://10.0.0.1:31080"}}, "--proxy-url"},
		{"kind", campaignRunFlags{serviceType: "LoadBalancer"}, "--service-type"},
	} {
		_, err := campaignEnvs[c.env](context.Background(), &c.f, io.Discard)
		var ee *exitError
		if err == nil || !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--env %s %+v: err = %v, want exit 2 naming %s", c.env, c.f, err, c.want)
		}
	}
	f := campaignRunFlags{kubeconfig: kc, serviceType: "LoadBalancer", proxyURLs: []string{"http://203.0.113.5:8080"}}
	if _, err := campaignEnvs["kube"](context.Background(), &f, io.Discard); err != nil {
		t.Errorf("good kube flags: %v", err)
	}
}
