package kind

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	clusterkind "github.com/prequalbench/prequalbench/cluster/kind"
	"github.com/prequalbench/prequalbench/cluster/kubeapply"
	"github.com/prequalbench/prequalbench/internal/kubetest"
	"github.com/prequalbench/prequalbench/manifests"
	"github.com/prequalbench/prequalbench/scenario"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

type fakeProvider struct {
	clusterkind.ClusterProvider
	kubeconfig string
}

func (f fakeProvider) KubeConfig(name string) (string, error) {
	if name != "pb" {
		return "", errors.New("no such cluster")
	}
	return f.kubeconfig, nil
}

func TestNeedsClusterUp(t *testing.T) {
	env := kubetest.Start(t)
	kc, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	s, err := scenario.Catalogue("quickstart")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := fakeProvider{kubeconfig: string(kc)}
	if _, err := New(ctx, Options{Cluster: "other", Scenario: s, Provider: p}); err == nil || !strings.Contains(err.Error(), "cluster up --name other") {
		t.Errorf("unknown cluster: err = %v", err)
	}
	// A cluster without the ClusterInfo ConfigMap was not made by cluster up.
	if _, err := New(ctx, Options{Cluster: "pb", Scenario: s, Provider: p}); err == nil || !strings.Contains(err.Error(), "cluster up") {
		t.Errorf("no install: err = %v", err)
	}
}

// TestRecordedNamespace: the kind environment deploys to the namespace
// `cluster up -n` recorded, unless -n is given to the campaign.
func TestRecordedNamespace(t *testing.T) {
	env := kubetest.Start(t)
	kc, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	s, err := scenario.Catalogue("quickstart")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: manifests.SystemNamespace}}, metav1.CreateOptions{})
	info := manifests.ClusterInfoObject(manifests.ClusterInfo{Topology: manifests.TopologyEA, Namespace: "recorded-ns", IngressImage: "i:1", BackendImage: "b:1"})
	c, err := kubeapply.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, []*unstructured.Unstructured{info}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.CoreV1().ConfigMaps(manifests.SystemNamespace).Delete(context.Background(), manifests.ClusterInfoName, metav1.DeleteOptions{})
	})
	p := fakeProvider{kubeconfig: string(kc)}
	e, err := New(ctx, Options{Cluster: "pb", Scenario: s, Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	if e.Namespace() != "recorded-ns" {
		t.Errorf("namespace %q, want the recorded recorded-ns", e.Namespace())
	}
	e, err = New(ctx, Options{Cluster: "pb", Namespace: "flag-ns", Scenario: s, Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	if e.Namespace() != "flag-ns" {
		t.Errorf("namespace %q, want -n flag-ns", e.Namespace())
	}
}
