#!/bin/sh
# setAlgorithm hook: switch.sh ALGORITHM. nginx's balancing for the
# algorithms it has; prequal runs on the project's ingress (its own
# proxy URL in external.yaml), so nothing to switch for it.
set -eu
prefix=${NGINX_PREFIX:-$(cd "$(dirname "$0")" && pwd)/run}
case "$1" in
  round-robin)   echo "# nginx default: weighted round robin" > "$prefix/balance.conf" ;;
  least-request) echo "least_conn;" > "$prefix/balance.conf" ;;
  random)        echo "random;" > "$prefix/balance.conf" ;;
  prequal)       exit 0 ;;
  *) echo "switch.sh: nginx has no equivalent of $1" >&2; exit 1 ;;
esac
nginx -p "$prefix" -c nginx.conf -s reload
