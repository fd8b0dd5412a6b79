package kube

import (
	"context"
	"fmt"

	"github.com/prequalbench/prequalbench/campaign/env"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var _ env.Scaler = (*Env)(nil)

// ScaleGroup sets the replicas of the group's Deployment through its
// scale subresource, waits for the rollout, and reconnects, which waits
// until every ingress replica routes to exactly the ready pods. Graceful
// removal is the cluster's: a deleted pod leaves the EndpointSlice while
// its preStop hook keeps the backend serving (see manifests), so the
// ingress drops it before the backend stops accepting.
func (e *Env) ScaleGroup(ctx context.Context, group string, replicas int) error {
	if replicas < 1 {
		return fmt.Errorf("kube: scale %s: replicas %d, want >= 1", group, replicas)
	}
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	deps := e.opts.Client.Kube.AppsV1().Deployments(e.ns)
	sc, err := deps.GetScale(ctx, group, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("kube: scale %s: %w", group, err)
	}
	sc.Spec.Replicas = int32(replicas)
	if _, err := deps.UpdateScale(ctx, group, sc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("kube: scale %s to %d: %w", group, replicas, err)
	}
	if err := e.opts.Client.WaitRollouts(ctx, e.ns, group); err != nil {
		return err
	}
	return e.connect(ctx)
}
