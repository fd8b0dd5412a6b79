package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env/local"
	"github.com/prequalbench/prequalbench/internal/buildinfo"
	"github.com/prequalbench/prequalbench/scenario"
	"github.com/prequalbench/prequalbench/stats"
	"github.com/spf13/cobra"
)

// abRequested says whether `campaign run` was asked for an A/B of two
// builds.
func (f *campaignRunFlags) abRequested() bool { return f.baselineBin != "" || f.baselineRef != "" }

// checkABFlags refuses an A/B where it cannot run: only the local
// environment starts the ingress from a binary this command can choose.
func checkABFlags(cmd *cobra.Command, f *campaignRunFlags) error {
	if !f.abRequested() {
		return nil
	}
	switch {
	case f.baselineBin != "" && f.baselineRef != "":
		return badInput(errors.New("--baseline-bin and --baseline-ref: give one baseline, a binary or a git ref"))
	case f.resume != "":
		return badInput(errors.New("--baseline-bin/--baseline-ref: --resume runs the builds the campaign recorded; drop the flag"))
	case f.env == "sim":
		return badInput(errors.New("--baseline-bin/--baseline-ref: the simulator runs no binaries, so it has no builds to compare; use --env local"))
	case f.env != "local":
		return badInput(fmt.Errorf("--baseline-bin/--baseline-ref: an A/B of two builds runs with --env local only (both builds' ingress processes on this host, switched run by run); --env %s runs one deployed ingress", f.env))
	case cmd.Flags().Changed("sweep"):
		return badInput(errors.New("--sweep: an A/B runs one algorithm on two builds; drop --sweep"))
	}
	return nil
}

// abScenario narrows the scenario to the one algorithm an A/B runs: the
// one --algorithms named, else the scenario's reference.
func abScenario(cmd *cobra.Command, s *scenario.Scenario, warn io.Writer) error {
	p := &s.Protocol
	if cmd.Flags().Changed("algorithms") && len(p.Algorithms) != 1 {
		return badInput(fmt.Errorf("--algorithms: an A/B runs one algorithm on two builds, got %d (%s)", len(p.Algorithms), strings.Join(p.Algorithms, ", ")))
	}
	policy := p.Reference
	if len(p.Algorithms) == 1 {
		policy = p.Algorithms[0]
	}
	p.Algorithms, p.Reference, p.Sweep = []string{policy}, policy, nil
	if errs := s.Validate(); len(errs) > 0 {
		return badInput(fmt.Errorf("A/B of %s: %w", policy, errs))
	}
	if need := stats.RunsPerSide(1, 0.05); p.Reps < need {
		fmt.Fprintf(warn, "warning: %d reps per build cannot reach p < 0.05 (the A/B needs at least %d); see docs/ab.md for the reps a given change needs\n", p.Reps, need)
	}
	return nil
}

// abBuilds resolves the two builds: the baseline from --baseline-bin or
// --baseline-ref (built once per commit), the candidate from --ingress-bin
// or this executable. Each is named by its short commit; when both name
// the same commit (an A/A) the names say which is which.
func abBuilds(ctx context.Context, f *campaignRunFlags, msg io.Writer) ([]artifacts.Build, error) {
	cand := artifacts.Build{Role: artifacts.BuildCandidate, IngressBin: f.ingressBin}
	if cand.IngressBin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("--ingress-bin: cannot find this executable: %w", err)
		}
		cand.IngressBin, cand.Revision = exe, revisionOf(buildinfo.Read())
	} else if cand.Revision = binaryRevision(ctx, cand.IngressBin); cand.Revision == "" && !exists(cand.IngressBin) {
		return nil, badInput(fmt.Errorf("--ingress-bin %s: no such file", cand.IngressBin))
	}
	base := artifacts.Build{Role: artifacts.BuildBaseline}
	switch {
	case f.baselineRef != "":
		cwd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		repo, err := local.FindRepo(cwd)
		if err != nil {
			// FindRepo's own hint (--backend-bin) does not help here.
			return nil, badInput(fmt.Errorf("--baseline-ref %s: builds from the prequalbench source tree, and %s is not inside one: run it from a clone of the repository, or give a built binary with --baseline-bin", f.baselineRef, cwd))
		}
		cache := f.buildCache
		if cache == "" {
			cache = local.DefaultBuildCache()
		}
		b, err := local.BuildRef(ctx, repo, f.baselineRef, cache, func(s string) { fmt.Fprintln(msg, s) })
		if err != nil {
			return nil, err
		}
		base.Ref, base.Revision, base.IngressBin = f.baselineRef, b.Commit, b.IngressBin
	default:
		if !exists(f.baselineBin) {
			return nil, badInput(fmt.Errorf("--baseline-bin %s: no such file", f.baselineBin))
		}
		abs, err := filepath.Abs(f.baselineBin)
		if err != nil {
			return nil, err
		}
		base.IngressBin, base.Revision = abs, binaryRevision(ctx, abs)
	}
	builds := []artifacts.Build{base, cand}
	for i := range builds {
		b := &builds[i]
		b.IngressSHA256 = sha256File(b.IngressBin)
		b.Name = buildName(b.Revision, b.IngressBin)
	}
	if builds[0].Name == builds[1].Name {
		builds[0].Name += "-" + artifacts.BuildBaseline
		builds[1].Name += "-" + artifacts.BuildCandidate
	}
	return builds, nil
}

// checkBuilds refuses, before any run, a build whose ingress lacks a
// flag the local env will pass it: a baseline older than that flag.
func checkBuilds(ctx context.Context, builds []artifacts.Build, s *scenario.Scenario) error {
	for _, b := range builds {
		if err := local.CheckIngressBuild(ctx, b.IngressBin, s); err != nil {
			return badInput(fmt.Errorf("the %s build %s (%s): %w", b.Role, b.Name, buildSource(b), err))
		}
	}
	return nil
}

// buildSource says where a build came from, for an error.
func buildSource(b artifacts.Build) string {
	if b.Ref != "" {
		return "--baseline-ref " + b.Ref + ", commit " + b.Revision
	}
	return b.IngressBin
}

// buildName is a build's label: its short commit ("-dirty" when built
// from a modified tree), else its binary's file name.
func buildName(revision, bin string) string {
	rev, dirty := strings.CutSuffix(revision, "-dirty")
	if rev == "" || rev == "unknown" {
		return strings.ReplaceAll(filepath.Base(bin), "@", "_")
	}
	name := rev[:min(7, len(rev))]
	if dirty {
		name += "-dirty"
	}
	return name
}

func revisionOf(info buildinfo.Info) string {
	if info.Dirty {
		return info.Revision + "-dirty"
	}
	return info.Revision
}

// binaryRevision asks a prequalbench binary for its revision (its
// `version` command); "" when it cannot say.
func binaryRevision(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "revision "); ok {
			rev, modified := strings.CutSuffix(strings.TrimSpace(rest), " (modified)")
			if modified {
				rev += "-dirty"
			}
			return rev
		}
	}
	return ""
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func sha256File(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
