package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// runCLI runs the root command with args and returns stdout and the error.
func campaignCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestCampaignRun_BadInputExits2NamingTheFlag(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--scenario", "nope"}, "quickstart"},
		{[]string{"--algorithms", "prequal,magic"}, "unknown algorithm \"magic\""},
		{[]string{"--reps", "0"}, "protocol.reps"},
		{[]string{"--order", "random"}, "protocol.order"},
		{[]string{"--reset", "reboot"}, "protocol.reset"},
		{[]string{"--duration-scale", "0"}, "--duration-scale"},
		{[]string{"--env", "mars"}, "--env"},
		{[]string{"--resume", "somewhere", "--reps", "2"}, "drop --reps"},
		{[]string{"--force"}, "--force: only with --resume"},
		{[]string{"--generator-one-per-node"}, "--generator-one-per-node: only with --env kind or kube"},
		{[]string{"--env", "kind", "--generator-toleration", "dedicated=x:NoScheduel"}, "--generator-toleration: effect \"NoScheduel\""},
		{[]string{"--env", "kube", "--generator-node-selector", "pool=not valid"}, "--generator-node-selector: value"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := campaignCLI(t, append([]string{"campaign", "run"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != 2 {
				t.Errorf("exit code %d, want 2", exitCode(err))
			}
		})
	}
}

func TestResolveScenario_Overrides(t *testing.T) {
	f := &campaignRunFlags{}
	cmd := campaignRunCommand(f)
	if err := cmd.ParseFlags([]string{"--scenario", "quickstart", "--algorithms", "rr,least-connections",
		"--reps", "1", "--seed", "9", "--duration-scale", "0.5", "--ingress-replicas", "3"}); err != nil {
		t.Fatal(err)
	}
	s, err := resolveScenario(cmd, f)
	if err != nil {
		t.Fatal(err)
	}
	p := s.Protocol
	if strings.Join(p.Algorithms, ",") != "round-robin,least-request" || p.Reference != "round-robin" {
		t.Errorf("algorithms %v reference %s", p.Algorithms, p.Reference)
	}
	if p.Reps != 1 || p.Seed != 9 || s.Ingress.Replicas != 3 {
		t.Errorf("reps %d seed %d replicas %d", p.Reps, p.Seed, s.Ingress.Replicas)
	}
	if got := s.Load.Open[0].Duration.Std(); got != 10*time.Second {
		t.Errorf("scaled window %v, want 10s", got)
	}
	if got := p.Warmup.Std(); got != 2500*time.Millisecond {
		t.Errorf("scaled warmup %v, want 2.5s", got)
	}
}

func TestCampaignList_ShowsTheCatalogue(t *testing.T) {
	out, err := campaignCLI(t, "campaign", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"quickstart", "c2-hetero-open", "hetero16-90-single"} {
		if !strings.Contains(out, name) {
			t.Errorf("list lacks %s:\n%s", name, out)
		}
	}
}

func TestCampaignShow_PrintsResolvedYAML(t *testing.T) {
	out, err := campaignCLI(t, "campaign", "show", "quickstart", "--duration-scale", "0.5")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: quickstart", "queueLimit: 1024", "reset: admin", "duration: 10s"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
}
