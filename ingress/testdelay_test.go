package ingress

import (
	"testing"
	"time"
)

// The test-only added delay holds every request, answered or not, at
// least that long: the known slowdown an A/B campaign must detect.
func TestTestAddedDelay_HoldsEveryRequest(t *testing.T) {
	const d = 300 * time.Millisecond
	_, url := newTestIngress(t, Options{TestAddedDelay: d})
	for range 2 {
		start := time.Now()
		code, _, _ := get(t, url+"/", "no-such-route.example")
		if took := time.Since(start); took < d {
			t.Fatalf("answer (%d) after %v, want at least the added %v", code, took, d)
		}
	}
}
