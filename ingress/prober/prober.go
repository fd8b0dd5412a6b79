// Package prober carries out probe plans: it sends GET /prequal/probe to
// backends from a bounded pool of workers over its own connection pool, and
// hands each answer or failure reason back to whoever asked.
//
// Enqueue never blocks, so the request path can plan probes under its route
// lock and hand them over cheaply; a full queue is reported as a drop.
package prober

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

// Path is the probe endpoint of a backend.
const Path = "/prequal/probe"

// maxBody caps how much of a probe answer is read; a real answer is ~100 B.
const maxBody = 4 << 10

// Target receives the outcome of a probe it asked for. It is called from a
// worker goroutine.
type Target interface {
	ProbeDone(endpoint string, r Result)
}

// Result is the outcome of one probe.
type Result struct {
	Outcome loadbalancer.ProbeOutcome
	// Reply is set when Outcome is ProbeOK.
	Reply loadbalancer.ProbeReply
	// Received is the local time the answer (or failure) was seen.
	Received time.Time
	// Duration is how long the probe took; 0 for dropped probes.
	Duration time.Duration
}

// Job is one probe to send.
type Job struct {
	Endpoint string
	Target   Target
}

// Config tunes a Prober. Zero fields take the defaults.
type Config struct {
	Workers   int           // default 8
	QueueSize int           // default 1024
	Timeout   time.Duration // per probe, default 100ms
	// StaleAfter is the largest accepted |backend clock − local clock|;
	// default 5s.
	StaleAfter  time.Duration
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Prober is a bounded worker pool sending probes.
type Prober struct {
	cfg    Config
	queue  chan Job
	client *http.Client
}

// New builds a Prober; call Run to start its workers.
func New(cfg Config) (*Prober, error) {
	if cfg.Workers == 0 {
		cfg.Workers = 8
	}
	if cfg.QueueSize == 0 {
		cfg.QueueSize = 1024
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 100 * time.Millisecond
	}
	if cfg.StaleAfter == 0 {
		cfg.StaleAfter = 5 * time.Second
	}
	if cfg.Workers < 0 || cfg.QueueSize < 0 || cfg.Timeout < 0 || cfg.StaleAfter < 0 {
		return nil, fmt.Errorf("prober: workers (%d), queue size (%d), timeout (%v) and stale-after (%v) must not be negative",
			cfg.Workers, cfg.QueueSize, cfg.Timeout, cfg.StaleAfter)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.DialContext == nil {
		cfg.DialContext = (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext
	}
	// Its own transport, so probes never wait behind proxied requests for a
	// connection and keep their connections alive between probes.
	tr := &http.Transport{
		DialContext:         cfg.DialContext,
		MaxIdleConns:        cfg.Workers * 64,
		MaxIdleConnsPerHost: cfg.Workers,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &Prober{cfg: cfg, queue: make(chan Job, cfg.QueueSize), client: &http.Client{Transport: tr}}, nil
}

// Enqueue hands a probe to the workers without blocking. It reports false
// when the queue is full and the probe was dropped.
func (p *Prober) Enqueue(j Job) bool {
	select {
	case p.queue <- j:
		return true
	default:
		return false
	}
}

// QueueDepth is the number of probes waiting for a worker.
func (p *Prober) QueueDepth() int { return len(p.queue) }

// Run runs the workers until ctx ends. Probes still queued then are dropped
// without being reported.
func (p *Prober) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range p.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case j := <-p.queue:
					j.Target.ProbeDone(j.Endpoint, p.Probe(ctx, j.Endpoint))
				}
			}
		}()
	}
	wg.Wait()
	p.client.CloseIdleConnections()
}

// Probe sends one probe and classifies the outcome.
func (p *Prober) Probe(ctx context.Context, endpoint string) Result {
	start := p.cfg.Now()
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	res := p.probe(ctx, endpoint)
	res.Received = p.cfg.Now()
	res.Duration = res.Received.Sub(start)
	return res
}

func (p *Prober) probe(ctx context.Context, endpoint string) Result {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+endpoint+Path, nil)
	if err != nil {
		return Result{Outcome: loadbalancer.ProbeMalformed}
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return Result{Outcome: loadbalancer.ProbeTimeout}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return Result{Outcome: loadbalancer.ProbeTimeout}
	}
	// Drain a little more so the connection can be reused.
	_, _ = io.CopyN(io.Discard, resp.Body, maxBody)
	if resp.StatusCode != http.StatusOK {
		return Result{Outcome: loadbalancer.ProbeStatus}
	}
	if len(body) > maxBody {
		return Result{Outcome: loadbalancer.ProbeMalformed}
	}
	reply, outcome := ParseReply(body, p.cfg.Now(), p.cfg.StaleAfter)
	return Result{Outcome: outcome, Reply: reply}
}

// wireReply is the backend's probe JSON. Pointers tell absent from zero.
type wireReply struct {
	RIF         *json.Number `json:"rif"`
	LatencyMS   *float64     `json:"latency_median_ms"`
	TimestampMS *uint64      `json:"timestamp_ms"`
	Samples     *int64       `json:"samples"`
}

// errMalformed is wrapped by ParseReply's detailed errors.
var errMalformed = errors.New("malformed probe reply")

// ParseReply decodes a probe answer received at now. It returns ProbeOK with
// the reply, ProbeMalformed for an invalid body, or ProbeStale when the
// backend's timestamp differs from now by more than staleAfter. A missing or
// zero timestamp (older backends) skips the staleness check; the pool ages
// probes from local receipt time either way.
func ParseReply(body []byte, now time.Time, staleAfter time.Duration) (loadbalancer.ProbeReply, loadbalancer.ProbeOutcome) {
	r, err := decodeReply(body)
	if err != nil {
		return loadbalancer.ProbeReply{}, loadbalancer.ProbeMalformed
	}
	if r.TimestampMS != nil && *r.TimestampMS != 0 {
		const maxMS = 1 << 53 // beyond this a float/int conversion would lie
		if *r.TimestampMS > maxMS {
			return loadbalancer.ProbeReply{}, loadbalancer.ProbeMalformed
		}
		skew := now.Sub(time.UnixMilli(int64(*r.TimestampMS)))
		if skew < 0 {
			skew = -skew
		}
		if skew > staleAfter {
			return loadbalancer.ProbeReply{}, loadbalancer.ProbeStale
		}
	}
	rif, _ := r.RIF.Int64()
	out := loadbalancer.ProbeReply{RIF: int(rif)}
	if r.LatencyMS != nil {
		out.LatencyKnown = true
		out.Latency = time.Duration(*r.LatencyMS * float64(time.Millisecond))
	}
	return out, loadbalancer.ProbeOK
}

func decodeReply(body []byte) (wireReply, error) {
	var r wireReply
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("%w: %v", errMalformed, err)
	}
	if dec.More() {
		return r, fmt.Errorf("%w: trailing data", errMalformed)
	}
	if r.RIF == nil {
		return r, fmt.Errorf("%w: rif missing", errMalformed)
	}
	rif, err := r.RIF.Int64()
	const maxRIF = 1 << 31
	if err != nil || rif < 0 || rif > maxRIF {
		return r, fmt.Errorf("%w: rif %q is not an integer in [0, %d]", errMalformed, r.RIF.String(), maxRIF)
	}
	if r.LatencyMS != nil {
		const maxLatencyMS = 24 * 3600 * 1000 // a day; anything above is nonsense
		if !(*r.LatencyMS >= 0 && *r.LatencyMS <= maxLatencyMS) {
			return r, fmt.Errorf("%w: latency_median_ms %v out of range", errMalformed, *r.LatencyMS)
		}
	}
	if r.Samples != nil && *r.Samples < 0 {
		return r, fmt.Errorf("%w: samples %d is negative", errMalformed, *r.Samples)
	}
	return r, nil
}
