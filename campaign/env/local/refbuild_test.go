package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// tinyRepo makes a git repository holding a module of this path whose
// cmd/prequalbench prints its stamped revision and a word, and commits
// it; it returns the repository and the commit.
func tinyRepo(t *testing.T, word string) (string, func(word string) string) {
	t.Helper()
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(rel, text string) {
		p := filepath.Join(repo, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module "+ModulePath+"\n\ngo 1.22\n")
	write("internal/buildinfo/b.go", "package buildinfo\n\nvar Revision string\n")
	git("init", "-q")
	commit := func(word string) string {
		write("cmd/prequalbench/main.go", `package main

import (
	"fmt"

	"`+ModulePath+`/internal/buildinfo"
)

func main() { fmt.Println(buildinfo.Revision, "`+word+`") }
`)
		git("add", "-A")
		git("commit", "-qm", word)
		return git("rev-parse", "HEAD")
	}
	commit(word)
	return repo, commit
}

// A ref is built once per commit, from that commit's tree (not the work
// tree's), stamped with its revision, and the worktree is gone after.
func TestBuildRef_OncePerCommitFromThatCommit(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain")
	}
	repo, commit := tinyRepo(t, "old")
	first := commit("new") // HEAD; HEAD~1 says "old"
	cache := t.TempDir()
	ctx := context.Background()
	builds := 0
	announce := func(string) { builds++ }

	b, err := BuildRef(ctx, repo, "HEAD~1", cache, announce)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(b.IngressBin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(out)), b.Commit+" old"; got != want {
		t.Errorf("built binary says %q, want %q", got, want)
	}
	if b.Commit == first || filepath.Dir(b.IngressBin) != filepath.Join(cache, b.Commit) {
		t.Errorf("commit %s in %s: want HEAD~1's, cached under its commit", b.Commit, b.IngressBin)
	}
	again, err := BuildRef(ctx, repo, b.Commit, cache, announce)
	if err != nil || again != b || builds != 1 {
		t.Errorf("second call: %+v %v after %d builds; want the cached binary, one build", again, err, builds)
	}
	wt, err := run(ctx, repo, "git", "worktree", "list")
	if err != nil || strings.Count(strings.TrimSpace(wt), "\n") != 0 {
		t.Errorf("worktrees left: %q %v", wt, err)
	}
	if _, err := BuildRef(ctx, repo, "no-such-ref", cache, nil); err == nil || !strings.Contains(err.Error(), "--baseline-ref") {
		t.Errorf("bad ref: %v, want an error naming --baseline-ref", err)
	}
}

// Two campaigns sharing the cache, asking for one commit at once: one
// builds, the other waits and takes that binary.
func TestBuildRef_ConcurrentCallsBuildOnce(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain")
	}
	repo, _ := tinyRepo(t, "once")
	cache := t.TempDir()
	var builds atomic.Int32
	results := make([]RefBuild, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = BuildRef(context.Background(), repo, "HEAD", cache, func(string) { builds.Add(1) })
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || results[0] != results[1] || builds.Load() != 1 {
		t.Fatalf("results %+v, errors %v, %d builds; want one build, one binary for both", results, errs, builds.Load())
	}
	if out, err := exec.Command(results[0].IngressBin).Output(); err != nil || !strings.Contains(string(out), "once") {
		t.Errorf("the binary: %q %v", out, err)
	}
}
