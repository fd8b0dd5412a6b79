#!/bin/sh
# setAlgorithm hook: switch.sh ALGORITHM. ingress-nginx's balancer is the
# Ingress's nginx.ingress.kubernetes.io/load-balance annotation; prequal
# runs on the project's ingress (its own proxy URL in external.yaml), so
# nothing to switch for it. NAMESPACE: workload.yaml's (prequalbench).
set -eu
ns=${NAMESPACE:-prequalbench}
case "$1" in
  round-robin) lb=round_robin ;;
  ewma)        lb=ewma ;;
  prequal)     exit 0 ;;
  *) echo "switch.sh: ingress-nginx has no equivalent of $1 (round_robin and ewma are its balancers)" >&2; exit 1 ;;
esac
kubectl -n "$ns" annotate --overwrite ingress work-nginx "nginx.ingress.kubernetes.io/load-balance=$lb"
