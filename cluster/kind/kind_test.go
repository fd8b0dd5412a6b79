package kind

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/cluster/kubeapply"
	"github.com/prequalbench/prequalbench/internal/kubetest"
	"github.com/prequalbench/prequalbench/manifests"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

type fakeProvider struct {
	mu       sync.Mutex
	clusters map[string][]Node
	created  []string
	configs  [][]byte
	images   []string
	ports    map[string][]PortMapping
}

func (f *fakeProvider) Create(name string, config []byte, nodeImage string, wait time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := manifests.ParseKindConfig(config)
	if err != nil {
		return err
	}
	var nodes []Node
	w := 0
	for _, n := range c.Nodes {
		node := Node{Name: name + "-control-plane", Role: string(n.Role)}
		if n.Role == "worker" {
			w++
			node.Name = name + "-worker"
			if w > 1 {
				node.Name += strconv.Itoa(w)
			}
		}
		nodes = append(nodes, node)
	}
	f.clusters[name] = nodes
	if f.ports == nil {
		f.ports = map[string][]PortMapping{}
	}
	for _, m := range RequiredPorts(c, true) {
		f.ports[name] = append(f.ports[name], m)
	}
	f.created = append(f.created, name)
	f.configs = append(f.configs, config)
	f.images = append(f.images, nodeImage)
	return nil
}
func (f *fakeProvider) Delete(name string) error { delete(f.clusters, name); return nil }
func (f *fakeProvider) List() ([]string, error) {
	var out []string
	for n := range f.clusters {
		out = append(out, n)
	}
	return out, nil
}
func (f *fakeProvider) KubeConfig(name string) (string, error) { return "fake", nil }
func (f *fakeProvider) Nodes(name string) ([]Node, error)      { return f.clusters[name], nil }
func (f *fakeProvider) PortMappings(name string) ([]PortMapping, error) {
	return f.ports[name], nil
}

type fakeDocker struct {
	builds []BuildSpec
	loads  map[string][][]Node
	local  map[string]string
}

func (f *fakeDocker) Build(_ context.Context, s BuildSpec) error {
	f.builds = append(f.builds, s)
	f.local[s.Tag] = "sha256:" + s.Tag
	return nil
}
func (f *fakeDocker) ImageID(_ context.Context, image string) (string, error) {
	id, ok := f.local[image]
	if !ok {
		return "", os.ErrNotExist
	}
	return id, nil
}
func (f *fakeDocker) Load(_ context.Context, cluster, image string, nodes []Node) error {
	f.loads[image] = append(f.loads[image], nodes)
	return nil
}

func repoRoot(t *testing.T) string {
	t.Helper()
	wd, _ := os.Getwd()
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

// TestDockerfilesMatchMakefile checks the build inputs: the Dockerfiles
// exist where BuildSpecs points, and build the same binaries with the
// same commands as `make build`.
func TestDockerfilesMatchMakefile(t *testing.T) {
	repo := repoRoot(t)
	specs := BuildSpecs(repo, "abc123", "i:t", "b:t")
	if len(specs) != 2 {
		t.Fatalf("%d build specs", len(specs))
	}
	mk, err := os.ReadFile(filepath.Join(repo, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	ingress, err := os.ReadFile(specs[0].Dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	backend, err := os.ReadFile(specs[1].Dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	// The Makefile's ldflags and package, and its backend command.
	ld := regexp.MustCompile(`LDFLAGS\s*:=\s*-X (\S+)=`).FindSubmatch(mk)
	if ld == nil || !strings.Contains(string(ingress), `-X `+string(ld[1])+`=${REVISION}`) {
		t.Errorf("Dockerfile.ingress does not set %s like the Makefile", ld)
	}
	for _, want := range []string{"./cmd/prequalbench", "CGO_ENABLED=0", "USER 65532", "nonroot", "ENTRYPOINT [\"/prequalbench\"]"} {
		if !strings.Contains(string(ingress), want) {
			t.Errorf("Dockerfile.ingress lacks %q", want)
		}
	}
	if !strings.Contains(string(mk), "cargo) build --release") && !strings.Contains(string(mk), "$(CARGO) build --release") {
		t.Fatal("Makefile no longer builds the backend with cargo build --release")
	}
	for _, want := range []string{"cargo build --release", "target/release/prequal-backend", "USER 65532", "nonroot"} {
		if !strings.Contains(string(backend), want) {
			t.Errorf("backend/Dockerfile lacks %q", want)
		}
	}
	for _, p := range []string{"backend/Cargo.toml", "backend/Cargo.lock", "backend/src", "go.mod", "go.sum", "cmd/prequalbench"} {
		if _, err := os.Stat(filepath.Join(repo, p)); err != nil {
			t.Errorf("build input missing: %v", err)
		}
	}
	if specs[0].Context != repo || specs[1].Context != repo || specs[0].BuildArgs["REVISION"] != "abc123" {
		t.Errorf("specs %+v", specs)
	}
	got := BuildArgs(specs[0])
	want := []string{"build", "-f", filepath.Join(repo, "Dockerfile.ingress"), "-t", "i:t", "--build-arg", "REVISION=abc123", repo}
	if !slices.Equal(got, want) {
		t.Errorf("BuildArgs = %q, want %q", got, want)
	}
	ignore, err := os.ReadFile(filepath.Join(repo, ".dockerignore"))
	if err != nil || !strings.Contains(string(ignore), "backend/target") {
		t.Errorf(".dockerignore must keep backend/target out of the context (%v)", err)
	}
}

func TestUpOptionsErrors(t *testing.T) {
	d := Deps{Provider: &fakeProvider{clusters: map[string][]Node{}}}
	if err := Up(context.Background(), d, UpOptions{Topology: "e-c", Repo: "/r"}); err == nil || !strings.Contains(err.Error(), "--topology") {
		t.Errorf("bad topology: %v", err)
	}
	if err := Up(context.Background(), d, UpOptions{Topology: manifests.TopologyEA}); err == nil || !strings.Contains(err.Error(), "--skip-build") {
		t.Errorf("no repo: %v", err)
	}
	for _, ns := range []string{"Bad_NS", manifests.SystemNamespace} {
		if err := Up(context.Background(), d, UpOptions{Topology: manifests.TopologyEA, Repo: "/r", Namespace: ns}); err == nil || !strings.Contains(err.Error(), "--namespace") {
			t.Errorf("namespace %q: %v", ns, err)
		}
	}
}

// TestUpTwiceOnEB runs Up with fake Docker and kind against the real
// apiserver (playing the controller for the rollout) and checks every
// step's inputs; the second Up creates nothing, keeps the token and
// leaves every object unchanged.
func TestUpTwiceOnEB(t *testing.T) {
	env := kubetest.Start(t)
	prov := &fakeProvider{clusters: map[string][]Node{}}
	dock := &fakeDocker{loads: map[string][][]Node{}, local: map[string]string{}}
	deps := Deps{Provider: prov, Builder: dock, Loader: dock,
		Connect: func(string) (*kubeapply.Client, *rest.Config, error) {
			c, err := kubeapply.New(env.Config)
			c.Poll = 20 * time.Millisecond
			return c, env.Config, err
		}}
	opts := UpOptions{Name: "pb", Topology: manifests.TopologyEB, Repo: "/repo", Revision: "rev1", Wait: 30 * time.Second, NodeImage: "kindest/node:v1.34.0", Namespace: "pb-bench"}
	up := func() {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- Up(context.Background(), deps, opts) }()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				return
			case <-deadline:
				t.Fatal("Up did not finish")
			case <-time.After(20 * time.Millisecond):
			}
			markRolledOut(env, manifests.SystemNamespace, manifests.IngressName)
		}
	}
	up()
	if len(prov.created) != 1 || prov.images[0] != "kindest/node:v1.34.0" {
		t.Fatalf("created %v with images %v", prov.created, prov.images)
	}
	wantNodes := prov.clusters["pb"]
	if len(wantNodes) != 4 {
		t.Fatalf("E-B fake cluster has %d nodes", len(wantNodes))
	}
	if len(dock.builds) != 2 || dock.builds[0].Tag != DefaultIngressImage || dock.builds[1].Tag != DefaultBackendImage ||
		dock.builds[0].Dockerfile != "/repo/Dockerfile.ingress" || dock.builds[1].Dockerfile != "/repo/backend/Dockerfile" {
		t.Errorf("builds %+v", dock.builds)
	}
	for _, img := range []string{DefaultIngressImage, DefaultBackendImage} {
		if len(dock.loads[img]) != 1 || !slices.Equal(dock.loads[img][0], wantNodes) {
			t.Errorf("%s loaded into %v, want every node %v", img, dock.loads[img], wantNodes)
		}
	}
	ctx := context.Background()
	sec1, err := env.Client.CoreV1().Secrets(manifests.SystemNamespace).Get(ctx, manifests.AdminTokenSecret, metav1.GetOptions{})
	if err != nil || len(sec1.Data[manifests.AdminTokenKey]) < 32 {
		t.Fatalf("token secret: %v", err)
	}
	d1, _ := env.Client.AppsV1().Deployments(manifests.SystemNamespace).Get(ctx, manifests.IngressName, metav1.GetOptions{})
	if d1.Spec.Template.Annotations[manifests.ImageIDAnnotation] != "sha256:"+DefaultIngressImage {
		t.Errorf("ingress pod annotations %v lack the image ID", d1.Spec.Template.Annotations)
	}

	up()
	if len(prov.created) != 1 {
		t.Errorf("second Up created a cluster again: %v", prov.created)
	}
	sec2, _ := env.Client.CoreV1().Secrets(manifests.SystemNamespace).Get(ctx, manifests.AdminTokenSecret, metav1.GetOptions{})
	d2, _ := env.Client.AppsV1().Deployments(manifests.SystemNamespace).Get(ctx, manifests.IngressName, metav1.GetOptions{})
	if string(sec2.Data[manifests.AdminTokenKey]) != string(sec1.Data[manifests.AdminTokenKey]) || sec2.ResourceVersion != sec1.ResourceVersion {
		t.Error("second Up changed the admin token")
	}
	if d2.Generation != d1.Generation {
		t.Errorf("second Up changed the ingress Deployment (generation %d -> %d)", d1.Generation, d2.Generation)
	}

	// Status reads it all back.
	st, err := Status(ctx, deps, "pb")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(d2.Spec.Template.Spec.Containers[0].Args, "--namespace=pb-bench") {
		t.Errorf("ingress args %v do not watch the -n namespace", d2.Spec.Template.Spec.Containers[0].Args)
	}
	if _, err := env.Client.CoreV1().Namespaces().Get(ctx, "pb-bench", metav1.GetOptions{}); err != nil {
		t.Errorf("workload namespace: %v", err)
	}
	if st.Topology != manifests.TopologyEB || st.Namespace != "pb-bench" || len(st.Nodes) != 4 || !st.IngressReady || st.ProxyURL != "http://127.0.0.1:31080" || st.GrafanaURL != "" {
		t.Errorf("status %+v", st)
	}

	// Another topology under the same name is refused.
	opts.Topology = manifests.TopologyEA
	if err := Up(ctx, deps, opts); err == nil || !strings.Contains(err.Error(), "another topology") {
		t.Errorf("E-A over E-B: err = %v", err)
	}
	if err := Down(deps, "pb"); err != nil || len(prov.clusters) != 0 {
		t.Errorf("down: %v, clusters %v", err, prov.clusters)
	}
}

func markRolledOut(env *kubetest.Env, ns, name string) {
	ctx := context.Background()
	d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	n := *d.Spec.Replicas
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
	_, _ = env.Client.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
}
