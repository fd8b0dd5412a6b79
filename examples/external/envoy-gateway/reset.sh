#!/bin/sh
# reset hook: reset.sh ALGORITHM.
#
# prequal: the project's ingress empties its pools and counters on an
# admin reset, through kind's published admin port (INGRESS_ADMIN, one
# ingress replica) with the token `cluster up` keeps in a Secret.
#
# Envoy Gateway has no reset call. A changed loadBalancer type makes it
# push a new cluster to its Envoy, whose balancer starts fresh; so this
# flips the policy to another type and back, waiting SYNC_WAIT (3 s) after
# each for the push. What it does not reset: the Envoy pods and their
# connections' history. RESET=restart restarts the Envoy proxy Deployment
# instead: a clean state, but slower, and a kubectl port-forward to the
# old pod breaks (restart it, or use the LoadBalancer address as the proxy).
set -eu
ns=${NAMESPACE:-prequalbench}
case "$1" in
  prequal)
    token=$(kubectl -n prequalbench-system get secret prequal-admin-token -o jsonpath='{.data.token}' | base64 -d)
    curl -fsS -X POST -H "Authorization: Bearer $token" -H "Content-Type: application/json" -d '{}' \
      "http://${INGRESS_ADMIN:-127.0.0.1:31081}/admin/reset" > /dev/null
    exit 0 ;;
  round-robin) lb=RoundRobin other=Random ;;
  p2c)         lb=LeastRequest other=RoundRobin ;;
  random)      lb=Random other=RoundRobin ;;
  *) echo "reset.sh: Envoy Gateway has no equivalent of $1" >&2; exit 1 ;;
esac
if [ "${RESET:-flip}" = restart ]; then
  sel="gateway.envoyproxy.io/owning-gateway-namespace=$ns,gateway.envoyproxy.io/owning-gateway-name=eg"
  kubectl -n envoy-gateway-system rollout restart deployment -l "$sel"
  kubectl -n envoy-gateway-system rollout status deployment -l "$sel" --timeout=120s
  exit 0
fi
for v in "$other" "$lb"; do
  kubectl -n "$ns" patch backendtrafficpolicy work-eg --type merge -p "{\"spec\":{\"loadBalancer\":{\"type\":\"$v\"}}}"
  sleep "${SYNC_WAIT:-3}"
done
