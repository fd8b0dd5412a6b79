#!/usr/bin/env bash
# Side-by-side proxy benchmark on loopback: the same load straight at a
# backend (direct), through nginx (1 worker, keepalive upstream) and through
# `prequalbench ingress` with round-robin and with prequal, in interleaved
# rounds (each round starts at the next target). Per target and round:
#   - saturation: wrk, closed loop (-c CONNECTIONS): rps, p50, p99;
#   - fixed rate: hack/proxybench, open loop at RATE rps: p50, p99 (added
#     latency = these minus direct's);
#   - CPU µs per request of the proxy process and of the backend nginx, from
#     utime+stime in /proc/PID/stat over each phase;
#   - for prequal, probes sent per request (prequal_probes_sent_total on its
#     admin /metrics), from which the summary estimates CPU per probe.
# Needs nginx and wrk (Debian packages). Every server listens on 127.0.0.1
# only, every load is bounded by its duration and a timeout. Prints a TSV,
# then a markdown summary (medians, ratios to nginx).
#
#   hack/bench-proxy.sh [ROUNDS] [DURATION] [CONNECTIONS] [RATE] [RATE_DURATION]
#
# INGRESS_BIN runs that prequalbench binary instead of building bin/; with
# COMPARE_BIN set, its ingress joins the rounds as cmp-ingress-rr,
# cmp-ingress-prequal, cmp-ingress-rr-16 and cmp-ingress-prequal-16, for a
# change measured side by side with its parent.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"; dur="${2:-10s}"; conns="${3:-64}"; rate="${4:-1000}"; rdur="${5:-5s}"
for t in nginx wrk curl; do command -v "$t" >/dev/null || { echo "bench-proxy: $t not found (apt-get install nginx wrk curl)" >&2; exit 2; }; done
ingress_bin="${INGRESS_BIN:-}"
[ -n "$ingress_bin" ] || { make -s build >/dev/null; ingress_bin=bin/prequalbench; }

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/proxybench" ./hack/proxybench

# nginx in the foreground, one process (no master), so its pid is the one
# doing the work. The backend answers {} itself (the cheapest backend there
# is, so the proxies' own cost dominates) and probes with a valid idle
# answer without a timestamp, so prequal's probes succeed.
start_nginx() { # name server-block
  mkdir -p "$work/$1"
  cat > "$work/$1/nginx.conf" <<NGINX
worker_processes 1; master_process off; daemon off; pid $work/$1/nginx.pid; error_log $work/$1/error.log;
events { worker_connections 4096; }
http { access_log off;
  client_body_temp_path $work/$1; proxy_temp_path $work/$1; fastcgi_temp_path $work/$1; uwsgi_temp_path $work/$1; scgi_temp_path $work/$1;
  $2
}
NGINX
  nginx -p "$work/$1" -c nginx.conf &
  pids+=($!)
}
# The backend also listens on 16 more ports, the endpoints of a prequal
# route whose probes spread over 16 replicas as in a campaign (behind one
# endpoint a probe in flight coalesces the next ones, so few are sent), and
# of a round-robin route over the same 16, which the CPU per probe is taken
# against (spreading over 16 endpoints costs CPU of its own).
be_listen="listen 127.0.0.1:18180;"
pq16_eps=""
for p in $(seq 18200 18215); do be_listen+=" listen 127.0.0.1:$p;"; pq16_eps+="${pq16_eps:+, }\"127.0.0.1:$p\""; done
start_nginx backend "server { $be_listen keepalive_requests 1000000; location / { return 200 '{}'; }
  location = /prequal/probe { return 200 '{\"rif\":0,\"latency_median_ms\":null,\"samples\":0}'; } }"
be_pid=${pids[-1]}
start_nginx proxy "upstream be { server 127.0.0.1:18180; keepalive 64; keepalive_requests 1000000; }
  server { listen 127.0.0.1:18181; keepalive_requests 1000000;
    location / { proxy_pass http://be; proxy_http_version 1.1; proxy_set_header Connection \"\"; } }"
nginx_pid=${pids[-1]}

start_ingress() { # name algorithm port adminport binary [endpoints]
  local eps=${6:-'"127.0.0.1:18180"'}
  cat > "$work/$1.yaml" <<YAML
routes:
  - name: bench
    path: /
    algorithm: $2
    endpoints: [$eps]
YAML
  "$5" ingress --source file --routes "$work/$1.yaml" --listen "127.0.0.1:$3" \
    --admin-listen "127.0.0.1:$4" --log-level warn 2>"$work/$1.log" &
  pids+=($!)
}
targets=(direct:18180:: nginx:18181:$nginx_pid:)
start_ingress rr round-robin 18182 18192 "$ingress_bin"
targets+=(ingress-rr:18182:${pids[-1]}:)
start_ingress pq prequal 18183 18193 "$ingress_bin"
targets+=(ingress-prequal:18183:${pids[-1]}:18193)
start_ingress rr16 round-robin 18187 18197 "$ingress_bin" "$pq16_eps"
targets+=(ingress-rr-16:18187:${pids[-1]}:)
start_ingress pq16 prequal 18186 18196 "$ingress_bin" "$pq16_eps"
targets+=(ingress-prequal-16:18186:${pids[-1]}:18196)
if [ -n "${COMPARE_BIN:-}" ]; then
  start_ingress cmp-rr round-robin 18184 18194 "$COMPARE_BIN"
  targets+=(cmp-ingress-rr:18184:${pids[-1]}:)
  start_ingress cmp-pq prequal 18185 18195 "$COMPARE_BIN"
  targets+=(cmp-ingress-prequal:18185:${pids[-1]}:18195)
  start_ingress cmp-rr16 round-robin 18188 18198 "$COMPARE_BIN" "$pq16_eps"
  targets+=(cmp-ingress-rr-16:18188:${pids[-1]}:)
  start_ingress cmp-pq16 prequal 18189 18199 "$COMPARE_BIN" "$pq16_eps"
  targets+=(cmp-ingress-prequal-16:18189:${pids[-1]}:18199)
fi
for t in "${targets[@]}"; do
  IFS=: read -r _ port _ _ <<<"$t"
  for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$port/" >/dev/null 2>&1 && break; sleep 0.1; done
  curl -fsS "http://127.0.0.1:$port/" >/dev/null || { echo "bench-proxy: nothing answers on 127.0.0.1:$port" >&2; exit 1; }
done

tck=$(getconf CLK_TCK)
cpu() { [ -n "$1" ] && awk '{print $14+$15}' "/proc/$1/stat" || echo 0; } # ticks
probes() { [ -n "$1" ] && curl -fsS "http://127.0.0.1:$1/metrics" | awk '/^prequal_probes_sent_total/ {s+=$2} END {printf "%d", s}' || echo 0; }
per_req() { # ticks-before ticks-after requests -> µs per request, or - without a process
  [ -n "$4" ] || { echo -; return; }
  awk -v a="$1" -v b="$2" -v n="$3" -v t="$tck" 'BEGIN {printf "%.1f", (n > 0 ? (b-a)*1e6/t/n : 0)}'
}
to_ms() { awk '{v=$1; if (v ~ /us$/) v=v/1000; else if (v ~ /ms$/) v=v+0; else if (v ~ /s$/) v=v*1000; printf "%.3f", v}' <<<"$1"; }

out="$work/results.tsv"
printf "round\ttarget\trps\tp50_ms\tp99_ms\tproxy_cpu_us_req\tbackend_cpu_us_req\tprobes_per_req\tfr_requests\tfr_rate\tfr_errors\tfr_p50_ms\tfr_p99_ms\tfr_proxy_cpu_us_req\tfr_backend_cpu_us_req\n" | tee "$out"
for r in $(seq "$rounds"); do
  for k in $(seq 0 $((${#targets[@]} - 1))); do
    t=${targets[$(((k + r - 1) % ${#targets[@]}))]}
    IFS=: read -r name port pid admin <<<"$t"
    url="http://127.0.0.1:$port/"
    # Saturation.
    p0=$(cpu "$pid"); b0=$(cpu "$be_pid"); q0=$(probes "$admin")
    w=$(timeout 120 wrk -t1 -c"$conns" -d"$dur" --latency "$url")
    p1=$(cpu "$pid"); b1=$(cpu "$be_pid"); q1=$(probes "$admin")
    n=$(awk '/requests in/ {print $1}' <<<"$w")
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$w")
    p50=$(to_ms "$(awk '$1=="50%" {print $2}' <<<"$w")"); p99=$(to_ms "$(awk '$1=="99%" {print $2}' <<<"$w")")
    ppr=-; [ -n "$admin" ] && ppr=$(awk -v a="$q0" -v b="$q1" -v n="$n" 'BEGIN {printf "%.2f", (n > 0 ? (b-a)/n : 0)}')
    sat="$rps\t$p50\t$p99\t$(per_req "$p0" "$p1" "$n" "$pid")\t$(per_req "$b0" "$b1" "$n" "$be_pid")\t$ppr"
    # Fixed rate.
    p0=$(cpu "$pid"); b0=$(cpu "$be_pid")
    IFS=$'\t' read -r fn frate ferr fp50 fp99 < <(timeout 120 "$work/proxybench" rate -url "$url" -rate "$rate" -duration "$rdur" -connections "$conns")
    p1=$(cpu "$pid"); b1=$(cpu "$be_pid")
    printf "%s\t%s\t$sat\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$r" "$name" "$fn" "$frate" "$ferr" "$fp50" "$fp99" \
      "$(per_req "$p0" "$p1" "$fn" "$pid")" "$(per_req "$b0" "$b1" "$fn" "$be_pid")" | tee -a "$out"
  done
done
echo
"$work/proxybench" summary <"$out"
# A sanity check on the prequal numbers: their probes must have succeeded.
for t in "${targets[@]}"; do
  IFS=: read -r name _ _ admin <<<"$t"
  [ -n "$admin" ] || continue
  curl -fsS "http://127.0.0.1:$admin/metrics" | awk -v name="$name" '/^prequal_probe_results_total/ {
    match($0, /outcome="[a-z]+"/); o = substr($0, RSTART + 9, RLENGTH - 10); n[o] += $NF }
    END { printf "%s probe outcomes over the whole run:", name; for (o in n) printf " %s %d", o, n[o]; print "" }'
done
