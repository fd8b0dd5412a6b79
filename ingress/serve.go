package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prequalbench/prequalbench/ingress/internal/h1"
	"github.com/prequalbench/prequalbench/ingress/internal/hangup"
	"github.com/prequalbench/prequalbench/ingress/internal/rawio"
	"github.com/prequalbench/prequalbench/ingress/route"
)

// ServeConfig is what Serve needs besides the Ingress options.
type ServeConfig struct {
	// Source feeds the routes.
	Source route.Source
	// Listen and AdminListen are the proxy and admin addresses (port 0 =
	// choose a free one).
	Listen      string
	AdminListen string
	// AdminToken is required as a bearer token on the admin API; it must be
	// set when AdminListen is not a loopback address.
	AdminToken string
	// AddrFile, when set, receives {"proxy":"ip:port","admin":"ip:port"}
	// atomically once both listeners are bound.
	AddrFile string
	Pprof    bool
	// ShutdownTimeout bounds the drain of in-flight requests; default 10 s.
	ShutdownTimeout time.Duration
	// ShutdownDelay is how long, once ctx ends, /readyz fails while the
	// proxy still accepts and serves new connections, so that load
	// balancers and EndpointSlice consumers stop sending before the listener
	// closes. 0 closes the listener at once.
	ShutdownDelay time.Duration
	// Started, when set, is called with the running Ingress and the bound
	// addresses (tests).
	Started func(proxyAddr, adminAddr string)
}

// Addrs is the content of the address file.
type Addrs struct {
	Proxy string `json:"proxy"`
	Admin string `json:"admin"`
}

// Serve runs ing until ctx ends: it binds both listeners, writes the
// address file, runs the route source and the prober, and on ctx's end starts
// failing readiness, keeps serving for ShutdownDelay, then stops accepting,
// drains in-flight requests up to ShutdownTimeout and returns nil.
func Serve(ctx context.Context, ing *Ingress, cfg ServeConfig) error {
	if cfg.Source == nil {
		return errors.New("ingress: serve: no route source")
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	if cfg.ShutdownTimeout < 0 || cfg.ShutdownDelay < 0 {
		return fmt.Errorf("ingress: serve: ShutdownTimeout %v and ShutdownDelay %v must not be negative", cfg.ShutdownTimeout, cfg.ShutdownDelay)
	}
	loop, err := IsLoopback(cfg.AdminListen)
	if err != nil {
		return err
	}
	if !loop && cfg.AdminToken == "" {
		return fmt.Errorf("ingress: admin listen address %q is not loopback: an admin token (--admin-token-file) is required", cfg.AdminListen)
	}
	log := ing.log

	pl, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("ingress: proxy listen: %w", err)
	}
	al, err := net.Listen("tcp", cfg.AdminListen)
	if err != nil {
		pl.Close()
		return fmt.Errorf("ingress: admin listen: %w", err)
	}
	addrs := Addrs{Proxy: pl.Addr().String(), Admin: al.Addr().String()}

	var stopping atomic.Bool
	proxySrv := ing.ProxyServer()
	adminSrv := &http.Server{
		Handler: ing.Admin(AdminConfig{
			Token: cfg.AdminToken,
			Pprof: cfg.Pprof,
			Ready: func() bool { return !stopping.Load() && cfg.Source.Synced() && ing.Synced() },
		}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
	}

	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	errc := make(chan error, 4)
	sourceDone := make(chan struct{})
	go func() {
		defer close(sourceDone)
		if err := cfg.Source.Run(runCtx, ing); err != nil {
			errc <- fmt.Errorf("ingress: route source: %w", err)
		}
	}()
	proberDone := make(chan struct{})
	go func() {
		defer close(proberDone)
		_ = ing.Run(runCtx)
	}()
	go func() {
		if err := proxySrv.Serve(ing.ProxyListener(pl)); err != nil {
			errc <- fmt.Errorf("ingress: proxy server: %w", err)
		}
	}()
	go func() {
		if err := adminSrv.Serve(al); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("ingress: admin server: %w", err)
		}
	}()
	if cfg.AddrFile != "" {
		if err := writeAddrFile(cfg.AddrFile, addrs); err != nil {
			errc <- err
		}
	}
	log.Info("ingress listening", "proxy", addrs.Proxy, "admin", addrs.Admin)
	if cfg.Started != nil {
		cfg.Started(addrs.Proxy, addrs.Admin)
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
		log.Error("ingress stopping after an error", "err", runErr)
	}

	// Drain: fail readiness, serve on while the endpoint removal
	// propagates, then stop accepting and wait for in-flight requests.
	stopping.Store(true)
	if cfg.ShutdownDelay > 0 && runErr == nil {
		log.Info("not ready; serving on for the shutdown delay", "delay", cfg.ShutdownDelay)
		t := time.NewTimer(cfg.ShutdownDelay)
		select {
		case <-t.C:
		case runErr = <-errc:
			log.Error("ingress stopping after an error", "err", runErr)
		}
		t.Stop()
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := proxySrv.Shutdown(sctx); err != nil {
		log.Warn("in-flight requests did not finish before the shutdown deadline", "timeout", cfg.ShutdownTimeout, "err", err)
	}
	_ = adminSrv.Shutdown(sctx)
	cancelRun()
	<-proberDone
	<-sourceDone // no route update (or informer goroutine) outlives Serve
	log.Info("ingress stopped")
	return runErr
}

// ProxyListener is the listener ProxyServer serves on. Its connections are
// read and written with raw non-blocking system calls (package rawio) and
// watched for the client hanging up (package hangup); the client timeouts
// are the connections' own deadlines.
func (i *Ingress) ProxyListener(l net.Listener) net.Listener {
	return watchedListener{rawio.Listener{Listener: l}}
}

// watchedListener watches every accepted connection for hangups.
type watchedListener struct{ rawio.Listener }

func (l watchedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return hangup.Watch(c), nil
}

// ProxyServer is the data plane's HTTP/1.1 server for ing, to serve on
// ProxyListener. It reads each request whole (head and body, bounded by
// ClientBodyTimeout and MaxBodySize; heads by 16 KiB, as nginx's
// large_client_header_buffers) before the proxy sees it, writes the
// answer whole within UpstreamReadTimeout, keeps client connections alive
// ClientIdleTimeout between requests (ClientFirstRequestTimeout before the
// first) and sheds the longest-idle one at MaxClientConns.
func (i *Ingress) ProxyServer() *h1.Server {
	handler := h1.Handler(i.serve)
	if d := i.opts.TestAddedDelay; d > 0 {
		handler = func(x *h1.Exchange) { time.Sleep(d); i.serve(x) }
	}
	return &h1.Server{
		Handler:      handler,
		ClientError:  i.clientError,
		MaxHeadSize:  16 << 10,
		MaxBodySize:  i.opts.MaxBodySize,
		ReadTimeout:  i.opts.ClientBodyTimeout,
		WriteTimeout: i.opts.UpstreamReadTimeout,
		IdleTimeout:  i.opts.ClientIdleTimeout,
		// Short before the first request: a socket that never sends a
		// byte holds its descriptor for seconds, not minutes.
		FirstRequestTimeout: i.opts.ClientFirstRequestTimeout,
		MaxConns:            max(i.opts.MaxClientConns, 0),
		BodyBudget:          i.bodies,
	}
}

// IsLoopback reports whether a listen address binds only loopback.
func IsLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("ingress: listen address %q: %v", addr, err)
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

func writeAddrFile(path string, a Addrs) error {
	data, err := json.Marshal(a)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("ingress: addr file: %w", err)
	}
	_, err = tmp.Write(append(data, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("ingress: addr file: %w", err)
	}
	return nil
}
