package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BackendRelPath is where cargo puts the backend binary, relative to the
// repository root.
const BackendRelPath = "backend/target/release/prequal-backend"

// ModulePath identifies this repository's go.mod.
const ModulePath = "github.com/prequalbench/prequalbench"

// FindRepo walks up from dir to the directory whose go.mod declares
// ModulePath.
func FindRepo(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("local: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module "+ModulePath+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("local: not inside the prequalbench source tree (no go.mod for " + ModulePath + " above the working directory); pass --backend-bin")
		}
		dir = parent
	}
}

// BackendBinary returns the backend binary to run: explicit when set (it
// must exist), else the repository's cargo build output, built with
// `cargo build --release` when missing. announce is told before a build,
// which takes a while the first time.
func BackendBinary(ctx context.Context, repo, explicit string, announce func(string)) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("local: --backend-bin: %w", err)
		}
		return explicit, nil
	}
	if repo == "" {
		return "", errors.New("local: no backend binary: pass --backend-bin or run inside the source tree")
	}
	bin := filepath.Join(repo, BackendRelPath)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if _, err := exec.LookPath("cargo"); err != nil {
		return "", errors.New("local: the backend binary is missing and cargo is not installed: install Rust (https://rustup.rs) or pass --backend-bin")
	}
	if announce != nil {
		announce("building the backend with cargo build --release (first run only)...")
	}
	cmd := exec.CommandContext(ctx, "cargo", "build", "--release", "--quiet")
	cmd.Dir = filepath.Join(repo, "backend")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("local: cargo build --release in %s: %v\n%s", cmd.Dir, err, out.String())
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("local: cargo build finished but %s is missing", bin)
	}
	return bin, nil
}
