package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/campaign/scenario"
)

func TestGeneratorsFlagRange(t *testing.T) {
	for _, name := range []string{"kind", "kube"} {
		f := campaignRunFlags{generators: -1, serviceType: "NodePort"}
		if _, err := campaignEnvs[name](context.Background(), &f, io.Discard); err == nil || !strings.Contains(err.Error(), "--generators") {
			t.Errorf("%s: --generators -1: %v", name, err)
		}
	}
}

// Which path the load takes: --generators when given (0 included), else
// the scenario's load.generators, else 1 on kind and 0 on kube.
func TestGeneratorCount(t *testing.T) {
	unset, err := scenario.Lookup("quickstart")
	if err != nil {
		t.Fatal(err)
	}
	four, _ := scenario.Lookup("quickstart")
	n := 4
	four.Load.Generators = &n
	for _, c := range []struct {
		env  string
		f    campaignRunFlags
		s    *scenario.Scenario
		want int
	}{
		{"kind", campaignRunFlags{}, unset, 1},
		{"kube", campaignRunFlags{}, unset, 0},
		{"kind", campaignRunFlags{}, four, 4},
		{"kube", campaignRunFlags{}, four, 4},
		{"kind", campaignRunFlags{generators: 0, generatorsSet: true}, unset, 0},
		{"kind", campaignRunFlags{generators: 2, generatorsSet: true}, four, 2},
		{"kube", campaignRunFlags{generators: 3, generatorsSet: true}, unset, 3},
	} {
		if got := generatorCount(c.env, &c.f, c.s); got != c.want {
			t.Errorf("%s, flags %+v, scenario generators %v: %d, want %d", c.env, c.f, c.s.Load.Generators, got, c.want)
		}
	}
}

// --generators and --generator-lead are for the cluster environments.
func TestGeneratorsFlagsOnlyOnClusters(t *testing.T) {
	for _, args := range [][]string{{"--generators", "2"}, {"--generator-lead", "1m"}} {
		code, out := runCLI(t, append([]string{"campaign", "run", "--env", "local", "--out", t.TempDir()}, args...)...)
		if code != 2 || !strings.Contains(out, args[0]+": only with --env kind or kube") {
			t.Errorf("%v on local: exit %d\n%s", args, code, out)
		}
	}
	f := campaignRunFlags{serviceType: "NodePort", generatorLead: time.Millisecond}
	if _, err := campaignEnvs["kube"](context.Background(), &f, io.Discard); err == nil || !strings.Contains(err.Error(), "--generator-lead") {
		t.Errorf("--generator-lead 1ms: %v", err)
	}
}
