package gatewayapi

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestInstall: the embedded install is the standard channel of Version,
// CRDs first, and holds the three kinds the ingress watches.
func TestInstall(t *testing.T) {
	objs, err := Install()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	seenOther := false
	for _, o := range objs {
		ann := o.GetAnnotations()
		if ann["gateway.networking.k8s.io/bundle-version"] != Version || ann["gateway.networking.k8s.io/channel"] != "standard" {
			t.Errorf("%s %s: annotations %v, want bundle-version %s, channel standard", o.GetKind(), o.GetName(), ann, Version)
		}
		if o.GetKind() == "CustomResourceDefinition" {
			if seenOther {
				t.Errorf("CRD %s after a non-CRD object", o.GetName())
			}
			names = append(names, o.GetName())
		} else {
			seenOther = true
		}
	}
	for _, r := range []string{GatewayClasses.Resource, Gateways.Resource, HTTPRoutes.Resource} {
		if !slices.Contains(names, r+"."+Group) {
			t.Errorf("no CRD %s.%s among %v", r, Group, names)
		}
	}
	crds, _ := CRDs()
	if len(crds) != len(names) {
		t.Errorf("CRDs() has %d objects, want %d", len(crds), len(names))
	}
}

// TestFilesMatchModule: the embedded files are the module's own, when the
// module cache (or the proxy) can give it.
func TestFilesMatchModule(t *testing.T) {
	out, err := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/gateway-api@"+Version).Output()
	if err != nil {
		t.Skipf("sigs.k8s.io/gateway-api@%s not available: %v", Version, err)
	}
	i := bytes.Index(out, []byte(`"Dir": "`))
	if i < 0 {
		t.Fatalf("no Dir in %s", out)
	}
	dir := string(out[i+len(`"Dir": "`):])
	dir = dir[:strings.IndexByte(dir, '"')]
	want, _ := filepath.Glob(filepath.Join(dir, "config", "crd", "standard", "*.yaml"))
	got, _ := filepath.Glob(filepath.Join("crds", "*.yaml"))
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("%d embedded files, module has %d", len(got), len(want))
	}
	for _, w := range want {
		a, _ := os.ReadFile(w)
		b, err := os.ReadFile(filepath.Join("crds", filepath.Base(w)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("crds/%s differs from the module's (run hack/gateway-api-crds.sh): %v", filepath.Base(w), err)
		}
	}
}
