package ingress

import (
	"net/http"
	"testing"

	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/internal/testbackend"
)

// TestProxy_HeaderMatchAndWeightedSplit: the proxy hands the request's
// header fields to the router (an HTTPRoute's header match picks its pool)
// and a weighted split sends each pool its share.
func TestProxy_HeaderMatchAndWeightedSplit(t *testing.T) {
	a, b, c := testbackend.Start(t), testbackend.Start(t), testbackend.Start(t)
	const origin = "HTTPRoute ns/split"
	ing, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"},
		route.Spec{Key: "a", Path: "/work", PathType: route.PathPrefix, Origin: origin, Weight: 3, Endpoints: []string{a.Addr}},
		route.Spec{Key: "b", Path: "/work", PathType: route.PathPrefix, Origin: origin, Weight: 1, Endpoints: []string{b.Addr}},
		route.Spec{Key: "canary", Path: "/work", PathType: route.PathPrefix, Origin: origin, Endpoints: []string{c.Addr},
			Headers: []route.HeaderMatch{{Name: "X-Canary", Value: "on"}}},
	)
	do := func(canary bool) {
		req, _ := http.NewRequest(http.MethodGet, url+"/work?iterations=1", nil)
		if canary {
			req.Header.Set("x-canary", "on")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d (canary %v)", resp.StatusCode, canary)
		}
	}
	for range 40 {
		do(false)
	}
	for range 5 {
		do(true)
	}
	picks := func(key string) uint64 { return policyStats(t, ing, key).Picks }
	if picks("a") != 30 || picks("b") != 10 || picks("canary") != 5 {
		t.Fatalf("picks a=%d b=%d canary=%d, want 30, 10, 5", picks("a"), picks("b"), picks("canary"))
	}
}

// TestProxy_FixedStatus: a rule with route.Spec.Status answers it and
// forwards nothing; in a weighted split it takes its share (an HTTPRoute
// backendRef that does not resolve gets 500 for its part of the traffic).
func TestProxy_FixedStatus(t *testing.T) {
	a := testbackend.Start(t)
	const origin = "HTTPRoute ns/half"
	_, url := newTestIngress(t, Options{DefaultAlgorithm: "round-robin"},
		route.Spec{Key: "a", Path: "/work", PathType: route.PathPrefix, Origin: origin, Weight: 1, Endpoints: []string{a.Addr}},
		route.Spec{Key: "unresolved/ns/half/0/1", Path: "/work", PathType: route.PathPrefix, Origin: origin, Weight: 1,
			Status: http.StatusInternalServerError},
		route.Spec{Key: "nobackend/ns/none/0", Path: "/none", PathType: route.PathExact, Origin: "HTTPRoute ns/none",
			Status: http.StatusInternalServerError},
	)
	codes := map[int]int{}
	for range 10 {
		resp, err := http.Get(url + "/work?iterations=1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	if codes[200] != 5 || codes[500] != 5 {
		t.Fatalf("1:1 split with an unresolved backend over 10 requests: %v, want 5 200s and 5 500s", codes)
	}
	resp, err := http.Get(url + "/none")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("rule with no backend: status %d, want 500", resp.StatusCode)
	}
}
