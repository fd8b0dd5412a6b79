package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Client talks to an ingress's admin API.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// NewClient returns a client for the admin API at baseURL
// ("http://127.0.0.1:8081"); token may be empty.
func NewClient(baseURL, token string) *Client {
	return &Client{
		base:  strings.TrimRight(baseURL, "/"),
		token: token,
		http:  &http.Client{Timeout: 30 * time.Second},
	}
}

// HTTPError is an admin API answer with a non-2xx status; Message is the
// server's JSON error text (or the raw body when it was not JSON).
type HTTPError struct {
	Method, Path string
	StatusCode   int
	Message      string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("adminapi: %s %s: %d %s: %s", e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// State fetches GET /admin/state.
func (c *Client) State(ctx context.Context) (State, error) {
	var s State
	err := c.do(ctx, http.MethodGet, "/admin/state", nil, &s)
	return s, err
}

// Routes fetches GET /routes.
func (c *Client) Routes(ctx context.Context) ([]Route, error) {
	var rs []Route
	err := c.do(ctx, http.MethodGet, "/routes", nil, &rs)
	return rs, err
}

// SetAlgorithm sets the algorithm of one route, or of every route when route
// is "".
func (c *Client) SetAlgorithm(ctx context.Context, route, algo string) error {
	return c.do(ctx, http.MethodPost, "/admin/algorithm", AlgorithmRequest{Route: route, Algorithm: algo}, nil)
}

// Reset clears pools and per-run counters of one route, or of every route
// when route is "", and returns the state right after the reset.
func (c *Client) Reset(ctx context.Context, route string) (State, error) {
	var s State
	err := c.do(ctx, http.MethodPost, "/admin/reset", ResetRequest{Route: route}, &s)
	return s, err
}

// Ready returns nil when GET /readyz answers 200.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/readyz", nil, nil)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("adminapi: %s %s: encoding request: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("adminapi: %s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("adminapi: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("adminapi: %s %s: reading answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		msg := strings.TrimSpace(string(data))
		var e Error
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return &HTTPError{Method: method, Path: path, StatusCode: resp.StatusCode, Message: msg}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("adminapi: %s %s: decoding answer: %w", method, path, err)
	}
	return nil
}

// VerifyReset checks that a state (normally the answer of Reset) shows empty
// pools and zero counters everywhere; the error names every route and
// counter that is not zero.
func (s State) VerifyReset() error {
	var errs []error
	for _, r := range s.Routes {
		bad := func(counter string, v uint64) {
			if v != 0 {
				errs = append(errs, fmt.Errorf("adminapi: reset of route %q not clean: %s = %d", r.Key, counter, v))
			}
		}
		bad("requests", r.Requests)
		bad("no_endpoint", r.NoEndpoint)
		bad("upstream_errors", r.UpstreamErrors)
		bad("client_aborts", r.ClientAborts)
		p := r.Policy
		bad("policy.pool_size", uint64(max(p.PoolSize, 0)))
		bad("policy.picks", p.Picks)
		bad("policy.fallbacks", p.Fallbacks)
		bad("policy.hot_picks", p.HotPicks)
		bad("policy.cold_picks", p.ColdPicks)
		bad("policy.probes_planned", p.ProbesPlanned)
		bad("policy.error_aversions", p.Aversions)
		bad("outliers.ejected", uint64(len(r.Outliers.Ejected)))
		bad("outliers.returns", r.Outliers.Returns)
		for _, reason := range slices.Sorted(maps.Keys(r.Outliers.Ejections)) {
			bad(fmt.Sprintf("outliers.ejections[%s]", reason), r.Outliers.Ejections[reason])
		}
		for _, o := range slices.Sorted(maps.Keys(p.ProbeOutcomes)) {
			bad(fmt.Sprintf("policy.probe_outcomes[%s]", o), p.ProbeOutcomes[o])
		}
		for _, reason := range slices.Sorted(maps.Keys(p.PoolRemovals)) {
			bad(fmt.Sprintf("policy.pool_removals[%s]", reason), p.PoolRemovals[reason])
		}
		for _, e := range p.Endpoints {
			bad(fmt.Sprintf("endpoint %s picks", e.Address), e.Picks)
			bad(fmt.Sprintf("endpoint %s errors", e.Address), e.Errors)
			bad(fmt.Sprintf("endpoint %s in_flight", e.Address), uint64(max(e.InFlight, 0)))
		}
	}
	return errors.Join(errs...)
}
