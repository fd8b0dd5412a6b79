package manifests

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// kindSystemCPU is what kind's own pods request on the control-plane node
// (kube-apiserver 250m, controller-manager 200m, scheduler 100m, etcd
// 100m, two CoreDNS 100m each, kindnet 100m), as kind v0.33 deploys them.
var kindSystemCPU = resource.MustParse("950m")

// TestIngressFitsSmallHost: four ingress replicas (the paper scenarios),
// with Prometheus and Grafana, must schedule on the node the ingress runs
// on (the control plane on E-B, the only node on E-A) of a 2-CPU host.
func TestIngressFitsSmallHost(t *testing.T) {
	hostCPU := resource.MustParse("2")
	for _, topo := range []Topology{TopologyEA, TopologyEB} {
		objs, err := Ingress(IngressOptions{Topology: topo, Image: "i", AdminToken: "t", Replicas: 4})
		if err != nil {
			t.Fatal(err)
		}
		obs, err := Observability()
		if err != nil {
			t.Fatal(err)
		}
		total := kindSystemCPU.DeepCopy()
		for _, u := range append(objs, obs...) {
			if u.GetKind() != "Deployment" {
				continue
			}
			var d appsv1.Deployment
			if err := toTyped(u, &d); err != nil {
				t.Fatal(err)
			}
			replicas := int64(1)
			if d.Spec.Replicas != nil {
				replicas = int64(*d.Spec.Replicas)
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				cpu := c.Resources.Requests.Cpu()
				total.Add(*resource.NewMilliQuantity(cpu.MilliValue()*replicas, resource.DecimalSI))
				if d.Name == IngressName && c.Resources.Limits.Cpu().MilliValue() != 0 {
					t.Errorf("ingress has a CPU limit %v: throttling would distort latency", c.Resources.Limits.Cpu())
				}
				if d.Name == IngressName && c.Resources.Limits.Memory().IsZero() {
					t.Error("ingress has no memory limit")
				}
			}
		}
		if total.Cmp(hostCPU) > 0 {
			t.Errorf("%s: 4 ingress replicas, observability and kind's own pods request %v CPU, more than a %v-CPU host", topo, &total, &hostCPU)
		}
	}
}
