package ingress

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress/internal/h1"
	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/internal/testbackend"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

// prequal-sync through the ingress: each query's pick comes from the
// answers of its own probes, never the random fallback that Pick is for a
// caller that does not drive the two phases. The long timeout keeps a
// loaded host from turning picks into fallbacks.
func TestProxy_PrequalSyncProbesPerQuery(t *testing.T) {
	var eps []string
	for range 3 {
		eps = append(eps, testbackend.Start(t, "--service-time", "1ms").Addr)
	}
	ing, url := newTestIngress(t, Options{},
		route.Spec{Key: "s", Path: "/", Algorithm: "prequal-sync{timeout=2s}", Endpoints: eps})
	const queries = 20
	for range queries {
		if code, body, _ := get(t, url+"/work?iterations=1", ""); code != 200 {
			t.Fatalf("status %d: %s", code, body)
		}
	}
	st := policyStats(t, ing, "s")
	if st.Fallbacks != 0 {
		t.Fatalf("%d of %d picks were random fallbacks: the ingress did not probe synchronously", st.Fallbacks, queries)
	}
	// d = 3 probes per query, the pick waits for d-1 = 2 answers.
	if ok := st.ProbeOutcomes[loadbalancer.ProbeOK]; ok < 2*queries {
		t.Fatalf("%d probe answers used for %d queries, want at least %d", ok, queries, 2*queries)
	}
	if st.HotPicks+st.ColdPicks != queries {
		t.Fatalf("hot %d + cold %d picks, want %d", st.HotPicks, st.ColdPicks, queries)
	}
}

// c3 through the ingress reads the queue size the backends put in their
// answers: a backend that reports a long queue is avoided although it
// answers faster than the other (which takes 20 ms). Without the feedback
// c3 ranks by latency alone and would send the fast one nearly every
// pick, so the test fails if the ingress does not hand the headers in.
func TestProxy_C3ReadsServerFeedback(t *testing.T) {
	backend := func(queue string, svc time.Duration) string {
		be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(svc) // the backend's work, not the test waiting
			w.Header().Set("X-Prequal-Queue", queue)
			w.Header().Set("X-Prequal-Service-Us", strconv.FormatInt(max(svc.Microseconds(), 100), 10))
			_, _ = w.Write([]byte("ok"))
		}))
		t.Cleanup(be.Close)
		return strings.TrimPrefix(be.URL, "http://")
	}
	queued, slow := backend("50", 0), backend("0", 20*time.Millisecond)
	ing, url := newTestIngress(t, Options{},
		route.Spec{Key: "c", Path: "/", Algorithm: "c3", Endpoints: []string{queued, slow}})
	const queries = 40
	for range queries {
		if code, body, _ := get(t, url+"/work", ""); code != 200 {
			t.Fatalf("status %d: %s", code, body)
		}
	}
	var picks uint64
	for _, ep := range policyStats(t, ing, "c").Endpoints {
		if ep.Address == queued {
			picks = ep.Picks
		}
	}
	// One pick to learn its score, a few more at most.
	if picks > 3 {
		t.Fatalf("the fast backend reporting a queue of 50 got %d of %d picks", picks, queries)
	}
}

func TestServerFeedback_Headers(t *testing.T) {
	for _, tt := range []struct {
		queue, svc string
		want       loadbalancer.ServerFeedback
	}{
		{"3", "1500", loadbalancer.ServerFeedback{Known: true, QueueSize: 3, ServiceTime: 1500 * 1000}},
		{"", "", loadbalancer.ServerFeedback{}},
		{"7", "", loadbalancer.ServerFeedback{Known: true, QueueSize: 7}},
		{"-1", "10", loadbalancer.ServerFeedback{}},
		{"2", "x", loadbalancer.ServerFeedback{}},
	} {
		raw := "HTTP/1.1 200 OK\r\n"
		if tt.queue != "" {
			raw += "X-Prequal-Queue: " + tt.queue + "\r\n"
		}
		if tt.svc != "" {
			raw += "x-prequal-service-us: " + tt.svc + "\r\n"
		}
		var resp h1.Response
		if err := h1.NewReader(strings.NewReader(raw+"\r\n"), 1024).ReadResponseHead(&resp); err != nil {
			t.Fatal(err)
		}
		if got := serverFeedback(&resp); got != tt.want {
			t.Errorf("queue %q service %q: got %+v, want %+v", tt.queue, tt.svc, got, tt.want)
		}
	}
}
