#!/usr/bin/env bash
# CPU per request of the backend against nginx's `return 200` on the same
# loopback, side by side in interleaved rounds. Each target is driven by
# the same wrk load; the server process's utime+stime is read from
# /proc/PID/stat before and after and divided by the requests wrk completed.
# Needs wrk and nginx (Debian packages). Listens on 127.0.0.1 only; every wrk
# run is bounded by -d.
#
#   backend/hack/bench-cost.sh [ROUNDS] [DURATION] [CONNECTIONS] [BACKEND_BIN]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"; dur="${2:-5s}"; conns="${3:-64}"; bin="${4:-target/release/prequal-backend}"
for t in nginx wrk; do command -v "$t" >/dev/null || { echo "bench-cost: $t not found (apt-get install nginx wrk)" >&2; exit 2; }; done
[ -x "$bin" ] || cargo build --release --quiet

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; nginx -p "$work" -c nginx.conf -s stop 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

cat > "$work/nginx.conf" <<NGINX
worker_processes 1; daemon on; pid $work/nginx.pid; error_log $work/error.log;
events { worker_connections 4096; }
http { access_log off;
  client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work; uwsgi_temp_path $work; scgi_temp_path $work;
  server { listen 127.0.0.1:18280; keepalive_requests 1000000; location / { return 200 '{}'; } }
}
NGINX
nginx -p "$work" -c nginx.conf
for _ in $(seq 50); do [ -s "$work/nginx.pid" ] && break; sleep 0.1; done
nginx_worker=$(pgrep -P "$(cat "$work/nginx.pid")" | head -1)

# work0 (iterations=0): no service time, so what is measured is the server's
# own cost (parsing, the gate, the estimator, the response). work1
# (iterations=1): 20 us in a slot (default --service-time 20ms per 1000), so
# the slot's wait and the queue in front of the 4 slots are in it too.
"$bin" --listen 127.0.0.1:18281 --seed 1 --shutdown-grace 0 2>"$work/backend.log" &
pids+=($!); backend=$!
for _ in $(seq 100); do curl -fsS http://127.0.0.1:18281/healthz >/dev/null 2>&1 && break; sleep 0.1; done

ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }

printf "round\ttarget\trps\tp50_ms\tcpu_us_per_req\n"
for r in $(seq "$rounds"); do
  for t in "nginx:$nginx_worker:http://127.0.0.1:18280/" \
           "work0:$backend:http://127.0.0.1:18281/work?iterations=0" \
           "work1:$backend:http://127.0.0.1:18281/work?iterations=1" \
           "probe:$backend:http://127.0.0.1:18281/prequal/probe"; do
    name=${t%%:*}; rest=${t#*:}; pid=${rest%%:*}; url=${rest#*:}
    before=$(cpu "$pid")
    out=$(timeout 60 wrk -t1 -c"$conns" -d"$dur" --latency "$url")
    after=$(cpu "$pid")
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1=="50%" {print $2}' <<<"$out")
    us=$(awk -v b="$before" -v a="$after" -v n="$reqs" -v hz="$ticks" 'BEGIN { printf "%.2f", (a-b)/hz*1e6/n }')
    printf "%s\t%s\t%s\t%s\t%s\n" "$r" "$name" "$rps" "$p50" "$us"
  done
done
