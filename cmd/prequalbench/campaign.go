package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/prequalbench/prequalbench/cluster/kind"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/prequalbench/prequalbench/campaign"
	"github.com/prequalbench/prequalbench/campaign/env"
	"github.com/prequalbench/prequalbench/campaign/env/local"
	"github.com/prequalbench/prequalbench/loadbalancer"
	"github.com/prequalbench/prequalbench/reports"
	"github.com/prequalbench/prequalbench/scenario"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func init() { subcommands = append(subcommands, newCampaignCommand) }

// campaignEnvs maps --env names to the code that builds that environment.
// Other environments (kind, kube) register here from their own file's
// init function.
var campaignEnvs = map[string]func(ctx context.Context, f *campaignRunFlags, out io.Writer) (campaign.EnvFactory, error){
	"local": localEnv,
}

// campaignRunFlags are the flags of `campaign run`.
type campaignRunFlags struct {
	scenario        string
	env             string
	algorithms      []string
	sweeps          []string
	reps            int
	seed            uint64
	out             string
	durationScale   float64
	resume          string
	force           bool
	backendBin      string
	ingressBin      string
	ingressReplicas int
	reset           string
	order           string
	noReport        bool
	prometheus      bool

	// kind and kube environments
	cluster     string
	kubeconfig  string
	kubeContext string
	namespace   string
	// images (kind and kube) and where the load goes (kube)
	ingressImage string
	backendImage string
	proxyURLs    []string
	serviceType  string
	// external env: its config file
	external string
	// kind and kube envs: in-cluster load generator Jobs; generatorsSet
	// when --generators was given (else the scenario's load.generators).
	generators    int
	generatorsSet bool
	generatorLead time.Duration
	// Generator placement: --generator-node-selector,
	// --generator-toleration, --generator-one-per-node.
	generatorNodeSelector map[string]string
	generatorTolerations  []string
	generatorOnePerNode   bool
	generatorAvoidBackend bool

	// A/B of two builds (local env): the baseline's binary or git ref,
	// and where ref builds are cached.
	baselineBin string
	baselineRef string
	buildCache  string
}

func newCampaignCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "campaign",
		Short: "Run benchmark campaigns and browse the scenario catalogue",
	}
	c.AddCommand(newCampaignRunCommand(), newCampaignListCommand(), newCampaignShowCommand(), newCampaignExportCommand())
	return c
}

func newCampaignRunCommand() *cobra.Command { return campaignRunCommand(&campaignRunFlags{}) }

// campaignRunCommand builds `campaign run` with its flags bound to f.
func campaignRunCommand(f *campaignRunFlags) *cobra.Command {
	c := &cobra.Command{
		Use:   "run",
		Short: "Run a scenario: interleaved, reset and warmed-up reps of every algorithm, then a report",
		Long: `Run a scenario from the catalogue (see "campaign list") or a YAML file.

Every rep runs every algorithm in an order drawn from --seed. Before each run
the ingress and the backends are reset and the reset is verified; a warmup is
discarded; the measured window's latency histogram, per-second series and
the ingress state before and after are written under
<out>/<UTC time>-<scenario>/. A failed run is recorded and the campaign goes
on. Ctrl-C (or kill -9) keeps every finished run; --resume DIR finishes the
campaign, running again what is missing, failed or unreadable. One process
at a time runs a campaign directory (a second --resume is refused), and a
resume on other binaries, revision or host needs --force. In the local env a
backend or ingress that dies fails its run and stops the campaign.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCampaign(cmd, f) },
	}
	fl := c.Flags()
	fl.StringVar(&f.scenario, "scenario", "quickstart", "catalogue name or path to a scenario YAML file")
	fl.StringVar(&f.env, "env", "local", "environment: "+strings.Join(envNames(), ", "))
	fl.StringSliceVar(&f.algorithms, "algorithms", nil, "algorithms to compare (overrides the scenario), e.g. prequal,round-robin or variants such as 'prequal{qrif=0.6,probes=2}'")
	fl.StringArrayVar(&f.sweeps, "sweep", nil, "run an algorithm parameter at several values beside the algorithms, "+scenario.SweepSyntax+"; repeatable, replaces the scenario's protocol.sweep")
	fl.IntVar(&f.reps, "reps", 0, "repetitions of every algorithm (overrides the scenario)")
	fl.Uint64Var(&f.seed, "seed", 0, "seed of the plan's order and of the load (overrides the scenario)")
	fl.StringVar(&f.out, "out", "results", "directory that receives the campaign directory")
	fl.Float64Var(&f.durationScale, "duration-scale", 1, "multiply every duration (phases, warmup, cooldown) by this, for a quick look")
	fl.StringVar(&f.resume, "resume", "", "finish the interrupted campaign in this directory: runs that are missing, failed or unreadable are run (again)")
	fl.BoolVar(&f.force, "force", false, "with --resume: go on although the binaries, git revision or host differ from the campaign's (campaign.json records both)")
	fl.StringVar(&f.backendBin, "backend-bin", "", "prequal-backend binary (default: backend/target/release/prequal-backend, built with cargo when missing)")
	fl.StringVar(&f.ingressBin, "ingress-bin", "", "prequalbench binary to run as the ingress (default: this executable)")
	fl.IntVar(&f.ingressReplicas, "ingress-replicas", 0, "ingress replicas (overrides the scenario)")
	fl.StringVar(&f.reset, "reset", "", "reset between runs: admin or restart (overrides the scenario)")
	fl.StringVar(&f.order, "order", "", "run order: shuffle, rotate or sequential (overrides the scenario)")
	fl.BoolVar(&f.noReport, "no-report", false, "do not build REPORT.md at the end")
	fl.BoolVar(&f.prometheus, "prometheus", false, "local env: run a Prometheus scraping the ingress replicas; its data stays in <campaign>/prometheus")
	fl.StringVar(&f.cluster, "cluster", "", "kind env: cluster name (default "+kind.DefaultName+")")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kube env: kubeconfig path (default $KUBECONFIG, ~/.kube/config, in-cluster)")
	fl.StringVar(&f.kubeContext, "context", "", "kube env: kubeconfig context")
	fl.StringVarP(&f.namespace, "namespace", "n", "", "kind and kube envs: namespace of the workload (default: the one 'prequalbench cluster up -n' recorded, else prequalbench)")
	fl.StringVar(&f.ingressImage, "ingress-image", "", "kind and kube envs: ingress image in the rendered Deployment (default: the one 'cluster up' recorded, else "+kind.DefaultIngressImage+")")
	fl.StringVar(&f.backendImage, "backend-image", "", "kind and kube envs: backend image in the rendered Deployments (default: the one 'cluster up' recorded, else "+kind.DefaultBackendImage+")")
	fl.StringSliceVar(&f.proxyURLs, "proxy-url", nil, "kube env: the ingress's address for the load, http://HOST:PORT (default: the LoadBalancer address, else the proxy NodePort on the ingress pods' nodes); admin calls and resets use port-forwarding")
	fl.StringVar(&f.serviceType, "service-type", "NodePort", "kube env: NodePort, or LoadBalancer to also publish the proxy port through a LoadBalancer Service")
	fl.StringVar(&f.external, "external", "", "external env: config file naming the ingress URL(s), the setAlgorithm and reset hooks and the backends (see examples/external/)")
	fl.IntVar(&f.generators, "generators", 0, "kind and kube envs: send the load from this many generator Jobs inside the cluster to the ingress Service, merged exactly; 0: from this machine through the published NodePort, LoadBalancer or --proxy-url (default: the scenario's load.generators, else 1 on kind and 0 on kube)")
	fl.StringToStringVar(&f.generatorNodeSelector, "generator-node-selector", nil, "kind and kube envs: run the generator Jobs only on nodes with these labels (KEY=VALUE,...)")
	fl.StringArrayVar(&f.generatorTolerations, "generator-toleration", nil, "kind and kube envs: let the generator Jobs onto nodes with this taint: KEY[=VALUE][:EFFECT], or * for every taint (repeatable)")
	fl.BoolVar(&f.generatorOnePerNode, "generator-one-per-node", false, "kind and kube envs: require each generator on a node of its own (required pod anti-affinity) instead of preferring it; surplus generators stay Pending and fail the run")
	fl.BoolVar(&f.generatorAvoidBackend, "generator-avoid-backends", false, "kind and kube envs: keep the generator Jobs off the nodes running backend pods (required pod anti-affinity)")
	fl.StringVar(&f.baselineBin, "baseline-bin", "", "A/B (local env): run the algorithm on this prequalbench binary too, interleaved with this build (or --ingress-bin) run by run; the report says which build is faster (docs/ab.md)")
	fl.StringVar(&f.baselineRef, "baseline-ref", "", "A/B (local env): like --baseline-bin, with the binary built from this git ref of the source tree (once per commit, cached)")
	fl.StringVar(&f.buildCache, "build-cache", "", "with --baseline-ref: directory of the builds by commit (default: the user cache directory's prequalbench/builds)")
	fl.DurationVar(&f.generatorLead, "generator-lead", 0, "kind and kube envs: time from creating the generator Jobs to their common start, for scheduling and image pulls (default 30s)")
	return c
}

func envNames() []string {
	names := make([]string, 0, len(campaignEnvs))
	for n := range campaignEnvs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func badInput(err error) error { return &exitError{code: 2, err: err} }

// lookupScaled resolves a scenario by name or file and applies
// --duration-scale to it.
func lookupScaled(name string, scale float64) (*scenario.Scenario, error) {
	s, err := scenario.Lookup(name)
	if err != nil {
		return nil, badInput(err)
	}
	if scale != 1 {
		if !(scale > 0 && scale <= 100) {
			return nil, badInput(errors.New("--duration-scale: want a factor in (0, 100]"))
		}
		s.Scale(scale)
	}
	return s, nil
}

// resolveScenario loads the scenario and applies the flags' overrides.
func resolveScenario(cmd *cobra.Command, f *campaignRunFlags) (*scenario.Scenario, error) {
	s, err := scenario.Lookup(f.scenario)
	if err != nil {
		return nil, badInput(err)
	}
	p := &s.Protocol
	if cmd.Flags().Changed("algorithms") {
		p.Algorithms = nil
		for _, a := range scenario.JoinAlgorithmArgs(f.algorithms) {
			c, err := loadbalancer.Canonical(a)
			if err != nil {
				return nil, badInput(fmt.Errorf("--algorithms: %w", err))
			}
			p.Algorithms = append(p.Algorithms, c)
		}
		if len(p.Algorithms) == 0 {
			return nil, badInput(fmt.Errorf("--algorithms: empty, want one or more of %s", strings.Join(loadbalancer.Names(), ", ")))
		}
		// The reference stays prequal when compared, else the first.
		p.Reference = p.Algorithms[0]
		for _, a := range p.Algorithms {
			if a == loadbalancer.NamePrequal {
				p.Reference = a
			}
		}
		p.ExpandSweeps() // the scenario's sweep still runs beside them
	}
	if cmd.Flags().Changed("sweep") {
		// Checked here, before anything runs, so the error names the flag.
		for _, sp := range f.sweeps {
			if _, err := scenario.ParseSweep(sp); err != nil {
				return nil, badInput(fmt.Errorf("--sweep %s: %s", sp, strings.TrimPrefix(err.Error(), "loadbalancer: ")))
			}
		}
		p.SetSweeps(f.sweeps)
	}
	if cmd.Flags().Changed("reps") {
		p.Reps = f.reps
	}
	if cmd.Flags().Changed("seed") {
		p.Seed = f.seed
	}
	if f.reset != "" {
		p.Reset = f.reset
	}
	if f.order != "" {
		p.Order = f.order
	}
	if cmd.Flags().Changed("ingress-replicas") {
		s.Ingress.Replicas = f.ingressReplicas
	}
	if cmd.Flags().Changed("duration-scale") {
		if !(f.durationScale > 0 && f.durationScale <= 100) {
			return nil, badInput(fmt.Errorf("--duration-scale: got %v, want a factor in (0, 100]", f.durationScale))
		}
		s.Scale(f.durationScale)
	}
	if errs := s.Validate(); len(errs) > 0 {
		return nil, badInput(fmt.Errorf("after the command-line overrides: %w", errs))
	}
	return s, nil
}

func runCampaign(cmd *cobra.Command, f *campaignRunFlags) error {
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	mkEnv, ok := campaignEnvs[f.env]
	if !ok {
		return badInput(fmt.Errorf("--env: got %q, allowed: %s", f.env, strings.Join(envNames(), ", ")))
	}
	opts := campaign.Options{OutDir: f.out, Warn: cmd.ErrOrStderr()}
	f.generatorsSet = cmd.Flags().Changed("generators")
	if cluster := f.env == "kind" || f.env == "kube"; !cluster {
		for _, name := range []string{"generators", "generator-lead", "generator-node-selector", "generator-toleration", "generator-one-per-node", "generator-avoid-backends"} {
			if cmd.Flags().Changed(name) {
				return badInput(fmt.Errorf("--%s: only with --env kind or kube (the %s environment sends the load from this machine)", name, f.env))
			}
		}
	}
	if err := checkABFlags(cmd, f); err != nil {
		return err
	}
	if f.resume != "" {
		for _, name := range []string{"scenario", "algorithms", "sweep", "reps", "seed", "duration-scale", "ingress-replicas", "reset", "order"} {
			if cmd.Flags().Changed(name) {
				return badInput(fmt.Errorf("--resume finishes a campaign with its recorded scenario; drop --%s", name))
			}
		}
		opts.ResumeDir = f.resume
		opts.Force = f.force
	} else {
		if f.force {
			return badInput(errors.New("--force: only with --resume"))
		}
		s, err := resolveScenario(cmd, f)
		if err != nil {
			return err
		}
		if f.env != "sim" {
			if err := s.RealEnvError(f.env); err != nil {
				return badInput(err)
			}
		}
		if f.env == "sim" && s.Churn != nil {
			// Said before a campaign directory is made (the runner refuses too).
			return badInput(fmt.Errorf("scenario %s: the churn block scales backend processes or Deployments; --env sim cannot, run it with --env local, kind or kube", s.Name))
		}
		if f.abRequested() {
			if err := abScenario(cmd, s, cmd.ErrOrStderr()); err != nil {
				return err
			}
			if opts.Builds, err = abBuilds(ctx, f, cmd.ErrOrStderr()); err != nil {
				return err
			}
			if err := checkBuilds(ctx, opts.Builds, s); err != nil {
				return err
			}
		}
		opts.Scenario = s
		if f.generatorsSet && (f.env == "kind" || f.env == "kube") {
			if err := s.Load.CheckGenerators(f.generators); err != nil {
				return badInput(fmt.Errorf("--generators: %w", err))
			}
		}
		if g := s.Load.Generators; g != nil && *g > 0 && f.env != "kind" && f.env != "kube" {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: scenario %s: load.generators (%d) applies to --env kind and kube; the %s environment sends the load from this machine\n", s.Name, *g, f.env)
		}
		// Said before hours of runs, not after: reps too few for any verdict.
		if w := scenario.RepsShortfall(s.Protocol); w != "" && !f.abRequested() {
			fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
		}
	}
	if f.prometheus && f.env != "local" {
		return badInput(fmt.Errorf("--prometheus: only with --env local (on kind use `cluster up --observability`)"))
	}
	factory, err := mkEnv(ctx, f, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	if f.prometheus {
		factory = withLocalPrometheus(ctx, factory, cmd.ErrOrStderr())
	}
	opts.Env = factory
	opts.Progress = campaign.NewProgress(out, isTerminal(out))

	res, runErr := campaign.Run(ctx, opts)
	if res == nil {
		return runErr
	}
	if len(res.Runs) > 0 {
		fmt.Fprintln(out)
		if err := campaign.WriteSummary(out, campaign.Summarize(res.Campaign.Algorithms, res.Runs)); err != nil {
			return err
		}
	}
	if runErr != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "interrupted: finished runs are kept in %s; finish with:\n  prequalbench campaign run --resume %s\n", res.Dir, res.Dir)
		}
		return runErr
	}
	fmt.Fprintf(out, "\nartifacts: %s\n", res.Dir)
	if !f.noReport {
		if err := reports.Build(res.Dir, reports.Options{}); err != nil {
			return fmt.Errorf("report: %w", err)
		}
		fmt.Fprintf(out, "report:    %s\n", filepath.Join(res.Dir, "REPORT.md"))
		// The report's conclusion, so a terminal run ends with its verdict.
		a, err := reports.Analyze(res.Dir, reports.Options{})
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		fmt.Fprintf(out, "\nverdict on %s:\n", a.Campaign.PrimaryMetric)
		for _, v := range reports.Verdicts(a) {
			fmt.Fprintf(out, "  %s\n", v)
		}
	}
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// localEnv builds the local environment: it finds or builds the backend
// and uses this executable as the ingress.
func localEnv(ctx context.Context, f *campaignRunFlags, msg io.Writer) (campaign.EnvFactory, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	repo, repoErr := local.FindRepo(cwd)
	if repoErr != nil && f.backendBin == "" {
		if p := os.Getenv("PREQUALBENCH_BACKEND_BIN"); p != "" {
			f.backendBin = p
		} else {
			return nil, badInput(repoErr)
		}
	}
	backendBin, err := local.BackendBinary(ctx, repo, f.backendBin, func(s string) { fmt.Fprintln(msg, s) })
	if err != nil {
		return nil, err
	}
	ingressBin := f.ingressBin
	if ingressBin == "" {
		if ingressBin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("--ingress-bin: cannot find this executable: %w", err)
		}
	}
	return func(dir string, s *scenario.Scenario, seed uint64) (env.Environment, error) {
		return local.New(local.Options{
			Scenario:   s,
			BackendBin: backendBin,
			IngressBin: ingressBin,
			LogDir:     filepath.Join(dir, "logs"),
			TempDir:    filepath.Join(dir, "tmp"),
			RepoDir:    repo,
			Seed:       seed,
		})
	}, nil
}

func newCampaignListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the scenario catalogue",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t := tablewriter.NewTable(cmd.OutOrStdout(), tablewriter.WithHeaderAutoFormat(tw.Off))
			t.Header("scenario", "runs", "time", "load", "ingress", "description")
			for _, name := range scenario.Names() {
				s, err := scenario.Catalogue(name)
				if err != nil {
					return err
				}
				p := s.Protocol
				runs := len(p.Algorithms) * p.Reps
				perRun := p.Warmup.Std() + s.Load.MeasuredDuration() + p.Cooldown.Std()
				if err := t.Append(name, fmt.Sprintf("%d x %d", len(p.Algorithms), p.Reps),
					(time.Duration(runs) * perRun).Round(time.Second).String(), loadSummary(s.Load),
					s.Ingress.Replicas, firstSentence(s.Description)); err != nil {
					return err
				}
			}
			return t.Render()
		},
	}
}

// loadSummary describes a load in a few words.
func loadSummary(l scenario.Load) string {
	if len(l.Open) == 0 {
		return fmt.Sprintf("%d users, %s", l.Users, l.Duration)
	}
	var parts []string
	for _, p := range l.Open {
		switch p.Kind {
		case scenario.PhaseConstant:
			parts = append(parts, fmt.Sprintf("%g rps %s", p.Rate, p.Duration))
		case scenario.PhaseRamp:
			parts = append(parts, fmt.Sprintf("%g→%g rps %s", p.From, p.To, p.Duration))
		case scenario.PhaseSteps:
			parts = append(parts, fmt.Sprintf("%g→%g rps in %d steps %s", p.From, p.To, p.Steps, p.Duration))
		case scenario.PhaseBurst:
			parts = append(parts, fmt.Sprintf("%g↔%g rps %s", p.High, p.Low, p.Duration))
		}
	}
	return strings.Join(parts, ", ")
}

// firstSentence shortens a description for the list.
func firstSentence(s string) string {
	if i := strings.Index(s, ": "); i > 0 && i < 100 {
		s = s[:i]
	} else if i := strings.Index(s, ". "); i > 0 {
		s = s[:i]
	}
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

func newCampaignShowCommand() *cobra.Command {
	var scale float64
	c := &cobra.Command{
		Use:   "show NAME|FILE",
		Short: "Print a scenario as resolved YAML (defaults filled in)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := lookupScaled(args[0], scale)
			if err != nil {
				return err
			}
			b, err := scenario.Marshal(s)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	c.Flags().Float64Var(&scale, "duration-scale", 1, "multiply every duration by this")
	return c
}
