// Package kubesource is the Kubernetes route source of the ingress: it watches
// Ingresses, IngressClasses, Services and EndpointSlices through client-go
// informers (and, where the Gateway API is served, GatewayClasses, Gateways
// and HTTPRoutes of its controller, whose status it writes) and, after any
// change, recomputes the complete route set from the informer caches and
// hands it to the dataplane.
//
// Recomputing everything on each change (coalesced: a burst of events causes
// one reconcile) keeps the source simple and obviously correct; the route set
// of one ingress controller is small.
package kubesource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/manifests/gatewayapi"
)

// Annotation and controller names.
const (
	// ControllerName is the spec.controller of IngressClasses this source serves.
	ControllerName = "prequalbench.dev/ingress"
	// DefaultIngressClass is the class name used when Options.IngressClass is empty.
	DefaultIngressClass = "prequal"
	// AnnotationLoadBalance chooses the algorithm for every path of an Ingress.
	AnnotationLoadBalance = "prequalbench.dev/load-balance"
	// AnnotationSeedAlgo is the seed controller's algorithm annotation, still accepted.
	AnnotationSeedAlgo = "lb/algo"
	// AnnotationLegacyClass is the pre-IngressClass way to pick a controller.
	AnnotationLegacyClass = "kubernetes.io/ingress.class"
	// AnnotationDefaultClass marks an IngressClass as the cluster default.
	AnnotationDefaultClass = "ingressclass.kubernetes.io/is-default-class"
	// LabelServiceName links an EndpointSlice to its Service.
	LabelServiceName = "kubernetes.io/service-name"
)

// Options configure a Source.
type Options struct {
	// Kubeconfig is the kubeconfig path; empty means $KUBECONFIG, then
	// ~/.kube/config, then the in-cluster config, as kubectl does.
	Kubeconfig string
	// Context overrides the kubeconfig's current context.
	Context string
	// Namespace limits the watch to one namespace; empty watches all.
	Namespace string
	// IngressClass is the class name this ingress answers to; empty means
	// DefaultIngressClass.
	IngressClass string
	// Logger receives warnings (conflicts, bad annotations); nil discards.
	Logger *slog.Logger
	// Client replaces the client built from the kubeconfig (tests).
	Client kubernetes.Interface
	// Dynamic replaces the dynamic client built from the kubeconfig, for
	// the Gateway API. With Client set and Dynamic nil the Gateway API is
	// not watched.
	Dynamic dynamic.Interface
	// OnReconcile, when set, is called after each reconcile with its result
	// ("success" or "error") and duration, for metrics.
	OnReconcile func(result string, d time.Duration)
}

// Source is the Kubernetes route source.
type Source struct {
	client      kubernetes.Interface
	dyn         dynamic.Interface // nil: no Gateway API watch
	namespace   string
	class       string
	log         *slog.Logger
	onReconcile func(string, time.Duration)

	dirty   chan struct{} // capacity 1: pending events coalesce
	synced  atomic.Bool
	running atomic.Bool

	// warned remembers problems already logged, so a reconcile loop does not
	// repeat the same warning on every event. Touched only by Run's goroutine.
	warned map[string]bool
}

var _ route.Source = (*Source)(nil)

// New builds a Source. Without opts.Client it loads the kubeconfig (or the
// in-cluster config) now, so a bad path or context fails at start-up.
func New(opts Options) (route.Source, error) {
	return newSource(opts)
}

func newSource(opts Options) (*Source, error) {
	client, dyn := opts.Client, opts.Dynamic
	if client == nil {
		cfg, err := RESTConfig(opts.Kubeconfig, opts.Context)
		if err != nil {
			return nil, err
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("kubesource: client: %w", err)
		}
		client = cs
		if dyn == nil {
			if dyn, err = dynamic.NewForConfig(cfg); err != nil {
				return nil, fmt.Errorf("kubesource: dynamic client: %w", err)
			}
		}
	}
	class := opts.IngressClass
	if class == "" {
		class = DefaultIngressClass
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Source{
		client:      client,
		dyn:         dyn,
		namespace:   opts.Namespace,
		class:       class,
		log:         log.With("component", "kubesource"),
		onReconcile: opts.OnReconcile,
		dirty:       make(chan struct{}, 1),
		warned:      map[string]bool{},
	}, nil
}

// Synced reports whether the informer caches have synced and the first
// complete route set has been delivered.
func (s *Source) Synced() bool { return s.synced.Load() }

func (s *Source) markDirty() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
}

// Run starts the informers, waits for their caches, then reconciles after
// every change until ctx is done. It may be called once.
func (s *Source) Run(ctx context.Context, sink route.Sink) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("kubesource: Run called twice")
	}
	// Ingresses, Services and EndpointSlices may be namespace-scoped;
	// IngressClass is cluster-scoped and needs its own factory.
	var nsOpts []informers.SharedInformerOption
	if s.namespace != "" {
		nsOpts = append(nsOpts, informers.WithNamespace(s.namespace))
	}
	nsFactory := informers.NewSharedInformerFactoryWithOptions(s.client, 0, nsOpts...)
	clusterFactory := informers.NewSharedInformerFactory(s.client, 0)

	ing := nsFactory.Networking().V1().Ingresses()
	svc := nsFactory.Core().V1().Services()
	eps := nsFactory.Discovery().V1().EndpointSlices()
	cls := clusterFactory.Networking().V1().IngressClasses()

	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.markDirty() },
		UpdateFunc: func(any, any) { s.markDirty() },
		DeleteFunc: func(any) { s.markDirty() },
	}
	for _, inf := range []cache.SharedIndexInformer{ing.Informer(), svc.Informer(), eps.Informer(), cls.Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("kubesource: event handler: %w", err)
		}
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	// Shut the factories down before waiting for their goroutines.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	nsFactory.Start(runCtx.Done())
	clusterFactory.Start(runCtx.Done())
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-runCtx.Done()
		nsFactory.Shutdown()
		clusterFactory.Shutdown()
	}()

	synced := []cache.InformerSynced{ing.Informer().HasSynced, svc.Informer().HasSynced,
		eps.Informer().HasSynced, cls.Informer().HasSynced}
	var gw *gwStores
	if s.dyn != nil {
		served, err := s.gatewayAPIServed(runCtx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if served {
			var gwSynced []cache.InformerSynced
			gw, gwSynced, err = s.startGatewayInformers(runCtx, &wg, handler)
			if err != nil {
				return err
			}
			synced = append(synced, gwSynced...)
		} else {
			s.log.Info("the Gateway API (" + gatewayapi.GroupVersion.String() + ") is not served; watching Ingresses only")
		}
	}

	s.log.Info("waiting for informer caches", "namespace", s.namespace, "class", s.class, "gatewayAPI", gw != nil)
	if !cache.WaitForCacheSync(runCtx.Done(), synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("kubesource: informer caches did not sync")
	}

	state := listers{
		ingresses: ing.Lister(),
		services:  svc.Lister(),
		slices:    eps.Lister(),
		classes:   cls.Lister(),
		gateway:   gw,
	}
	s.markDirty()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.dirty:
		}
		start := time.Now()
		specs, updates, err := s.reconcile(state)
		result := "success"
		if err != nil {
			// Listers read the local cache, so an error here is a bug or
			// a malformed object; keep the previous route set and log.
			result = "error"
			s.log.Error("reconcile failed; keeping the previous routes", "err", err)
		} else {
			sink.Update(specs)
			if !s.synced.Load() {
				s.log.Info("caches synced, first route set delivered", "routes", len(specs))
				s.synced.Store(true)
			}
			s.writeStatus(ctx, updates)
		}
		if s.onReconcile != nil {
			s.onReconcile(result, time.Since(start))
		}
	}
}

// warnOnce logs msg once per key for the lifetime of the source.
func (s *Source) warnOnce(key, msg string, args ...any) {
	if s.warned[key] {
		return
	}
	s.warned[key] = true
	s.log.Warn(msg, args...)
}
