// Package prober carries out probe plans: it sends GET /prequal/probe to
// backends from a bounded pool of workers over its own keep-alive
// connections, and hands each answer or failure reason back to whoever
// asked.
//
// Enqueue never blocks, so the request path can plan probes under its route
// lock and hand them over cheaply; a full queue is reported as a drop.
//
// A probe is cheap: the worker that takes it writes a request prepared once
// per endpoint on an idle connection to that endpoint (or dials one), reads
// the answer with the data plane's HTTP/1.1 reader (package h1: the same
// framing refusals as the proxy, smaller size limits) into the connection's
// own buffers and parses the JSON in place, with deadlines for the timeout. No goroutine is started per enqueued probe and
// the exchange does not allocate. An idle connection is reused only while
// it is quiet (one non-blocking peek: nothing sent by the backend since the
// last answer, no close), and one with bytes past its answer is not kept,
// so a connection never gets out of step with its backend.
package prober

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/prequalbench/prequalbench/ingress/internal/h1"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

// Path is the probe endpoint of a backend.
const Path = "/prequal/probe"

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
	// IdleTimeout closes a connection unused this long; default 30s (the
	// backend keeps idle connections 120s).
	IdleTimeout time.Duration
	// MaxIdlePerEndpoint bounds the idle connections kept per endpoint;
	// default Workers, as many as can probe one endpoint at once.
	MaxIdlePerEndpoint int
}

// Prober is a bounded worker pool sending probes.
type Prober struct {
	cfg   Config
	queue chan Job
	conns pool
	// realClock: cfg.Now is time.Now, so one clock read serves both the
	// probe's times and its deadlines.
	realClock bool
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
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 30 * time.Second
	}
	if cfg.MaxIdlePerEndpoint == 0 {
		cfg.MaxIdlePerEndpoint = cfg.Workers
	}
	if cfg.Workers < 0 || cfg.QueueSize < 0 || cfg.Timeout < 0 || cfg.StaleAfter < 0 || cfg.IdleTimeout < 0 || cfg.MaxIdlePerEndpoint < 0 {
		return nil, fmt.Errorf("prober: workers (%d), queue size (%d), timeout (%v), stale-after (%v), idle timeout (%v) and idle connections per endpoint (%d) must not be negative",
			cfg.Workers, cfg.QueueSize, cfg.Timeout, cfg.StaleAfter, cfg.IdleTimeout, cfg.MaxIdlePerEndpoint)
	}
	realClock := cfg.Now == nil
	if realClock {
		cfg.Now = time.Now
	}
	if cfg.DialContext == nil {
		cfg.DialContext = (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext
	}
	p := &Prober{cfg: cfg, queue: make(chan Job, cfg.QueueSize), realClock: realClock}
	p.conns = pool{maxIdle: cfg.MaxIdlePerEndpoint, idleTimeout: cfg.IdleTimeout, eps: map[string]*endpointConns{}}
	return p, nil
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

// Run runs the workers until ctx ends, and closes connections idle longer
// than the idle timeout meanwhile. Probes still queued then are dropped
// without being reported; a probe in flight ends by its deadline. Every
// idle connection is closed when Run returns.
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
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(p.cfg.IdleTimeout / 2)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				p.conns.closeIdle(now)
			}
		}
	}()
	wg.Wait()
	p.conns.close()
}

// Probe sends one probe and classifies the outcome. Any failure to connect,
// to send or to read an HTTP/1.x answer in time is ProbeTimeout. The probe
func (p *Prober) Probe(ctx context.Context, endpoint string) Result {
	start, actual := p.now()
	res := p.probe(ctx, endpoint, actual)
	res.Duration = res.Received.Sub(start)
	return res
}

// now reads the configured clock and the real one (which deadlines and
// the connection pool go by), once when they are the same.
func (p *Prober) now() (clock, actual time.Time) {
	actual = time.Now()
	if p.realClock {
		return actual, actual
	}
	return p.cfg.Now(), actual
}

// probe sends the probe, started at start (the real clock); the result's
// Received is the configured clock read once it ended, which the reply's
// staleness is judged by too.
func (p *Prober) probe(ctx context.Context, endpoint string, start time.Time) Result {
	deadline := start.Add(p.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if ctx.Err() != nil {
		return Result{Outcome: loadbalancer.ProbeTimeout, Received: p.cfg.Now()}
	}
	for attempt := 0; ; attempt++ {
		// A retry dials: the older idle connections are likelier closed.
		c, req := p.conns.get(endpoint, attempt == 0, start)
		reused := c != nil
		if c == nil {
			var err error
			if c, err = p.dial(ctx, endpoint, deadline); err != nil {
				return Result{Outcome: loadbalancer.ProbeTimeout, Received: p.cfg.Now()}
			}
		}
		r, reusable, err := c.roundTrip(req, deadline)
		// An idle connection the backend has closed meanwhile fails before
		// any answer: try once more on a new one, as net/http does.
		if err == errNoAnswer && reused && attempt == 0 {
			c.close()
			continue
		}
		received, end := p.now()
		out := Result{Outcome: loadbalancer.ProbeTimeout, Received: received}
		switch {
		case err == h1.ErrBodyTooLarge && r.Code == 200:
			out.Outcome = loadbalancer.ProbeMalformed
		case err == h1.ErrBodyTooLarge:
			out.Outcome = loadbalancer.ProbeStatus
		case err != nil:
		case r.Code != 200:
			out.Outcome = loadbalancer.ProbeStatus
		default:
			out.Reply, out.Outcome = ParseReply(r.Body, out.Received, p.cfg.StaleAfter)
		}
		if reusable {
			p.conns.put(endpoint, c, end)
		} else {
			c.close()
		}
		return out
	}
}

func (p *Prober) dial(ctx context.Context, endpoint string, deadline time.Time) (*conn, error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	nc, err := p.cfg.DialContext(ctx, "tcp", endpoint)
	if err != nil {
		return nil, err
	}
	return newConn(nc), nil
}
