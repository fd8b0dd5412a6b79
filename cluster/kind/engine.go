package kind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// EngineTimeout bounds the engine check's `docker version`.
const EngineTimeout = 20 * time.Second

// CheckEngine says plainly, before kind is asked anything, when there
// is no Docker engine to run kind's nodes: no docker command (podman
// alone is not enough: the kind provider here is Docker's), or a docker
// command that cannot reach its engine (not running, a DOCKER_HOST or
// DOCKER_CONTEXT that points nowhere, a socket the user may not open).
// It asks the docker command itself, so whatever engine docker reaches
// (rootless, a context, DOCKER_HOST=tcp:// or ssh://) kind reaches too. Without it kind
// fails later with `docker ps ... exit status 1`.
func CheckEngine(ctx context.Context) error {
	docker, err := exec.LookPath("docker")
	if err != nil {
		if _, perr := exec.LookPath("podman"); perr == nil {
			return errors.New("cluster: no `docker` command on PATH, only podman: kind runs its nodes through Docker here " +
				"(its podman provider is not used), so install Docker (https://docs.docker.com/engine/install/) and start it, " +
				"or use --env local or sim, which need no cluster")
		}
		return errors.New("cluster: no `docker` command on PATH: kind runs its nodes as Docker containers, so install Docker " +
			"(https://docs.docker.com/engine/install/, or Docker Desktop) and start it, then check with `docker info`; " +
			"--env local and sim need no cluster")
	}
	ctx, cancel := context.WithTimeout(ctx, EngineTimeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, docker, "version", "--format", "{{.Server.Version}}")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil && strings.TrimSpace(string(out)) != "" {
		return nil
	}
	said := lastLine(stderr.String())
	if ctx.Err() != nil {
		said = fmt.Sprintf("no answer in %v", EngineTimeout)
	} else if said == "" && err != nil {
		said = err.Error()
	} else if said == "" {
		said = "no server version"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cluster: cannot reach a Docker engine (`docker version` said: %s). kind runs its nodes as Docker containers, so one must be running: ", said)
	switch {
	case strings.Contains(said, "permission denied"):
		b.WriteString("it runs, but this user may not open its socket: add yourself to the docker group (sudo usermod -aG docker $USER, then log in again)")
	default:
		b.WriteString("start it (Linux: sudo systemctl start docker, or for rootless Docker systemctl --user start docker; macOS, Windows: start Docker Desktop)")
	}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		fmt.Fprintf(&b, "; DOCKER_HOST=%s is where docker looked: unset it or point it at the running engine", h)
	} else if c := os.Getenv("DOCKER_CONTEXT"); c != "" {
		fmt.Fprintf(&b, "; DOCKER_CONTEXT=%s chose where docker looked: unset it or pick a running engine's context (docker context ls)", c)
	}
	b.WriteString("; then check with `docker info`")
	return errors.New(b.String())
}

// lastLine is s's last non-empty line, trimmed.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
