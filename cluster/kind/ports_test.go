package kind

import (
	"context"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/manifests"
)

// A kind E-A control-plane node's `docker inspect -f '{{json .HostConfig.PortBindings}}'`.
const prequalbenchNodeBindings = `{"31080/tcp":[{"HostIp":"127.0.0.1","HostPort":"31080"}],"31081/tcp":[{"HostIp":"127.0.0.1","HostPort":"31081"}],"31090/tcp":[{"HostIp":"127.0.0.1","HostPort":"31090"}],"31300/tcp":[{"HostIp":"127.0.0.1","HostPort":"31300"}],"6443/tcp":[{"HostIp":"127.0.0.1","HostPort":"41235"}]}`

// A plain `kind create cluster` node: only the API server.
const plainNodeBindings = `{"6443/tcp":[{"HostIp":"127.0.0.1","HostPort":"41235"}]}`

func wantPorts(t *testing.T, topo manifests.Topology, obs bool) []PortMapping {
	t.Helper()
	raw, err := manifests.KindConfig(topo)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := manifests.ParseKindConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	return RequiredPorts(cfg, obs)
}

func TestCheckPorts(t *testing.T) {
	want := wantPorts(t, manifests.TopologyEB, true)
	if len(want) != 4 || want[0].String() != "127.0.0.1:31080->31080/tcp" {
		t.Fatalf("required ports of E-B with observability: %v", want)
	}
	if n := len(wantPorts(t, manifests.TopologyEA, false)); n != 2 {
		t.Errorf("E-A without observability needs %d ports, want proxy and admin", n)
	}
	have, err := ParsePortBindings([]byte(prequalbenchNodeBindings))
	if err != nil || len(have) != 5 {
		t.Fatalf("parse: %v %v", have, err)
	}
	if err := CheckPorts(have, want); err != nil {
		t.Errorf("a cluster up node: %v", err)
	}
	plain, err := ParsePortBindings([]byte(plainNodeBindings))
	if err != nil {
		t.Fatal(err)
	}
	err = CheckPorts(plain, wantPorts(t, manifests.TopologyEA, false))
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:31080->31080/tcp, 127.0.0.1:31081->31081/tcp") {
		t.Errorf("plain kind node: %v", err)
	}
	// Published on every address serves 127.0.0.1; another host port does not.
	all, _ := ParsePortBindings([]byte(`{"31080/tcp":[{"HostIp":"","HostPort":"31080"}],"31081/tcp":[{"HostIp":"0.0.0.0","HostPort":"31081"}]}`))
	if err := CheckPorts(all, wantPorts(t, manifests.TopologyEA, false)); err != nil {
		t.Errorf("0.0.0.0 bindings: %v", err)
	}
	moved, _ := ParsePortBindings([]byte(`{"31080/tcp":[{"HostIp":"127.0.0.1","HostPort":"8080"}],"31081/tcp":[{"HostIp":"127.0.0.1","HostPort":"31081"}]}`))
	if err := CheckPorts(moved, wantPorts(t, manifests.TopologyEA, false)); err == nil || !strings.Contains(err.Error(), "31080->31080") {
		t.Errorf("proxy on another host port: %v", err)
	}
	for _, bad := range []string{`[]`, `{"x/tcp":[]}`, `{"80/tcp":[{"HostPort":"y"}]}`} {
		if _, err := ParsePortBindings([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// TestUpRefusesClusterWithoutPorts: an existing cluster of the right shape
// but without the published ports (e.g. made by `kind create cluster`) is
// refused with a clear error, before anything is built or applied.
func TestUpRefusesClusterWithoutPorts(t *testing.T) {
	plain, _ := ParsePortBindings([]byte(plainNodeBindings))
	prov := &fakeProvider{
		clusters: map[string][]Node{"kind": {{Name: "kind-control-plane", Role: "control-plane"}}},
		ports:    map[string][]PortMapping{"kind": plain},
	}
	dock := &fakeDocker{loads: map[string][][]Node{}, local: map[string]string{}}
	err := Up(context.Background(), Deps{Provider: prov, Builder: dock, Loader: dock},
		UpOptions{Name: "kind", Topology: manifests.TopologyEA, Repo: "/repo"})
	if err == nil || !strings.Contains(err.Error(), `cluster "kind" exists but its control-plane node does not publish 127.0.0.1:31080->31080/tcp`) ||
		!strings.Contains(err.Error(), "cluster down --name kind") {
		t.Errorf("err = %v", err)
	}
	if len(dock.builds) != 0 || len(prov.created) != 0 {
		t.Errorf("built %v, created %v after refusing", dock.builds, prov.created)
	}
}
