package kind

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/campaign/scenario"
	clusterkind "github.com/prequalbench/prequalbench/cluster/kind"
	"github.com/prequalbench/prequalbench/internal/kubetest"
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
