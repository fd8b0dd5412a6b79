package kind

import (
	"strings"
)

// Whether a node already holds the local image is decided from what the
// node lists, because Docker's two image stores name an image differently:
//
//   - classic store: `docker image inspect` gives the config digest, which
//     is the IMAGE ID column of `crictl images --no-trunc` on the node;
//   - containerd store (default on fresh Docker installs and GitHub's
//     runners): it gives the manifest (or index) digest, which `docker
//     save` exports as the image's target and `ctr images import` keeps,
//     so it is the DIGEST column of `ctr -n k8s.io images list`.
//
// The image matches when either list has the same reference with the local
// ID. Builds run without provenance attestations (BuildEnv), so an
// unchanged build keeps its digest and is not loaded again.

// NormalizeRef spells an image reference as containerd does:
// "prequalbench/ingress:dev" -> "docker.io/prequalbench/ingress:dev",
// "busybox" -> "docker.io/library/busybox:latest".
func NormalizeRef(ref string) string {
	name, digest, _ := strings.Cut(ref, "@")
	first, _, hasSlash := strings.Cut(name, "/")
	switch {
	case !hasSlash:
		name = "docker.io/library/" + name
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		name = "docker.io/" + name
	}
	if i := strings.LastIndex(name, ":"); i < strings.LastIndex(name, "/") || i < 0 {
		if digest == "" {
			name += ":latest"
		}
	}
	if digest != "" {
		name += "@" + digest
	}
	return name
}

// NodeHasImage reports whether a node's `ctr -n k8s.io images list` or
// `crictl images --no-trunc` output lists ref with the local image ID.
func NodeHasImage(ref, localID, ctrList, crictlList string) bool {
	if localID == "" {
		return false
	}
	want := NormalizeRef(ref)
	// ctr: REF TYPE DIGEST SIZE PLATFORMS LABELS
	for _, line := range strings.Split(ctrList, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] != "REF" && NormalizeRef(f[0]) == want && f[2] == localID {
			return true
		}
	}
	// crictl: IMAGE TAG IMAGE-ID SIZE
	for _, line := range strings.Split(crictlList, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] != "IMAGE" && NormalizeRef(f[0]+":"+f[1]) == want && f[2] == localID {
			return true
		}
	}
	return false
}
