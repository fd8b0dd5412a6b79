package kubetest

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestStartNamespaceStop brings up a private control plane (no Main here),
// uses it through both the clientset and the kubeconfig file, and checks that
// stopping it leaves no etcd or kube-apiserver behind.
func TestStartNamespaceStop(t *testing.T) {
	var env *Env
	t.Run("start", func(t *testing.T) {
		env = Start(t)
		ns := env.Namespace(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := env.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
			t.Fatalf("namespace %s: %v", ns, err)
		}
		if !strings.HasPrefix(ns, "teststartnamespacestop-start-") {
			t.Errorf("namespace %q is not named after the test", ns)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
		if err != nil {
			t.Fatalf("kubeconfig %s: %v", env.Kubeconfig, err)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		v, err := cs.Discovery().ServerVersion()
		if err != nil || v.GitVersion != "v1.34.4" {
			t.Fatalf("server version through kubeconfig = %v, %v; want v1.34.4", v, err)
		}
		if len(leftovers(env.assets)) != 2 {
			t.Errorf("running children from %s = %v, want etcd and kube-apiserver", env.assets, leftovers(env.assets))
		}
	})
	// The subtest's cleanup stopped the control plane.
	if env == nil {
		t.Fatal("no environment")
	}
	if left := leftovers(env.assets); len(left) > 0 {
		t.Errorf("processes left after stop: %v", left)
	}
}

// recordingTB catches Errorf so the refusal of the dialer can be checked.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestLoopbackDialer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "hello")
			_ = c.Close()
		}
	}()
	rec := &recordingTB{TB: t}
	dial := LoopbackDialer(rec, map[string]string{"192.0.2.10:8080": ln.Addr().String()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for _, addr := range []string{"192.0.2.10:8080", ln.Addr().String()} {
		c, err := dial(ctx, "tcp", addr)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		b, _ := io.ReadAll(c)
		c.Close()
		if string(b) != "hello" {
			t.Errorf("dial %s read %q, want hello", addr, b)
		}
	}
	if _, err := dial(ctx, "tcp", "192.0.2.11:8080"); err == nil {
		t.Error("dial of an unmapped documentation address succeeded, want refusal")
	}
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "192.0.2.11:8080") {
		t.Errorf("test errors = %q, want one naming 192.0.2.11:8080", rec.errors)
	}
}
