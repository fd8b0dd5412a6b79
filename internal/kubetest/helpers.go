package kubetest

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a fresh namespace named after the test and deletes it
// when the test ends. (Without a controller-manager a deleted namespace stays
// Terminating, so names are never reused.)
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	prefix := nonDNS.ReplaceAllString(strings.ToLower(t.Name()), "-")
	prefix = strings.Trim(prefix, "-")
	if len(prefix) > 40 {
		prefix = strings.Trim(prefix[:40], "-")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubetest: create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.Client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("kubetest: delete namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// LoopbackDialer returns a DialContext that sends each address of m (such as
// "192.0.2.10:8080", the documentation addresses tests put in EndpointSlices,
// which refuse loopback) to its loopback target ("127.0.0.1:NNNN"). Loopback
// addresses pass through. Any other address is refused: the dial fails and
// the test is marked failed, so a mistake can never send traffic off the
// machine. Every target in m must itself be a loopback address.
func LoopbackDialer(t testing.TB, m map[string]string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	t.Helper()
	mapping := make(map[string]string, len(m))
	for from, to := range m {
		if !isLoopback(to) {
			t.Fatalf("kubetest: LoopbackDialer target %q for %q is not a loopback ip:port", to, from)
		}
		mapping[from] = to
	}
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		target, ok := mapping[addr]
		if !ok {
			if !isLoopback(addr) {
				t.Errorf("kubetest: refusing to dial unmapped non-loopback address %s %s", network, addr)
				return nil, fmt.Errorf("kubetest: refusing to dial unmapped non-loopback address %s", addr)
			}
			target = addr
		}
		return d.DialContext(ctx, network, target)
	}
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
