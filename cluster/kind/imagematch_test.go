package kind

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	cfgDigest  = "sha256:6f1c6ab3c7a0d9d3c4b1e2f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0"
	idxDigest  = "sha256:0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"
	convDigest = "sha256:d41d8cd98f00b204e9800998ecf8427ed41d8cd98f00b204e9800998ecf8427e"
	newDigest  = "sha256:ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
)

// What a kind node lists after `docker save` of an image from Docker's
// classic store was imported: ctr keeps a manifest it converted from the
// docker-archive (its own digest); crictl shows the config digest, which
// is the classic store's image ID.
const (
	classicCtr = `REF                                          TYPE                                                 DIGEST                                                                  SIZE     PLATFORMS   LABELS
docker.io/kindest/kindnetd:v20250512-df8de77b application/vnd.docker.distribution.manifest.v2+json sha256:1111111111111111111111111111111111111111111111111111111111111111 37.4 MiB linux/amd64 io.cri-containerd.image=managed
docker.io/prequalbench/ingress:dev           application/vnd.docker.distribution.manifest.v2+json ` + convDigest + ` 11.9 MiB linux/amd64 io.cri-containerd.image=managed
` + cfgDigest + ` application/vnd.docker.distribution.manifest.v2+json ` + convDigest + ` 11.9 MiB linux/amd64 io.cri-containerd.image=managed
`
	classicCrictl = `IMAGE                          TAG                  IMAGE ID                                                                  SIZE
docker.io/kindest/kindnetd     v20250512-df8de77b   sha256:2222222222222222222222222222222222222222222222222222222222222222   44.4MB
docker.io/prequalbench/ingress dev                  ` + cfgDigest + `   12.5MB
`
)

// After an image from Docker's containerd store was imported: ctr's
// target is the OCI index `docker image inspect` names as the image ID;
// crictl still shows the config digest.
const (
	containerdCtr = `REF                                TYPE                                    DIGEST                                                                  SIZE     PLATFORMS   LABELS
docker.io/prequalbench/ingress:dev application/vnd.oci.image.index.v1+json ` + idxDigest + ` 11.9 MiB linux/amd64 io.cri-containerd.image=managed
import-2026-12-01@` + idxDigest + ` application/vnd.oci.image.index.v1+json ` + idxDigest + ` 11.9 MiB linux/amd64 io.cri-containerd.image=managed
` + cfgDigest + ` application/vnd.oci.image.index.v1+json ` + idxDigest + ` 11.9 MiB linux/amd64 io.cri-containerd.image=managed
`
	containerdCrictl = `IMAGE                          TAG   IMAGE ID                                                                  SIZE
docker.io/prequalbench/ingress dev   ` + cfgDigest + `   12.5MB
`
)

func TestNodeHasImage(t *testing.T) {
	for _, c := range []struct {
		name, ref, localID, ctr, crictl string
		want                            bool
	}{
		{"classic store, same image", "prequalbench/ingress:dev", cfgDigest, classicCtr, classicCrictl, true},
		{"classic store, rebuilt image", "prequalbench/ingress:dev", newDigest, classicCtr, classicCrictl, false},
		{"containerd store, same image", "prequalbench/ingress:dev", idxDigest, containerdCtr, containerdCrictl, true},
		{"containerd store, rebuilt image", "prequalbench/ingress:dev", newDigest, containerdCtr, containerdCrictl, false},
		{"ctr only (crictl failed)", "prequalbench/ingress:dev", idxDigest, containerdCtr, "", true},
		{"crictl only (ctr failed)", "prequalbench/ingress:dev", cfgDigest, "", classicCrictl, true},
		{"same ID under another tag", "prequalbench/ingress:v2", idxDigest, containerdCtr, containerdCrictl, false},
		{"another image", "prequalbench/backend:dev", cfgDigest, classicCtr, classicCrictl, false},
		{"fully qualified ref", "docker.io/prequalbench/ingress:dev", idxDigest, containerdCtr, containerdCrictl, true},
		{"nothing listed", "prequalbench/ingress:dev", cfgDigest, "", "", false},
		{"no local ID", "prequalbench/ingress:dev", "", classicCtr, classicCrictl, false},
	} {
		if got := NodeHasImage(c.ref, c.localID, c.ctr, c.crictl); got != c.want {
			t.Errorf("%s: NodeHasImage = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestNormalizeRef(t *testing.T) {
	for in, want := range map[string]string{
		"prequalbench/ingress:dev":              "docker.io/prequalbench/ingress:dev",
		"busybox":                               "docker.io/library/busybox:latest",
		"busybox:1":                             "docker.io/library/busybox:1",
		"ghcr.io/x/y:1":                         "ghcr.io/x/y:1",
		"localhost:5000/x":                      "localhost:5000/x:latest",
		"localhost/x:2":                         "localhost/x:2",
		"docker.io/prequalbench/ingress:dev":    "docker.io/prequalbench/ingress:dev",
		"kindest/node@sha256:abc":               "docker.io/kindest/node@sha256:abc",
		"registry.example:5000/team/img:v1.2.3": "registry.example:5000/team/img:v1.2.3",
	} {
		if got := NormalizeRef(in); got != want {
			t.Errorf("NormalizeRef(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSaveArgs(t *testing.T) {
	if got := strings.Join(SaveArgs("prequalbench/ingress:dev", "/t/image.tar", "linux/amd64"), " "); got != "save -o /t/image.tar --platform linux/amd64 prequalbench/ingress:dev" {
		t.Errorf("with platform: %s", got)
	}
	if got := strings.Join(SaveArgs("b:1", "/t/x.tar", ""), " "); got != "save -o /t/x.tar b:1" {
		t.Errorf("without platform: %s", got)
	}
}

// TestSaveFallsBackWithoutPlatform: a Docker that does not know
// `save --platform` gets the plain save.
func TestSaveFallsBackWithoutPlatform(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho \"$@\" >> " + calls + "\n" +
		"case \"$1\" in version) echo linux/arm64;; save) case \"$*\" in *--platform*) echo 'unknown flag: --platform' >&2; exit 125;; esac;; esac\nexit 0\n"
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	if err := (dockerCLI{}).save(context.Background(), "b:1", "/t/x.tar"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(calls)
	want := "version -f {{.Server.Os}}/{{.Server.Arch}}\nsave -o /t/x.tar --platform linux/arm64 b:1\nsave -o /t/x.tar b:1\n"
	if string(got) != want {
		t.Errorf("docker calls\n%s\nwant\n%s", got, want)
	}
}
