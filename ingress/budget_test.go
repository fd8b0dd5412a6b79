package ingress

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/internal/testbackend"
)

// A flood of sockets that never send a byte, four times the connection
// cap, does not lock a new client out: it sheds the longest-idle one.
func TestProxy_IdleFloodDoesNotLockOutNewClients(t *testing.T) {
	be := testbackend.Start(t, "--service-time", "0s")
	_, url := newTestIngress(t, Options{MaxClientConns: 50},
		route.Spec{Key: "k", Path: "/", Endpoints: []string{be.Addr}})
	addr := strings.TrimPrefix(url, "http://")
	for range 200 {
		c, err := net.DialTimeout("tcp", addr, deadline)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	if code, body, _ := get(t, url+"/work?iterations=1", ""); code != 200 {
		t.Fatalf("a new client behind 200 idle sockets: %d %s", code, body)
	}
}

// A new connection that sends nothing is closed after
// ClientFirstRequestTimeout, not held for ClientIdleTimeout.
func TestProxy_SilentConnectionClosedEarly(t *testing.T) {
	_, url := newTestIngress(t, Options{ClientFirstRequestTimeout: 50 * time.Millisecond, ClientIdleTimeout: time.Hour})
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), deadline)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(deadline))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
		t.Fatalf("read %d, %v: want the ingress to close the silent connection", n, err)
	}
}
