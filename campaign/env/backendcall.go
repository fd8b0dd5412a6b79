package env

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// MaxAnswer bounds the body Call reads.
const MaxAnswer = 1 << 20

// Call sends a bodiless request and returns the body of a 200 answer (at
// most MaxAnswer bytes); another status is an error carrying the body.
// The environments' calls to the backends' /stats, /reset and probe and
// to the ingress's admin API go through it.
func Call(ctx context.Context, c *http.Client, method, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: status %d: %s", method, url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// BackendStats is a prequalbench backend's /stats and /reset answer.
type BackendStats struct {
	InFlight int    `json:"in_flight"`
	Queued   int    `json:"queued"`
	Served   uint64 `json:"served"`
	Rejected uint64 `json:"rejected"`
	MaxQueue int    `json:"max_queue"`
}

// Clean reports whether the counters are those of a freshly reset,
// idle backend.
func (s BackendStats) Clean() bool { return s == BackendStats{} }

// CallBackend sends method to a prequalbench backend's path (/stats or
// /reset) at addr (host:port) and decodes its counters.
func CallBackend(ctx context.Context, c *http.Client, method, addr, path string) (BackendStats, error) {
	var st BackendStats
	b, err := Call(ctx, c, method, "http://"+addr+path)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s %s: bad answer %q", method, path, b)
	}
	return st, nil
}
