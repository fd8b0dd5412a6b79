package testbackend_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/prequalbench/prequalbench/internal/testbackend"
)

// benchGet issues GETs from parallel goroutines over keep-alive connections.
func benchGet(b *testing.B, path string, args ...string) {
	be := testbackend.Start(b, args...)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	url := be.URL(path)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Get(url)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}

// Request overhead of the server itself: zero-iteration work, no capacity limit.
func BenchmarkWork_ZeroIterations(b *testing.B) {
	benchGet(b, "/work?iterations=0", "--concurrency", "0")
}

func BenchmarkProbe(b *testing.B) {
	benchGet(b, "/prequal/probe")
}

// Cost of cpu mode: 1000 chained SHA-256 rounds per request.
func BenchmarkWork_CPU1000Rounds(b *testing.B) {
	benchGet(b, "/work?iterations=1000", "--mode", "cpu", "--concurrency", "2")
}
