#!/usr/bin/env bash
# Runs hack/scenarios/ingress-rss.yaml (5,000 rps over 16 backends, on
# 127.0.0.1) and samples the ingress process's RSS every second; prints the
# peak per ingress process and the campaign summary.
#
#   hack/ingress-rss.sh [extra campaign run flags, e.g. --duration-scale 0.5]
set -euo pipefail
cd "$(dirname "$0")/.."
make -s build >/dev/null
out=$(mktemp -d)
samples="$out/rss.tsv"
bin/prequalbench campaign run --scenario "${SCENARIO:-hack/scenarios/ingress-rss.yaml}" --out "$out" --no-report "$@" &
campaign=$!
while kill -0 "$campaign" 2>/dev/null; do
  for pid in $(pgrep -f "prequalbench ingress --source file --routes $out" || true); do
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    [ -n "$rss" ] && printf "%s\t%s\t%s\n" "$(date +%s)" "$pid" "$rss" >>"$samples"
  done
  sleep 1
done
wait "$campaign"
echo "peak RSS per ingress process (MB):"
awk '{ if ($3 > peak[$2]) peak[$2] = $3; n[$2]++ } END { for (p in peak) printf "  pid %s: %.1f MB over %d samples\n", p, peak[p]/1024, n[p] }' "$samples"
echo "artifacts: $out"
