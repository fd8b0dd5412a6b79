#!/usr/bin/env bash
# Peak RSS (VmHWM) of ingress binaries under the two memory attacks of
# docs/robustness.md, side by side, on 127.0.0.1: 16 connections sending
# 32 MiB bodies, and 16 clients asking for a 30 MB answer and never reading
# it. Each binary gets a fresh process per attack.
#
#   hack/ingress-attack-rss.sh BIN [BIN...]   (run it under flock, see docs)
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${DURATION:-10s}
work=$(mktemp -d)
go build -o "$work/attack" ./hack/ingressattack
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
be=127.0.0.1:$(port)
"$work/attack" -serve "$be" & bepid=$!
trap 'kill $bepid 2>/dev/null || true; rm -rf "$work"' EXIT
printf 'routes:\n  - name: attack\n    path: /\n    algorithm: round-robin\n    endpoints: ["%s"]\n' "$be" >"$work/routes.yaml"
for mode in body unread; do
  size=32Mi; [ "$mode" = unread ] && size=30M
  for bin in "$@"; do
    "$bin" ingress --source file --routes "$work/routes.yaml" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
      --addr-file "$work/addr.json" --log-level error ${INGRESS_FLAGS:-} & ing=$!
    for _ in $(seq 100); do [ -s "$work/addr.json" ] && break; sleep 0.1; done
    proxy=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["proxy"])' "$work/addr.json")
    # RssAnon (the Go runtime's memory, which the soft limit bounds) and
    # RssFile (the binary's own pages, which it does not) sampled apart.
    (while kill -0 "$ing" 2>/dev/null; do grep -E '^Rss(Anon|File)' "/proc/$ing/status" 2>/dev/null; sleep 0.05; done) >"$work/samples" &
    sampler=$!
    result=$("$work/attack" -mode "$mode" -target "$proxy" -conns 16 -size "$size" -duration "$dur")
    hwm=$(awk '/VmHWM/ {print $2}' "/proc/$ing/status")
    kill "$sampler" 2>/dev/null || true
    split=$(awk '{ if ($2 > m[$1]) m[$1] = $2 } END { printf "anon %.1f, file %.1f MiB", m["RssAnon:"]/1024, m["RssFile:"]/1024 }' "$work/samples")
    printf '%-7s %-28s peak RSS %6.1f MiB (%s)  %s\n' "$mode" "$bin" "$(echo "$hwm/1024" | bc -l)" "$split" "$result"
    kill "$ing"; wait "$ing" 2>/dev/null || true
    rm -f "$work/addr.json"
  done
done
