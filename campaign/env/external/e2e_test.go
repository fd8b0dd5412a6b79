package external_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/ingress/adminapi"
	"github.com/prequalbench/prequalbench/internal/testbackend"
)

// repoRoot is the module root, from this file's place in it.
func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// freePorts returns n distinct loopback ports free a moment ago.
func freePorts(t *testing.T, n int) []string {
	var ls []net.Listener
	var ports []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// start runs a process in a process group of its own until the test
// ends; then the group gets SIGTERM, and SIGKILL what is left after 10 s.
// The group, not the process: nginx's workers (and those a reload starts)
// outlive a killed master and keep its ports.
func start(t *testing.T, log string, name string, args ...string) {
	t.Helper()
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // workers left over, if any
		<-done
		f.Close()
	})
}

// requirePortFreeAtEnd checks, once the test's processes are stopped,
// that nothing listens on 127.0.0.1:port any more. Registered before the
// processes are started, it runs after their cleanups.
func requirePortFreeAtEnd(t *testing.T, port string) {
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			l, err := net.Listen("tcp", "127.0.0.1:"+port)
			if err == nil {
				l.Close()
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("127.0.0.1:%s still taken after the test: %v", port, err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// waitHTTP polls url until it answers any status, for up to 30 s.
func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not answering: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// copyExample copies an example file into dir with the example's fixed
// ports replaced by free ones.
func copyExample(t *testing.T, dir, name string, ports map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "external", "nginx", name))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for from, to := range ports {
		s = strings.ReplaceAll(s, from, to)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// The shipped nginx example, end to end on loopback: three real backends,
// nginx (round robin, then least_conn through the setAlgorithm hook) and
// the project's ingress (prequal), driven by `campaign run --env
// external` with the example's config, scenario and hooks, to a report.
func TestE2E_NginxExample(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	for _, bin := range []string{"nginx", "curl"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s not installed (hack/setup.sh installs it): %v", bin, err)
			}
			t.Skipf("%s not installed: %v", bin, err)
		}
	}
	backendBin := testbackend.Binary(t)
	dir := t.TempDir()
	cli := filepath.Join(dir, "prequalbench")
	build := exec.Command("go", "build", "-o", cli, "./cmd/prequalbench")
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	p := freePorts(t, 6)
	ports := map[string]string{"18080": p[0], "18081": p[1], "18082": p[2], "18083": p[3], "18090": p[4], "18091": p[5]}
	backends := []string{"127.0.0.1:" + p[1], "127.0.0.1:" + p[2], "127.0.0.1:" + p[3]}
	for i, addr := range backends {
		args := []string{"--listen", addr, "--concurrency", "4", "--service-time", "5ms", "--shutdown-grace", "0"}
		if i == 2 {
			args = append(args, "--slow", "3")
		}
		start(t, filepath.Join(dir, "backend-"+strconv.Itoa(i)+".log"), backendBin, args...)
	}
	for _, addr := range backends {
		waitHTTP(t, "http://"+addr+"/healthz")
	}

	prefix := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		t.Fatal(err)
	}
	copyExample(t, prefix, "nginx.conf", ports)
	if err := os.WriteFile(filepath.Join(prefix, "balance.conf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	requirePortFreeAtEnd(t, p[0])
	start(t, filepath.Join(dir, "nginx.log"), "nginx", "-p", prefix, "-c", "nginx.conf", "-g", "daemon off;")
	waitHTTP(t, "http://127.0.0.1:"+p[0]+"/healthz")

	routes := copyExample(t, dir, "routes.yaml", ports)
	start(t, filepath.Join(dir, "ingress.log"), cli, "ingress", "--source", "file", "--routes", routes,
		"--listen", "127.0.0.1:"+p[4], "--admin-listen", "127.0.0.1:"+p[5], "--default-algorithm", "prequal")
	waitHTTP(t, "http://127.0.0.1:"+p[5]+"/readyz")

	for _, f := range []string{"switch.sh", "reset.sh", "scenario.yaml"} {
		copyExample(t, dir, f, ports)
	}
	cfg := copyExample(t, dir, "external.yaml", ports)
	out := filepath.Join(dir, "results")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, cli, "campaign", "run", "--env", "external", "--external", cfg,
		"--scenario", filepath.Join(dir, "scenario.yaml"), "--duration-scale", "0.2", "--reps", "2", "--out", out)
	run.Env = append(os.Environ(), "NGINX_PREFIX="+prefix, "INGRESS_ADMIN=127.0.0.1:"+p[5])
	if b, err := run.CombinedOutput(); err != nil {
		t.Fatalf("campaign run: %v\n%s", err, b)
	}

	entries, err := os.ReadDir(out)
	if err != nil || len(entries) != 1 {
		t.Fatalf("want one campaign directory, got %v (%v)", entries, err)
	}
	cdir := filepath.Join(out, entries[0].Name())
	var c artifacts.Campaign
	if err := artifacts.ReadJSON(filepath.Join(cdir, artifacts.CampaignFile), &c); err != nil {
		t.Fatal(err)
	}
	if c.Environment.Name != "external" || !strings.Contains(c.Environment.Topology, "nginx upstream least_conn") {
		t.Errorf("environment %q, topology %q", c.Environment.Name, c.Environment.Topology)
	}
	if len(c.Plan) != 6 {
		t.Fatalf("plan has %d runs, want 3 algorithms x 2 reps", len(c.Plan))
	}
	valid := 0
	for _, pr := range c.Plan {
		var r artifacts.Run
		if err := artifacts.ReadJSON(filepath.Join(cdir, pr.Dir, artifacts.RunFile), &r); err != nil {
			t.Fatal(err)
		}
		if r.Status != artifacts.StatusOK || !r.ResetVerified || r.Load.Succeeded == 0 {
			t.Errorf("%s: status %s (%s), reset verified %v (%s), %d successes", pr.Dir, r.Status, r.Error, r.ResetVerified, r.ResetDetail, r.Load.Succeeded)
			continue
		}
		if r.Validity.Valid {
			valid++
		}
		shares := picks(t, filepath.Join(cdir, pr.Dir))
		var total uint64
		for _, n := range shares {
			total += n
		}
		// Every success of the window reached a backend; the picks count
		// what the backends served between the snapshots, which the
		// window's successes approximate (a few answers straddle them).
		if total == 0 || float64(total) < 0.8*float64(r.Load.Succeeded) {
			t.Errorf("%s: %d picks from the backends for %d successes", pr.Dir, total, r.Load.Succeeded)
		}
		t.Logf("%s: goodput %.1f/s, p50 %.1f ms, p99 %.1f ms, slow backend %d of %d picks", pr.Dir, r.Load.Goodput, r.Load.P50, r.Load.P99, shares[backends[2]], total)
		if pr.Algorithm == "round-robin" {
			// nginx's round robin gives the slow replica its third.
			if s := float64(shares[backends[2]]) / float64(total); s < 0.28 || s > 0.39 {
				t.Errorf("%s: nginx round robin gave the slow backend %.2f of %d picks, want about 1/3", pr.Dir, s, total)
			}
		}
	}
	report, err := os.ReadFile(filepath.Join(cdir, artifacts.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	wants := []string{"prequal", "round-robin", "least-request"}
	if valid > 0 {
		// Shares come from valid runs only; on a host too busy for any
		// run to keep its headroom there are none, and the report says
		// why in its Validity section instead.
		wants = append(wants, backends[2])
	} else {
		wants = append(wants, "**invalid**")
		t.Log("no run was valid (busy host): the report has no selection shares")
	}
	for _, want := range wants {
		if !strings.Contains(string(report), want) {
			t.Errorf("REPORT.md does not mention %s:\n%s", want, report)
		}
	}
}

// picks returns each backend's picks between a run's two snapshots.
func picks(t *testing.T, runDir string) map[string]uint64 {
	t.Helper()
	var before, after []adminapi.State
	for _, f := range []struct {
		name string
		dst  *[]adminapi.State
	}{{artifacts.StateBefore, &before}, {artifacts.StateAfter, &after}} {
		b, err := os.ReadFile(filepath.Join(runDir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, f.dst); err != nil {
			t.Fatal(err)
		}
	}
	m := map[string]uint64{}
	for _, st := range after {
		for _, r := range st.Routes {
			for _, e := range r.Policy.Endpoints {
				m[e.Address] += e.Picks
			}
		}
	}
	for _, st := range before {
		for _, r := range st.Routes {
			for _, e := range r.Policy.Endpoints {
				m[e.Address] -= e.Picks
			}
		}
	}
	return m
}
