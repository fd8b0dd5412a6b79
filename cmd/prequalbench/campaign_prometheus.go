package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/prequalbench/prequalbench/campaign"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/campaign/promlocal"
	"github.com/prequalbench/prequalbench/scenario"
)

// adminAddresser is implemented by environments whose ingress admin
// listeners a local Prometheus can scrape (the local environment).
type adminAddresser interface {
	AdminAddrs() []string
}

// withLocalPrometheus wraps an environment factory so that a Prometheus
// scraping the ingress replicas runs from Setup to Close, with its data
// directory inside the campaign directory. Without a prometheus binary the
// campaign goes on and says so.
func withLocalPrometheus(ctx context.Context, next campaign.EnvFactory, msg io.Writer) campaign.EnvFactory {
	return func(dir string, s *scenario.Scenario, seed uint64) (env.Environment, error) {
		e, err := next(dir, s, seed)
		if err != nil {
			return nil, err
		}
		return &promEnv{Environment: e, ctx: ctx, dir: dir, msg: msg}, nil
	}
}

type promEnv struct {
	env.Environment
	ctx  context.Context
	dir  string
	msg  io.Writer
	prom *promlocal.Instance
}

func (p *promEnv) Setup(ctx context.Context) error {
	if err := p.Environment.Setup(ctx); err != nil {
		return err
	}
	aa, ok := p.Environment.(adminAddresser)
	if !ok {
		return fmt.Errorf("--prometheus: this environment has no local admin addresses to scrape")
	}
	in, err := promlocal.StartInstance(p.ctx, p.dir, aa.AdminAddrs(), promlocal.Options{})
	if errors.Is(err, promlocal.ErrNotFound) {
		fmt.Fprintln(p.msg, "prometheus:", err, "- going on without it")
		return nil
	}
	if err != nil {
		return err
	}
	p.prom = in
	fmt.Fprintf(p.msg, "prometheus: %s (data in %s)\n", in.URL, in.Dir)
	return nil
}

func (p *promEnv) Close() error {
	err := p.Environment.Close()
	if p.prom != nil {
		err = errors.Join(err, p.prom.Stop())
		p.prom = nil
	}
	return err
}

// CollectLogs passes through to the wrapped environment when it cuts logs.
func (p *promEnv) CollectLogs(dir string) error {
	if lc, ok := p.Environment.(env.LogCollector); ok {
		return lc.CollectLogs(dir)
	}
	return nil
}

// Died and Exited pass the wrapped environment's process watch through,
// so --prometheus does not hide a dead backend from the runner.
func (p *promEnv) Died() <-chan struct{} {
	if w, ok := p.Environment.(campaign.ProcessWatcher); ok {
		return w.Died()
	}
	return nil // never ready: nothing to watch
}

func (p *promEnv) Exited() error {
	if w, ok := p.Environment.(campaign.ProcessWatcher); ok {
		return w.Exited()
	}
	return nil
}

var _ campaign.ProcessWatcher = (*promEnv)(nil)

// ScaleGroup passes a churn scenario's scaling through to the wrapped
// environment.
func (p *promEnv) ScaleGroup(ctx context.Context, group string, replicas int) error {
	s, ok := p.Environment.(env.Scaler)
	if !ok {
		return fmt.Errorf("this environment cannot scale backend group %s", group)
	}
	return s.ScaleGroup(ctx, group, replicas)
}
