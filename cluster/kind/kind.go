// Package kind brings up, inspects and removes the kind clusters of the E-A
// and E-B topologies: it creates the cluster with the kind library, builds
// the ingress and backend images, loads them into every node (as `kind load
// docker-image` does), installs the ingress (and optionally Prometheus and
// Grafana) with server-side apply and waits until it is ready.
//
// Everything that needs Docker sits behind three small interfaces
// (ClusterProvider, ImageBuilder, ImageLoader) so the steps and their inputs
// are tested here without a Docker engine; docker.go holds the real ones.
package kind

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prequalbench/prequalbench/cluster/deploy"
	"github.com/prequalbench/prequalbench/cluster/kubeapply"
	"github.com/prequalbench/prequalbench/manifests"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// DefaultName is the cluster name when --name is not given.
const DefaultName = "prequalbench"

// Default image references built by `cluster up`. Not ":latest", so the
// kubelet never tries to pull them (imagePullPolicy IfNotPresent).
const (
	DefaultIngressImage = "prequalbench/ingress:dev"
	DefaultBackendImage = "prequalbench/backend:dev"
)

// Node is one kind node.
type Node struct {
	Name string `json:"name"`
	Role string `json:"role"` // control-plane or worker
}

// ClusterProvider is the part of the kind library `cluster` uses.
type ClusterProvider interface {
	// Create makes a cluster from a raw kind config and waits up to wait
	// for its control plane (0: do not wait).
	Create(name string, config []byte, nodeImage string, wait time.Duration) error
	Delete(name string) error
	List() ([]string, error)
	// KubeConfig returns the external kubeconfig of the cluster.
	KubeConfig(name string) (string, error)
	Nodes(name string) ([]Node, error)
	// PortMappings returns the host ports published by the cluster's
	// control-plane node container.
	PortMappings(name string) ([]PortMapping, error)
}

// BuildSpec is one `docker build`.
type BuildSpec struct {
	// Context is the build context folder; Dockerfile its path.
	Context    string
	Dockerfile string
	Tag        string
	BuildArgs  map[string]string
}

// ImageBuilder builds images and reports their content IDs.
type ImageBuilder interface {
	Build(ctx context.Context, spec BuildSpec) error
	// ImageID returns the local image's ID, or an error if it is not a
	// local image.
	ImageID(ctx context.Context, image string) (string, error)
}

// ImageLoader puts a local image into the given nodes of a cluster,
// skipping nodes that already hold it.
type ImageLoader interface {
	Load(ctx context.Context, cluster, image string, nodes []Node) error
}

// Deps are the Docker- and kind-facing parts; tests pass fakes.
type Deps struct {
	Provider ClusterProvider
	Builder  ImageBuilder
	Loader   ImageLoader
	// Connect turns a kubeconfig into an API client; default
	// kubeapply.New over the kubeconfig.
	Connect func(kubeconfig string) (*kubeapply.Client, *rest.Config, error)
}

// UpOptions are the flags of `cluster up`.
type UpOptions struct {
	Name      string
	Topology  manifests.Topology
	NodeImage string
	// Namespace of the workload; recorded for the kind environment.
	// Default manifests.WorkloadNamespace.
	Namespace string
	// Wait bounds the wait for the control plane and for the ingress.
	Wait time.Duration
	// Repo is the repository root (build contexts); Revision its git revision.
	Repo     string
	Revision string
	// SkipBuild uses IngressImage and BackendImage as they are.
	SkipBuild     bool
	IngressImage  string
	BackendImage  string
	Observability bool
	// Progress receives one line per step.
	Progress func(string)
}

// BuildSpecs returns the two builds `cluster up` runs: the ingress image
// from the repo root with Dockerfile.ingress, the backend image from the
// repo root with backend/Dockerfile.
func BuildSpecs(repo, revision, ingressTag, backendTag string) []BuildSpec {
	if revision == "" {
		revision = "unknown"
	}
	return []BuildSpec{
		{Context: repo, Dockerfile: filepath.Join(repo, "Dockerfile.ingress"), Tag: ingressTag, BuildArgs: map[string]string{"REVISION": revision}},
		{Context: repo, Dockerfile: filepath.Join(repo, "backend", "Dockerfile"), Tag: backendTag},
	}
}

func (o *UpOptions) normalize() error {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Topology != manifests.TopologyEA && o.Topology != manifests.TopologyEB {
		return fmt.Errorf("kind: --topology %q: want e-a or e-b", o.Topology)
	}
	if o.Namespace == "" {
		o.Namespace = manifests.WorkloadNamespace
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return fmt.Errorf("kind: --namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
	}
	if o.Namespace == manifests.SystemNamespace {
		return fmt.Errorf("kind: --namespace %q: the workload needs its own namespace, not %s", o.Namespace, manifests.SystemNamespace)
	}
	if o.Wait <= 0 {
		o.Wait = 5 * time.Minute
	}
	if o.IngressImage == "" {
		o.IngressImage = DefaultIngressImage
	}
	if o.BackendImage == "" {
		o.BackendImage = DefaultBackendImage
	}
	if !o.SkipBuild && o.Repo == "" {
		return errors.New("kind: building images needs the repository root (or --skip-build with prebuilt images)")
	}
	return nil
}

func (d Deps) connect(kubeconfig string) (*kubeapply.Client, *rest.Config, error) {
	if d.Connect != nil {
		return d.Connect(kubeconfig)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		return nil, nil, fmt.Errorf("kind: kubeconfig: %w", err)
	}
	c, err := kubeapply.New(cfg)
	return c, cfg, err
}

// Up creates (or reuses) the cluster and installs the ingress. Running it
// twice changes nothing: an existing cluster of the same shape is kept,
// images already on the nodes are not loaded again, the admin token is
// kept, and server-side apply of identical objects is a no-op.
func Up(ctx context.Context, d Deps, o UpOptions) error {
	if err := o.normalize(); err != nil {
		return err
	}
	say := func(format string, args ...any) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf(format, args...))
		}
	}
	raw, err := manifests.KindConfig(o.Topology)
	if err != nil {
		return err
	}
	want, err := manifests.ParseKindConfig(raw)
	if err != nil {
		return err
	}
	existing, err := d.Provider.List()
	if err != nil {
		return fmt.Errorf("kind: list clusters: %w", err)
	}
	if slices.Contains(existing, o.Name) {
		nodes, err := d.Provider.Nodes(o.Name)
		if err != nil {
			return fmt.Errorf("kind: nodes of %s: %w", o.Name, err)
		}
		if err := sameShape(nodes, want.Nodes); err != nil {
			return fmt.Errorf("kind: cluster %q exists with another topology (%v); run `prequalbench cluster down --name %s` first", o.Name, err, o.Name)
		}
		have, err := d.Provider.PortMappings(o.Name)
		if err != nil {
			return fmt.Errorf("kind: published ports of %s: %w", o.Name, err)
		}
		if err := CheckPorts(have, RequiredPorts(want, o.Observability)); err != nil {
			return fmt.Errorf("kind: cluster %q exists but %v, so the campaign could not reach the ingress; it was not made by `prequalbench cluster up`: run `prequalbench cluster down --name %s` first or pick another --name", o.Name, err, o.Name)
		}
		say("cluster %s exists (%s), keeping it", o.Name, o.Topology)
	} else {
		say("creating kind cluster %s (%s, %d nodes)", o.Name, o.Topology, len(want.Nodes))
		if err := d.Provider.Create(o.Name, raw, o.NodeImage, o.Wait); err != nil {
			return fmt.Errorf("kind: create cluster %s: %w", o.Name, err)
		}
	}
	nodes, err := d.Provider.Nodes(o.Name)
	if err != nil {
		return fmt.Errorf("kind: nodes of %s: %w", o.Name, err)
	}

	if !o.SkipBuild {
		for _, spec := range BuildSpecs(o.Repo, o.Revision, o.IngressImage, o.BackendImage) {
			say("building %s (docker build -f %s)", spec.Tag, spec.Dockerfile)
			if err := d.Builder.Build(ctx, spec); err != nil {
				return fmt.Errorf("kind: build %s: %w", spec.Tag, err)
			}
		}
	}
	ids := map[string]string{}
	for _, img := range []string{o.IngressImage, o.BackendImage} {
		id, err := d.Builder.ImageID(ctx, img)
		if err != nil {
			if !o.SkipBuild {
				return fmt.Errorf("kind: image %s: %w", img, err)
			}
			// A prebuilt image that is not local: the nodes pull it.
			say("image %s is not local; the nodes will pull it", img)
			continue
		}
		ids[img] = id
		say("loading %s into %d nodes", img, len(nodes))
		if err := d.Loader.Load(ctx, o.Name, img, nodes); err != nil {
			return fmt.Errorf("kind: load %s: %w", img, err)
		}
	}

	kubeconfig, err := d.Provider.KubeConfig(o.Name)
	if err != nil {
		return fmt.Errorf("kind: kubeconfig of %s: %w", o.Name, err)
	}
	c, _, err := d.connect(kubeconfig)
	if err != nil {
		return err
	}
	c.Progress = o.Progress
	waitCtx, cancel := context.WithTimeout(ctx, o.Wait)
	defer cancel()
	return Install(waitCtx, c, InstallOptions{
		Topology: o.Topology, Namespace: o.Namespace, IngressImage: o.IngressImage, IngressImageID: ids[o.IngressImage],
		BackendImage: o.BackendImage, BackendImageID: ids[o.BackendImage], Observability: o.Observability,
	})
}

// sameShape compares the roles of existing nodes with a config's.
func sameShape(have []Node, want []v1alpha4.Node) error {
	count := func(roles []string) map[string]int {
		m := map[string]int{}
		for _, r := range roles {
			m[r]++
		}
		return m
	}
	var h, w []string
	for _, n := range have {
		h = append(h, n.Role)
	}
	for _, n := range want {
		w = append(w, string(n.Role))
	}
	hc, wc := count(h), count(w)
	if hc["control-plane"] != wc["control-plane"] || hc["worker"] != wc["worker"] {
		return fmt.Errorf("has %d control-plane and %d workers, want %d and %d", hc["control-plane"], hc["worker"], wc["control-plane"], wc["worker"])
	}
	return nil
}

// InstallOptions are what Install puts into a cluster.
type InstallOptions struct {
	Topology manifests.Topology
	// Namespace of the workload (the ingress watches it); recorded in the
	// cluster info. Default manifests.WorkloadNamespace.
	Namespace      string
	IngressImage   string
	IngressImageID string
	BackendImage   string
	BackendImageID string
	Observability  bool
}

// Install applies the Gateway API (CRDs, GatewayClass), the ingress (and
// the observability stack), records the
// cluster info and waits for the rollouts. The admin token is generated
// once and kept across runs.
func Install(ctx context.Context, c *kubeapply.Client, o InstallOptions) error {
	token, err := AdminToken(ctx, c)
	if err != nil {
		return err
	}
	// The Gateway API's CRDs and the ingress's GatewayClass, before the
	// ingress, so it watches HTTPRoutes from its start.
	if err := deploy.GatewayAPI(ctx, c); err != nil {
		return err
	}
	objs, err := manifests.Ingress(manifests.IngressOptions{
		Topology: o.Topology, Image: o.IngressImage, ImageID: o.IngressImageID, AdminToken: token,
		WorkloadNamespace: o.Namespace,
	})
	if err != nil {
		return err
	}
	objs = append(objs, manifests.ClusterInfoObject(manifests.ClusterInfo{
		Topology: o.Topology, Namespace: o.Namespace, IngressImage: o.IngressImage, BackendImage: o.BackendImage,
		BackendID: o.BackendImageID, Observability: o.Observability,
	}))
	waitFor := []string{manifests.IngressName}
	if o.Observability {
		obs, err := manifests.Observability()
		if err != nil {
			return err
		}
		objs = append(objs, obs...)
		waitFor = append(waitFor, "prometheus", "grafana")
	}
	if err := c.Apply(ctx, objs); err != nil {
		return err
	}
	return c.WaitRollouts(ctx, manifests.SystemNamespace, waitFor...)
}

// AdminToken returns the token in the admin token Secret, or a new random
// one when there is no Secret yet.
func AdminToken(ctx context.Context, c *kubeapply.Client) (string, error) {
	s, err := c.Kube.CoreV1().Secrets(manifests.SystemNamespace).Get(ctx, manifests.AdminTokenSecret, metav1.GetOptions{})
	switch {
	case err == nil && len(s.Data[manifests.AdminTokenKey]) > 0:
		return string(s.Data[manifests.AdminTokenKey]), nil
	case err == nil || apierrors.IsNotFound(err):
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return "", fmt.Errorf("kind: admin token: %w", err)
		}
		return hex.EncodeToString(b), nil
	default:
		return "", fmt.Errorf("kind: read admin token: %w", err)
	}
}

// Down deletes the cluster; deleting a cluster that does not exist is not
// an error.
func Down(d Deps, name string) error {
	if name == "" {
		name = DefaultName
	}
	if err := d.Provider.Delete(name); err != nil {
		return fmt.Errorf("kind: delete cluster %s: %w", name, err)
	}
	return nil
}
