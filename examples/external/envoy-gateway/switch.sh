#!/bin/sh
# setAlgorithm hook: switch.sh ALGORITHM. Envoy Gateway's balancer is the
# loadBalancer.type of the BackendTrafficPolicy attached to its HTTPRoute
# (a policy attachment, the Gateway API's way); prequal runs on the
# project's ingress (its own proxy URL in external.yaml), so nothing to
# switch for it. NAMESPACE: workload.yaml's (prequalbench).
set -eu
ns=${NAMESPACE:-prequalbench}
case "$1" in
  round-robin) lb=RoundRobin ;;
  p2c)         lb=LeastRequest ;;
  random)      lb=Random ;;
  prequal)     exit 0 ;;
  *) echo "switch.sh: Envoy Gateway has no equivalent of $1 (RoundRobin, LeastRequest as p2c, Random)" >&2; exit 1 ;;
esac
kubectl -n "$ns" patch backendtrafficpolicy work-eg --type merge -p "{\"spec\":{\"loadBalancer\":{\"type\":\"$lb\"}}}"
