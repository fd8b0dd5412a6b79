#!/usr/bin/env bash
# Side-by-side proxy benchmark on loopback: the same wrk load straight at a
# backend, through nginx (1 worker, keepalive upstream) and through
# `prequalbench ingress` (round-robin and prequal), in interleaved rounds.
# Needs nginx and wrk (Debian packages). Every server listens on 127.0.0.1
# only and every wrk run is bounded by -d. Prints a TSV of rps and latency.
#
#   hack/bench-proxy.sh [ROUNDS] [DURATION] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"; dur="${2:-10s}"; conns="${3:-64}"
for t in nginx wrk; do command -v "$t" >/dev/null || { echo "bench-proxy: $t not found (apt-get install nginx wrk)" >&2; exit 2; }; done
make -s build >/dev/null

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; nginx -p "$work" -c nginx.conf -s stop 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# The backend: nginx answering {} itself (the cheapest backend there is, so
# the proxies' own cost dominates), and the proxy nginx in front of it.
cat > "$work/nginx.conf" <<NGINX
worker_processes 1; daemon on; pid $work/nginx.pid; error_log $work/error.log;
events { worker_connections 4096; }
http { access_log off;
  client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work; uwsgi_temp_path $work; scgi_temp_path $work;
  upstream be { server 127.0.0.1:18180; keepalive 64; keepalive_requests 1000000; }
  server { listen 127.0.0.1:18180; keepalive_requests 1000000; location / { return 200 '{}'; } }
  server { listen 127.0.0.1:18181; keepalive_requests 1000000;
    location / { proxy_pass http://be; proxy_http_version 1.1; proxy_set_header Connection ""; } }
}
NGINX
nginx -p "$work" -c nginx.conf

start_ingress() { # name algorithm port adminport
  cat > "$work/$1.yaml" <<YAML
routes:
  - name: bench
    path: /
    algorithm: $2
    endpoints: ["127.0.0.1:18180"]
YAML
  bin/prequalbench ingress --source file --routes "$work/$1.yaml" --listen "127.0.0.1:$3" \
    --admin-listen "127.0.0.1:$4" --log-level warn 2>"$work/$1.log" &
  pids+=($!)
}
start_ingress rr round-robin 18182 18192
start_ingress pq prequal 18183 18193
for port in 18180 18181 18182 18183; do
  for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$port/" >/dev/null 2>&1 && break; sleep 0.1; done
done

printf "round\ttarget\trps\tp50_ms\tp99_ms\n"
for r in $(seq "$rounds"); do
  for t in direct:18180 nginx:18181 ingress-rr:18182 ingress-prequal:18183; do
    name=${t%%:*}; port=${t##*:}
    out=$(timeout 60 wrk -t1 -c"$conns" -d"$dur" --latency "http://127.0.0.1:$port/")
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1=="50%" {print $2}' <<<"$out"); p99=$(awk '$1=="99%" {print $2}' <<<"$out")
    printf "%s\t%s\t%s\t%s\t%s\n" "$r" "$name" "$rps" "$p50" "$p99"
  done
done
