package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress"
	"github.com/prequalbench/prequalbench/ingress/adminapi"
	"github.com/prequalbench/prequalbench/internal/testbackend"
)

func runIngressCmd(ctx context.Context, args ...string) error {
	cmd := newRootCommand()
	cmd.SetArgs(append([]string{"ingress"}, args...))
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	return cmd.ExecuteContext(ctx)
}

func TestIngressCommand_BadFlagsExit2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--source", "file"}, "--routes"},
		{[]string{"--source", "ftp"}, "--source"},
		{[]string{"--routes", "x", "--default-algorithm", "fastest"}, "--default-algorithm"},
		{[]string{"--routes", "x", "--prequal-pool-size", "0"}, "PoolSize"},
		{[]string{"--routes", "x", "--c3-clients", "0"}, "C3.Clients"},
		{[]string{"--routes", "x", "--admin-listen", "0.0.0.0:0"}, "--admin-token-file"},
		{[]string{"--routes", "x", "--log-level", "loud"}, "--log-level"},
	} {
		err := runIngressCmd(context.Background(), tc.args...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v (exit %d), want exit 2 naming %s", tc.args, err, exitCode(err), tc.want)
		}
	}
}

// TestIngressCommand_ProxiesToThreeBackends is the "done when": the
// command on a routes file proxies to three backends, the state shows picks
// per endpoint, a reset answers empty pools and /metrics has prequal_ series.
func TestIngressCommand_ProxiesToThreeBackends(t *testing.T) {
	dir := t.TempDir()
	var eps []string
	for range 3 {
		eps = append(eps, fmt.Sprintf("%q", testbackend.Start(t, "--service-time", "1ms").Addr))
	}
	routes := filepath.Join(dir, "routes.yaml")
	doc := fmt.Sprintf("routes:\n  - name: work\n    path: /work\n    algorithm: prequal\n    endpoints: [%s]\n", strings.Join(eps, ", "))
	if err := os.WriteFile(routes, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	addrFile := filepath.Join(dir, "addrs.json")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runIngressCmd(ctx, "--source", "file", "--routes", routes, "--listen", "127.0.0.1:0",
			"--admin-listen", "127.0.0.1:0", "--addr-file", addrFile, "--seed", "7", "--log-level", "error")
	}()
	var addrs ingress.Addrs
	end := time.Now().Add(15 * time.Second)
	for {
		if data, err := os.ReadFile(addrFile); err == nil && json.Unmarshal(data, &addrs) == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatal("no addr file")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c := adminapi.NewClient("http://"+addrs.Admin, "")
	for c.Ready(context.Background()) != nil {
		if time.Now().After(end) {
			t.Fatal("never ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 60 {
		resp, err := http.Get("http://" + addrs.Proxy + "/work?iterations=100")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	st, err := c.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Routes) != 1 || len(st.Routes[0].Policy.Endpoints) != 3 {
		t.Fatalf("state %+v", st)
	}
	for _, e := range st.Routes[0].Policy.Endpoints {
		if e.Picks == 0 {
			t.Errorf("endpoint %s has no picks", e.Address)
		}
	}
	rs, err := c.Reset(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.VerifyReset(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addrs.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(body.String(), `prequal_selections_total{algorithm="prequal",endpoint=`) {
		t.Fatal("metrics lack prequal_selections_total")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ingress exited with %v", err)
	}
}
