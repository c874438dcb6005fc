#!/usr/bin/env bash
# Builds (or reuses) the pinned Helm 3 CLI from Go modules, cached outside the work tree like the
# control plane binaries. Used to render and check the operators' Helm charts.
#
#   bash cluster/build-helm.sh   -> progress on stderr; last stdout line: the helm binary's path
set -euo pipefail
HELM_VERSION=v3.18.6
CACHE_ROOT=${IOT_OPERATOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/iot-operator}
DEST="$CACHE_ROOT/helm-$HELM_VERSION/bin"
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"

if [[ -x "$DEST/helm" ]]; then
  echo "$DEST/helm"
  exit 0
fi
mkdir -p "$CACHE_ROOT"
TMP=$(mktemp -d "$CACHE_ROOT/.helm-build-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
echo "[cluster] building helm $HELM_VERSION from Go modules (about 2 minutes on a cold cache)" >&2
start=$SECONDS
if ! GOBIN="$TMP/bin" CGO_ENABLED=0 GOFLAGS=-buildvcs=false go install -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
  "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2; then
  echo "[cluster] BUILD FAILED: go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION (see the output above)" >&2
  exit 1
fi
mkdir -p "$(dirname "$DEST")"
mv "$TMP/bin" "$DEST.tmp.$$" && mv -T "$DEST.tmp.$$" "$DEST"
echo "[cluster] built helm $HELM_VERSION in $((SECONDS - start))s" >&2
echo "$DEST/helm"
