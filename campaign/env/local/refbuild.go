package local

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// RefBuild is the ingress built from a git ref, cached by commit.
type RefBuild struct {
	// Commit is the full commit the ref resolved to.
	Commit string
	// IngressBin is the cached prequalbench binary of that commit.
	IngressBin string
}

// BuildRef returns the prequalbench binary of ref, building it once per
// commit into cacheDir/<commit>/prequalbench: the commit is checked out
// in a detached `git worktree` beside the cache entry, built with `go
// build` (its revision stamped as the Makefile does), and the worktree
// removed. A later call for the same commit, through any ref naming it,
// reuses the binary; a concurrent call for it waits for the build under
// way. announce is told before a build.
func BuildRef(ctx context.Context, repo, ref, cacheDir string, announce func(string)) (RefBuild, error) {
	out, err := run(ctx, repo, "git", "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil {
		return RefBuild{}, fmt.Errorf("local: --baseline-ref %q: not a commit of the repository in %s", ref, repo)
	}
	commit := strings.TrimSpace(out)
	entry := filepath.Join(cacheDir, commit)
	bin := filepath.Join(entry, "prequalbench")
	if _, err := os.Stat(bin); err == nil {
		return RefBuild{Commit: commit, IngressBin: bin}, nil
	}
	if err := os.MkdirAll(entry, 0o755); err != nil {
		return RefBuild{}, fmt.Errorf("local: build cache: %w", err)
	}
	// Two campaigns building one commit at once (a shared cache) wrote
	// one .tmp and renamed it twice; the second now waits for the first
	// and takes its binary.
	lock, err := os.OpenFile(filepath.Join(entry, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return RefBuild{}, fmt.Errorf("local: build cache: %w", err)
	}
	defer lock.Close() // closing releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return RefBuild{}, fmt.Errorf("local: build cache: lock %s: %w", lock.Name(), err)
	}
	if _, err := os.Stat(bin); err == nil {
		return RefBuild{Commit: commit, IngressBin: bin}, nil
	}
	if announce != nil {
		announce(fmt.Sprintf("building %s (%s) into %s (once per commit)...", ref, commit[:min(7, len(commit))], entry))
	}
	src, err := os.MkdirTemp(entry, "src-")
	if err != nil {
		return RefBuild{}, fmt.Errorf("local: build cache: %w", err)
	}
	defer func() {
		// The worktree goes, and git forgets it.
		_, _ = run(context.Background(), repo, "git", "worktree", "remove", "--force", src)
		os.RemoveAll(src)
		_, _ = run(context.Background(), repo, "git", "worktree", "prune")
	}()
	if _, err := run(ctx, repo, "git", "worktree", "add", "--detach", src, commit); err != nil {
		return RefBuild{}, fmt.Errorf("local: --baseline-ref %s: git worktree add: %w", ref, err)
	}
	tmp := bin + ".tmp"
	ldflags := "-X " + ModulePath + "/internal/buildinfo.Revision=" + commit
	if _, err := run(ctx, src, "go", "build", "-ldflags", ldflags, "-o", tmp, "./cmd/prequalbench"); err != nil {
		return RefBuild{}, fmt.Errorf("local: --baseline-ref %s: go build: %w", ref, err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return RefBuild{}, fmt.Errorf("local: build cache: %w", err)
	}
	return RefBuild{Commit: commit, IngressBin: bin}, nil
}

// DefaultBuildCache is where BuildRef keeps its builds: the user's cache
// directory, else the system's temporary one.
func DefaultBuildCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "prequalbench", "builds")
}

// run runs a command in dir and returns its standard output; the error
// carries what it printed.
func run(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
