package kube

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prequalbench/prequalbench/manifests"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// PortForward reaches pods through client-go port-forwarding to a free
// port on 127.0.0.1, one forward per pod and port, kept open until Close.
type PortForward struct {
	Config *rest.Config
	Kube   kubernetes.Interface

	mu    sync.Mutex
	open  map[string]string // "ns/pod:port" -> local address
	stops []chan struct{}
}

var _ Access = (*PortForward)(nil)

// ForwardURL builds the apiserver URL of a pod's portforward subresource.
func ForwardURL(host, namespace, pod string) (*url.URL, error) {
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("kube: apiserver host %q: %w", host, err)
	}
	u.Path = fmt.Sprintf("%s/api/v1/namespaces/%s/pods/%s/portforward", u.Path, namespace, pod)
	return u, nil
}

func (f *PortForward) forward(ctx context.Context, p corev1.Pod, port int) (string, error) {
	key := fmt.Sprintf("%s/%s:%d", p.Namespace, p.Name, port)
	f.mu.Lock()
	defer f.mu.Unlock()
	if addr, ok := f.open[key]; ok {
		return addr, nil
	}
	u, err := ForwardURL(f.Config.Host, p.Namespace, p.Name)
	if err != nil {
		return "", err
	}
	rt, upgrader, err := spdy.RoundTripperFor(f.Config)
	if err != nil {
		return "", fmt.Errorf("kube: port-forward: %w", err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		return "", fmt.Errorf("kube: port-forward to %s: %w", key, err)
	}
	errc := make(chan error, 1)
	go func() { errc <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		return "", fmt.Errorf("kube: port-forward to %s: %w", key, err)
	case <-ctx.Done():
		close(stop)
		return "", ctx.Err()
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		close(stop)
		return "", fmt.Errorf("kube: port-forward to %s: no local port (%v)", key, err)
	}
	addr := fmt.Sprintf("http://127.0.0.1:%d", ports[0].Local)
	if f.open == nil {
		f.open = map[string]string{}
	}
	f.open[key] = addr
	f.stops = append(f.stops, stop)
	return addr, nil
}

// Via says how the proxy URLs reach the ingress.
func (f *PortForward) Via() string { return "client-go port-forward to each ingress pod" }

// Ingress forwards the proxy and admin ports of every ingress pod.
func (f *PortForward) Ingress(ctx context.Context, pods []corev1.Pod) (proxy, admin []string, err error) {
	for _, p := range pods {
		pu, err := f.forward(ctx, p, manifests.ProxyPort)
		if err != nil {
			return nil, nil, err
		}
		au, err := f.forward(ctx, p, manifests.AdminPort)
		if err != nil {
			return nil, nil, err
		}
		proxy, admin = append(proxy, pu), append(admin, au)
	}
	return proxy, admin, nil
}

// Backend forwards a backend pod's port.
func (f *PortForward) Backend(ctx context.Context, p corev1.Pod) (string, error) {
	return f.forward(ctx, p, manifests.BackendPort)
}

// Close stops every forward.
func (f *PortForward) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.stops {
		close(s)
	}
	f.stops, f.open = nil, nil
	return nil
}

// NodePorts reaches the ingress through the NodePorts kind publishes on
// 127.0.0.1, and the backends through port-forwarding. With more than one
// ingress replica the admin NodePort would answer for a random pod, so
// admin calls then go to each pod through port-forwarding too.
type NodePorts struct {
	Forward *PortForward
}

var _ Access = (*NodePorts)(nil)

// Via says how the proxy URL reaches the ingress.
func (n *NodePorts) Via() string {
	return fmt.Sprintf("kind's proxy NodePort %d published on 127.0.0.1", manifests.ProxyNodePort)
}

// Ingress returns the published proxy URL and the admin URL(s).
func (n *NodePorts) Ingress(ctx context.Context, pods []corev1.Pod) (proxy, admin []string, err error) {
	proxy = []string{fmt.Sprintf("http://127.0.0.1:%d", manifests.ProxyNodePort)}
	if len(pods) == 1 {
		return proxy, []string{fmt.Sprintf("http://127.0.0.1:%d", manifests.AdminNodePort)}, nil
	}
	for _, p := range pods {
		a, err := n.Forward.forward(ctx, p, manifests.AdminPort)
		if err != nil {
			return nil, nil, err
		}
		admin = append(admin, a)
	}
	return proxy, admin, nil
}

// Backend forwards to the backend pod.
func (n *NodePorts) Backend(ctx context.Context, p corev1.Pod) (string, error) {
	return n.Forward.Backend(ctx, p)
}

// Close stops the forwards.
func (n *NodePorts) Close() error { return n.Forward.Close() }

// ServiceAddress sends the load to the ingress's own address, as a client
// of the cluster would: the URLs given (--proxy-url), else what the
// Services publish (see ProxyURLs). Only the admin API and the resets go
// through port-forwarding: a port-forward is one multiplexed stream
// through the API server that caps throughput and adds latency of its own.
type ServiceAddress struct {
	// URLs given by the user; empty means detect from the Services.
	URLs    []string
	Kube    kubernetes.Interface
	Forward *PortForward

	via string
}

var _ Access = (*ServiceAddress)(nil)

// Via says how the proxy URLs reach the ingress, as of the last Ingress.
func (s *ServiceAddress) Via() string { return s.via }

// Ingress returns the proxy URLs and one forwarded admin URL per pod.
func (s *ServiceAddress) Ingress(ctx context.Context, pods []corev1.Pod) (proxy, admin []string, err error) {
	proxy, s.via = s.URLs, "--proxy-url"
	if len(proxy) == 0 {
		if proxy, s.via, err = s.detect(ctx, pods); err != nil {
			return nil, nil, err
		}
	}
	for _, p := range pods {
		a, err := s.Forward.forward(ctx, p, manifests.AdminPort)
		if err != nil {
			return nil, nil, err
		}
		admin = append(admin, a)
	}
	return proxy, admin, nil
}

// detect polls the Services until one publishes an address (a cloud
// LoadBalancer takes a while to get one) or ctx ends.
func (s *ServiceAddress) detect(ctx context.Context, pods []corev1.Pod) ([]string, string, error) {
	for {
		urls, via, err := s.detectOnce(ctx, pods)
		if err == nil {
			return urls, via, nil
		}
		select {
		case <-ctx.Done():
			return nil, "", fmt.Errorf("kube: proxy address: %w (or pass --proxy-url)", err)
		case <-time.After(2 * time.Second):
		}
	}
}

func (s *ServiceAddress) detectOnce(ctx context.Context, pods []corev1.Pod) ([]string, string, error) {
	svcs, err := s.Kube.CoreV1().Services(manifests.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: manifests.LabelName + "=" + manifests.IngressName})
	if err != nil {
		return nil, "", fmt.Errorf("list the ingress Services: %w", err)
	}
	nodes := map[string]*corev1.Node{}
	for _, p := range pods {
		if p.Spec.NodeName == "" || nodes[p.Spec.NodeName] != nil {
			continue
		}
		n, err := s.Kube.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			return nil, "", fmt.Errorf("node %s of pod %s: %w", p.Spec.NodeName, p.Name, err)
		}
		nodes[n.Name] = n
	}
	return ProxyURLs(svcs.Items, pods, nodes)
}

// Backend forwards to the backend pod (resets and stats only).
func (s *ServiceAddress) Backend(ctx context.Context, p corev1.Pod) (string, error) {
	return s.Forward.Backend(ctx, p)
}

// Close stops the forwards.
func (s *ServiceAddress) Close() error { return s.Forward.Close() }

// ProxyURLs picks where load goes from the ingress's Services: a
// LoadBalancer Service's published address (IP or hostname) and its proxy
// port if one has it; else the proxy NodePort on the address of every
// node that runs an ingress pod (the NodePort Service keeps traffic on the
// node it enters, so only those nodes answer), preferring a node's
// ExternalIP to its InternalIP. via says which, for the run's facts.
func ProxyURLs(svcs []corev1.Service, pods []corev1.Pod, nodes map[string]*corev1.Node) (urls []string, via string, err error) {
	proxyPort := func(svc corev1.Service) (port, nodePort int32) {
		for _, p := range svc.Spec.Ports {
			if p.Name == "proxy" {
				return p.Port, p.NodePort
			}
		}
		return 0, 0
	}
	sort.Slice(svcs, func(i, j int) bool { return svcs[i].Name < svcs[j].Name })
	var pendingLB string
	for _, svc := range svcs {
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		port, _ := proxyPort(svc)
		if port == 0 {
			continue
		}
		for _, in := range svc.Status.LoadBalancer.Ingress {
			host := in.IP
			if host == "" {
				host = in.Hostname
			}
			if host != "" {
				return []string{"http://" + net.JoinHostPort(host, strconv.Itoa(int(port)))},
					fmt.Sprintf("LoadBalancer Service %s/%s", manifests.SystemNamespace, svc.Name), nil
			}
		}
		pendingLB = svc.Name
	}
	// A LoadBalancer Service was asked for: wait for its address rather
	// than fall back to node addresses the user may not reach.
	if pendingLB != "" {
		return nil, "", fmt.Errorf("service %s/%s has no LoadBalancer address yet", manifests.SystemNamespace, pendingLB)
	}
	for _, svc := range svcs {
		if svc.Spec.Type != corev1.ServiceTypeNodePort && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		_, nodePort := proxyPort(svc)
		if nodePort == 0 {
			continue
		}
		seen := map[string]bool{}
		urls = nil
		for _, p := range pods {
			n := nodes[p.Spec.NodeName]
			if n == nil {
				continue
			}
			addr := nodeAddress(n)
			if addr == "" || seen[addr] {
				continue
			}
			seen[addr] = true
			urls = append(urls, "http://"+net.JoinHostPort(addr, strconv.Itoa(int(nodePort))))
		}
		if len(urls) > 0 {
			sort.Strings(urls)
			return urls, fmt.Sprintf("NodePort %d of Service %s/%s on the nodes running an ingress pod", nodePort, manifests.SystemNamespace, svc.Name), nil
		}
	}
	return nil, "", fmt.Errorf("no LoadBalancer address and no node address with the proxy NodePort among %d Services of the ingress", len(svcs))
}

func nodeAddress(n *corev1.Node) string {
	for _, want := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
		for _, a := range n.Status.Addresses {
			if a.Type == want && a.Address != "" {
				return a.Address
			}
		}
	}
	return ""
}

// ParseProxyURLs checks --proxy-url values: http or https with a host,
// nothing after the port but an optional "/".
func ParseProxyURLs(raw []string) ([]string, error) {
	var out []string
	for _, r := range raw {
		u, err := url.Parse(strings.TrimSpace(r))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return nil, fmt.Errorf("--proxy-url %q: want http://HOST:PORT or https://HOST:PORT (the ingress's address, no path)", r)
		}
		out = append(out, u.Scheme+"://"+u.Host)
	}
	return out, nil
}
