package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClusterEnvFlags: the kind and kube flags exist on `campaign run`
// and `cluster up`, and bad values are refused (exit 2, naming the flag)
// before any cluster is contacted.
func TestClusterEnvFlags(t *testing.T) {
	run := newCampaignRunCommand()
	for _, name := range []string{"proxy-url", "service-type", "ingress-image", "backend-image", "namespace", "cluster"} {
		if run.Flags().Lookup(name) == nil {
			t.Errorf("campaign run lacks --%s", name)
		}
	}
	up := newClusterUpCommand()
	if f := up.Flags().ShorthandLookup("n"); f == nil || f.Name != "namespace" {
		t.Errorf("cluster up lacks -n/--namespace")
	}

	// A kubeconfig that loads but points nowhere: nothing may dial it.
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  string
		f    campaignRunFlags
		want string
	}{
		{"kube", campaignRunFlags{kubeconfig: kc, serviceType: "NodePort", proxyURLs: []string{"10.0.0.1:31080"}}, "--proxy-url"},
		{"kube", campaignRunFlags{kubeconfig: kc, serviceType: "ClusterIP"}, "--service-type"},
		{"kind", campaignRunFlags{serviceType: "NodePort", proxyURLs: []string{"http://10.0.0.1:31080"}}, "--proxy-url"},
		{"kind", campaignRunFlags{serviceType: "LoadBalancer"}, "--service-type"},
	} {
		_, err := campaignEnvs[c.env](context.Background(), &c.f, io.Discard)
		var ee *exitError
		if err == nil || !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--env %s %+v: err = %v, want exit 2 naming %s", c.env, c.f, err, c.want)
		}
	}
	f := campaignRunFlags{kubeconfig: kc, serviceType: "LoadBalancer", proxyURLs: []string{"http://203.0.113.5:8080"}}
	if _, err := campaignEnvs["kube"](context.Background(), &f, io.Discard); err != nil {
		t.Errorf("good kube flags: %v", err)
	}
}

// fakeDocker puts a docker command that runs body first on PATH.
func fakeDocker(t *testing.T, body string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
}

// With no Docker engine, every cluster command says so plainly before
// kind is asked (which would print `docker ps ... exit status 1`).
func TestClusterCommandsNeedDocker(t *testing.T) {
	fakeDocker(t, `echo "Cannot connect to the Docker daemon at unix:///nonexistent.sock. Is the docker daemon running?" >&2; exit 1`)
	t.Setenv("DOCKER_HOST", "unix:///nonexistent.sock")
	for _, args := range [][]string{{"cluster", "up"}, {"cluster", "up", "--skip-build"}, {"cluster", "status"}, {"cluster", "down"}} {
		code, out := runCLI(t, args...)
		if code == 0 || !strings.Contains(out, "cannot reach a Docker engine") || !strings.Contains(out, "DOCKER_HOST=unix:///nonexistent.sock") ||
			strings.Contains(out, "docker ps") {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
	}
	t.Setenv("PATH", t.TempDir())
	if code, out := runCLI(t, "cluster", "up"); code == 0 || !strings.Contains(out, "no `docker` command on PATH") {
		t.Errorf("cluster up without docker: exit %d\n%s", code, out)
	}
}

// Outside the source tree, cluster up names the flags it has.
func TestClusterUpOutsideTheTree(t *testing.T) {
	fakeDocker(t, "echo 27.5.1")
	dir := t.TempDir()
	t.Chdir(dir)
	code, out := runCLI(t, "cluster", "up")
	if code != 2 || !strings.Contains(out, dir+" is not inside one") || !strings.Contains(out, "--skip-build with --ingress-image and --backend-image") {
		t.Errorf("exit %d\n%s", code, out)
	}
	for _, flag := range []string{"--backend-bin"} {
		if strings.Contains(out, flag) {
			t.Errorf("suggests %s, which cluster up does not have:\n%s", flag, out)
		}
	}
	for _, flag := range []string{"skip-build", "ingress-image", "backend-image"} {
		if newClusterUpCommand().Flags().Lookup(flag) == nil {
			t.Errorf("the message suggests --%s, which cluster up lacks", flag)
		}
	}
}
