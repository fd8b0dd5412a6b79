package kubesource

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"

	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/loadbalancer"
)

type listers struct {
	ingresses networkinglisters.IngressLister
	services  corelisters.ServiceLister
	slices    discoverylisters.EndpointSliceLister
	classes   networkinglisters.IngressClassLister
	gateway   *gwStores // nil when the Gateway API is not served
}

// snapshot is everything a reconcile reads, copied out of the caches.
type snapshot struct {
	ingresses []*networkingv1.Ingress
	services  []*corev1.Service
	slices    []*discoveryv1.EndpointSlice
	classes   []*networkingv1.IngressClass
	gateway   gwSnapshot // empty when the Gateway API is not served
}

func (s *Source) reconcile(l listers) ([]route.Spec, []statusUpdate, error) {
	var snap snapshot
	var err error
	if snap.ingresses, err = l.ingresses.List(labels.Everything()); err != nil {
		return nil, nil, fmt.Errorf("kubesource: list ingresses: %w", err)
	}
	if snap.services, err = l.services.List(labels.Everything()); err != nil {
		return nil, nil, fmt.Errorf("kubesource: list services: %w", err)
	}
	if snap.slices, err = l.slices.List(labels.Everything()); err != nil {
		return nil, nil, fmt.Errorf("kubesource: list endpointslices: %w", err)
	}
	if snap.classes, err = l.classes.List(labels.Everything()); err != nil {
		return nil, nil, fmt.Errorf("kubesource: list ingressclasses: %w", err)
	}
	if l.gateway != nil {
		snap.gateway = l.gateway.snapshot()
	}
	specs, updates := s.computeAll(snap)
	return specs, updates, nil
}

// classFilter decides which Ingresses are ours.
type classFilter struct {
	name       string          // --ingress-class
	ours       map[string]bool // IngressClass objects whose controller is ours
	existing   map[string]bool // every IngressClass object
	hasDefault bool            // one of ours is the cluster default
}

func newClassFilter(name string, classes []*networkingv1.IngressClass) classFilter {
	f := classFilter{name: name, ours: map[string]bool{}, existing: map[string]bool{}}
	for _, c := range classes {
		f.existing[c.Name] = true
		if c.Spec.Controller == ControllerName {
			f.ours[c.Name] = true
			if c.Annotations[AnnotationDefaultClass] == "true" {
				f.hasDefault = true
			}
		}
	}
	return f
}

// handles reports whether the Ingress belongs to this controller:
//   - spec.ingressClassName names an IngressClass whose controller is ours, or
//     equals --ingress-class while no IngressClass of that name exists (so the
//     ingress works where nobody may create cluster-scoped objects);
//   - otherwise the legacy annotation equals --ingress-class or names one of
//     our classes;
//   - otherwise (no class at all) one of our IngressClasses is the default.
func (f classFilter) handles(ing *networkingv1.Ingress) bool {
	if n := ing.Spec.IngressClassName; n != nil {
		if f.existing[*n] {
			return f.ours[*n]
		}
		return *n == f.name
	}
	if a, ok := ing.Annotations[AnnotationLegacyClass]; ok {
		return a == f.name || f.ours[a]
	}
	return f.hasDefault
}

type svcKey struct{ namespace, name string }

// ruleKey identifies a rule for conflict detection.
type ruleKey struct{ host, path, pathType string }

// backends resolves Service ports to route keys and ready endpoints for
// one reconcile, for Ingresses and HTTPRoutes alike.
type backends struct {
	services    map[svcKey]*corev1.Service
	slicesBySvc map[svcKey][]*discoveryv1.EndpointSlice
	memo        map[string][]string
	// static, when set, resolves backendRefs instead (the routes file).
	static func(namespace, name string, port int32) (key string, endpoints []string, ok bool)
}

func newBackends(snap snapshot) *backends {
	services := make(map[svcKey]*corev1.Service, len(snap.services))
	for _, svc := range snap.services {
		services[svcKey{svc.Namespace, svc.Name}] = svc
	}
	slicesBySvc := map[svcKey][]*discoveryv1.EndpointSlice{}
	for _, sl := range snap.slices {
		name := sl.Labels[LabelServiceName]
		if name == "" {
			continue
		}
		k := svcKey{sl.Namespace, name}
		slicesBySvc[k] = append(slicesBySvc[k], sl)
	}
	return &backends{services: services, slicesBySvc: slicesBySvc, memo: map[string][]string{}}
}

// compute returns the route set: the Ingresses' routes, then the
// HTTPRoutes'.
func (s *Source) compute(snap snapshot) []route.Spec {
	specs, _ := s.computeAll(snap)
	return specs
}

// computeAll returns the route set and the Gateway API status writes it
// implies.
func (s *Source) computeAll(snap snapshot) ([]route.Spec, []statusUpdate) {
	be := newBackends(snap)
	specs := s.computeIngresses(snap, be)
	updates := s.computeGateway(snap.gateway, be, &specs)
	return specs, updates
}

func (s *Source) computeIngresses(snap snapshot, be *backends) []route.Spec {
	filter := newClassFilter(s.class, snap.classes)
	services, slicesBySvc := be.services, be.slicesBySvc

	// Oldest Ingress first, so it wins conflicts; ties by namespace/name.
	ings := make([]*networkingv1.Ingress, 0, len(snap.ingresses))
	for _, ing := range snap.ingresses {
		if filter.handles(ing) {
			ings = append(ings, ing)
		}
	}
	slices.SortFunc(ings, func(a, b *networkingv1.Ingress) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})

	var specs []route.Spec
	claimed := map[ruleKey]string{} // rule → origin that owns it
	endpointsCache := be.memo
	add := func(ing *networkingv1.Ingress, host, path, pathType string, b *networkingv1.IngressServiceBackend, algo string) {
		origin := ing.Namespace + "/" + ing.Name
		rk := ruleKey{host, path, pathType}
		if owner, ok := claimed[rk]; ok {
			if owner != origin {
				s.warnOnce(fmt.Sprintf("conflict %v %s %s", rk, owner, origin),
					"rule already claimed by an older Ingress; ignoring it",
					"host", host, "path", path, "pathType", pathType, "winner", owner, "loser", origin)
			}
			return
		}
		key, eps, ok := s.backend(ing.Namespace, b, services, slicesBySvc, endpointsCache)
		if !ok {
			return
		}
		claimed[rk] = origin
		specs = append(specs, route.Spec{
			Key: key, Host: host, Path: path, PathType: pathType,
			Algorithm: algo, Endpoints: eps, Origin: origin,
		})
	}

	for _, ing := range ings {
		algo := s.algorithm(ing)
		for _, rule := range ing.Spec.Rules {
			if rule.HTTP == nil {
				continue
			}
			for _, p := range rule.HTTP.Paths {
				pathType := route.PathPrefix
				if p.PathType != nil {
					pathType = string(*p.PathType)
				}
				path := p.Path
				if path == "" {
					path = "/"
				}
				if p.Backend.Service == nil {
					s.warnOnce("resource "+ing.Namespace+"/"+ing.Name+path,
						"Ingress path has a resource backend, which is not supported; skipping it",
						"ingress", ing.Namespace+"/"+ing.Name, "path", path)
					continue
				}
				add(ing, rule.Host, path, pathType, p.Backend.Service, algo)
			}
		}
	}
	// Default backends catch everything the rules do not, so they come
	// after every rule; the oldest Ingress's default backend wins.
	for _, ing := range ings {
		if db := ing.Spec.DefaultBackend; db != nil {
			if db.Service == nil {
				s.warnOnce("resource-default "+ing.Namespace+"/"+ing.Name,
					"Ingress defaultBackend is a resource backend, which is not supported; skipping it",
					"ingress", ing.Namespace+"/"+ing.Name)
				continue
			}
			add(ing, "", "/", route.PathPrefix, db.Service, s.algorithm(ing))
		}
	}
	return specs
}

// algorithm returns the canonical algorithm named by the Ingress's
// annotations, or "" (the ingress default) when none or an invalid one is set.
func (s *Source) algorithm(ing *networkingv1.Ingress) string {
	return s.algorithmOf("ingress", ing.Namespace+"/"+ing.Name, ing.Annotations)
}

// algorithmOf reads the algorithm annotations of the object kind ns/name.
func (s *Source) algorithmOf(kind, name string, annotations map[string]string) string {
	ann := AnnotationLoadBalance
	v, ok := annotations[ann]
	if !ok {
		ann = AnnotationSeedAlgo
		v, ok = annotations[ann]
	}
	v = strings.TrimSpace(v)
	if !ok || v == "" {
		return ""
	}
	name, err := loadbalancer.Canonical(v)
	if err != nil {
		s.warnOnce("algo "+kind+" "+name+"="+v,
			"invalid load-balancing annotation; using the default algorithm",
			kind, name, "annotation", ann, "value", v, "err", err)
		return ""
	}
	return name
}

// backend resolves an Ingress service backend to its route key and ready
// endpoints. ok is false when the Service does not exist (the route is
// dropped) or the backend names no port.
func (s *Source) backend(ns string, b *networkingv1.IngressServiceBackend, services map[svcKey]*corev1.Service,
	slicesBySvc map[svcKey][]*discoveryv1.EndpointSlice, memo map[string][]string) (key string, eps []string, ok bool) {
	var portText string
	switch {
	case b.Port.Name != "":
		portText = b.Port.Name
	case b.Port.Number != 0:
		portText = strconv.Itoa(int(b.Port.Number))
	default:
		s.warnOnce("noport "+ns+"/"+b.Name, "Ingress backend names no service port; skipping it",
			"service", ns+"/"+b.Name)
		return "", nil, false
	}
	key = ns + "/" + b.Name + ":" + portText
	if eps, ok := memo[key]; ok {
		return key, eps, true
	}
	sk := svcKey{ns, b.Name}
	svc := services[sk]
	if svc == nil {
		return "", nil, false
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if (b.Port.Name != "" && p.Name == b.Port.Name) || (b.Port.Name == "" && p.Port == b.Port.Number) {
			sp = p
			break
		}
	}
	if sp == nil {
		// The Service exists but lacks the port: keep the route so requests
		// get 503 (no endpoints) rather than falling through to another rule.
		s.warnOnce("missingport "+key, "Service has no such port; the route has no endpoints",
			"service", ns+"/"+b.Name, "port", portText)
		memo[key] = nil
		return key, nil, true
	}
	eps = readyEndpoints(*sp, slicesBySvc[sk])
	memo[key] = eps
	return key, eps, true
}

// readyEndpoints lists the sorted, deduplicated "ip:port" addresses of the
// slices' endpoints that are ready, serving and not terminating, on the port
// the Service port sp forwards to.
func readyEndpoints(sp corev1.ServicePort, sls []*discoveryv1.EndpointSlice) []string {
	seen := map[string]bool{}
	var out []string
	for _, sl := range sls {
		if sl.AddressType != discoveryv1.AddressTypeIPv4 && sl.AddressType != discoveryv1.AddressTypeIPv6 {
			continue // FQDN slices name no address we could dial by IP
		}
		port, ok := slicePort(sp, sl.Ports)
		if !ok {
			continue
		}
		for _, ep := range sl.Endpoints {
			if !usable(ep.Conditions) || len(ep.Addresses) == 0 {
				continue
			}
			// Addresses of one endpoint are fungible; use the first, as kube-proxy does.
			addr := net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(port)))
			if !seen[addr] {
				seen[addr] = true
				out = append(out, addr)
			}
		}
	}
	slices.Sort(out)
	return out
}

// slicePort finds the slice port that carries the Service port's traffic.
// The EndpointSlice controller names slice ports after the Service port and
// sets the resolved target port number, so a named targetPort (resolved per
// Pod) is matched by name, and a numeric one by number (and by name when the
// slice has several ports of that number).
func slicePort(sp corev1.ServicePort, ports []discoveryv1.EndpointPort) (int32, bool) {
	if sp.TargetPort.Type == intstr.String && sp.TargetPort.StrVal != "" {
		for _, p := range ports {
			if p.Port == nil || p.Name == nil {
				continue
			}
			if *p.Name == sp.Name || *p.Name == sp.TargetPort.StrVal {
				return *p.Port, true
			}
		}
		return 0, false
	}
	target := sp.TargetPort.IntVal
	if target == 0 {
		target = sp.Port // targetPort defaults to port
	}
	var found int32
	var ok bool
	for _, p := range ports {
		if p.Port == nil || *p.Port != target {
			continue
		}
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		if name == sp.Name {
			return target, true
		}
		found, ok = target, true
	}
	return found, ok
}

// usable: ready (nil means ready), serving (nil means as ready) and not
// terminating (nil means not terminating), per discovery.k8s.io/v1.
func usable(c discoveryv1.EndpointConditions) bool {
	if c.Ready != nil && !*c.Ready {
		return false
	}
	if c.Serving != nil && !*c.Serving {
		return false
	}
	return c.Terminating == nil || !*c.Terminating
}
