package kubeapply_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/cluster/kubeapply"
	"github.com/prequalbench/prequalbench/internal/kubetest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x:1"}}},
			},
		},
	}
}

// markRolledOut plays the controller-manager: it sets the status of the
// Deployment's current generation to fully available.
func markRolledOut(t *testing.T, k kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	d, err := k.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := *d.Spec.Replicas
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
	if _, err := k.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestRolloutStatus(t *testing.T) {
	d := deployment("ns", "d", 2)
	d.Generation = 3
	for _, tc := range []struct {
		st   appsv1.DeploymentStatus
		done bool
		why  string
	}{
		{appsv1.DeploymentStatus{ObservedGeneration: 2}, false, "generation 3"},
		{appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 1}, false, "1 of 2 replicas updated"},
		{appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 2}, false, "1 old replicas"},
		{appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 1}, false, "1 of 2 updated replicas available"},
		{appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}, true, "2 replicas ready"},
	} {
		d.Status = tc.st
		done, why, err := kubeapply.RolloutStatus(d)
		if err != nil || done != tc.done || !strings.Contains(why, tc.why) {
			t.Errorf("status %+v: done=%v why=%q err=%v; want done=%v why~%q", tc.st, done, why, err, tc.done, tc.why)
		}
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 3, Conditions: []appsv1.DeploymentCondition{{
		Type: appsv1.DeploymentProgressing, Reason: "ProgressDeadlineExceeded", Message: "stuck"}}}
	if _, _, err := kubeapply.RolloutStatus(d); err == nil || !strings.Contains(err.Error(), "stuck") {
		t.Errorf("deadline exceeded: err = %v", err)
	}
}

// TestWaitAndRestart runs the rollout wait and the restart against the
// real apiserver; the test sets the status a controller would.
func TestWaitAndRestart(t *testing.T) {
	env := kubetest.Start(t)
	c, err := kubeapply.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	c.Poll = 20 * time.Millisecond
	var lines []string
	c.Progress = func(s string) { lines = append(lines, s) }
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "ing", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Not rolled out: the wait ends with the context, naming the reason.
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	err = c.WaitRollouts(short, ns, "ing")
	cancelShort()
	if err == nil || !strings.Contains(err.Error(), "ing") {
		t.Fatalf("wait before rollout: err = %v, want a timeout naming the deployment", err)
	}
	markRolledOut(t, env.Client, ns, "ing")
	if err := c.WaitRollouts(ctx, ns, "ing"); err != nil {
		t.Fatal(err)
	}

	// Restart: bumps the template, so the wait holds until the new
	// generation is rolled out.
	before, _ := env.Client.AppsV1().Deployments(ns).Get(ctx, "ing", metav1.GetOptions{})
	done := make(chan error, 1)
	go func() { done <- c.Restart(ctx, ns, "ing", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) }()
	var after *appsv1.Deployment
	for after == nil || after.Generation == before.Generation {
		select {
		case err := <-done:
			t.Fatalf("restart returned before the new generation rolled out: %v", err)
		case <-ctx.Done():
			t.Fatal("restart never bumped the generation")
		case <-time.After(20 * time.Millisecond):
		}
		after, _ = env.Client.AppsV1().Deployments(ns).Get(ctx, "ing", metav1.GetOptions{})
	}
	if got := after.Spec.Template.Annotations[kubeapply.RestartAnnotation]; got != "2026-01-02T03:04:05Z" {
		t.Errorf("restart annotation = %q", got)
	}
	select {
	case err := <-done:
		t.Fatalf("restart returned before the status caught up: %v", err)
	default:
	}
	markRolledOut(t, env.Client, ns, "ing")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("restart did not return after the rollout")
	}
	if !strings.Contains(strings.Join(lines, "\n"), "restarted deployment") {
		t.Errorf("progress lines %q lack the restart", lines)
	}

	// Missing deployment: an error, not a hang.
	if err := c.WaitRollouts(ctx, ns, "nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("missing deployment: err = %v", err)
	}
}
