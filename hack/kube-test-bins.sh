#!/usr/bin/env bash
# Builds etcd and kube-apiserver from the Go module proxy and caches them per
# version, so tests of the Kubernetes route source and of every manifest can run
# against a real API server on a machine without Docker. Prints the folder that
# holds both binaries (use it as KUBEBUILDER_ASSETS).
#
# kube-apiserver cannot be "go install"ed: k8s.io/kubernetes replaces its staging
# modules with local paths, so we build it from a scratch module whose go.mod
# points each staging module at its published version instead.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.34.4}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
STAGING_VERSION="v0.${KUBE_VERSION#v1.}"  # v1.34.4 -> v0.34.4
cache="${PREQUALBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/prequalbench}"
out="$cache/kube-${KUBE_VERSION}-etcd-${ETCD_VERSION}"
mkdir -p "$out"

log() { echo "kube-test-bins: $*" >&2; }

# Several test binaries (and `make test`) may call this at once: one builds,
# the others wait for it instead of building the same thing in parallel.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$out/.lock"
  if ! flock -n 9; then
    log "another build is running; waiting for it"
    flock 9
  fi
fi

if [[ ! -x "$out/etcd" ]]; then
  log "building etcd $ETCD_VERSION (once per machine)"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (
    cd "$work"
    export GOFLAGS=-mod=mod
    go mod init etcdbuild >/dev/null 2>&1
    for m in api client/pkg client/v3 pkg server; do
      go mod edit -replace "go.etcd.io/etcd/$m/v3=go.etcd.io/etcd/$m/v3@$ETCD_VERSION"
    done
    go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
    go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp.$$" go.etcd.io/etcd/server/v3 >&2
    mv "$out/etcd.tmp.$$" "$out/etcd"
  )
  rm -rf "$work"; trap - EXIT
fi

if [[ ! -x "$out/kube-apiserver" ]]; then
  log "building kube-apiserver $KUBE_VERSION (once per machine, 2-4 minutes)"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (
    cd "$work"
    export GOFLAGS=-mod=mod
    gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
    [[ -f "$gomod" ]] || { log "cannot find go.mod of k8s.io/kubernetes@$KUBE_VERSION"; exit 1; }
    go mod init apiserverbuild >/dev/null 2>&1
    # Every staging replace becomes a replace to the published module version.
    grep -oE 'k8s.io/[a-z0-9-]+ => ./staging/src/k8s.io/[a-z0-9-]+' "$gomod" | awk '{print $1}' | sort -u |
      while read -r m; do go mod edit -replace "$m=$m@$STAGING_VERSION"; done
    go get "k8s.io/kubernetes/cmd/kube-apiserver@$KUBE_VERSION" >&2
    minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
    ld="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld="$ld -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    done
    go build -trimpath -ldflags "$ld" -o "$out/kube-apiserver.tmp.$$" k8s.io/kubernetes/cmd/kube-apiserver >&2
    mv "$out/kube-apiserver.tmp.$$" "$out/kube-apiserver"
  )
  rm -rf "$work"; trap - EXIT
fi

echo "$out"
