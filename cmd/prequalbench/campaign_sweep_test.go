package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/artifacts"
)

// A bad sweep is refused before anything runs (no campaign directory),
// with exit code 2 and an error naming the flag, the parameter and what
// it takes.
func TestCampaignRun_BadSweepExits2BeforeAnythingRuns(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--sweep", "prequal:qrif=0.5,2"}, `--sweep prequal:qrif=0.5,2: prequal: parameter "qrif": want a number in [0, 1], got "2"`},
		{[]string{"--sweep", "prequal:bogus=1,2"}, `unknown parameter "bogus", known: coldrif, donerif, maxage, pool, probes, qrif, remove, reuse`},
		{[]string{"--sweep", "prequal"}, "--sweep prequal: got \"prequal\", want ALGORITHM:PARAMETER=V1,V2,..."},
		{[]string{"--sweep", "prequal:qrif=0.5"}, `--sweep prequal:qrif=0.5: parameter "qrif" of prequal: got 1 value(s), want at least two`},
		{[]string{"--sweep", "prequal:qrif=0.5,1", "--sweep", "pq:qrif=0.6,0.7"}, "protocol.sweep[1]: sweeps qrif of prequal again"},
		{[]string{"--algorithms", "prequal{qrif=0.6,probes=x}"}, `--algorithms: loadbalancer: prequal: parameter "probes"`},
		{[]string{"--resume", "somewhere", "--sweep", "prequal:qrif=0.5,1"}, "drop --sweep"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out := t.TempDir()
			_, err := campaignCLI(t, append([]string{"campaign", "run", "--env", "sim", "--out", out}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != 2 {
				t.Errorf("exit code %d, want 2", exitCode(err))
			}
			if entries, _ := os.ReadDir(out); len(entries) > 0 {
				t.Errorf("a campaign directory was made: %v", entries)
			}
		})
	}
}

func TestResolveScenario_SweepAndVariants(t *testing.T) {
	f := &campaignRunFlags{}
	cmd := campaignRunCommand(f)
	if err := cmd.ParseFlags([]string{"--scenario", "quickstart",
		"--algorithms", "prequal{qrif=0.6,probes=2},rr",
		"--sweep", "pq:QRIF=0.50,1", "--sweep", "p2c:choices=2,3"}); err != nil {
		t.Fatal(err)
	}
	s, err := resolveScenario(cmd, f)
	if err != nil {
		t.Fatal(err)
	}
	p := s.Protocol
	want := "prequal{probes=2,qrif=0.6},round-robin,prequal{qrif=0.5},prequal{qrif=1},p2c{choices=2},p2c{choices=3}"
	if got := strings.Join(p.Algorithms, ","); got != want {
		t.Errorf("algorithms %s, want %s", got, want)
	}
	if got := strings.Join(p.Sweep, " "); got != "prequal:qrif=0.5,1 p2c:choices=2,3" {
		t.Errorf("sweep %q, want the canonical spellings", got)
	}
	if p.Reference != "prequal{probes=2,qrif=0.6}" {
		t.Errorf("reference %q, want the first algorithm", p.Reference)
	}
}

const simSweepScenario = `
name: tiny-sweep
workload:
  routes:
    - name: work
      host: bench.local
      backends:
        - name: fast
          replicas: 3
          serviceTime: 20ms
          concurrency: 2
        - name: slow
          replicas: 1
          serviceTime: 20ms
          slow: 3
          concurrency: 2
load:
  open:
    - kind: constant
      duration: 2s
      rate: 150
protocol:
  algorithms: [round-robin]
  reps: 2
  warmup: 500ms
  cooldown: 0s
simulation:
  networkDelay: 100us
`

// TestCampaignRun_SimSweep runs a tiny sweep end to end in the simulator:
// the variants run interleaved beside round-robin, their run directories
// are slugs with the names inside run.json, and the report has the sweep's
// table and plot and rebuilds byte for byte.
func TestCampaignRun_SimSweep(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tiny-sweep.yaml")
	if err := os.WriteFile(file, []byte(simSweepScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if _, err := campaignCLI(t, "campaign", "run", "--env", "sim", "--scenario", file, "--out", out,
		"--sweep", "prequal:qrif=0.5,1"); err != nil {
		t.Fatal(err)
	}
	dirs, err := filepath.Glob(filepath.Join(out, "*-tiny-sweep"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("campaign dirs %v, %v", dirs, err)
	}
	dir := dirs[0]
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(dir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Algorithms, ","); got != "round-robin,prequal{qrif=0.5},prequal{qrif=1}" {
		t.Errorf("campaign algorithms %s", got)
	}
	if len(c.Plan) != 6 {
		t.Fatalf("plan has %d runs, want 3 algorithms x 2 reps", len(c.Plan))
	}
	safe := regexp.MustCompile(`^runs/[0-9]{2}-rep[0-9]-[a-z0-9._-]+$`)
	for _, p := range c.Plan {
		if !safe.MatchString(p.Dir) {
			t.Errorf("run dir %q not path-safe", p.Dir)
		}
		var r artifacts.Run
		if err := artifacts.ReadJSON(filepath.Join(dir, p.Dir, artifacts.RunFile), &r); err != nil {
			t.Fatal(err)
		}
		if r.Status != artifacts.StatusOK || r.Algorithm != p.Algorithm {
			t.Errorf("run %d: status %s algorithm %q, want ok %q (%s)", p.Index, r.Status, r.Algorithm, p.Algorithm, r.Error)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, artifacts.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Sweeps", "### qrif of prequal", "prequal{qrif=0.5}", "plots/sweep-1-qrif.svg"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("REPORT.md lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, artifacts.PlotsDir, "sweep-1-qrif.svg")); err != nil {
		t.Error(err)
	}
	if _, err := campaignCLI(t, "report", dir, "--check"); err != nil {
		t.Errorf("report --check: %v", err)
	}
}
