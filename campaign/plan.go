package campaign

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/scenario"
)

// Plan orders reps × algorithms. With shuffle every rep runs the algorithms
// in an order drawn from seed (the same seed gives the same plan); with
// rotate rep r starts at algorithm r-1; with sequential all reps of one
// algorithm run back to back, which is not interleaved: slow drift of the
// machine then shows up as a difference between algorithms, so Plan
// returns a warning. Algorithms are canonical names, variants included
// (prequal{probes=2,qrif=0.6}); each run keeps its name, and its directory
// holds a path-safe slug of it (artifacts.RunDirName).
func Plan(algorithms []string, reps int, order string, seed uint64) ([]artifacts.PlannedRun, string, error) {
	if len(algorithms) == 0 {
		return nil, "", fmt.Errorf("plan: no algorithms")
	}
	if reps < 1 {
		return nil, "", fmt.Errorf("plan: reps %d, want >= 1", reps)
	}
	var plan []artifacts.PlannedRun
	add := func(rep int, algo string) {
		i := len(plan) + 1
		plan = append(plan, artifacts.PlannedRun{Index: i, Rep: rep, Algorithm: algo, Dir: artifacts.RunsDir + "/" + artifacts.RunDirName(i, rep, algo)})
	}
	warning := ""
	switch order {
	case scenario.OrderShuffle:
		for rep := 1; rep <= reps; rep++ {
			// One stream per rep, so a rep's order does not depend on
			// how many draws the earlier reps took.
			rng := rand.New(rand.NewPCG(seed, uint64(rep)))
			algos := slices.Clone(algorithms)
			rng.Shuffle(len(algos), func(i, j int) { algos[i], algos[j] = algos[j], algos[i] })
			for _, a := range algos {
				add(rep, a)
			}
		}
	case scenario.OrderRotate:
		n := len(algorithms)
		for rep := 1; rep <= reps; rep++ {
			for k := range n {
				add(rep, algorithms[(rep-1+k)%n])
			}
		}
	case scenario.OrderSequential:
		for _, a := range algorithms {
			for rep := 1; rep <= reps; rep++ {
				add(rep, a)
			}
		}
		warning = "order sequential: the algorithms are not interleaved, so drift over the campaign (thermal, noisy neighbours) biases the comparison; prefer shuffle"
	default:
		return nil, "", fmt.Errorf("plan: order %q, allowed: %s, %s, %s", order, scenario.OrderShuffle, scenario.OrderRotate, scenario.OrderSequential)
	}
	return plan, warning, nil
}
