package deploy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/cluster/deploy"
	"github.com/prequalbench/prequalbench/cluster/kubeapply"
	"github.com/prequalbench/prequalbench/internal/kubetest"
	"github.com/prequalbench/prequalbench/manifests"
	"github.com/prequalbench/prequalbench/scenario"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// TestScenarioThenAnother deploys two scenarios in a row on the real
// apiserver, playing the controller-manager for the rollouts, and checks
// the ingress flags, the leftovers' removal and the algorithm switch.
func TestScenarioThenAnother(t *testing.T) {
	env := kubetest.Start(t)
	c, err := kubeapply.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	c.Poll = 20 * time.Millisecond
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The controller stand-in: mark every Deployment rolled out.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			for _, n := range []string{manifests.SystemNamespace, ns} {
				list, err := env.Client.AppsV1().Deployments(n).List(ctx, metav1.ListOptions{})
				if err != nil {
					continue
				}
				for _, d := range list.Items {
					r := *d.Spec.Replicas
					if d.Status.ObservedGeneration == d.Generation {
						continue
					}
					d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: r, UpdatedReplicas: r, ReadyReplicas: r, AvailableReplicas: r}
					_, _ = env.Client.AppsV1().Deployments(n).UpdateStatus(ctx, &d, metav1.UpdateOptions{})
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stop); <-done }()

	opts := deploy.Options{Topology: manifests.TopologyEB, Namespace: ns, IngressImage: "i:1", BackendImage: "b:1", AdminToken: "tok", Algorithm: "prequal", LoadBalancer: true}
	first, err := scenario.Catalogue("c2-hetero-open")
	if err != nil {
		t.Fatal(err)
	}
	res, err := deploy.Scenario(ctx, c, first, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Deployments) == 0 || len(res.Deleted) != 0 {
		t.Fatalf("first deploy: %+v", res)
	}
	d, err := env.Client.AppsV1().Deployments(manifests.SystemNamespace).Get(ctx, manifests.IngressName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")
	if want := strings.Join(first.Ingress.Args(), " "); !strings.HasSuffix(args, want) {
		t.Errorf("ingress args %q do not end with the scenario's %q", args, want)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "i:1" {
		t.Errorf("ingress image %q, want --ingress-image i:1", img)
	}
	if b, err := env.Client.AppsV1().Deployments(ns).Get(ctx, res.Deployments[0], metav1.GetOptions{}); err != nil || b.Spec.Template.Spec.Containers[0].Image != "b:1" {
		t.Errorf("backend deployment %s: %v, want image b:1", res.Deployments[0], err)
	}
	if _, err := env.Client.CoreV1().Services(manifests.SystemNamespace).Get(ctx, manifests.LoadBalancerServiceName, metav1.GetOptions{}); err != nil {
		t.Errorf("LoadBalancer Service: %v", err)
	}
	if int(*d.Spec.Replicas) != first.Ingress.Replicas {
		t.Errorf("ingress replicas %d, want %d", *d.Spec.Replicas, first.Ingress.Replicas)
	}

	if err := deploy.SetAlgorithm(ctx, c, first, opts, "round-robin"); err != nil {
		t.Fatal(err)
	}
	for _, r := range first.Workload.Routes {
		ing, err := env.Client.NetworkingV1().Ingresses(ns).Get(ctx, r.Name, metav1.GetOptions{})
		if err != nil || ing.Annotations[manifests.AlgorithmAnnotation] != "round-robin" {
			t.Errorf("ingress %s after SetAlgorithm: %v %v", r.Name, err, ing.Annotations)
		}
	}

	second, err := scenario.Catalogue("c4-multi-route")
	if err != nil {
		t.Fatal(err)
	}
	opts.LoadBalancer = false
	res, err = deploy.Scenario(ctx, c, second, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().Services(manifests.SystemNamespace).Get(ctx, manifests.LoadBalancerServiceName, metav1.GetOptions{}); err == nil || !has(res.Deleted, "Service "+manifests.SystemNamespace+"/"+manifests.LoadBalancerServiceName) {
		t.Errorf("the LoadBalancer Service outlives a NodePort deploy (deleted %v)", res.Deleted)
	}
	if len(res.Deleted) == 0 {
		t.Errorf("second deploy deleted nothing; the first scenario's objects stay")
	}
	for _, g := range first.Workload.Routes[0].Backends {
		if _, err := env.Client.AppsV1().Deployments(ns).Get(ctx, g.Name, metav1.GetOptions{}); err == nil && !has(res.Deployments, g.Name) {
			t.Errorf("deployment %s of the first scenario is still there", g.Name)
		}
	}
}

func has(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
