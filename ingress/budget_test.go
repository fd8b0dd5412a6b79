package ingress

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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

// An answer whose body would overrun the body memory budget while another
// request holds its share gets 503 (not counted against the backend), and
// the share is given back once that request is answered.
func TestProxy_BodyBudgetCoversAnswers(t *testing.T) {
	const size = 700 << 10
	hold := make(chan struct{})
	held := make(chan struct{}, 1)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/hold" {
			held <- struct{}{}
			<-hold
			return
		}
		_, _ = w.Write(make([]byte, size))
	}))
	defer be.Close()
	var once sync.Once
	unhold := func() { once.Do(func() { close(hold) }) }
	defer unhold() // before be.Close, which waits for the held handler
	ing, url := newTestIngress(t, Options{MaxBodySize: 1 << 20, BodyMemoryBudget: 1 << 20},
		route.Spec{Key: "k", Path: "/", Endpoints: []string{strings.TrimPrefix(be.URL, "http://")}})
	done := make(chan int, 1)
	go func() {
		resp, err := http.Post(url+"/hold", "application/octet-stream", bytes.NewReader(make([]byte, size)))
		if err != nil {
			done <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	<-held
	if code, _, _ := get(t, url+"/big", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("an answer over the budget: %d, want 503", code)
	}
	if n := counterValue(t, ing.metrics.BodyBudgetRefusals); n != 1 {
		t.Fatalf("prequal_body_budget_refusals_total %v, want 1", n)
	}
	unhold()
	if code := <-done; code != 200 {
		t.Fatalf("the held request: %d", code)
	}
	if code, _, _ := get(t, url+"/big", ""); code != 200 {
		t.Fatalf("after the release: %d, want 200", code)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
