package kind

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/prequalbench/prequalbench/manifests"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// PortMapping is one published port of a node container.
type PortMapping struct {
	HostIP        string
	HostPort      int
	ContainerPort int
	Protocol      string // tcp or udp
}

func (p PortMapping) String() string {
	ip := p.HostIP
	if ip == "" {
		ip = "0.0.0.0"
	}
	return fmt.Sprintf("%s:%d->%d/%s", ip, p.HostPort, p.ContainerPort, p.Protocol)
}

// ParsePortBindings reads `docker inspect -f '{{json .HostConfig.PortBindings}}'`
// of a node container: {"31080/tcp":[{"HostIp":"127.0.0.1","HostPort":"31080"}],...}.
func ParsePortBindings(raw []byte) ([]PortMapping, error) {
	var b map[string][]struct{ HostIp, HostPort string }
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("port bindings: %w", err)
	}
	var out []PortMapping
	for key, binds := range b {
		port, proto, _ := strings.Cut(key, "/")
		cp, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("port bindings: container port %q: want a number", key)
		}
		if proto == "" {
			proto = "tcp"
		}
		for _, h := range binds {
			hp, err := strconv.Atoi(h.HostPort)
			if err != nil {
				return nil, fmt.Errorf("port bindings: %s host port %q: want a number", key, h.HostPort)
			}
			out = append(out, PortMapping{HostIP: h.HostIp, HostPort: hp, ContainerPort: cp, Protocol: strings.ToLower(proto)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ContainerPort < out[j].ContainerPort })
	return out, nil
}

// RequiredPorts are the control-plane port mappings of the kind config
// that the ingress needs (proxy, admin), and Prometheus' and Grafana's
// with observability.
func RequiredPorts(cfg *v1alpha4.Cluster, observability bool) []PortMapping {
	need := map[int]bool{manifests.ProxyNodePort: true, manifests.AdminNodePort: true}
	if observability {
		need[manifests.PrometheusNodePort], need[manifests.GrafanaNodePort] = true, true
	}
	var out []PortMapping
	for _, n := range cfg.Nodes {
		if n.Role != v1alpha4.ControlPlaneRole {
			continue
		}
		for _, m := range n.ExtraPortMappings {
			if need[int(m.ContainerPort)] {
				proto := strings.ToLower(string(m.Protocol))
				if proto == "" {
					proto = "tcp"
				}
				out = append(out, PortMapping{HostIP: m.ListenAddress, HostPort: int(m.HostPort), ContainerPort: int(m.ContainerPort), Protocol: proto})
			}
		}
	}
	return out
}

// CheckPorts says which wanted mappings the node does not publish. A
// binding on every address (0.0.0.0 or empty) serves a 127.0.0.1 one.
func CheckPorts(have, want []PortMapping) error {
	var missing []string
	for _, w := range want {
		ok := false
		for _, h := range have {
			sameIP := h.HostIP == w.HostIP || h.HostIP == "" || h.HostIP == "0.0.0.0"
			ok = ok || (h.HostPort == w.HostPort && h.ContainerPort == w.ContainerPort && h.Protocol == w.Protocol && sameIP)
		}
		if !ok {
			missing = append(missing, w.String())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("its control-plane node does not publish %s", strings.Join(missing, ", "))
	}
	return nil
}
