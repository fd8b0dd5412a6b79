package external

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/scenario"
)

// fakeBackend answers /stats and /reset like a prequalbench backend whose
// served counter is served.
func fakeBackend(served *atomic.Uint64) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/reset" {
			served.Store(0)
		}
		w.Write([]byte(`{"in_flight":0,"queued":0,"served":` + strconv.FormatUint(served.Load(), 10) + `,"rejected":0,"max_queue":0}`))
	}))
}

func newEnv(t *testing.T, cfg *Config, backends int) (*Env, []*atomic.Uint64) {
	t.Helper()
	proxy := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(proxy.Close)
	cfg.Proxy = proxy.URL
	var counters []*atomic.Uint64
	for range backends {
		c := &atomic.Uint64{}
		b := fakeBackend(c)
		t.Cleanup(b.Close)
		counters = append(counters, c)
		cfg.Backends = append(cfg.Backends, strings.TrimPrefix(b.URL, "http://"))
	}
	cfg.dir = t.TempDir()
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	s, err := scenario.Lookup(filepath.Join("..", "..", "..", "examples", "external", "nginx", "scenario.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{Scenario: s, Config: cfg, LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e, counters
}

// Without a reset hook a run is not verified, and the detail says why;
// the snapshot's picks are the backends' served counters.
func TestResetWithoutHookIsUnverified(t *testing.T) {
	e, counters := newEnv(t, &Config{}, 3)
	counters[0].Store(5)
	v, err := e.Reset(context.Background(), scenario.ResetAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if v.Verified || !strings.Contains(v.Detail, "no reset hook") {
		t.Errorf("verification %+v", v)
	}
	if counters[0].Load() != 0 {
		t.Error("the backends were not reset")
	}
	counters[2].Store(7)
	st, err := e.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || len(st[0].Routes) != 1 || st[0].Routes[0].Policy.Picks != 7 || st[0].Routes[0].Policy.Endpoints[2].Picks != 7 {
		t.Errorf("snapshot %+v", st)
	}
}

// A reset hook that runs (with the algorithm substituted) and clean
// backends verify the reset; a failing hook fails with its output.
func TestHooks(t *testing.T) {
	e, _ := newEnv(t, &Config{SetAlgorithm: "echo set {algorithm} $PREQUALBENCH_ALGORITHM > set.txt", Reset: "echo reset"}, 3)
	if err := e.SetAlgorithm(context.Background(), "round-robin"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(e.cfg.dir, "set.txt"))
	if err != nil || strings.TrimSpace(string(b)) != "set round-robin round-robin" {
		t.Errorf("setAlgorithm hook wrote %q (%v)", b, err)
	}
	v, err := e.Reset(context.Background(), scenario.ResetAdmin)
	if err != nil || !v.Verified {
		t.Errorf("reset: %+v, %v", v, err)
	}
	e.cfg.Reset = "echo cannot reload >&2; exit 3"
	if _, err := e.Reset(context.Background(), scenario.ResetAdmin); err == nil || !strings.Contains(err.Error(), "cannot reload") {
		t.Errorf("failing hook: %v", err)
	}
}

// A hook that overruns its timeout is killed with every child it
// started, promptly, and the error says it timed out: exec.CommandContext
// alone killed only the shell, left the child to switch the ingress
// during the next run, and waited WaitDelay (5 s) for its output pipe.
func TestHookTimeoutKillsItsChildren(t *testing.T) {
	e, _ := newEnv(t, &Config{}, 0)
	e.cfg.hookTimeout = 300 * time.Millisecond
	// The inner shell is the outer one's child: it records its pid, then
	// would touch late.txt a second after the timeout.
	e.cfg.SetAlgorithm = `sh -c 'echo $$ > child.pid; sleep 1.3; touch late.txt'; echo switched`
	began := time.Now()
	err := e.SetAlgorithm(context.Background(), "round-robin")
	took := time.Since(began)
	if err == nil || !strings.Contains(err.Error(), "timed out after 300ms") {
		t.Fatalf("SetAlgorithm: %v, want a hook timed out after 300ms", err)
	}
	if took > 1200*time.Millisecond {
		t.Errorf("SetAlgorithm returned after %v, want about the 300ms hook timeout (not the child's 1.3 s nor a 5 s WaitDelay)", took)
	}
	b, err := os.ReadFile(filepath.Join(e.cfg.dir, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	// Once the child is gone it can touch nothing: wait for that, then
	// check it had not.
	waitGone(t, b, "the hook's child still runs after the timeout")
	if _, err := os.Stat(filepath.Join(e.cfg.dir, "late.txt")); err == nil {
		t.Error("the timed-out hook's child ran on and touched late.txt")
	}
}

// A hook that succeeds but leaves a short-lived child holding its output
// succeeds (it failed with "WaitDelay expired"), and the child is stopped.
func TestHookThatLeavesAChildSucceeds(t *testing.T) {
	e, _ := newEnv(t, &Config{}, 0)
	e.cfg.hookTimeout = 5 * time.Second
	e.cfg.SetAlgorithm = `sh -c 'echo $$ > child.pid; exec sleep 2' & echo switched`
	if err := e.SetAlgorithm(context.Background(), "round-robin"); err != nil {
		t.Fatalf("SetAlgorithm of a hook that exited 0: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(e.cfg.dir, "child.pid"))
	if os.IsNotExist(err) {
		return // stopped before it got as far as writing its pid
	}
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, b, "the child the hook left still runs")
}

// waitGone polls, with a deadline, until the process whose pid pidFile
// holds is gone (a zombie waiting for its reaper counts as gone).
func waitGone(t *testing.T, pidFile []byte, msg string) {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidFile)))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); alive(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d: %s", pid, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// A variant's name reaches a hook as one word even in a shell that
// brace-expands (bash: prequal{probes=3,remove=1} would become two
// words), whether the hook quotes {algorithm} or not; a name with shell
// syntax in it is refused.
func TestSubstituteQuotesTheAlgorithm(t *testing.T) {
	const name = "prequal{probes=3,remove=1}"
	for _, hook := range []string{
		`printf '<%s>' {algorithm}`,
		`printf '<%s>' "{algorithm}"`,
		`printf '<%s>' '{algorithm}'`,
		`printf '<%s>' x\ {algorithm}`,
	} {
		line, err := substitute(hook, name)
		if err != nil {
			t.Fatal(err)
		}
		want := "<" + name + ">"
		if strings.Contains(hook, `x\ `) {
			want = "<x " + name + ">" // the escaped space joins the words
		}
		for _, shell := range []string{"sh", "bash"} {
			if _, err := exec.LookPath(shell); err != nil {
				continue
			}
			out, err := exec.Command(shell, "-c", line).CombinedOutput()
			if err != nil || string(out) != want {
				t.Errorf("%s -c %s (from %s): %q, %v; want %q", shell, line, hook, out, err, want)
			}
		}
	}
	for _, bad := range []string{"a;touch x", "$(id)", "a b", "it's", "`id`"} {
		if _, err := substitute("./switch.sh {algorithm}", bad); err == nil {
			t.Errorf("name %q substituted", bad)
		}
	}
}
