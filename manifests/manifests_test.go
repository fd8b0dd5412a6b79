package manifests

import (
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/scenario"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

func TestKindConfigs(t *testing.T) {
	for _, tc := range []struct {
		topo    Topology
		workers int
	}{{TopologyEA, 0}, {TopologyEB, 3}} {
		raw, err := KindConfig(tc.topo)
		if err != nil {
			t.Fatal(err)
		}
		c, err := ParseKindConfig(raw)
		if err != nil {
			t.Fatalf("%s: %v", tc.topo, err)
		}
		var cp, workers int
		for i, n := range c.Nodes {
			switch n.Role {
			case v1alpha4.ControlPlaneRole:
				cp++
				ports := map[int32]bool{}
				for _, pm := range n.ExtraPortMappings {
					if pm.ListenAddress != "127.0.0.1" || pm.ContainerPort != pm.HostPort || pm.Protocol != v1alpha4.PortMappingProtocolTCP {
						t.Errorf("%s node %d: mapping %+v: want TCP on 127.0.0.1 with hostPort == containerPort", tc.topo, i, pm)
					}
					ports[pm.HostPort] = true
				}
				for _, p := range []int32{ProxyNodePort, AdminNodePort, PrometheusNodePort, GrafanaNodePort} {
					if !ports[p] {
						t.Errorf("%s: control-plane does not publish %d", tc.topo, p)
					}
				}
			case v1alpha4.WorkerRole:
				workers++
				if len(n.ExtraPortMappings) != 0 {
					t.Errorf("%s: worker %d publishes ports; only the ingress's node should", tc.topo, i)
				}
			default:
				t.Errorf("%s: node %d has role %q", tc.topo, i, n.Role)
			}
		}
		if cp != 1 || workers != tc.workers {
			t.Errorf("%s: %d control-plane and %d workers, want 1 and %d", tc.topo, cp, workers, tc.workers)
		}
	}
	if _, err := KindConfig(TopologyNone); err == nil {
		t.Error("KindConfig(none) succeeded; want an error")
	}
}

func TestParseKindConfigRejectsUnknownFields(t *testing.T) {
	_, err := ParseKindConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodez: []\n"))
	if err == nil || !strings.Contains(err.Error(), "nodez") {
		t.Fatalf("err = %v, want one naming the unknown field", err)
	}
}

func TestParseTopology(t *testing.T) {
	for in, want := range map[string]Topology{"e-a": TopologyEA, "E-B": TopologyEB, "eb": TopologyEB} {
		got, err := ParseTopology(in)
		if err != nil || got != want {
			t.Errorf("ParseTopology(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseTopology("e-c"); err == nil || !strings.Contains(err.Error(), "e-a or e-b") {
		t.Errorf("ParseTopology(e-c): err = %v, want the allowed values", err)
	}
}

func TestIngressOptionsErrors(t *testing.T) {
	ok := IngressOptions{Image: "i:1", AdminToken: "tok"}
	for name, tc := range map[string]struct {
		mut  func(*IngressOptions)
		want string
	}{
		"no image":        {func(o *IngressOptions) { o.Image = "" }, "ingress image"},
		"no token":        {func(o *IngressOptions) { o.AdminToken = "" }, "admin token"},
		"token with \\n":  {func(o *IngressOptions) { o.AdminToken = "a\nb" }, "admin token"},
		"bad namespace":   {func(o *IngressOptions) { o.WorkloadNamespace = "Bad_NS" }, "namespace"},
		"system ns":       {func(o *IngressOptions) { o.WorkloadNamespace = SystemNamespace }, "namespace"},
		"bad topology":    {func(o *IngressOptions) { o.Topology = "e-z" }, "topology"},
		"negative replic": {func(o *IngressOptions) { o.Replicas = -1 }, "replicas"},
	} {
		o := ok
		tc.mut(&o)
		if _, err := Ingress(o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to name %q", name, err, tc.want)
		}
	}
}

func TestWorkloadErrors(t *testing.T) {
	s, err := scenario.Catalogue("quickstart")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Workload(s, WorkloadOptions{Algorithm: "prequal"}); err == nil || !strings.Contains(err.Error(), "backend image") {
		t.Errorf("no image: err = %v", err)
	}
	if _, err := Workload(s, WorkloadOptions{Image: "b:1"}); err == nil || !strings.Contains(err.Error(), "algorithm") {
		t.Errorf("no algorithm: err = %v", err)
	}
	bad := *s
	bad.Workload.Routes = append([]scenario.Route(nil), s.Workload.Routes...)
	bad.Workload.Routes[0].Name = "Work_Route"
	if _, err := Workload(&bad, WorkloadOptions{Image: "b:1", Algorithm: "prequal"}); err == nil || !strings.Contains(err.Error(), "workload.routes[0].name") {
		t.Errorf("bad route name: err = %v, want the field path", err)
	}
}

func TestObservabilityCarriesDashboardsAndRules(t *testing.T) {
	objs, err := Observability()
	if err != nil {
		t.Fatal(err)
	}
	_, rules := find(objs, "ConfigMap", PrometheusRulesConfigMap)
	_, boards := find(objs, "ConfigMap", GrafanaDashboardsMap)
	if rules == nil || boards == nil {
		t.Fatal("missing rules or dashboards ConfigMap")
	}
	data, _, _ := unstructuredMap(boards.Object, "data")
	if _, ok := data["request-overview.json"]; !ok {
		t.Errorf("dashboards ConfigMap lacks request-overview.json: keys %v", keys(data))
	}
	data, _, _ = unstructuredMap(rules.Object, "data")
	if len(data) == 0 {
		t.Error("rules ConfigMap is empty")
	}
}
