package campaign

import (
	"context"
	"errors"
	"fmt"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/env"
)

// abArms returns the algorithms a campaign plans and its reference: the
// scenario's own, or in an A/B campaign (builds set) its one algorithm on
// each build, baseline first, the baseline's arm the reference. The
// builds are then arms like algorithms: planned, interleaved and reset
// the same way, so the host's drift over the campaign falls on both.
func abArms(algorithms []string, reference string, builds []artifacts.Build) ([]string, string, error) {
	if len(builds) == 0 {
		return algorithms, reference, nil
	}
	if len(algorithms) != 1 {
		return nil, "", fmt.Errorf("campaign: an A/B of two builds runs one algorithm on both, got %d (%v)", len(algorithms), algorithms)
	}
	if len(builds) != 2 || builds[0].Role != artifacts.BuildBaseline || builds[1].Role != artifacts.BuildCandidate {
		return nil, "", errors.New("campaign: an A/B needs two builds, the baseline then the candidate")
	}
	if builds[0].Name == builds[1].Name {
		return nil, "", fmt.Errorf("campaign: both builds are named %q; their arms must differ", builds[0].Name)
	}
	arms := make([]string, len(builds))
	for i, b := range builds {
		if b.Name == "" || b.IngressBin == "" {
			return nil, "", fmt.Errorf("campaign: the %s build needs a name and an ingress binary", b.Role)
		}
		arms[i] = artifacts.ArmLabel(algorithms[0], b.Name)
	}
	return arms, arms[0], nil
}

// switchBuild puts the run's build in place when its algorithm is an A/B
// arm, and returns the policy to set. Every run of an A/B restarts the
// ingress, on the same build or the other, so that no arm runs on a
// process warmed by the run before it (a build switch must restart).
func (r *runner) switchBuild(ctx context.Context, algorithm string) (string, error) {
	if len(r.c.Builds) == 0 {
		return algorithm, nil
	}
	policy, name := artifacts.SplitArm(algorithm)
	for _, b := range r.c.Builds {
		if b.Name != name {
			continue
		}
		bs, ok := r.env.(env.BuildSwitcher)
		if !ok {
			return "", fmt.Errorf("campaign: this environment (%s) cannot run two builds of the ingress; run the A/B with --env local", r.c.Environment.Name)
		}
		return policy, bs.SetBuild(ctx, b)
	}
	return "", fmt.Errorf("campaign: run %q names no build of this campaign", algorithm)
}
