package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/prequalbench/prequalbench/campaign"
	"github.com/prequalbench/prequalbench/campaign/env"
	kindenv "github.com/prequalbench/prequalbench/campaign/env/kind"
	"github.com/prequalbench/prequalbench/campaign/env/kube"
	"github.com/prequalbench/prequalbench/campaign/env/local"
	"github.com/prequalbench/prequalbench/cluster/kind"
	"github.com/prequalbench/prequalbench/ingress/kubesource"
	"github.com/prequalbench/prequalbench/internal/buildinfo"
	"github.com/prequalbench/prequalbench/manifests"
	"github.com/prequalbench/prequalbench/scenario"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newClusterCommand) }

func newClusterCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Create, inspect and delete the kind clusters of the E-A and E-B topologies",
		Long: `cluster manages a kind cluster (Docker needed) for the kind environment:
  E-A  one node holding the ingress and the backends
  E-B  a control-plane node holding the ingress and three workers for the backends
The ingress's proxy and admin ports are published on 127.0.0.1:31080 and
127.0.0.1:31081, so no kubectl port-forward is needed.`,
	}
	cmd.AddCommand(newClusterUpCommand(), newClusterDownCommand(), newClusterStatusCommand())
	return cmd
}

type clusterUpFlags struct {
	name, topology, nodeImage  string
	namespace                  string
	wait                       time.Duration
	skipBuild                  bool
	ingressImage, backendImage string
	observability              bool
}

func newClusterUpCommand() *cobra.Command {
	var f clusterUpFlags
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Create the cluster, build and load the images, install the ingress and wait until it is ready",
		Long: `up creates a kind cluster of the chosen topology (or keeps an existing one of
the same shape), builds the ingress and backend images with docker build,
loads them into every node, installs the ingress (namespace, RBAC,
IngressClass prequal, Deployment, NodePort Service) and waits until it is
ready. Running it again changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			topo, err := manifests.ParseTopology(f.topology)
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--topology: %w", err)}
			}
			opts := kind.UpOptions{
				Name: f.name, Topology: topo, NodeImage: f.nodeImage, Namespace: f.namespace, Wait: f.wait,
				SkipBuild: f.skipBuild, IngressImage: f.ingressImage, BackendImage: f.backendImage,
				Observability: f.observability, Revision: buildinfo.Read().Revision,
				Progress: func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), "cluster:", s) },
			}
			if err := kind.CheckEngine(cmd.Context()); err != nil {
				return err
			}
			if !f.skipBuild {
				wd, _ := os.Getwd()
				repo, err := local.FindRepo(wd)
				if err != nil {
					return &exitError{code: 2, err: fmt.Errorf("cluster up builds the ingress and backend images from the source tree, and %s is not inside one "+
						"(no go.mod of %s above it): run it from a checkout of the repository, or pass --skip-build with "+
						"--ingress-image and --backend-image naming images docker already has", wd, local.ModulePath)}
				}
				opts.Repo = repo
			}
			if err := kind.Up(cmd.Context(), kind.RealDeps(), opts); err != nil {
				return err
			}
			st, err := kind.Status(cmd.Context(), kind.RealDeps(), f.name)
			if err != nil {
				return err
			}
			printStatus(cmd, st)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", kind.DefaultName, "kind cluster name")
	fl.StringVar(&f.topology, "topology", "e-a", "e-a (one node) or e-b (control-plane + 3 workers)")
	fl.StringVar(&f.nodeImage, "node-image", "", "kind node image (default: the kind library's)")
	fl.StringVarP(&f.namespace, "namespace", "n", manifests.WorkloadNamespace, "namespace of the workload; recorded in the cluster, so campaign run --env kind uses it")
	fl.DurationVar(&f.wait, "wait", 5*time.Minute, "how long to wait for the control plane and for the ingress")
	fl.BoolVar(&f.skipBuild, "skip-build", false, "do not build images; use --ingress-image and --backend-image as they are")
	fl.StringVar(&f.ingressImage, "ingress-image", kind.DefaultIngressImage, "ingress image (built unless --skip-build)")
	fl.StringVar(&f.backendImage, "backend-image", kind.DefaultBackendImage, "backend image (built unless --skip-build)")
	fl.BoolVar(&f.observability, "observability", false, "also install Prometheus (127.0.0.1:31090) and Grafana (127.0.0.1:31300) with the dashboards")
	return cmd
}

func newClusterDownCommand() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Delete the kind cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := kind.CheckEngine(cmd.Context()); err != nil {
				return err
			}
			if err := kind.Down(kind.RealDeps(), name); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cluster %s deleted\n", name)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", kind.DefaultName, "kind cluster name")
	return cmd
}

func newClusterStatusCommand() *cobra.Command {
	var name, output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the cluster's nodes, the ingress pods and readiness, and the published URLs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" && output != "text" {
				return &exitError{code: 2, err: fmt.Errorf("-o %q: want text or json", output)}
			}
			if err := kind.CheckEngine(cmd.Context()); err != nil {
				return err
			}
			st, err := kind.Status(cmd.Context(), kind.RealDeps(), name)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			printStatus(cmd, st)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", kind.DefaultName, "kind cluster name")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func printStatus(cmd *cobra.Command, st kind.ClusterStatus) {
	w := cmd.OutOrStdout()
	if !st.Exists {
		fmt.Fprintf(w, "cluster %s: does not exist (run: prequalbench cluster up --name %s)\n", st.Name, st.Name)
		return
	}
	fmt.Fprintf(w, "cluster %s (%s), workload namespace %s\n", st.Name, orDash(string(st.Topology)), orDash(st.Namespace))
	for _, n := range st.Nodes {
		fmt.Fprintf(w, "  node %-32s %s\n", n.Name, n.Role)
	}
	ready := "not ready"
	if st.IngressReady {
		ready = "ready"
	}
	fmt.Fprintf(w, "ingress: %s (%s), image %s\n", ready, st.IngressDetail, orDash(st.IngressImage))
	for _, p := range st.Pods {
		fmt.Fprintf(w, "  pod %s on %s: %s, ready=%v\n", p.Name, orDash(p.Node), p.Phase, p.Ready)
	}
	var urls []string
	for _, u := range [][2]string{{"proxy", st.ProxyURL}, {"admin", st.AdminURL}, {"prometheus", st.PrometheusURL}, {"grafana", st.GrafanaURL}} {
		if u[1] != "" {
			urls = append(urls, fmt.Sprintf("  %-10s %s", u[0], u[1]))
		}
	}
	if len(urls) > 0 {
		fmt.Fprintln(w, "urls:")
		fmt.Fprintln(w, strings.Join(urls, "\n"))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// The kind and kube campaign environments, chosen with `campaign run
// --env kind [--cluster]` and `--env kube [--kubeconfig] [--context] [-n]`.
func init() {
	campaignEnvs["kind"] = func(ctx context.Context, f *campaignRunFlags, msg io.Writer) (campaign.EnvFactory, error) {
		if len(f.proxyURLs) > 0 || f.serviceType != "NodePort" {
			return nil, badInput(fmt.Errorf("--proxy-url and --service-type are for --env kube; kind publishes the proxy on 127.0.0.1:%d", manifests.ProxyNodePort))
		}
		repo, _ := os.Getwd()
		if r, err := local.FindRepo(repo); err == nil {
			repo = r
		}
		return func(dir string, s *scenario.Scenario, seed uint64) (env.Environment, error) {
			return kindenv.New(ctx, kindenv.Options{
				Cluster: f.cluster, Namespace: f.namespace, Scenario: s, RepoDir: repo,
				IngressImage: f.ingressImage, BackendImage: f.backendImage,
				Progress: func(l string) { fmt.Fprintln(msg, "kind:", l) },
			})
		}, nil
	}
	campaignEnvs["kube"] = func(ctx context.Context, f *campaignRunFlags, msg io.Writer) (campaign.EnvFactory, error) {
		cfg, err := kubesource.RESTConfig(f.kubeconfig, f.kubeContext)
		if err != nil {
			return nil, badInput(err)
		}
		proxyURLs, err := kube.ParseProxyURLs(f.proxyURLs)
		if err != nil {
			return nil, badInput(err)
		}
		var loadBalancer bool
		switch f.serviceType {
		case "NodePort":
		case "LoadBalancer":
			loadBalancer = true
		default:
			return nil, badInput(fmt.Errorf("--service-type %q: want NodePort or LoadBalancer", f.serviceType))
		}
		repo, _ := os.Getwd()
		if r, err := local.FindRepo(repo); err == nil {
			repo = r
		}
		return func(dir string, s *scenario.Scenario, seed uint64) (env.Environment, error) {
			return kube.ForCluster(ctx, kube.ClusterOptions{
				Config: cfg, Scenario: s, Name: "kube", Namespace: f.namespace, RepoDir: repo,
				IngressImage: f.ingressImage, BackendImage: f.backendImage,
				ProxyURLs: proxyURLs, LoadBalancer: loadBalancer,
				Progress: func(l string) { fmt.Fprintln(msg, "kube:", l) },
			})
		}, nil
	}
}
