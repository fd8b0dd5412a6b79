package kube

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/cluster/kubeapply"
	"github.com/prequalbench/prequalbench/internal/kubetest"
	"github.com/prequalbench/prequalbench/manifests"
	"github.com/prequalbench/prequalbench/scenario"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func podOn(name, node string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}}
}

func node(name string, addrs ...corev1.NodeAddress) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
}

func nodePortSvc() corev1.Service {
	return corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: manifests.IngressName}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort,
		Ports: []corev1.ServicePort{
			{Name: "proxy", Port: 8080, NodePort: 31080},
			{Name: "admin", Port: 8081, NodePort: 31081},
		}}}
}

func lbSvc(ingress ...corev1.LoadBalancerIngress) corev1.Service {
	return corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: manifests.LoadBalancerServiceName},
		Spec:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "proxy", Port: 8080, NodePort: 30123}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: ingress}}}
}

func TestProxyURLs(t *testing.T) {
	nodes := map[string]*corev1.Node{
		"a": node("a", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.1"}),
		"b": node("b", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd00::2"}),
		"c": node("c", corev1.NodeAddress{Type: corev1.NodeHostName, Address: "c.local"}),
	}
	pods := []corev1.Pod{podOn("i-1", "a"), podOn("i-2", "a"), podOn("i-3", "b"), podOn("i-4", "c")}
	for _, c := range []struct {
		name    string
		svcs    []corev1.Service
		want    []string
		wantVia string
		wantErr string
	}{
		{"NodePort on the ingress pods' nodes, ExternalIP first", []corev1.Service{nodePortSvc()}, []string{"http://203.0.113.1:31080", "http://[fd00::2]:31080"},
			"NodePort 31080 of Service prequalbench-system/prequal-ingress on the nodes running an ingress pod", ""},
		{"LoadBalancer IP", []corev1.Service{nodePortSvc(), lbSvc(corev1.LoadBalancerIngress{IP: "198.51.100.7"})}, []string{"http://198.51.100.7:8080"},
			"LoadBalancer Service prequalbench-system/" + manifests.LoadBalancerServiceName, ""},
		{"LoadBalancer hostname", []corev1.Service{lbSvc(corev1.LoadBalancerIngress{Hostname: "lb.example.com"}), nodePortSvc()}, []string{"http://lb.example.com:8080"},
			"LoadBalancer Service prequalbench-system/" + manifests.LoadBalancerServiceName, ""},
		{"LoadBalancer pending", []corev1.Service{nodePortSvc(), lbSvc()}, nil, "", "has no LoadBalancer address yet"},
		{"ClusterIP only", []corev1.Service{{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Name: "proxy", Port: 8080}}}}}, nil, "", "no LoadBalancer address and no node address"},
	} {
		got, via, err := ProxyURLs(c.svcs, pods, nodes)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: %v, %v; want error %q", c.name, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) || via != c.wantVia {
			t.Errorf("%s: %v (%q), %v; want %v (%q)", c.name, got, via, err, c.want, c.wantVia)
		}
	}
}

func TestParseProxyURLs(t *testing.T) {
	got, err := ParseProxyURLs([]string{"http://10.0.0.1:31080/", " https://lb.example.com "})
	if err != nil || !slices.Equal(got, []string{"http://10.0.0.1:31080", "https://lb.example.com"}) {
		t.Errorf("%v, %v", got, err)
	}
	for _, bad := range []string{"10.0.0.1:31080", "ftp://x", "http://", "http://x/work", "http://x?a=1"} {
		if _, err := ParseProxyURLs([]string{bad}); err == nil || !strings.Contains(err.Error(), "--proxy-url") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}

// TestServiceAddressOnRealAPIServer applies the ingress with its
// LoadBalancer Service to the real apiserver, plays the node and the cloud
// controller, and checks where the load would go: nowhere while the
// LoadBalancer is pending, its address once it has one.
func TestServiceAddressOnRealAPIServer(t *testing.T) {
	kenv := kubetest.Start(t)
	k := kenv.Client
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	objs, err := manifests.Ingress(manifests.IngressOptions{Image: "i:1", AdminToken: "t", LoadBalancer: true, WorkloadNamespace: "lb-test"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubeapply.New(kenv.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, objs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k.CoreV1().Services(manifests.SystemNamespace).Delete(context.Background(), manifests.LoadBalancerServiceName, metav1.DeleteOptions{})
	})
	if _, err := k.CoreV1().Nodes().Create(ctx, node("lb-node",
		corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.9.0.1"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n, _ := k.CoreV1().Nodes().Get(ctx, "lb-node", metav1.GetOptions{})
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.9.0.1"}}
	if _, err := k.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := []corev1.Pod{podOn("ingress-0", "lb-node")}
	sa := &ServiceAddress{Kube: k}
	if urls, _, err := sa.detectOnce(ctx, pods); err == nil || !strings.Contains(err.Error(), "no LoadBalancer address yet") {
		t.Errorf("pending LoadBalancer: %v, %v", urls, err)
	}
	lb, err := k.CoreV1().Services(manifests.SystemNamespace).Get(ctx, manifests.LoadBalancerServiceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(lb.Spec.Ports) != 1 || lb.Spec.Ports[0].Name != "proxy" || lb.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Errorf("LoadBalancer Service publishes %+v (%s), want only the proxy port", lb.Spec.Ports, lb.Spec.Type)
	}
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.9"}}
	if _, err := k.CoreV1().Services(manifests.SystemNamespace).UpdateStatus(ctx, lb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if urls, via, err := sa.detectOnce(ctx, pods); err != nil || !slices.Equal(urls, []string{"http://198.51.100.9:8080"}) || !strings.HasPrefix(via, "LoadBalancer Service") {
		t.Errorf("LoadBalancer with an address: %v (%s), %v", urls, via, err)
	}
	// Without the LoadBalancer Service: the NodePort on the pod's node.
	if err := k.CoreV1().Services(manifests.SystemNamespace).Delete(ctx, manifests.LoadBalancerServiceName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if urls, via, err := sa.detectOnce(ctx, pods); err != nil || !slices.Equal(urls, []string{"http://10.9.0.1:31080"}) || !strings.HasPrefix(via, "NodePort 31080") {
		t.Errorf("NodePort: %v (%s), %v", urls, via, err)
	}
}

// TestForClusterWiring: on kube the load goes to the given (or detected)
// proxy address and the image flags win over the recorded images; on kind
// --proxy-url is refused.
func TestForClusterWiring(t *testing.T) {
	kenv := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := quickstart(t)
	e, err := ForCluster(ctx, ClusterOptions{Config: kenv.Config, Scenario: s, Name: "kube",
		ProxyURLs: []string{"http://203.0.113.5:31080"}, IngressImage: "reg.example/ingress:v1", BackendImage: "reg.example/backend:v1", LoadBalancer: true})
	if err != nil {
		t.Fatal(err)
	}
	sa, ok := e.opts.Access.(*ServiceAddress)
	if !ok || !slices.Equal(sa.URLs, []string{"http://203.0.113.5:31080"}) {
		t.Errorf("access %T %+v, want ServiceAddress with the --proxy-url", e.opts.Access, e.opts.Access)
	}
	d := e.opts.Deploy
	if d.IngressImage != "reg.example/ingress:v1" || d.BackendImage != "reg.example/backend:v1" || !d.LoadBalancer {
		t.Errorf("deploy options %+v", d)
	}
	if _, err := ForCluster(ctx, ClusterOptions{Config: kenv.Config, Scenario: s, Name: "kind", ProxyURLs: []string{"http://x:1"}}); err == nil || !strings.Contains(err.Error(), "--proxy-url") {
		t.Errorf("kind with --proxy-url: %v", err)
	}
}

func quickstart(t *testing.T) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Catalogue("quickstart")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
