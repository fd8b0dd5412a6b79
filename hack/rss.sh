#!/usr/bin/env bash
# Runs a campaign on 127.0.0.1 and samples the RSS of every process it
# starts (ingress and backend replicas) every RSS_EVERY seconds; then prints,
# per process, the peak, the mean of the first and last tenth of the
# samples, and the least-squares slope in MB per hour: flat memory is a
# slope near 0 and equal tenths.
#
#   hack/rss.sh [campaign run flags]                       # 5,000 rps over 16 backends
#   SCENARIO=scenario/catalogue/c5-soak.yaml RSS_EVERY=10 \
#     hack/rss.sh --algorithms prequal                     # the hour-long soak
set -euo pipefail
cd "$(dirname "$0")/.."
make -s build >/dev/null
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
samples="$out/rss.tsv"
every=${RSS_EVERY:-1}
bin/prequalbench campaign run --scenario "${SCENARIO:-hack/scenarios/ingress-rss.yaml}" --out "$out" --no-report "$@" &
campaign=$!
while kill -0 "$campaign" 2>/dev/null; do
  for pid in $(pgrep -P "$campaign" || true); do
    name=$(awk '/^Name:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    [ -n "$rss" ] && printf "%s\t%s\t%s\t%s\n" "$(date +%s)" "$pid" "$name" "$rss" >>"$samples"
  done
  sleep "$every"
done
wait "$campaign"
echo "RSS per process (MB): peak, mean of the first and last tenth of the samples, slope"
sort -k2,2n -k1,1n "$samples" | awk -F'\t' '
  function report() {
    if (n == 0) return
    k = int(n / 10); if (k < 1) k = 1
    a = 0; b = 0
    for (i = 1; i <= k; i++) { a += v[i]; b += v[n - k + i] }
    sx = 0; sy = 0; sxx = 0; sxy = 0
    for (i = 1; i <= n; i++) { x = (t[i] - t[1]) / 3600; sx += x; sy += v[i]; sxx += x * x; sxy += x * v[i] }
    d = n * sxx - sx * sx
    slope = d > 0 ? (n * sxy - sx * sy) / d : 0
    printf "  %-14s pid %-7s peak %6.1f  first %6.1f  last %6.1f  slope %+6.2f MB/h over %d samples, %.0f s\n", name, pid, peak, a / k, b / k, slope, n, t[n] - t[1]
  }
  $2 != pid { report(); pid = $2; name = $3; n = 0; peak = 0 }
  { n++; t[n] = $1; v[n] = $4 / 1024; if (v[n] > peak) peak = v[n] }
  END { report() }'
echo "artifacts: $out"
