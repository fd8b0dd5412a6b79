#!/usr/bin/env bash
# Installs what a fresh machine needs for `make test` and the local campaign:
# Debian packages (promtool for the rule checks, nginx for the external example), the Go modules, the Rust
# backend, and the kube-apiserver and etcd the Kubernetes tests start.
# Safe to run again: each step is skipped when its result is present.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
command -v cargo >/dev/null 2>&1 || need_apt+=(cargo)
# nginx and curl: the external environment's end-to-end test runs the
# shipped nginx example on loopback (it is required under CI=true).
command -v nginx >/dev/null 2>&1 || need_apt+=(nginx)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: apt-get install ${need_apt[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  else
    echo "setup: please install: ${need_apt[*]} (needs root)" >&2
  fi
fi

# The three builds are independent; the kube-apiserver build is the longest
# (several minutes from cold caches), so it starts first and the others run
# beside it.
hack/kube-test-bins.sh >/dev/null &
kube=$!
# The lint tools (actionlint) live in their own module, hack/tools.
(go mod download && go mod download -modfile=hack/tools/go.mod) &
mods=$!
(cd backend && cargo build --release --quiet)
wait "$mods"
wait "$kube"
echo "setup: done"
