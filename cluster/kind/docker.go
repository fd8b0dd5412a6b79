package kind

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/defaults"
	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
)

// RealDeps are the Docker and kind library implementations; kind's own
// log goes to stderr at its normal verbosity.
func RealDeps() Deps {
	p := &provider{
		p:   cluster.NewProvider(cluster.ProviderWithDocker(), cluster.ProviderWithLogger(&Logger{W: os.Stderr})),
		log: os.Stderr,
	}
	return Deps{Provider: p, Builder: dockerCLI{}, Loader: &nodeLoader{p: p, docker: dockerCLI{}}}
}

// provider adapts the kind library's Provider.
type provider struct {
	p *cluster.Provider
	// log receives docker pull's progress for the node image.
	log io.Writer
}

var _ ClusterProvider = (*provider)(nil)

// NodeImage is the node image a create uses: the flag's, else the kind
// library's default.
func NodeImage(flag string) string {
	if flag != "" {
		return flag
	}
	return defaults.Image
}

// PullIfMissing pulls image with docker's own progress on w unless it is
// already local. kind pulls the node image (about 1 GB) silently; pulling
// it first shows the progress, and kind then finds it present.
func PullIfMissing(ctx context.Context, image string, w io.Writer) error {
	if exec.CommandContext(ctx, "docker", "image", "inspect", image).Run() == nil {
		return nil
	}
	fmt.Fprintf(w, "cluster: pulling node image %s (about 1 GB the first time)\n", image)
	cmd := exec.CommandContext(ctx, "docker", "pull", image)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("docker pull %s: %w", image, err)
	}
	return nil
}

func (p *provider) Create(name string, config []byte, nodeImage string, wait time.Duration) error {
	if p.log != nil {
		if err := PullIfMissing(context.Background(), NodeImage(nodeImage), p.log); err != nil {
			return err
		}
	}
	opts := []cluster.CreateOption{
		cluster.CreateWithRawConfig(config),
		cluster.CreateWithDisplayUsage(false),
		cluster.CreateWithDisplaySalutation(false),
	}
	if nodeImage != "" {
		opts = append(opts, cluster.CreateWithNodeImage(nodeImage))
	}
	if wait > 0 {
		opts = append(opts, cluster.CreateWithWaitForReady(wait))
	}
	return p.p.Create(name, opts...)
}

func (p *provider) Delete(name string) error               { return p.p.Delete(name, "") }
func (p *provider) List() ([]string, error)                { return p.p.List() }
func (p *provider) KubeConfig(name string) (string, error) { return p.p.KubeConfig(name, false) }

func (p *provider) Nodes(name string) ([]Node, error) {
	ns, err := p.internal(name)
	if err != nil {
		return nil, err
	}
	out := make([]Node, 0, len(ns))
	for _, n := range ns {
		role, err := n.Role()
		if err != nil {
			return nil, err
		}
		out = append(out, Node{Name: n.String(), Role: role})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// PortMappings inspects the control-plane node container's port bindings.
func (p *provider) PortMappings(name string) ([]PortMapping, error) {
	ns, err := p.Nodes(name)
	if err != nil {
		return nil, err
	}
	var out []PortMapping
	for _, n := range ns {
		if n.Role != "control-plane" {
			continue
		}
		raw, err := exec.Command("docker", "inspect", "-f", "{{json .HostConfig.PortBindings}}", n.Name).Output()
		if err != nil {
			return nil, fmt.Errorf("docker inspect %s: %w", n.Name, err)
		}
		m, err := ParsePortBindings(raw)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		out = append(out, m...)
	}
	return out, nil
}

func (p *provider) internal(name string) ([]nodes.Node, error) {
	return p.p.ListInternalNodes(name)
}

// dockerCLI runs the docker command line.
type dockerCLI struct{}

var _ ImageBuilder = dockerCLI{}

// BuildArgs is the docker command line of a build, sorted build args.
func BuildArgs(s BuildSpec) []string {
	args := []string{"build", "-f", s.Dockerfile, "-t", s.Tag}
	keys := make([]string, 0, len(s.BuildArgs))
	for k := range s.BuildArgs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--build-arg", k+"="+s.BuildArgs[k])
	}
	return append(args, s.Context)
}

// BuildEnv is added to docker build's environment. BuildKit attaches a
// provenance attestation by default, which makes the image an index whose
// digest changes on every build and rolls every pod on every `cluster up`.
// The variable is buildx's equivalent of --provenance=false; unlike the
// flag, the legacy builder (no buildx plugin) ignores it instead of failing.
var BuildEnv = []string{"BUILDX_NO_DEFAULT_ATTESTATIONS=1"}

func (dockerCLI) Build(ctx context.Context, s BuildSpec) error {
	cmd := exec.CommandContext(ctx, "docker", BuildArgs(s)...)
	cmd.Env = append(os.Environ(), BuildEnv...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("docker %s: %w", strings.Join(BuildArgs(s), " "), err)
	}
	return nil
}

func (dockerCLI) ImageID(ctx context.Context, image string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "-f", "{{.Id}}", image).Output()
	if err != nil {
		return "", fmt.Errorf("docker image inspect %s: %w", image, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// SaveArgs is the docker command line that exports image for the nodes'
// platform. Under Docker's containerd store a pulled multi-platform image
// is saved as its whole index, and `ctr images import --all-platforms` on
// the node then fails on the platforms that were never pulled ("content
// digest not found"); --platform (Docker 27.2+) saves only the nodes' one.
func SaveArgs(image, dest, platform string) []string {
	args := []string{"save", "-o", dest}
	if platform != "" {
		args = append(args, "--platform", platform)
	}
	return append(args, image)
}

// save exports image for the daemon's own platform (the kind nodes run on
// it), and without --platform on a Docker too old to know the flag.
func (dockerCLI) save(ctx context.Context, image, dest string) error {
	run := func(platform string) (string, error) {
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, "docker", SaveArgs(image, dest, platform)...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		return stderr.String(), err
	}
	platform := ""
	if out, err := exec.CommandContext(ctx, "docker", "version", "-f", "{{.Server.Os}}/{{.Server.Arch}}").Output(); err == nil {
		platform = strings.TrimSpace(string(out))
	}
	stderr, err := run(platform)
	if err != nil && platform != "" && strings.Contains(stderr, "unknown flag: --platform") {
		stderr, err = run("")
	}
	if err != nil {
		return fmt.Errorf("docker save %s: %w: %s", image, err, stderr)
	}
	return nil
}

// nodeHasImage asks the node's containerd through ctr and crictl (see
// NodeHasImage); a failing listing counts as absent, so the image is loaded.
func nodeHasImage(n nodes.Node, image, localID string) bool {
	var ctr, crictl bytes.Buffer
	_ = n.Command("ctr", "--namespace=k8s.io", "images", "list").SetStdout(&ctr).Run()
	_ = n.Command("crictl", "images", "--no-trunc").SetStdout(&crictl).Run()
	return NodeHasImage(image, localID, ctr.String(), crictl.String())
}

// nodeLoader repeats `kind load docker-image`: skip nodes that already
// list the image with the local ID (in either Docker store's terms),
// docker save once, import the archive into each other node with the kind
// library's node utilities.
type nodeLoader struct {
	p      *provider
	docker dockerCLI
}

var _ ImageLoader = (*nodeLoader)(nil)

func (l *nodeLoader) Load(ctx context.Context, clusterName, image string, want []Node) error {
	id, err := l.docker.ImageID(ctx, image)
	if err != nil {
		return err
	}
	all, err := l.p.internal(clusterName)
	if err != nil {
		return err
	}
	wanted := map[string]bool{}
	for _, n := range want {
		wanted[n.Name] = true
	}
	var todo []nodes.Node
	for _, n := range all {
		if !wanted[n.String()] {
			continue
		}
		if nodeHasImage(n, image, id) {
			continue
		}
		todo = append(todo, n)
	}
	if len(todo) == 0 {
		return nil
	}
	dir, err := os.MkdirTemp("", "prequalbench-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tar := filepath.Join(dir, "image.tar")
	if err := l.docker.save(ctx, image, tar); err != nil {
		return err
	}
	for _, n := range todo {
		f, err := os.Open(tar)
		if err != nil {
			return err
		}
		err = nodeutils.LoadImageArchive(n, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("load %s into node %s: %w", image, n, err)
		}
	}
	return nil
}
