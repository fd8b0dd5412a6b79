package artifacts

import (
	"fmt"
	"time"
)

// Session is one process that ran or resumed a campaign: when its
// environment came up and what it ran on.
type Session struct {
	Started     time.Time   `json:"started"`
	Environment Environment `json:"environment"`
	// Differences are the facts that differ from the first session's,
	// accepted with --force ("git_revision: abc -> def").
	Differences []string `json:"differences,omitempty"`
}

// FactDifferences lists the environment facts that differ between a and
// b, one "field: a -> b" each, in field order. Facts missing on either
// side (older artifacts, an environment that cannot tell) are not
// compared.
func FactDifferences(a, b Environment) []string {
	facts := []struct {
		name string
		a, b any
	}{
		{"name", a.Name, b.Name},
		{"topology", a.Topology, b.Topology},
		{"ingress_replicas", a.IngressReplicas, b.IngressReplicas},
		{"os", a.OS, b.OS},
		{"arch", a.Arch, b.Arch},
		{"cpus", a.CPUs, b.CPUs},
		{"cpu_model", a.CPUModel, b.CPUModel},
		{"memory_bytes", a.MemoryBytes, b.MemoryBytes},
		{"kernel", a.Kernel, b.Kernel},
		{"go_version", a.GoVersion, b.GoVersion},
		{"rust_version", a.RustVersion, b.RustVersion},
		{"prequalbench_version", a.Version, b.Version},
		{"git_revision", a.GitRevision, b.GitRevision},
		{"git_dirty", a.GitDirty, b.GitDirty},
		{"ingress_sha256", a.IngressSHA256, b.IngressSHA256},
		{"backend_sha256", a.BackendSHA256, b.BackendSHA256},
		{"load", a.Load.Kind(), b.Load.Kind()},
	}
	var diffs []string
	for _, f := range facts {
		if f.a == f.b || isZero(f.a) || isZero(f.b) {
			continue
		}
		diffs = append(diffs, fmt.Sprintf("%s: %v -> %v", f.name, f.a, f.b))
	}
	return diffs
}

func isZero(v any) bool {
	switch x := v.(type) {
	case string:
		return x == ""
	case int:
		return x == 0
	case uint64:
		return x == 0
	}
	return false // a bool is a fact either way
}
