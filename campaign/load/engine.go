package load

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
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
// a warmup Run and the measured Run to reuse its connections.
func NewClient(cfg Config) *http.Client {
	cfg = cfg.withDefaults()
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
	// At most maxDials dials at once: a request waiting for a dial takes
	// the first connection that frees up, so a sender briefly starved of
	// CPU does not answer its backlog with a storm of new connections,
	// each costing more CPU on both ends.
	dials := make(chan struct{}, maxDials)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		select {
		case dials <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		defer func() { <-dials }()
		return dialer.DialContext(ctx, network, addr)
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

// Run offers the load cfg describes and returns what it measured. It stops
// by itself at the end of the schedule (open loop) or Duration (closed
// loop), then waits for the requests in flight (each bounded by Timeout).
// Cancelling ctx stops it early: requests in flight are aborted and not
// counted as completed, and Run returns what it measured with ctx's error.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	client := cfg.Client
	if client == nil {
		client = NewClient(cfg)
		defer client.CloseIdleConnections()
	}
	e := &engine{cfg: cfg, client: client, rec: newRecorder(), pick: newPicker(cfg.Targets)}

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
	e.rec.windowEnd = start.Add(cfg.Window())
	stopTick, tickDone := make(chan struct{}), make(chan struct{})
	go e.tick(start, cfg.Window(), stopTick, tickDone)

	var res *Result
	if cfg.Closed() {
		window := e.runClosed(ctx, start)
		close(stopTick)
		<-tickDone
		res = e.finish()
		res.Model, res.Users, res.Duration = ModelClosed, cfg.Users, window
	} else {
		o := e.runOpen(ctx, start)
		close(stopTick)
		<-tickDone
		res = e.finish()
		res.Model, res.Duration, res.Dropped = ModelOpen, o.window, o.dropped
		res.TargetRate = meanRate(cfg.Open)
		if o.window < cfg.Window() && o.window > 0 {
			res.TargetRate = float64(o.offered) / o.window.Seconds()
		}
	}
	return res, ctx.Err()
}

type engine struct {
	cfg    Config
	client *http.Client
	rec    *recorder
	pick   *picker
}

// tick closes one row of the series at each whole second of the window
// but the last; finish closes the last, after the drain.
func (e *engine) tick(start time.Time, window time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for k := time.Duration(1); k*time.Second < window; k++ {
		t.Reset(time.Until(start.Add(k * time.Second)))
		select {
		case <-stop:
			return
		case <-t.C:
		}
		row := e.rec.closeSecond()
		if e.cfg.OnSecond != nil {
			e.cfg.OnSecond(row)
		}
	}
}

func (e *engine) finish() *Result {
	row := e.rec.closeSecond()
	if e.cfg.OnSecond != nil {
		e.cfg.OnSecond(row)
	}
	return e.rec.result()
}

// hit is one scheduled open-loop request.
type hit struct {
	due    time.Time
	target *target
}

type openOutcome struct {
	window           time.Duration
	offered, dropped uint64
}

// runOpen dispatches the schedule to a pool of workers that grows up to
// MaxWorkers, and returns once every worker is done.
func (e *engine) runOpen(ctx context.Context, start time.Time) openOutcome {
	var (
		o       openOutcome
		sched   = newSchedule(e.cfg.Open)
		rng     = rand.New(rand.NewPCG(e.cfg.Seed, 0x6c6f6164))
		hits    = make(chan hit)
		wg      sync.WaitGroup
		workers int
		timer   = time.NewTimer(0)
		// Past this, sends still waiting for a busy worker are dropped:
		// every worker has then been stuck for a whole Timeout.
		hardEnd = start.Add(e.cfg.Window() + e.cfg.Timeout)
	)
	<-timer.C
	defer timer.Stop()
	o.window = e.cfg.Window()
dispatch:
	for {
		off, ok := sched.next()
		if !ok {
			break
		}
		due := start.Add(off)
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				o.window = min(time.Since(start), o.window)
				break dispatch
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			o.window = min(time.Since(start), o.window)
			break
		}
		o.offered++
		h := hit{due: due, target: e.pick.pick(rng)}
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
			o.offered--
			o.window = min(time.Since(start), o.window)
			break dispatch
		case <-timer.C:
			o.dropped++
			for _, more := sched.next(); more; _, more = sched.next() {
				o.dropped++
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
	e.rec.sent(time.Since(h.due))
	status, err := e.do(ctx, h.target)
	if err != nil && ctx.Err() != nil {
		return // aborted by the cancellation: not an answer
	}
	e.rec.done(time.Since(h.due), status)
}

// runClosed runs the users until Duration has passed, waits for them and
// returns the window.
func (e *engine) runClosed(ctx context.Context, start time.Time) time.Duration {
	end := start.Add(e.cfg.Duration)
	var wg sync.WaitGroup
	for u := range e.cfg.Users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.user(ctx, uint64(u), end)
		}()
	}
	wg.Wait()
	return min(time.Since(start), e.cfg.Duration)
}

// user loops request → response → think time until end; it never has more
// than one request in flight.
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
		e.rec.sent(0)
		status, err := e.do(ctx, t)
		if err != nil && ctx.Err() != nil {
			return
		}
		e.rec.done(time.Since(sentAt), status)
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

// do sends one request and reads the whole response; status 0 with an
// error means the request failed in transport.
func (e *engine) do(ctx context.Context, t *target) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	var body io.Reader
	if len(t.body) > 0 {
		body = bytes.NewReader(t.body)
	}
	req, err := http.NewRequestWithContext(ctx, t.method, t.url, body)
	if err != nil {
		return 0, err
	}
	if len(t.header) > 0 {
		req.Header = t.header.Clone()
	}
	if t.host != "" {
		req.Host = t.host
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
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
