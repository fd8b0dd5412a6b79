package kind

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kind/pkg/apis/config/defaults"
)

// TestLoggerPassesWarnings: kind's warnings and errors reach the writer,
// status lines at V(0) too, debug lines only above the verbosity.
func TestLoggerPassesWarnings(t *testing.T) {
	var buf bytes.Buffer
	l := &Logger{W: &buf}
	l.Warn("timed out waiting for Ready ⚠️")
	l.Warnf("node %s not ready", "pb-worker")
	l.Errorf("failed: %d", 1)
	l.V(0).Infof(" ✓ %s\n", "Ensuring node image")
	l.V(1).Info("Pulling image: kindest/node ...")
	if l.V(1).Enabled() || !l.V(0).Enabled() {
		t.Error("V(0) must be enabled and V(1) not at verbosity 0")
	}
	want := "kind: WARNING: timed out waiting for Ready ⚠️\n" +
		"kind: WARNING: node pb-worker not ready\n" +
		"kind: ERROR: failed: 1\n" +
		"kind:  ✓ Ensuring node image\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
	buf.Reset()
	(&Logger{W: &buf, Verbosity: 1}).V(1).Info("debug")
	if buf.String() != "kind: debug\n" {
		t.Errorf("verbosity 1: %q", buf.String())
	}
}

func TestNodeImage(t *testing.T) {
	if NodeImage("") != defaults.Image || NodeImage("kindest/node:v1.34.0") != "kindest/node:v1.34.0" {
		t.Errorf("NodeImage: %q, %q", NodeImage(""), NodeImage("kindest/node:v1.34.0"))
	}
}

// fakeDockerBin puts a `docker` script first on PATH that logs its
// arguments and answers `image inspect` with the given exit code.
func fakeDockerBin(t *testing.T, inspectExit int) (logFile string) {
	t.Helper()
	dir := t.TempDir()
	logFile = filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho \"$@\" >> " + logFile + "\n" +
		"case \"$1 $2\" in \"image inspect\") exit " + string(rune('0'+inspectExit)) + ";; esac\n" +
		"[ \"$1\" = pull ] && echo 'Downloading [=====>   ] 512MB/1GB'\nexit 0\n"
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return logFile
}

// TestPullIfMissingShowsProgress: a missing node image is pulled with
// docker's progress on the writer; a present one is not pulled.
func TestPullIfMissingShowsProgress(t *testing.T) {
	calls := fakeDockerBin(t, 1)
	var buf bytes.Buffer
	if err := PullIfMissing(context.Background(), "kindest/node:v1", &buf); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(calls)
	if string(got) != "image inspect kindest/node:v1\npull kindest/node:v1\n" {
		t.Errorf("docker calls %q", got)
	}
	if !strings.Contains(buf.String(), "pulling node image kindest/node:v1") || !strings.Contains(buf.String(), "512MB/1GB") {
		t.Errorf("progress %q", buf.String())
	}

	calls = fakeDockerBin(t, 0)
	buf.Reset()
	if err := PullIfMissing(context.Background(), "kindest/node:v1", &buf); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(calls); string(got) != "image inspect kindest/node:v1\n" || buf.Len() != 0 {
		t.Errorf("present image: calls %q, output %q", got, buf.String())
	}
}
