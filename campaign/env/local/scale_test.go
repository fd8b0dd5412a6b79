package local

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/internal/testbackend"
	"github.com/prequalbench/prequalbench/scenario"
)

// ingressBinary builds cmd/prequalbench once per test binary.
func ingressBinary(t *testing.T) string {
	t.Helper()
	ingressBuild.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		dir, err := os.MkdirTemp("", "prequalbench-local-test-")
		if err != nil {
			ingressBuild.err = err
			return
		}
		ingressBuild.path = filepath.Join(dir, "prequalbench")
		cmd := exec.Command("go", "build", "-o", ingressBuild.path, "./cmd/prequalbench")
		cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..", "..")
		ingressBuild.out, ingressBuild.err = cmd.CombinedOutput()
	})
	if ingressBuild.err != nil {
		t.Fatalf("go build ./cmd/prequalbench: %v\n%s", ingressBuild.err, ingressBuild.out)
	}
	return ingressBuild.path
}

var ingressBuild struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

const scaleScenario = `
name: scale
workload:
  routes:
    - name: work
      backends:
        - name: fixed
          replicas: 1
          serviceTime: 5ms
        - name: elastic
          replicas: 2
          serviceTime: 5ms
load:
  open:
    - {kind: constant, duration: 1s, rate: 10}
protocol:
  algorithms: [round-robin]
`

// endpoints is the route's endpoint set in ingress-0's admin state.
func endpoints(t *testing.T, e *Env) []string {
	t.Helper()
	st, err := e.ingresses[0].admin.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ep := range st.Routes[0].Policy.Endpoints {
		out = append(out, ep.Address)
	}
	slices.Sort(out)
	return out
}

func groupBackends(e *Env, group string) []backend {
	var out []backend
	for _, b := range e.backendList() {
		if b.info.Group == group {
			out = append(out, b)
		}
	}
	return out
}

// Scaling a group up adds replicas the ingress routes to; scaling it down
// removes them from the ingress before stopping them, so a client sending
// all along sees no failed request. Round-robin sends to every endpoint,
// so a replica stopped while still routed to would fail requests.
// setupEnv starts a local environment of the scenario in yaml (real
// backends and an ingress) for the test, and a context that bounds it.
func setupEnv(t *testing.T, yaml string) (*Env, context.Context) {
	t.Helper()
	s, err := scenario.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{Scenario: s, BackendBin: testbackend.Binary(t), IngressBin: ingressBinary(t), LogDir: t.TempDir(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	if err := e.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	return e, ctx
}

func TestScaleGroup_UpAndDownUnderLoad(t *testing.T) {
	e, ctx := setupEnv(t, scaleScenario)
	target := e.LoadTargets()[0].URL

	// Four clients send sequentially until the scalings are done (at most
	// 20,000 requests or the test's deadline).
	var sent, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sent.Load() < 20_000 && ctx.Err() == nil {
				select {
				case <-stop:
					return
				default:
				}
				sent.Add(1)
				resp, err := client.Get(target)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		}()
	}
	// Wait for the load to flow before the first scaling.
	for sent.Load() < 50 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}

	if err := e.ScaleGroup(ctx, "elastic", 5); err != nil {
		t.Fatal(err)
	}
	up := groupBackends(e, "elastic")
	if len(up) != 5 {
		t.Fatalf("%d elastic backends after scaling to 5", len(up))
	}
	var want []string
	for _, b := range e.backendList() {
		want = append(want, b.info.Address)
	}
	slices.Sort(want)
	if got := endpoints(t, e); !slices.Equal(got, want) {
		t.Errorf("ingress endpoints after scaling up %v, want %v", got, want)
	}

	for _, n := range []int{1, 4, 2} {
		if err := e.ScaleGroup(ctx, "elastic", n); err != nil {
			t.Fatal(err)
		}
		if got := len(groupBackends(e, "elastic")); got != n {
			t.Errorf("%d elastic backends after scaling to %d", got, n)
		}
	}
	if err := e.ScaleGroup(ctx, "elastic", 1); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()

	left := groupBackends(e, "elastic")
	if len(left) != 1 || left[0].proc != up[0].proc {
		t.Errorf("elastic backends after scaling to 1: %v, want the first one kept", left)
	}
	for _, b := range up[1:] {
		if !b.proc.exited() {
			t.Errorf("removed backend %s still running", b.proc.name)
		}
	}
	want = []string{left[0].info.Address, groupBackends(e, "fixed")[0].info.Address}
	slices.Sort(want)
	if got := endpoints(t, e); !slices.Equal(got, want) {
		t.Errorf("ingress endpoints after scaling down %v, want %v", got, want)
	}
	if err := e.Exited(); err != nil {
		t.Errorf("a stopped replica counted as a death: %v", err)
	}
	t.Logf("%d requests during the scalings, %d failed", sent.Load(), failed.Load())
	if failed.Load() != 0 {
		t.Errorf("%d of %d requests failed during the scalings (first: %v)", failed.Load(), sent.Load(), firstErr.Load())
	}
	if err := e.ScaleGroup(ctx, "nope", 2); err == nil {
		t.Error("scaling an unknown group succeeded")
	}
}
