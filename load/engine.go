package load

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sort"
	"sync"
	"time"
)

// Load models, as in artifacts.LoadResult.Model.
const (
	ModelOpen   = "open"
	ModelClosed = "closed"
)

// maxDials bounds the connections NewClient's transport dials at once.
const maxDials = 8

// NewClient returns an HTTP client tuned for load: many keep-alive
// connections per host, no proxy from the environment (traffic goes only
// to the targets), no redirects followed, no compression. Share one between
// runs to reuse its connections.
func NewClient(cfg Config) *http.Client {
	return newClient(cfg, nil)
}

// newClient is NewClient, with the connections per address counted in
// conns when it is not nil (to tell when the cap binds).
func newClient(cfg Config, conns *connCount) *http.Client {
	cfg = cfg.withDefaults()
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
	// At most maxDials dials at once: a request waiting for a dial takes
	// the first connection that frees up, so a sender briefly starved of
	// CPU does not answer its backlog with a storm of new connections,
	// each costing more CPU on both ends.
	dials := make(chan struct{}, maxDials)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		conns.add(addr, 1) // a pending dial counts against the cap too
		select {
		case dials <- struct{}{}:
		case <-ctx.Done():
			conns.add(addr, -1)
			return nil, ctx.Err()
		}
		defer func() { <-dials }()
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			conns.add(addr, -1)
			return nil, err
		}
		if conns == nil {
			return c, nil
		}
		return &countedConn{Conn: c, release: func() { conns.add(addr, -1) }}, nil
	}
	return &http.Client{
		Transport: &http.Transport{
			DialContext:         dial,
			MaxIdleConnsPerHost: cfg.Connections,
			MaxConnsPerHost:     cfg.MaxConnections,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: cfg.Timeout,
			DisableCompression:  true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// connCount counts the open (or being dialled) connections per address.
type connCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *connCount) add(addr string, d int) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.n[addr] += d
	c.mu.Unlock()
}

func (c *connCount) get(addr string) int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[addr]
}

// countedConn releases its count once, on the first Close.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// Run offers the load cfg describes and returns what it measured: the
// warmup, then the window, in one schedule without a pause. It stops by
// itself at the end of the schedule (open loop) or Duration (closed loop),
// then waits for the requests in flight (each bounded by Timeout). Only
// requests whose intended send time lies in the window are counted.
// Cancelling ctx stops it early: requests in flight are aborted and not
// counted as answered, and Run returns what it measured with ctx's error.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	e := &engine{cfg: cfg, rec: newRecorder(cfg.Timeout), pick: newPicker(cfg.Targets)}
	e.rec.keepSec = cfg.SecondHistograms
	e.client = cfg.Client
	if e.client == nil {
		if cfg.MaxConnections > 0 {
			e.conns = &connCount{n: map[string]int{}}
		}
		e.client = newClient(cfg, e.conns)
		defer e.client.CloseIdleConnections()
	}

	// A cancellation stops the recorder: answers that still arrive belong
	// to a run that is being thrown away.
	runDone := make(chan struct{})
	defer close(runDone)
	go func() {
		select {
		case <-ctx.Done():
			e.rec.stop()
		case <-runDone:
		}
	}()

	start := time.Now()
	if !cfg.Start.IsZero() {
		if wait := time.Until(cfg.Start); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
		start = cfg.Start
	}
	e.windowStart = start.Add(cfg.Warmup)
	e.windowEnd = e.windowStart.Add(cfg.Window())
	e.rec.windowEnd = e.windowEnd
	stopTick, tickDone := make(chan struct{}), make(chan struct{})
	go e.tick(ctx, start, stopTick, tickDone)

	var res *Result
	if cfg.Closed() {
		window := e.runClosed(ctx, start)
		close(stopTick)
		<-tickDone
		res = e.finish()
		res.Model, res.Users, res.Duration = ModelClosed, cfg.Users, window
		if cfg.Shards > 1 {
			res.Users = 0
			for u := range cfg.Users {
				if cfg.mine(uint64(u)) {
					res.Users++
				}
			}
		}
	} else {
		o := e.runOpen(ctx, start)
		close(stopTick)
		<-tickDone
		res = e.finish()
		res.Model, res.Duration, res.Dropped, res.Planned = ModelOpen, o.window, o.dropped, o.planned
		switch {
		case o.window <= 0:
		case o.window < cfg.Window():
			// Cancelled: what was offered of the shortened window.
			res.TargetRate = float64(o.offered) / o.window.Seconds()
		default:
			// What the schedule planned, drops included (offered would
			// leave them out, and a shard's rate would then not add up
			// to one generator's).
			res.TargetRate = float64(o.planned) / o.window.Seconds()
		}
	}
	if cfg.MaxConnections > 0 {
		res.ConnCap = cfg.MaxConnections * distinctAddrs(cfg.Targets)
	}
	return res, ctx.Err()
}

type engine struct {
	cfg    Config
	client *http.Client
	conns  *connCount // nil: not counted (a shared client, or no cap)
	rec    *recorder
	pick   *picker

	windowStart, windowEnd time.Time
	// lastCPU is the CPU use of the window's last second, sampled by tick
	// at the window's end (nil when not sampled).
	lastCPU *CPU
}

// tick runs the clock of the run: a progress call per warmup second, the
// window's start boundary, one row of the series at each whole second of
// the window but the last (finish closes that one, after the drain), and
// the window's end boundary. The load may finish a hair before the clock
// reaches the window's end (its last send is due exactly there); the
// boundaries not yet signalled then are signalled at the stop, unless the
// run was cancelled.
func (e *engine) tick(ctx context.Context, start time.Time, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	var started, ended bool
	boundary := func(f func(), flag *bool) {
		if !*flag && ctx.Err() == nil {
			*flag = true
			if f != nil {
				f()
			}
		}
	}
	defer func() {
		boundary(e.cfg.OnWindowStart, &started)
		boundary(e.cfg.OnWindowEnd, &ended)
	}()
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	wait := func(at time.Time) bool {
		t.Reset(time.Until(at))
		select {
		case <-stop:
			return false
		case <-t.C:
			return true
		}
	}
	for k := 1; start.Add(time.Duration(k) * time.Second).Before(e.windowStart); k++ {
		if !wait(start.Add(time.Duration(k) * time.Second)) {
			return
		}
		if e.cfg.OnSecond != nil {
			e.cfg.OnSecond(Second{Second: k - 1, Warmup: true})
		}
	}
	if !wait(e.windowStart) {
		return
	}
	if e.cfg.SampleCPU != nil {
		e.cfg.SampleCPU() // the baseline of the first second
	}
	boundary(e.cfg.OnWindowStart, &started)
	window := e.cfg.Window()
	for k := time.Duration(1); k*time.Second < window; k++ {
		if !wait(e.windowStart.Add(k * time.Second)) {
			return
		}
		row := e.rec.closeSecond(e.sampleCPU())
		if e.cfg.OnSecond != nil {
			e.cfg.OnSecond(row)
		}
	}
	if !wait(e.windowEnd) {
		return
	}
	// The last second's CPU is the window's, not the drain's after it
	// (its row closes after the drain, for the answers still coming).
	e.lastCPU = e.sampleCPU()
	boundary(e.cfg.OnWindowEnd, &ended)
	// Wait for the stop: the last row is closed after the drain.
	<-stop
}

func (e *engine) sampleCPU() *CPU {
	if e.cfg.SampleCPU == nil {
		return nil
	}
	return e.cfg.SampleCPU()
}

// finish closes the last row, with the CPU sampled at the window's end
// when the clock reached it (else now), and returns the totals. Call it
// after tick has returned.
func (e *engine) finish() *Result {
	cpu := e.lastCPU
	if cpu == nil {
		cpu = e.sampleCPU()
	}
	row := e.rec.closeSecond(cpu)
	if e.cfg.OnSecond != nil {
		e.cfg.OnSecond(row)
	}
	return e.rec.result()
}

// hit is one scheduled open-loop request.
type hit struct {
	due      time.Time
	target   *target
	inWindow bool
}

type openOutcome struct {
	window time.Duration
	// planned counts this shard's hits of the window, dropped or not;
	// offered those handed to a worker; dropped those never sent.
	planned, offered, dropped uint64
}

// runOpen dispatches the schedule (warmup phase first) to a pool of
// workers that grows up to MaxWorkers, and returns once every worker is
// done.
func (e *engine) runOpen(ctx context.Context, start time.Time) openOutcome {
	var (
		o       openOutcome
		sched   = newSchedule(e.cfg.openPhases())
		rng     = rand.New(rand.NewPCG(e.cfg.Seed, 0x6c6f6164))
		hits    = make(chan hit)
		wg      sync.WaitGroup
		workers int
		timer   = time.NewTimer(0)
		// Past this, sends still waiting for a busy worker are dropped:
		// every worker has then been stuck for a whole Timeout.
		hardEnd = e.windowEnd.Add(e.cfg.Timeout)
		// cut ends the window early at a cancellation.
		cut = func() { o.window = min(max(time.Since(e.windowStart), 0), o.window) }
	)
	<-timer.C
	defer timer.Stop()
	o.window = e.cfg.Window()
	var k uint64 // hit number over the whole schedule, for the shard
dispatch:
	for ; ; k++ {
		off, ok := sched.next()
		if !ok {
			break
		}
		// The target is drawn for every hit, so each shard's hits keep
		// the targets one generator would give them.
		t := e.pick.pick(rng)
		if !e.cfg.mine(k) {
			continue
		}
		// The schedule is in its phase of the hit: phase 0 is the warmup
		// when there is one.
		inWindow := e.cfg.Warmup == 0 || sched.phase() > 0
		due := start.Add(off)
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				cut()
				break dispatch
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			cut()
			break
		}
		if inWindow {
			o.planned++
			o.offered++
		}
		h := hit{due: due, target: t, inWindow: inWindow}
		select {
		case hits <- h:
			continue
		default:
		}
		if workers < e.cfg.MaxWorkers {
			workers++
			wg.Add(1)
			go e.openWorker(ctx, h, hits, &wg)
			continue
		}
		timer.Reset(time.Until(hardEnd))
		select {
		case hits <- h:
			timer.Stop()
		case <-ctx.Done():
			timer.Stop()
			if inWindow {
				o.offered--
			}
			cut()
			break dispatch
		case <-timer.C:
			if inWindow {
				o.dropped++
			}
			for _, more := sched.next(); more; _, more = sched.next() {
				if k++; e.cfg.mine(k) && (e.cfg.Warmup == 0 || sched.phase() > 0) {
					o.planned++
					o.dropped++
				}
			}
			break dispatch
		}
	}
	close(hits)
	wg.Wait()
	return o
}

func (e *engine) openWorker(ctx context.Context, first hit, hits <-chan hit, wg *sync.WaitGroup) {
	defer wg.Done()
	e.sendOpen(ctx, first)
	for h := range hits {
		e.sendOpen(ctx, h)
	}
}

func (e *engine) sendOpen(ctx context.Context, h hit) {
	if !h.inWindow {
		e.do(ctx, h.target)
		return
	}
	e.rec.sent(time.Since(h.due), true)
	out := e.do(ctx, h.target)
	if out.aborted(ctx) {
		return // aborted by the cancellation: not an answer
	}
	e.rec.done(time.Since(h.due), out)
}

// runClosed runs the users through the warmup and the window, waits for
// them and returns the window.
func (e *engine) runClosed(ctx context.Context, start time.Time) time.Duration {
	var wg sync.WaitGroup
	for u := range e.cfg.Users {
		if !e.cfg.mine(uint64(u)) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.user(ctx, uint64(u), e.windowEnd)
		}()
	}
	wg.Wait()
	return min(max(time.Since(e.windowStart), 0), e.cfg.Duration)
}

// user loops request → response → think time until end; it never has more
// than one request in flight. A request counts when it left in the window.
func (e *engine) user(ctx context.Context, id uint64, end time.Time) {
	rng := rand.New(rand.NewPCG(e.cfg.Seed, id+1))
	var think *time.Timer
	if e.cfg.ThinkTime > 0 {
		think = time.NewTimer(0)
		<-think.C
		defer think.Stop()
	}
	for ctx.Err() == nil && time.Now().Before(end) {
		t := e.pick.pick(rng)
		sentAt := time.Now()
		inWindow := !sentAt.Before(e.windowStart)
		if inWindow {
			e.rec.sent(0, false)
		}
		out := e.do(ctx, t)
		if out.aborted(ctx) {
			return
		}
		if inWindow {
			e.rec.done(time.Since(sentAt), out)
		}
		if think != nil {
			think.Reset(min(e.cfg.ThinkTime, time.Until(end)))
			select {
			case <-ctx.Done():
				return
			case <-think.C:
			}
		}
	}
}

// outcome is what became of one request.
type outcome struct {
	status int   // 0 = no answer
	err    error // transport error or timeout
	// timeout is set when the request's own timeout expired.
	timeout bool
	// connWait is the time from the send to getting a connection, and
	// capBound whether the connection cap was full when it asked (both
	// unset when no connection was got).
	connWait time.Duration
	gotConn  bool
	capBound bool
}

func (o outcome) aborted(ctx context.Context) bool { return o.err != nil && ctx.Err() != nil }

// do sends one request and reads the whole response.
func (e *engine) do(ctx context.Context, t *target) (out outcome) {
	rctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	var body io.Reader
	if len(t.body) > 0 {
		body = bytes.NewReader(t.body)
	}
	sent := time.Now()
	trace := &httptrace.ClientTrace{
		GetConn: func(hostPort string) {
			if e.conns != nil && e.conns.get(hostPort) >= e.cfg.MaxConnections {
				out.capBound = true
			}
		},
		GotConn: func(httptrace.GotConnInfo) {
			if !out.gotConn {
				out.gotConn, out.connWait = true, time.Since(sent)
			}
		},
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(rctx, trace), t.method, t.url, body)
	if err != nil {
		out.err = err
		return out
	}
	if len(t.header) > 0 {
		req.Header = t.header.Clone()
	}
	if t.host != "" {
		req.Host = t.host
	}
	resp, err := e.client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err != nil {
		out.err = err
		out.timeout = ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || rctx.Err() != nil)
		return out
	}
	out.status = resp.StatusCode
	return out
}

// distinctAddrs counts the distinct host:port the targets connect to (the
// connection cap applies to each).
func distinctAddrs(ts []Target) int { return DistinctAddrs(ts) }

// DistinctAddrs counts the distinct host:port the targets connect to
// (Config.MaxConnections applies to each).
func DistinctAddrs(ts []Target) int {
	seen := map[string]bool{}
	for _, t := range ts {
		u, err := url.Parse(t.URL)
		if err != nil {
			continue
		}
		seen[u.Host] = true
	}
	return len(seen)
}

// target is a validated Target ready to send.
type target struct {
	url, method, host string
	body              []byte
	header            http.Header
}

// picker chooses a target per request with probability proportional to
// its weight.
type picker struct {
	targets []target
	cum     []float64 // cumulative weights
}

func newPicker(ts []Target) *picker {
	p := &picker{}
	var sum float64
	for _, t := range ts {
		w := t.Weight
		if w == 0 {
			w = 1
		}
		sum += w
		host := t.Host
		if host == "" {
			host = t.Header.Get("Host")
		}
		method := t.Method
		if method == "" {
			method = http.MethodGet
		}
		p.targets = append(p.targets, target{url: t.URL, method: method, host: host, body: t.Body, header: t.Header})
		p.cum = append(p.cum, sum)
	}
	return p
}

func (p *picker) pick(rng *rand.Rand) *target {
	if len(p.targets) == 1 {
		return &p.targets[0]
	}
	x := rng.Float64() * p.cum[len(p.cum)-1]
	i := sort.Search(len(p.cum), func(i int) bool { return p.cum[i] > x })
	return &p.targets[min(i, len(p.targets)-1)]
}
