package ingress

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/internal/testbackend"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

// The direction of each policy of issue 14 through the ingress, on real
// backends: under a steady closed-loop load the better backend must come
// to take clearly more picks than the worse one, through whatever signal
// the policy reads (load reports polled by probes, polled RIF, probe
// answers, local latency). Without that signal each of them splits the
// picks about evenly (wrr runs round-robin, yarp-po2c and the pool
// policies draw at random), so each test fails if the signal is cut off.
// The tests poll the policy's counters until a deadline; nothing is timed.

// keepBusy runs workers closed-loop clients against url until the test
// ends. Their errors do not matter: the assertions read the policy.
func keepBusy(t *testing.T, url string, workers int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	c := &http.Client{Timeout: deadline, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if err != nil {
					return
				}
				resp, err := c.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	// Registered after the ingress and the backends, so it runs before
	// their cleanups: the load stops first.
	t.Cleanup(func() { cancel(); wg.Wait(); c.CloseIdleConnections() })
}

// picksOf returns the picks of each address on route key.
func picksOf(t *testing.T, ing *Ingress, key string) map[string]uint64 {
	t.Helper()
	m := map[string]uint64{}
	for _, e := range policyStats(t, ing, key).Endpoints {
		m[e.Address] = e.Picks
	}
	return m
}

// favours waits until, counted from the moment it is called, the good
// endpoint has at least ratio times the picks of the bad one over at
// least minPicks picks, and fails at the deadline. It returns the counts.
func favours(t *testing.T, ing *Ingress, key, good, bad string, ratio float64, minPicks uint64) (uint64, uint64) {
	t.Helper()
	base := picksOf(t, ing, key)
	end := time.Now().Add(deadline)
	var g, b uint64
	for {
		now := picksOf(t, ing, key)
		g, b = now[good]-base[good], now[bad]-base[bad]
		if g+b >= minPicks && float64(g) >= ratio*float64(b) {
			return g, b
		}
		if time.Now().After(end) {
			st := policyStats(t, ing, key)
			t.Fatalf("%s: after %v the better backend has %d picks, the worse %d: want at least %.1f× over %d picks (probes planned %d, outcomes %v)",
				st.Algorithm, deadline, g, b, ratio, minPicks, st.ProbesPlanned, st.ProbeOutcomes)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a wait for the outcome
	}
}

// wrr weights each backend by qps / utilization from its load reports,
// which the ingress polls through probes: a backend with 1 slot is about
// four times as busy as one with 4 at the same rate, so its weight falls
// to about a quarter. Without the reports wrr is round-robin (1:1).
func TestE2E_WRRShiftsWeightOffTheBusierBackend(t *testing.T) {
	roomy := testbackend.Start(t, "--service-time", "10ms", "--concurrency", "4").Addr
	busy := testbackend.Start(t, "--service-time", "10ms", "--concurrency", "1").Addr
	alg := "wrr{blackout=0s,period=100ms}"
	ing, url := newTestIngress(t, Options{}, route.Spec{Key: "w", Path: "/", Algorithm: alg, Endpoints: []string{roomy, busy}})
	keepBusy(t, url+"/work", 4)
	g, b := favours(t, ing, "w", roomy, busy, 2, 200)
	t.Logf("%s: roomy %d picks, busy %d", alg, g, b)
	if st := policyStats(t, ing, "w"); st.ProbeOutcomes[loadbalancer.ProbeOK] == 0 {
		t.Errorf("%s favoured the roomy backend without a load report", alg)
	}
}

// yarp-po2c picks the lower of two polled RIFs: under the load a backend
// four times as slow holds more requests (RIF = rate × latency), so its
// polled RIF is the higher. Never polled, both count as RIF 0 and the
// picks split at random.
func TestE2E_YARPPo2CPrefersTheLowerPolledRIF(t *testing.T) {
	fast := testbackend.Start(t, "--service-time", "5ms", "--concurrency", "2").Addr
	slow := testbackend.Start(t, "--service-time", "20ms", "--concurrency", "2").Addr
	alg := "yarp-po2c{poll=50ms}"
	ing, url := newTestIngress(t, Options{}, route.Spec{Key: "y", Path: "/", Algorithm: alg, Endpoints: []string{fast, slow}})
	keepBusy(t, url+"/work", 4)
	g, b := favours(t, ing, "y", fast, slow, 2, 200)
	t.Logf("%s: fast %d picks, slow %d", alg, g, b)
}

// The pool policies and ewma send fewer picks to a backend four times as
// slow (same slots): linear and rif-only through its probed RIF and
// latency, ewma through the latency it measures itself.
func TestE2E_PoliciesSendFewerPicksToTheSlowBackend(t *testing.T) {
	for _, alg := range []string{"linear", "rif-only", "ewma"} {
		t.Run(alg, func(t *testing.T) {
			fast := testbackend.Start(t, "--service-time", "5ms", "--concurrency", "2").Addr
			slow := testbackend.Start(t, "--service-time", "20ms", "--concurrency", "2").Addr
			ing, url := newTestIngress(t, Options{}, route.Spec{Key: "p", Path: "/", Algorithm: alg, Endpoints: []string{fast, slow}})
			keepBusy(t, url+"/work", 4)
			g, b := favours(t, ing, "p", fast, slow, 2, 200)
			t.Logf("%s: fast %d picks, slow %d", alg, g, b)
			if st := policyStats(t, ing, "p"); alg != "ewma" && st.Fallbacks > (g+b)/2 {
				t.Errorf("%s: %d random fallbacks in %d picks: not the probes' doing", alg, st.Fallbacks, g+b)
			}
		})
	}
}
