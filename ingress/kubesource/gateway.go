package kubesource

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/prequalbench/prequalbench/ingress/route"
	"github.com/prequalbench/prequalbench/ingress/router"
	"github.com/prequalbench/prequalbench/manifests/gatewayapi"
)

// Condition types and reasons of the Gateway API this source writes.
const (
	condAccepted     = "Accepted"
	condProgrammed   = "Programmed"
	condResolvedRefs = "ResolvedRefs"

	kindGateway   = "Gateway"
	kindHTTPRoute = "HTTPRoute"
)

// gwSnapshot is the Gateway API objects of one reconcile.
type gwSnapshot struct {
	classes, gateways, routes []*unstructured.Unstructured
}

// gwStores are the dynamic informers' caches.
type gwStores struct {
	classes, gateways, routes cache.Store
}

func (g *gwStores) snapshot() gwSnapshot {
	list := func(st cache.Store) []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for _, o := range st.List() {
			if u, ok := o.(*unstructured.Unstructured); ok {
				out = append(out, u)
			}
		}
		return out
	}
	return gwSnapshot{classes: list(g.classes), gateways: list(g.gateways), routes: list(g.routes)}
}

// statusUpdate is one status subresource write: obj (a copy of the cached
// object) with its status replaced.
type statusUpdate struct {
	resource schema.GroupVersionResource
	obj      *unstructured.Unstructured
}

func errUnexpected(obj any) error { return fmt.Errorf("kubesource: unexpected object %T", obj) }

// stripForCache drops what the source never reads from objects before the
// informers cache them (managedFields, the last-applied annotation, which
// can be as large as the object), to keep the ingress's memory small.
func stripForCache(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetManagedFields(nil)
		if a := u.GetAnnotations(); a != nil {
			if _, ok := a["kubectl.kubernetes.io/last-applied-configuration"]; ok {
				delete(a, "kubectl.kubernetes.io/last-applied-configuration")
				u.SetAnnotations(a)
			}
		}
	}
	return obj, nil
}

// gwGatewayInfo is one of our Gateways with its listeners judged.
type gwGatewayInfo struct {
	u        *unstructured.Unstructured
	gw       gwGateway
	valid    []bool  // per listener: HTTP and allows HTTPRoutes
	attached []int32 // per listener: routes attached
}

// computeGateway serves the HTTPRoutes attached to Gateways of our
// GatewayClasses: it appends their routes to specs and returns the status
// writes for the classes, Gateways and routes (only the entries of this
// controller; nothing is written for objects of other controllers).
func (s *Source) computeGateway(snap gwSnapshot, be *backends, specs *[]route.Spec) []statusUpdate {
	var updates []statusUpdate

	ours := map[string]bool{}
	for _, u := range snap.classes {
		var c gwClass
		if err := fromUnstructured(u, &c); err != nil {
			s.warnOnce("decode class "+u.GetName(), "cannot decode GatewayClass", "name", u.GetName(), "err", err)
			continue
		}
		if c.Spec.ControllerName != ControllerName {
			continue
		}
		ours[c.Name] = true
		conds := slices.Clone(c.Status.Conditions)
		meta.SetStatusCondition(&conds, metav1.Condition{Type: condAccepted, Status: metav1.ConditionTrue,
			Reason: "Accepted", Message: "handled by " + ControllerName, ObservedGeneration: c.Generation})
		if !apiequality.Semantic.DeepEqual(conds, c.Status.Conditions) {
			updates = s.appendStatus(updates, gatewayapi.GatewayClasses, u, "conditions", conds)
		}
	}

	gateways := map[string]*gwGatewayInfo{} // namespace/name
	var gwOrder []string
	for _, u := range snap.gateways {
		info := &gwGatewayInfo{u: u}
		if err := fromUnstructured(u, &info.gw); err != nil {
			s.warnOnce("decode gateway "+u.GetNamespace()+"/"+u.GetName(), "cannot decode Gateway",
				"gateway", u.GetNamespace()+"/"+u.GetName(), "err", err)
			continue
		}
		if !ours[info.gw.Spec.GatewayClassName] {
			continue
		}
		info.valid = make([]bool, len(info.gw.Spec.Listeners))
		info.attached = make([]int32, len(info.gw.Spec.Listeners))
		for i, l := range info.gw.Spec.Listeners {
			info.valid[i] = l.Protocol == "HTTP" && allowsHTTPRoute(l) && len(info.gw.Spec.Addresses) == 0
		}
		key := u.GetNamespace() + "/" + u.GetName()
		gateways[key] = info
		gwOrder = append(gwOrder, key)
	}

	// Oldest route first: it wins a match another route repeats, as the
	// Gateway API's precedence asks; then namespace/name order.
	routes := make([]*gwHTTPRoute, 0, len(snap.routes))
	byRoute := map[*gwHTTPRoute]*unstructured.Unstructured{}
	for _, u := range snap.routes {
		r := &gwHTTPRoute{}
		if err := fromUnstructured(u, r); err != nil {
			s.warnOnce("decode route "+u.GetNamespace()+"/"+u.GetName(), "cannot decode HTTPRoute",
				"route", u.GetNamespace()+"/"+u.GetName(), "err", err)
			continue
		}
		routes = append(routes, r)
		byRoute[r] = u
	}
	slices.SortFunc(routes, func(a, b *gwHTTPRoute) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time),
			strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	claimed := map[string]string{}
	// Counts the rules with header matches in route age order, for the
	// router's tie-break between header sets (only they can tie).
	precedence := 0
	for _, r := range routes {
		if u := s.serveRoute(r, byRoute[r], gateways, be, claimed, &precedence, specs); u != nil {
			updates = append(updates, *u)
		}
	}

	for _, key := range gwOrder {
		info := gateways[key]
		if u := gatewayStatus(info); u != nil {
			updates = append(updates, *u)
		}
	}
	return updates
}

func (s *Source) appendStatus(updates []statusUpdate, gvr schema.GroupVersionResource, u *unstructured.Unstructured, field string, value any) []statusUpdate {
	v, err := toUnstructuredValue(value)
	if err != nil {
		s.warnOnce("encode status "+u.GetName(), "cannot encode status", "name", u.GetName(), "err", err)
		return updates
	}
	obj := u.DeepCopy()
	if err := unstructured.SetNestedField(obj.Object, v, "status", field); err != nil {
		s.warnOnce("set status "+u.GetName(), "cannot set status", "name", u.GetName(), "err", err)
		return updates
	}
	return append(updates, statusUpdate{resource: gvr, obj: obj})
}

// toUnstructuredValue turns a typed status field into JSON-shaped values.
func toUnstructuredValue(v any) (any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&struct {
		V any `json:"v"`
	}{v})
	if err != nil {
		return nil, err
	}
	return m["v"], nil
}

// allowsHTTPRoute: the listener's allowedRoutes.kinds is unset or names
// HTTPRoute of the Gateway API group.
func allowsHTTPRoute(l gwListener) bool {
	if l.AllowedRoutes == nil || len(l.AllowedRoutes.Kinds) == 0 {
		return true
	}
	for _, k := range l.AllowedRoutes.Kinds {
		if deref(k.Group, gatewayapi.Group) == gatewayapi.Group && k.Kind == kindHTTPRoute {
			return true
		}
	}
	return false
}

// gatewayStatus returns the Gateway's status write, or nil when its status
// is already what it should be.
func gatewayStatus(info *gwGatewayInfo) *statusUpdate {
	gw := info.gw
	gen := gw.Generation
	cur := gw.Status
	var want gwGatewayStatus
	want.Conditions = slices.Clone(cur.Conditions)
	valid := 0
	for _, v := range info.valid {
		if v {
			valid++
		}
	}
	accepted := metav1.Condition{Type: condAccepted, Status: metav1.ConditionTrue, Reason: "Accepted",
		Message: "handled by " + ControllerName, ObservedGeneration: gen}
	programmed := metav1.Condition{Type: condProgrammed, Status: metav1.ConditionTrue, Reason: "Programmed",
		Message: "routes are served by the ingress's proxy port", ObservedGeneration: gen}
	switch {
	case len(gw.Spec.Addresses) > 0:
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, "UnsupportedAddress",
			"spec.addresses is not supported: the ingress serves on its own Service"
		programmed.Status, programmed.Reason, programmed.Message = metav1.ConditionFalse, "Invalid", accepted.Message
	case valid == 0:
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, "ListenersNotValid",
			"no listener is valid: only protocol HTTP with HTTPRoutes is supported"
		programmed.Status, programmed.Reason, programmed.Message = metav1.ConditionFalse, "Invalid", accepted.Message
	case valid < len(info.valid):
		accepted.Reason, accepted.Message = "ListenersNotValid", "some listeners are not valid: only protocol HTTP with HTTPRoutes is supported"
	}
	meta.SetStatusCondition(&want.Conditions, accepted)
	meta.SetStatusCondition(&want.Conditions, programmed)

	for i, l := range gw.Spec.Listeners {
		ls := gwListenerStatus{Name: l.Name, AttachedRoutes: info.attached[i], SupportedKinds: []gwRouteGroupKind{}}
		for _, c := range cur.Listeners {
			if c.Name == l.Name {
				ls.Conditions = slices.Clone(c.Conditions)
			}
		}
		if allowsHTTPRoute(l) {
			ls.SupportedKinds = []gwRouteGroupKind{{Group: ptrTo(gatewayapi.Group), Kind: kindHTTPRoute}}
		}
		la := metav1.Condition{Type: condAccepted, Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: gen}
		lp := metav1.Condition{Type: condProgrammed, Status: metav1.ConditionTrue, Reason: "Programmed", ObservedGeneration: gen}
		lr := metav1.Condition{Type: condResolvedRefs, Status: metav1.ConditionTrue, Reason: "ResolvedRefs", ObservedGeneration: gen}
		switch {
		case l.Protocol != "HTTP":
			la.Status, la.Reason, la.Message = metav1.ConditionFalse, "UnsupportedProtocol", "protocol "+l.Protocol+": only HTTP is supported"
			lp.Status, lp.Reason = metav1.ConditionFalse, "Invalid"
		case !allowsHTTPRoute(l):
			lr.Status, lr.Reason, lr.Message = metav1.ConditionFalse, "InvalidRouteKinds", "allowedRoutes.kinds: only HTTPRoute is supported"
			lp.Status, lp.Reason = metav1.ConditionFalse, "Invalid"
		case len(gw.Spec.Addresses) > 0:
			lp.Status, lp.Reason = metav1.ConditionFalse, "Invalid"
		}
		meta.SetStatusCondition(&ls.Conditions, la)
		meta.SetStatusCondition(&ls.Conditions, lp)
		meta.SetStatusCondition(&ls.Conditions, lr)
		want.Listeners = append(want.Listeners, ls)
	}
	if apiequality.Semantic.DeepEqual(normalizeGatewayStatus(want), normalizeGatewayStatus(cur)) {
		return nil
	}
	v, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&want)
	if err != nil {
		return nil
	}
	obj := info.u.DeepCopy()
	obj.Object["status"] = v
	return &statusUpdate{resource: gatewayapi.Gateways, obj: obj}
}

// normalizeGatewayStatus makes nil and empty lists compare equal.
func normalizeGatewayStatus(s gwGatewayStatus) gwGatewayStatus {
	if len(s.Conditions) == 0 {
		s.Conditions = nil
	}
	if len(s.Listeners) == 0 {
		s.Listeners = nil
	}
	return s
}

func ptrTo[T any](v T) *T { return &v }

// routeVerdict is the outcome for one parentRef of ours.
type routeVerdict struct {
	ref       gwParentRef
	accepted  metav1.Condition
	hostnames []string // hosts the route serves through this parent; "" = any
}

// serveRoute judges one HTTPRoute against the Gateways it names, appends
// its routes when some Gateway of ours accepts it, and returns its status
// write (nil when unchanged or when it names no Gateway of ours).
func (s *Source) serveRoute(r *gwHTTPRoute, u *unstructured.Unstructured, gateways map[string]*gwGatewayInfo,
	be *backends, claimed map[string]string, precedence *int, specs *[]route.Spec) *statusUpdate {
	gen := r.Generation
	origin := "HTTPRoute " + r.Namespace + "/" + r.Name
	unsupported := unsupportedField(r)
	var verdicts []routeVerdict
	hostSet := map[string]bool{}
	for _, ref := range r.Spec.ParentRefs {
		if deref(ref.Group, gatewayapi.Group) != gatewayapi.Group || deref(ref.Kind, kindGateway) != kindGateway {
			continue
		}
		info := gateways[deref(ref.Namespace, r.Namespace)+"/"+ref.Name]
		if info == nil {
			continue // not a Gateway of ours: its controller writes this entry
		}
		// The CRD defaults group and kind in status as in spec; write them
		// so the stored entry equals the written one.
		ref.Group, ref.Kind = ptrTo(gatewayapi.Group), ptrTo(kindGateway)
		v := routeVerdict{ref: ref, accepted: metav1.Condition{Type: condAccepted, Status: metav1.ConditionTrue,
			Reason: "Accepted", ObservedGeneration: gen}}
		var matched, allowed []int
		for i, l := range info.gw.Spec.Listeners {
			if !info.valid[i] || (ref.SectionName != nil && *ref.SectionName != l.Name) || (ref.Port != nil && *ref.Port != l.Port) {
				continue
			}
			matched = append(matched, i)
			if allowsNamespace(l, info.gw.Namespace, r.Namespace) {
				allowed = append(allowed, i)
			}
		}
		var hosts []string
		var attachedTo []int
		for _, i := range allowed {
			hs := intersectHostnames(info.gw.Spec.Listeners[i].Hostname, r.Spec.Hostnames)
			if len(hs) > 0 {
				hosts = append(hosts, hs...)
				attachedTo = append(attachedTo, i)
			}
		}
		fail := func(reason, msg string) {
			v.accepted.Status, v.accepted.Reason, v.accepted.Message = metav1.ConditionFalse, reason, msg
		}
		switch {
		case len(matched) == 0:
			fail("NoMatchingParent", "no valid HTTP listener of the Gateway matches the parentRef's sectionName and port")
		case len(allowed) == 0:
			fail("NotAllowedByListeners", "the listeners' allowedRoutes.namespaces do not admit the route's namespace (Same and All are supported)")
		case len(attachedTo) == 0:
			fail("NoMatchingListenerHostname", "no hostname of the route matches a listener's hostname")
		case unsupported != "":
			fail("UnsupportedValue", unsupported)
		default:
			v.hostnames = hosts
			for _, h := range hosts {
				hostSet[h] = true
			}
			for _, i := range attachedTo {
				info.attached[i]++
			}
		}
		verdicts = append(verdicts, v)
	}

	// References are resolved whether or not a parent accepts the route:
	// ResolvedRefs says so either way; only attached routes are served
	// (no hosts, no specs).
	resolved := metav1.Condition{Type: condResolvedRefs, Status: metav1.ConditionTrue, Reason: "ResolvedRefs", ObservedGeneration: gen}
	{
		hosts := make([]string, 0, len(hostSet))
		for h := range hostSet {
			hosts = append(hosts, h)
		}
		slices.Sort(hosts)
		algo := s.algorithmOf("httproute", r.Namespace+"/"+r.Name, r.Annotations)
		for ri, rule := range r.Spec.Rules {
			targets := s.ruleTargets(r, ri, rule, be, &resolved)
			rulePrecedence := 0
			matches := rule.Matches
			if len(matches) == 0 {
				matches = []gwMatch{{}}
			}
			for _, m := range matches {
				path, pathType := "/", route.PathPrefix
				if m.Path != nil {
					path = deref(m.Path.Value, "/")
					if deref(m.Path.Type, "PathPrefix") == "Exact" {
						pathType = route.PathExact
					}
				}
				headers := matchHeaders(m)
				if len(headers) > 0 && rulePrecedence == 0 {
					*precedence++
					rulePrecedence = *precedence
				}
				for _, host := range hosts {
					ck := fmt.Sprintf("%s %s %s %v", host, path, pathType, headerKey(headers))
					where := fmt.Sprintf("%s rule %d", origin, ri)
					if owner, ok := claimed[ck]; ok {
						if owner != where {
							s.warnOnce("gwconflict "+ck+" "+where, "match already served by an older HTTPRoute rule; ignoring it",
								"host", host, "path", path, "winner", owner, "loser", where)
						}
						continue
					}
					claimed[ck] = where
					for _, t := range targets {
						*specs = append(*specs, route.Spec{Key: t.key, Host: host, Path: path, PathType: pathType,
							Algorithm: algo, Endpoints: t.endpoints, Origin: origin, Headers: headers, Weight: t.weight,
							Status: t.status, Precedence: rulePrecedence, AnyDepth: strings.HasPrefix(host, "*.")})
					}
				}
			}
		}
	}

	// Status: other controllers' entries stay; ours are rebuilt.
	var want []gwRouteParentStatus
	var mine []gwRouteParentStatus
	for _, p := range r.Status.Parents {
		if p.ControllerName != ControllerName {
			want = append(want, p)
		} else {
			mine = append(mine, p)
		}
	}
	if len(verdicts) == 0 && len(mine) == 0 {
		return nil
	}
	for _, v := range verdicts {
		e := gwRouteParentStatus{ParentRef: v.ref, ControllerName: ControllerName}
		for _, p := range mine {
			if apiequality.Semantic.DeepEqual(p.ParentRef, v.ref) {
				e.Conditions = slices.Clone(p.Conditions)
			}
		}
		meta.SetStatusCondition(&e.Conditions, v.accepted)
		meta.SetStatusCondition(&e.Conditions, resolved)
		want = append(want, e)
	}
	if want == nil {
		want = []gwRouteParentStatus{}
	}
	if apiequality.Semantic.DeepEqual(want, r.Status.Parents) {
		return nil
	}
	up := s.appendStatus(nil, gatewayapi.HTTPRoutes, u, "parents", want)
	if len(up) == 0 {
		return nil
	}
	return &up[0]
}

// target is one weighted backend of a rule.
type target struct {
	key       string
	endpoints []string
	weight    int32
	status    int // not 0: answered instead of forwarding (route.Spec.Status)
}

// ruleTargets resolves a rule's backendRefs. A ref that cannot be
// resolved keeps its share of the traffic on a pool of its own that
// answers 500, as the Gateway API asks (a Service without ready
// endpoints is resolved, and gets 503 from the proxy); a rule with no
// backend to send to (none named, or every weight 0) answers 500 to all
// its traffic rather than falling through to another rule. resolved
// records the first problem.
func (s *Source) ruleTargets(r *gwHTTPRoute, ri int, rule gwRule, be *backends, resolved *metav1.Condition) []target {
	var out []target
	fail := func(reason, msg string) {
		if resolved.Status == metav1.ConditionTrue {
			resolved.Status, resolved.Reason, resolved.Message = metav1.ConditionFalse, reason, msg
		}
	}
	for bi, ref := range rule.BackendRefs {
		w := deref(ref.Weight, 1)
		if w <= 0 {
			continue
		}
		where := fmt.Sprintf("spec.rules[%d].backendRefs[%d]", ri, bi)
		unresolved := fmt.Sprintf("unresolved/%s/%s/%d/%d", r.Namespace, r.Name, ri, bi)
		switch {
		case deref(ref.Group, "") != "" || deref(ref.Kind, "Service") != "Service":
			fail("InvalidKind", where+": only Services are supported")
			out = append(out, target{key: unresolved, weight: w, status: http.StatusInternalServerError})
			continue
		case deref(ref.Namespace, r.Namespace) != r.Namespace:
			fail("RefNotPermitted", where+": cross-namespace references (ReferenceGrant) are not supported")
			out = append(out, target{key: unresolved, weight: w, status: http.StatusInternalServerError})
			continue
		case ref.Port == nil:
			fail("UnsupportedValue", where+": port is required")
			out = append(out, target{key: unresolved, weight: w, status: http.StatusInternalServerError})
			continue
		}
		var key string
		var eps []string
		var ok bool
		if be.static != nil {
			key, eps, ok = be.static(r.Namespace, ref.Name, *ref.Port)
		} else {
			isb := &networkingv1.IngressServiceBackend{Name: ref.Name, Port: networkingv1.ServiceBackendPort{Number: *ref.Port}}
			key, eps, ok = s.backend(r.Namespace, isb, be.services, be.slicesBySvc, be.memo)
		}
		if !ok {
			fail("BackendNotFound", where+": Service "+r.Namespace+"/"+ref.Name+" not found")
			out = append(out, target{key: unresolved, weight: w, status: http.StatusInternalServerError})
			continue
		}
		if i := slices.IndexFunc(out, func(t target) bool { return t.key == key }); i >= 0 {
			out[i].weight += w // one pool named twice: one share, summed
			continue
		}
		out = append(out, target{key: key, endpoints: eps, weight: w})
	}
	if len(out) == 0 {
		out = append(out, target{key: fmt.Sprintf("nobackend/%s/%s/%d", r.Namespace, r.Name, ri), weight: 1,
			status: http.StatusInternalServerError})
	}
	return out
}

// unsupportedField names the first part of the route the ingress does not
// implement, or "": a route it would serve differently from its spec is
// not accepted at all.
func unsupportedField(r *gwHTTPRoute) string {
	for ri, rule := range r.Spec.Rules {
		if len(rule.Filters) > 0 {
			return fmt.Sprintf("spec.rules[%d].filters: filters are not supported", ri)
		}
		for bi, b := range rule.BackendRefs {
			if len(b.Filters) > 0 {
				return fmt.Sprintf("spec.rules[%d].backendRefs[%d].filters: filters are not supported", ri, bi)
			}
		}
		for mi, m := range rule.Matches {
			switch {
			case m.Method != nil:
				return fmt.Sprintf("spec.rules[%d].matches[%d].method: method matches are not supported", ri, mi)
			case len(m.QueryParams) > 0:
				return fmt.Sprintf("spec.rules[%d].matches[%d].queryParams: query parameter matches are not supported", ri, mi)
			case m.Path != nil && deref(m.Path.Type, "PathPrefix") != "PathPrefix" && deref(m.Path.Type, "") != "Exact":
				return fmt.Sprintf("spec.rules[%d].matches[%d].path.type %s: only PathPrefix and Exact are supported", ri, mi, *m.Path.Type)
			}
			for hi, h := range m.Headers {
				if t := deref(h.Type, route.HeaderExact); t != route.HeaderExact && t != route.HeaderRegularExpression {
					return fmt.Sprintf("spec.rules[%d].matches[%d].headers[%d].type %s: want Exact or RegularExpression", ri, mi, hi, t)
				}
			}
			// What the router would refuse (a RegularExpression that does
			// not compile as RE2) must not be Accepted and then not served.
			if err := router.CheckHeaders(matchHeaders(m)); err != nil {
				return fmt.Sprintf("spec.rules[%d].matches[%d].headers: %v", ri, mi, err)
			}
		}
	}
	return ""
}

// matchHeaders returns a match's header conditions for the router. Of
// entries whose names are equal but for case only the first counts, as
// the spec says (the CRD's list-map key is case-sensitive, so such
// entries reach the ingress).
func matchHeaders(m gwMatch) []route.HeaderMatch {
	var out []route.HeaderMatch
	for _, h := range m.Headers {
		if slices.ContainsFunc(out, func(x route.HeaderMatch) bool { return strings.EqualFold(x.Name, h.Name) }) {
			continue
		}
		out = append(out, route.HeaderMatch{Name: h.Name, Type: deref(h.Type, route.HeaderExact), Value: h.Value})
	}
	return out
}

func headerKey(hs []route.HeaderMatch) string {
	parts := make([]string, 0, len(hs))
	for _, h := range hs {
		parts = append(parts, strings.ToLower(h.Name)+"/"+h.Type+"="+h.Value)
	}
	slices.Sort(parts)
	return strings.Join(parts, ";")
}

// allowsNamespace applies a listener's allowedRoutes.namespaces.from:
// Same (the default) and All; Selector is not supported (no Namespace
// watch) and admits nothing.
func allowsNamespace(l gwListener, gwNamespace, routeNamespace string) bool {
	from := "Same"
	if l.AllowedRoutes != nil && l.AllowedRoutes.Namespaces != nil {
		from = deref(l.AllowedRoutes.Namespaces.From, "Same")
	}
	switch from {
	case "All":
		return true
	case "Same":
		return gwNamespace == routeNamespace
	}
	return false
}

// intersectHostnames returns the hosts a route serves through a listener:
// the route's hostnames that the listener's admits (a wildcard listener
// admits names under it; a wildcard route hostname under a specific
// listener hostname yields that hostname). No listener hostname admits
// all; a route without hostnames takes the listener's, or any host ("").
func intersectHostnames(listener *string, routeHosts []string) []string {
	l := strings.ToLower(deref(listener, ""))
	if len(routeHosts) == 0 {
		return []string{l}
	}
	var out []string
	for _, h := range routeHosts {
		h = strings.ToLower(h)
		switch {
		case l == "" || h == l:
			out = append(out, h)
		case strings.HasPrefix(l, "*.") && strings.HasSuffix(h, l[1:]):
			out = append(out, h)
		case strings.HasPrefix(h, "*.") && strings.HasSuffix(l, h[1:]):
			out = append(out, l)
		}
	}
	return out
}
