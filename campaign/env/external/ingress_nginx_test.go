package external

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/manifests"
	"github.com/prequalbench/prequalbench/scenario"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

var ingressNginxDir = filepath.Join("..", "..", "..", "examples", "external", "ingress-nginx")

// The ingress-nginx example (not run here: no cluster) loads and fits its
// scenario, and its workload.yaml holds the scenario's backends exactly
// as the project renders them, the prequal Ingress, and an nginx Ingress
// with the load-balance annotation on the same route.
func TestIngressNginxExampleConfig(t *testing.T) {
	c, err := Load(filepath.Join(ingressNginxDir, "external.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := scenario.Lookup(filepath.Join(ingressNginxDir, "scenario.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckScenario(s); err != nil {
		t.Error(err)
	}
	if c.SetAlgorithm == "" || c.Reset == "" || len(c.Backends) != 0 {
		t.Errorf("hooks %q / %q, backends %v", c.SetAlgorithm, c.Reset, c.Backends)
	}
	b, err := os.ReadFile(filepath.Join(ingressNginxDir, "workload.yaml"))
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
		if meta.Metadata.Namespace != manifests.WorkloadNamespace {
			t.Errorf("%s %s in namespace %q, want %s (the one the project's ingress watches)", meta.Kind, meta.Metadata.Name, meta.Metadata.Namespace, manifests.WorkloadNamespace)
		}
		committed[meta.Kind+"/"+meta.Metadata.Name] = []byte(doc)
	}
	rendered, err := manifests.Workload(s, manifests.WorkloadOptions{Image: "prequalbench/backend:dev", Algorithm: "prequal"})
	if err != nil {
		t.Fatal(err)
	}
	var prequalRules []networkingv1.IngressRule
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
		case "Ingress":
			var w, g networkingv1.Ingress
			convert(t, u.Object, &w)
			unmarshal(t, doc, &g)
			prequalRules = w.Spec.Rules
			want, got = &w.Spec, &g.Spec
			if g.Annotations[manifests.AlgorithmAnnotation] != "prequal" {
				t.Errorf("the prequal Ingress's annotations: %v", g.Annotations)
			}
		}
		if !equality.Semantic.DeepEqual(want, got) {
			t.Errorf("workload.yaml's %s is not what the project renders for scenario.yaml", key)
		}
	}
	var ng networkingv1.Ingress
	unmarshal(t, committed["Ingress/work-nginx"], &ng)
	if ng.Spec.IngressClassName == nil || *ng.Spec.IngressClassName != "nginx" ||
		ng.Annotations["nginx.ingress.kubernetes.io/load-balance"] != "round_robin" ||
		!equality.Semantic.DeepEqual(ng.Spec.Rules, prequalRules) {
		t.Errorf("the nginx Ingress: class %v, annotations %v, rules %+v; want class nginx, load-balance round_robin, the prequal Ingress's rules",
			ng.Spec.IngressClassName, ng.Annotations, ng.Spec.Rules)
	}
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
// for kubectl and curl that record their arguments: setAlgorithm sets
// the annotation per algorithm (prequal: nothing), the reset flips it to
// the other balancer and back, prequal's reset posts to the admin API
// with the Secret's token, and a name ingress-nginx has not is refused.
func TestIngressNginxExampleHooks(t *testing.T) {
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
	c, err := Load(filepath.Join(ingressNginxDir, "external.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c.settle = 0
	s, err := scenario.Lookup(filepath.Join(ingressNginxDir, "scenario.yaml"))
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
	const annotate = "kubectl -n prequalbench annotate --overwrite ingress work-nginx nginx.ingress.kubernetes.io/load-balance="
	ctx := context.Background()
	for _, c := range []struct{ algorithm, set, reset string }{
		{"round-robin", annotate + "round_robin\n", annotate + "ewma\n" + annotate + "round_robin\n"},
		{"ewma", annotate + "ewma\n", annotate + "round_robin\n" + annotate + "ewma\n"},
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
