#!/usr/bin/env bash
# Refreshes manifests/gatewayapi/crds/ from the Gateway API module in the Go
# module cache (fetched through the module proxy): the standard channel of
# the version manifests/gatewayapi names. Run after changing that Version.
set -euo pipefail
cd "$(dirname "$0")/.."
v=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' manifests/gatewayapi/gatewayapi.go)
dir=$(go mod download -json "sigs.k8s.io/gateway-api@$v" | sed -n 's/.*"Dir": "\(.*\)",*$/\1/p')
rm -f manifests/gatewayapi/crds/*.yaml
install -m 0644 "$dir"/config/crd/standard/*.yaml manifests/gatewayapi/crds/
echo "gateway-api-crds: copied $(ls manifests/gatewayapi/crds | wc -l) files of $v from $dir"
