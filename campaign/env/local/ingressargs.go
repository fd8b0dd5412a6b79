package local

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	"github.com/prequalbench/prequalbench/scenario"
)

// ingressArgv is the command line an ingress replica starts with: what
// this environment needs of it, then the scenario's policy flags.
func ingressArgv(routesFile, addrFile, algorithm string, seed uint64, extra []string) []string {
	args := []string{"ingress", "--source", "file", "--routes", routesFile,
		"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--addr-file", addrFile,
		"--default-algorithm", algorithm, "--seed", strconv.FormatUint(seed, 10)}
	return append(args, extra...)
}

// CheckIngressBuild asks bin (`bin ingress --help`) whether its ingress
// takes every flag this environment will pass it for scenario s. An A/B
// may run a build older than a flag (the nightly's last passing commit);
// such a build would fail its first run only after the other build had
// run, with "ingress exited" and a log to read. Said before: which flag.
func CheckIngressBuild(ctx context.Context, bin string, s *scenario.Scenario) error {
	out, err := exec.CommandContext(ctx, bin, "ingress", "--help").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s ingress --help: %v (is it a prequalbench binary?)\n%s", bin, err, strings.TrimSpace(string(out)))
	}
	help := string(out)
	var missing []string
	for _, a := range ingressArgv("r", "a", "x", 0, s.Ingress.Args()) {
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, "=")
		if !regexp.MustCompile(`(^|\s)--` + regexp.QuoteMeta(name) + `[\s=]`).MatchString(help) {
			missing = append(missing, "--"+name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("its ingress does not take %s, which the local env passes for this scenario: a build older than that flag cannot run in this campaign; choose a newer baseline", strings.Join(missing, ", "))
	}
	return nil
}
