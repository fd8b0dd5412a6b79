package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"

	"github.com/prequalbench/prequalbench/manifests"
	corev1 "k8s.io/api/core/v1"
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
