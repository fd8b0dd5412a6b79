package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/scenario"
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

// --generators above the scenario's connection cap is refused before
// anything runs, naming the flag.
func TestGeneratorsFlagAboveTheCap(t *testing.T) {
	s, err := scenario.Lookup("quickstart")
	if err != nil {
		t.Fatal(err)
	}
	s.Load.MaxConnections = 8
	b, err := scenario.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "capped.yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := runCLI(t, "campaign", "run", "--env", "kube", "--scenario", p, "--generators", "9", "--out", t.TempDir())
	if code != 2 || !strings.Contains(out, "--generators: 9 generators cannot split the cap of 8 connections") {
		t.Errorf("exit %d\n%s", code, out)
	}
}
