package reports

import (
	"strings"
	"testing"
)

// The review's case: with 6 algorithms of 6 runs, 3 invalid runs for one
// and 1 for each of four others are not more than half of the 7 invalid
// runs, but three times the others' share: a cluster. An even spread is
// none.
func TestInvalidCluster_ShareAgainstTheOthers(t *testing.T) {
	t.Parallel()
	algs := []string{"prequal", "round-robin", "least-request", "random", "p2c", "wrr"}
	runs := map[string]int{}
	for _, a := range algs {
		runs[a] = 6
	}
	invalid := map[string]int{"prequal": 3, "round-robin": 1, "least-request": 1, "random": 1, "p2c": 1}
	w := invalidCluster(invalid, runs, algs)
	if !strings.Contains(w, "cluster in prequal (3 of its 6 runs, against 4 of the other algorithms' 30 runs)") {
		t.Errorf("no cluster warning for 3/6 against 4/30: %q", w)
	}
	even := map[string]int{"prequal": 2, "round-robin": 2, "least-request": 1, "random": 1, "p2c": 1, "wrr": 1}
	if w := invalidCluster(even, runs, algs); w != "" {
		t.Errorf("warning for an even spread: %q", w)
	}
	if w := invalidCluster(map[string]int{"prequal": 1}, runs, algs); w != "" {
		t.Errorf("warning for a single invalid run: %q", w)
	}
}
