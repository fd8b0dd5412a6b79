package external

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/manifests"
	"github.com/prequalbench/prequalbench/scenario"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

var envoyGatewayDir = filepath.Join("..", "..", "..", "examples", "external", "envoy-gateway")

// The Envoy Gateway example (not run here: no cluster) loads and fits its
// scenario, and its workload.yaml holds the scenario's backends, the
// prequal Gateway and HTTPRoute exactly as the project renders them, and
// Envoy Gateway's Gateway and HTTPRoute with the same rules and a
// BackendTrafficPolicy attached to that route.
func TestEnvoyGatewayExampleConfig(t *testing.T) {
	c, err := Load(filepath.Join(envoyGatewayDir, "external.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := scenario.Lookup(filepath.Join(envoyGatewayDir, "scenario.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckScenario(s); err != nil {
		t.Error(err)
	}
	if !s.Ingress.UsesGateway() {
		t.Error("scenario.yaml: ingress.routing is not gateway")
	}
	if c.SetAlgorithm == "" || c.Reset == "" || len(c.Backends) != 0 {
		t.Errorf("hooks %q / %q, backends %v", c.SetAlgorithm, c.Reset, c.Backends)
	}
	b, err := os.ReadFile(filepath.Join(envoyGatewayDir, "workload.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	committed := map[string][]byte{}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name, Namespace string
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Kind == "" {
			continue
		}
		if meta.Kind != "GatewayClass" && meta.Metadata.Namespace != manifests.WorkloadNamespace {
			t.Errorf("%s %s in namespace %q, want %s (the one the project's ingress watches)", meta.Kind, meta.Metadata.Name, meta.Metadata.Namespace, manifests.WorkloadNamespace)
		}
		committed[meta.Kind+"/"+meta.Metadata.Name] = []byte(doc)
	}
	rendered, err := manifests.Workload(s, manifests.WorkloadOptions{Image: "prequalbench/backend:dev", Algorithm: "prequal"})
	if err != nil {
		t.Fatal(err)
	}
	var prequalRules any
	for _, u := range rendered {
		key := u.GetKind() + "/" + u.GetName()
		doc, ok := committed[key]
		if !ok {
			t.Errorf("workload.yaml lacks %s", key)
			continue
		}
		var want, got any
		switch u.GetKind() {
		case "Deployment":
			var w, g appsv1.Deployment
			want, got = &w.Spec, &g.Spec
			convert(t, u.Object, &w)
			unmarshal(t, doc, &g)
		case "Service":
			var w, g corev1.Service
			want, got = &w.Spec, &g.Spec
			convert(t, u.Object, &w)
			unmarshal(t, doc, &g)
		case "Gateway", "HTTPRoute":
			var g map[string]any
			unmarshal(t, doc, &g)
			want, got = jsonOf(t, u.Object["spec"]), jsonOf(t, g["spec"])
			if u.GetKind() == "HTTPRoute" {
				prequalRules = g["spec"].(map[string]any)["rules"]
				if ann, _, _ := unstructured.NestedString(g, "metadata", "annotations", manifests.AlgorithmAnnotation); ann != "prequal" {
					t.Errorf("the prequal HTTPRoute's algorithm annotation %q, want prequal", ann)
				}
			}
		default:
			t.Errorf("the project renders an unexpected %s", key)
			continue
		}
		if !equality.Semantic.DeepEqual(want, got) {
			t.Errorf("workload.yaml's %s is not what the project renders for scenario.yaml", key)
		}
	}
	var eg, policy map[string]any
	unmarshal(t, committed["HTTPRoute/work-eg"], &eg)
	unmarshal(t, committed["BackendTrafficPolicy/work-eg"], &policy)
	if refs, _, _ := unstructured.NestedSlice(eg, "spec", "parentRefs"); jsonOf(t, refs) != `[{"name":"eg"}]` ||
		jsonOf(t, eg["spec"].(map[string]any)["rules"]) != jsonOf(t, prequalRules) {
		t.Errorf("Envoy Gateway's HTTPRoute %v: want parentRef eg and the prequal HTTPRoute's rules", eg["spec"])
	}
	if targets, _, _ := unstructured.NestedSlice(policy, "spec", "targetRefs"); jsonOf(t, targets) != `[{"group":"gateway.networking.k8s.io","kind":"HTTPRoute","name":"work-eg"}]` {
		t.Errorf("BackendTrafficPolicy targets %v, want the HTTPRoute work-eg", targets)
	}
	if lb, _, _ := unstructured.NestedString(policy, "spec", "loadBalancer", "type"); lb != "RoundRobin" {
		t.Errorf("BackendTrafficPolicy loadBalancer.type %q, want RoundRobin", lb)
	}
	if _, ok := committed["GatewayClass/eg"]; !ok {
		t.Error("workload.yaml lacks Envoy Gateway's GatewayClass eg")
	}
}

// jsonOf is v's JSON, for comparing YAML-decoded and rendered values.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func convert(t *testing.T, obj map[string]any, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, into); err != nil {
		t.Fatal(err)
	}
}

func unmarshal(t *testing.T, doc []byte, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		t.Fatal(err)
	}
}

// The example's hooks, run as the campaign runs them, against stand-ins
// for kubectl and curl that record their arguments: setAlgorithm patches
// the policy's loadBalancer.type per algorithm (prequal: nothing), the
// reset flips it to another type and back, prequal's reset posts to the
// admin API with the Secret's token, and a name Envoy Gateway has not is
// refused.
func TestEnvoyGatewayExampleHooks(t *testing.T) {
	bin, log := t.TempDir(), filepath.Join(t.TempDir(), "calls.log")
	token := base64.StdEncoding.EncodeToString([]byte("sekret"))
	for name, body := range map[string]string{
		"kubectl": `echo "kubectl $*" >> "$HOOKLOG"; case "$*" in *"get secret"*) echo ` + token + ` ;; esac`,
		"curl":    `echo "curl $*" >> "$HOOKLOG"`,
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("HOOKLOG", log)
	t.Setenv("SYNC_WAIT", "0")
	c, err := Load(filepath.Join(envoyGatewayDir, "external.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c.settle = 0
	s, err := scenario.Lookup(filepath.Join(envoyGatewayDir, "scenario.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{Scenario: s, Config: c, LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	calls := func() string {
		t.Helper()
		b, _ := os.ReadFile(log)
		os.Remove(log)
		return string(b)
	}
	patch := func(lb string) string {
		return `kubectl -n prequalbench patch backendtrafficpolicy work-eg --type merge -p {"spec":{"loadBalancer":{"type":"` + lb + `"}}}` + "\n"
	}
	ctx := context.Background()
	for _, c := range []struct{ algorithm, set, reset string }{
		{"round-robin", patch("RoundRobin"), patch("Random") + patch("RoundRobin")},
		{"p2c", patch("LeastRequest"), patch("RoundRobin") + patch("LeastRequest")},
		{"random", patch("Random"), patch("RoundRobin") + patch("Random")},
		{"prequal", "", "kubectl -n prequalbench-system get secret prequal-admin-token -o jsonpath={.data.token}\n" +
			"curl -fsS -X POST -H Authorization: Bearer sekret -H Content-Type: application/json -d {} http://127.0.0.1:31081/admin/reset\n"},
	} {
		if err := e.SetAlgorithm(ctx, c.algorithm); err != nil {
			t.Fatalf("%s: setAlgorithm: %v", c.algorithm, err)
		}
		if got := calls(); got != c.set {
			t.Errorf("%s: setAlgorithm ran\n%s\nwant\n%s", c.algorithm, got, c.set)
		}
		v, err := e.Reset(ctx, scenario.ResetAdmin)
		if err != nil {
			t.Fatalf("%s: reset: %v", c.algorithm, err)
		}
		if got := calls(); got != c.reset {
			t.Errorf("%s: reset ran\n%s\nwant\n%s", c.algorithm, got, c.reset)
		}
		if v.Verified || !strings.Contains(v.Detail, "no backend addresses") {
			t.Errorf("%s: verification %+v, want unverified (no backends)", c.algorithm, v)
		}
	}
	if err := e.SetAlgorithm(ctx, "least-request"); err == nil || !strings.Contains(err.Error(), "no equivalent of least-request") {
		t.Errorf("least-request: %v", err)
	}
}
