#!/bin/sh
# reset hook: reset.sh ALGORITHM.
#
# prequal: the project's ingress empties its pools and counters on an
# admin reset, through kind's published admin port (INGRESS_ADMIN, one
# ingress replica) with the token `cluster up` keeps in a Secret.
#
# ingress-nginx has no reset call. Each nginx worker keeps one Lua
# balancer per backend and builds a new one only when the backend's
# load-balance changes (its log: "LB algorithm changed from ... resetting
# the instance"); a new instance starts with a fresh round-robin position
# and, in current releases, no EWMA scores. So this flips the annotation
# to the other balancer and back, waiting SYNC_WAIT (3 s) after each for
# the workers to sync. What it does not reset: the controller pods, their
# keepalive connections to the backends, and, in older releases that kept
# EWMA scores in a shared dict, those scores (they decay with a 10 s time
# constant). RESET=restart restarts the controller instead: a clean
# state, but slower, and a kubectl port-forward to the old pod breaks
# (restart it, or use a NodePort or LoadBalancer address as the proxy).
set -eu
ns=${NAMESPACE:-prequalbench}
case "$1" in
  prequal)
    token=$(kubectl -n prequalbench-system get secret prequal-admin-token -o jsonpath='{.data.token}' | base64 -d)
    curl -fsS -X POST -H "Authorization: Bearer $token" -H "Content-Type: application/json" -d '{}' \
      "http://${INGRESS_ADMIN:-127.0.0.1:31081}/admin/reset" > /dev/null
    exit 0 ;;
  round-robin) lb=round_robin other=ewma ;;
  ewma)        lb=ewma other=round_robin ;;
  *) echo "reset.sh: ingress-nginx has no equivalent of $1" >&2; exit 1 ;;
esac
if [ "${RESET:-flip}" = restart ]; then
  kubectl -n ingress-nginx rollout restart deployment/ingress-nginx-controller
  kubectl -n ingress-nginx rollout status deployment/ingress-nginx-controller --timeout=120s
  exit 0
fi
for v in "$other" "$lb"; do
  kubectl -n "$ns" annotate --overwrite ingress work-nginx "nginx.ingress.kubernetes.io/load-balance=$v"
  sleep "${SYNC_WAIT:-3}"
done
