// Package ingresstest serves an Ingress's data plane on a loopback listener
// for tests in other packages, as httptest does for an http.Handler.
package ingresstest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress"
)

// Serve serves ing's proxy on 127.0.0.1 until the test ends and returns its
// base URL ("http://127.0.0.1:port").
func Serve(t testing.TB, ing *ingress.Ingress) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := ing.ProxyServer()
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ing.ProxyListener(l)) }()
	t.Cleanup(func() {
		// Bounded: a test may leave a request hanging on a stalled backend.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		l.Close()
		<-done
	})
	return "http://" + l.Addr().String()
}
