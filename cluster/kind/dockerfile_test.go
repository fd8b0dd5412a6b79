package kind

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// debianRelease maps Debian codenames to release numbers, as the builder
// tags (golang:*-bookworm) and distroless runtimes (*-debian12) name them.
var debianRelease = map[string]int{"bullseye": 11, "bookworm": 12, "trixie": 13, "forky": 14}

// stageReleases returns the Debian release of the first (builder) and the
// last (runtime) FROM of a Dockerfile.
func stageReleases(dockerfile string) (builder, runtime int, err error) {
	from := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(dockerfile, -1)
	if len(from) < 2 {
		return 0, 0, fmt.Errorf("want a builder and a runtime stage, found %d FROM lines", len(from))
	}
	first, last := from[0][1], from[len(from)-1][1]
	tag := first[strings.LastIndex(first, ":")+1:]
	for name, n := range debianRelease {
		if strings.HasSuffix(tag, "-"+name) || tag == name {
			builder = n
		}
	}
	if builder == 0 {
		return 0, 0, fmt.Errorf("builder %s: want a tag naming its Debian release (e.g. -bookworm)", first)
	}
	m := regexp.MustCompile(`-debian(\d+)(:|$)`).FindStringSubmatch(last)
	if m == nil {
		return 0, 0, fmt.Errorf("runtime %s: want a distroless image naming its Debian release (e.g. -debian12)", last)
	}
	fmt.Sscan(m[1], &runtime)
	return builder, runtime, nil
}

// TestDockerfilesSameDebianRelease: a binary built on a newer glibc than
// its runtime's fails at startup, so each Dockerfile's builder and runtime
// must name the same Debian release.
func TestDockerfilesSameDebianRelease(t *testing.T) {
	for _, spec := range BuildSpecs(repoRoot(t), "", "i", "b") {
		raw, err := os.ReadFile(spec.Dockerfile)
		if err != nil {
			t.Fatal(err)
		}
		b, r, err := stageReleases(string(raw))
		if err != nil {
			t.Errorf("%s: %v", spec.Dockerfile, err)
			continue
		}
		if b != r {
			t.Errorf("%s: builder on Debian %d, runtime on Debian %d", spec.Dockerfile, b, r)
		}
	}
}

func TestStageReleases(t *testing.T) {
	for _, c := range []struct {
		in      string
		b, r    int
		wantErr string
	}{
		{"FROM golang:1.26-bookworm AS build\nRUN x\nFROM gcr.io/distroless/static-debian12:nonroot\n", 12, 12, ""},
		{"FROM rust:1.95-trixie AS build\nFROM gcr.io/distroless/cc-debian12\n", 13, 12, ""},
		{"FROM rust:1.95 AS build\nFROM gcr.io/distroless/cc-debian12:nonroot\n", 0, 0, "builder rust:1.95"},
		{"FROM golang:1.26-bookworm\nFROM alpine:3\n", 0, 0, "runtime alpine:3"},
		{"FROM golang:1.26-bookworm\n", 0, 0, "found 1 FROM"},
	} {
		b, r, err := stageReleases(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: err = %v, want %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || b != c.b || r != c.r {
			t.Errorf("%q: %d, %d, %v; want %d, %d", c.in, b, r, err, c.b, c.r)
		}
	}
}

// TestBuildDropsAttestations: the build environment turns off buildx's
// default provenance attestation (see BuildEnv).
func TestBuildDropsAttestations(t *testing.T) {
	found := false
	for _, e := range BuildEnv {
		found = found || e == "BUILDX_NO_DEFAULT_ATTESTATIONS=1"
	}
	if !found {
		t.Errorf("BuildEnv %q does not turn off default attestations", BuildEnv)
	}
}
