#!/bin/sh
# Runs the nginx comparison on loopback: three backends, nginx and the
# project's ingress, then the campaign and its report. Needs nginx, curl,
# a built backend (cargo build --release in backend/) and prequalbench on
# PATH (go install ./cmd/prequalbench). Extra arguments go to
# `campaign run`, e.g. --duration-scale 0.3.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
backend=${BACKEND_BIN:-$repo/backend/target/release/prequal-backend}
export NGINX_PREFIX="$here/run" INGRESS_ADMIN=127.0.0.1:18091
mkdir -p "$NGINX_PREFIX"
cp "$here/nginx.conf" "$NGINX_PREFIX/nginx.conf"
echo "# nginx default: weighted round robin" > "$NGINX_PREFIX/balance.conf"
pids=""
cleanup() {
  nginx -p "$NGINX_PREFIX" -c nginx.conf -s quit 2>/dev/null || true
  for p in $pids; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM
"$backend" --listen 127.0.0.1:18081 --concurrency 4 --service-time 5ms & pids="$pids $!"
"$backend" --listen 127.0.0.1:18082 --concurrency 4 --service-time 5ms & pids="$pids $!"
"$backend" --listen 127.0.0.1:18083 --concurrency 4 --service-time 5ms --slow 3 & pids="$pids $!"
nginx -p "$NGINX_PREFIX" -c nginx.conf
prequalbench ingress --source file --routes "$here/routes.yaml" \
  --listen 127.0.0.1:18090 --admin-listen 127.0.0.1:18091 --default-algorithm prequal & pids="$pids $!"
prequalbench campaign run --env external --external "$here/external.yaml" \
  --scenario "$here/scenario.yaml" --out "$here/results" "$@"
