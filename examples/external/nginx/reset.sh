#!/bin/sh
# reset hook: reset.sh ALGORITHM. The project's ingress has an admin reset
# that empties its pools and counters; nginx is reloaded, so fresh
# workers start with a fresh round-robin position and no upstream
# connections (the old workers finish their requests and exit).
set -eu
prefix=${NGINX_PREFIX:-$(cd "$(dirname "$0")" && pwd)/run}
case "$1" in
  prequal) curl -fsS -X POST -H "Content-Type: application/json" -d "{}" "http://${INGRESS_ADMIN:-127.0.0.1:18091}/admin/reset" > /dev/null ;;
  *)       nginx -p "$prefix" -c nginx.conf -s reload ;;
esac
