package ingress

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/internal/testbackend"
)

// TestServe_ShutdownDelayLosesNoRequests stops an ingress under load the way
// Kubernetes does: readiness fails, and the senders (standing in for
// EndpointSlice consumers) stop only some requests later. With the shutdown
// delay every request is served; without it the requests sent after the
// readiness change find the listener closed.
func TestServe_ShutdownDelayLosesNoRequests(t *testing.T) {
	be := testbackend.Start(t, "--service-time", "2ms")
	for _, tt := range []struct {
		delay        time.Duration
		wantFailures bool
	}{{5 * time.Second, false}, {0, true}} {
		t.Run(fmt.Sprint("delay=", tt.delay), func(t *testing.T) {
			const (
				workers  = 4
				lag      = 5    // requests each sender still sends after readiness failed
				maxSends = 4000 // bound on the whole load
			)
			ing, err := New(Options{Seed: 1, DefaultAlgorithm: "round-robin", Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			started := make(chan [2]string, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- Serve(ctx, ing, ServeConfig{
					Source: staticSource{[]route.Spec{{Key: "w", Path: "/", Endpoints: []string{be.Addr}}}},
					Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0",
					ShutdownDelay: tt.delay, ShutdownTimeout: 10 * time.Second,
					Started: func(p, a string) { started <- [2]string{p, a} },
				})
			}()
			addrs := <-started
			// A new connection per request: what a client balanced away
			// from this replica would otherwise open.
			client := &http.Client{Timeout: deadline, Transport: &http.Transport{DisableKeepAlives: true}}
			ready := func() bool {
				resp, err := client.Get("http://" + addrs[1] + "/readyz")
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == 200
			}
			waitFor(t, "ready", ready)

			var notReady atomic.Bool
			var sends, ok, failed, servedAfter atomic.Int64
			var firstErr atomic.Value
			var wg sync.WaitGroup
			end := time.Now().Add(deadline)
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					after := 0
					for sends.Add(1) <= maxSends && time.Now().Before(end) {
						if notReady.Load() {
							if after == lag {
								return
							}
							after++
						}
						resp, err := client.Get("http://" + addrs[0] + "/work?iterations=1")
						if err == nil {
							resp.Body.Close()
						}
						switch {
						case err != nil:
							failed.Add(1)
							firstErr.CompareAndSwap(nil, err.Error())
						case resp.StatusCode != 200:
							failed.Add(1)
							firstErr.CompareAndSwap(nil, resp.Status)
						default:
							ok.Add(1)
							if after > 0 {
								servedAfter.Add(1)
							}
						}
					}
				}()
			}
			waitFor(t, "load flowing", func() bool { return ok.Load() >= 40 })
			cancel() // SIGTERM
			waitFor(t, "readiness to fail", func() bool { return !ready() })
			notReady.Store(true)
			wg.Wait()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Serve = %v", err)
				}
			case <-time.After(deadline + tt.delay):
				t.Fatal("Serve did not return")
			}
			t.Logf("sent %d: ok %d, failed %d (first: %v), served after readiness failed %d",
				min(sends.Load(), maxSends), ok.Load(), failed.Load(), firstErr.Load(), servedAfter.Load())
			if tt.wantFailures {
				if failed.Load() == 0 {
					t.Fatal("no request failed without a shutdown delay: the test does not reach the closed listener")
				}
				return
			}
			if failed.Load() != 0 || servedAfter.Load() != workers*lag {
				t.Fatalf("%d failed requests (first: %v), %d served after readiness failed; want 0 and %d",
					failed.Load(), firstErr.Load(), servedAfter.Load(), workers*lag)
			}
		})
	}
}
