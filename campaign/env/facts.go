package env

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/internal/buildinfo"
)

// HostFacts describes the machine running the campaign and the software
// versions: OS, CPUs, memory, kernel, Go and Rust versions, and the git
// revision of repoDir (from the binary's build stamp, else from git).
// Facts that cannot be read are left empty.
func HostFacts(repoDir string) artifacts.Environment {
	info := buildinfo.Read()
	f := artifacts.Environment{
		OS:          runtime.GOOS,
		Arch:        runtime.GOARCH,
		CPUs:        runtime.NumCPU(),
		CPUModel:    cpuModel(),
		HostID:      hostID(),
		MemoryBytes: memTotal(),
		Kernel:      readTrim("/proc/sys/kernel/osrelease"),
		GoVersion:   info.GoVersion,
		Version:     info.Version,
		GitRevision: info.Revision,
		GitDirty:    info.Dirty,
		RustVersion: command(repoDir, "rustc", "--version"),
	}
	if repoDir != "" && (f.GitRevision == "" || f.GitRevision == "unknown") {
		// go run does not stamp the binary; ask git directly.
		if rev := command(repoDir, "git", "rev-parse", "HEAD"); rev != "" {
			f.GitRevision = rev
			f.GitDirty = command(repoDir, "git", "status", "--porcelain", "--untracked-files=no") != ""
		}
	}
	return f
}

// hostID is the first 12 hex digits of the SHA-256 of the host name, ""
// when it cannot be read.
func hostID() string {
	name, err := os.Hostname()
	if err != nil || name == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:6])
}

func command(dir, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func memTotal() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseUint(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}
