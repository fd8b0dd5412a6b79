package kind

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// onPath makes PATH one directory holding the given fake commands
// (shell scripts), so the check sees exactly those.
func onPath(t *testing.T, scripts map[string]string) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir)
}

// Each way of having no Docker engine gets its own plain message, and a
// reachable engine passes.
func TestCheckEngine(t *testing.T) {
	const refused = `echo "Cannot connect to the Docker daemon at unix:///nonexistent.sock. Is the docker daemon running?" >&2; exit 1`
	cases := []struct {
		name       string
		scripts    map[string]string
		dockerHost string
		want, not  []string
	}{
		{"no docker", nil, "", []string{"no `docker` command on PATH", "install Docker", "--env local"}, []string{"podman"}},
		{"podman only", map[string]string{"podman": "exit 0"}, "", []string{"no `docker` command on PATH, only podman", "install Docker"}, nil},
		{"engine not running", map[string]string{"docker": refused}, "",
			[]string{"cannot reach a Docker engine", "Cannot connect to the Docker daemon", "sudo systemctl start docker", "docker info"}, []string{"DOCKER_HOST", "docker group"}},
		{"DOCKER_HOST nowhere", map[string]string{"docker": refused}, "unix:///nonexistent.sock",
			[]string{"cannot reach a Docker engine", "DOCKER_HOST=unix:///nonexistent.sock is where docker looked"}, nil},
		{"socket not ours", map[string]string{"docker": `echo "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock" >&2; exit 1`}, "",
			[]string{"may not open its socket", "docker group"}, []string{"systemctl"}},
		{"no server version", map[string]string{"docker": "exit 0"}, "", []string{"cannot reach a Docker engine (`docker version` said: no server version)"}, nil},
		{"DOCKER_CONTEXT nowhere", map[string]string{"docker": refused}, "",
			[]string{"DOCKER_CONTEXT=gone chose where docker looked", "docker context ls", "systemctl --user start docker"}, []string{"DOCKER_HOST"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			onPath(t, c.scripts)
			t.Setenv("DOCKER_HOST", c.dockerHost)
			if c.dockerHost == "" {
				os.Unsetenv("DOCKER_HOST")
			}
			t.Setenv("DOCKER_CONTEXT", "")
			if strings.Contains(c.name, "DOCKER_CONTEXT") {
				t.Setenv("DOCKER_CONTEXT", "gone")
			} else {
				os.Unsetenv("DOCKER_CONTEXT")
			}
			err := CheckEngine(context.Background())
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nlacks %q", err, w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(err.Error(), n) {
					t.Errorf("%v\nsays %q", err, n)
				}
			}
		})
	}
	onPath(t, map[string]string{"docker": `echo 27.5.1`})
	if err := CheckEngine(context.Background()); err != nil {
		t.Errorf("an engine that answers: %v", err)
	}
}

// The real docker command, pointed at a socket that does not exist.
func TestCheckEngineRealDocker(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no docker command here")
	}
	t.Setenv("DOCKER_HOST", "unix:///nonexistent.sock")
	err := CheckEngine(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot reach a Docker engine") || !strings.Contains(err.Error(), "nonexistent.sock") {
		t.Errorf("docker at a missing socket: %v", err)
	}
}
