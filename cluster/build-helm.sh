#!/usr/bin/env bash
# Builds (or reuses) the pinned Helm 3 CLI from Go modules, cached outside the work tree like the
# control plane binaries. Used to render and check the operators' Helm charts.
#
# Stamped as Helm's own release build stamps it (its Makefile's LDFLAGS): its version, and the
# Kubernetes version of the client-go it is built with (1.33 for v3.18.6), which `helm template`
# and `helm lint` take as the cluster's version offline. Unstamped, Helm believes it talks to
# Kubernetes v1.20 and refuses charts that require a later kubeVersion.
#
#   bash cluster/build-helm.sh   -> progress on stderr; last stdout line: the helm binary's path
set -euo pipefail
HELM_VERSION=v3.18.6
CACHE_ROOT=${IOT_OPERATOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/iot-operator}
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
# The Kubernetes minor of Helm's own k8s.io/client-go requirement (v0.33.x -> 1.33), as its Makefile reads it.
HELM_K8S_MINOR=33
DEST="$CACHE_ROOT/helm-$HELM_VERSION-k8s-1.$HELM_K8S_MINOR/bin"

if [[ -x "$DEST/helm" ]]; then
  echo "$DEST/helm"
  exit 0
fi
mkdir -p "$CACHE_ROOT"
TMP=$(mktemp -d "$CACHE_ROOT/.helm-build-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
echo "[cluster] building helm $HELM_VERSION from Go modules (about 2 minutes on a cold cache)" >&2
start=$SECONDS
module_dir=$(GOFLAGS=-mod=mod go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
grep -q "^[[:space:]]k8s.io/client-go v0\.$HELM_K8S_MINOR\." "$module_dir/go.mod" ||
  { echo "[cluster] BUILD FAILED: helm $HELM_VERSION does not build with k8s.io/client-go v0.$HELM_K8S_MINOR (update HELM_K8S_MINOR)" >&2; exit 1; }
stamps=(internal/version.version="$HELM_VERSION" internal/version.gitTreeState=clean
  pkg/lint/rules.k8sVersionMajor=1 pkg/lint/rules.k8sVersionMinor="$HELM_K8S_MINOR"
  pkg/chartutil.k8sVersionMajor=1 pkg/chartutil.k8sVersionMinor="$HELM_K8S_MINOR")
if ! GOBIN="$TMP/bin" CGO_ENABLED=0 GOFLAGS=-buildvcs=false go install -trimpath \
  -ldflags "-s -w ${stamps[*]/#/-X helm.sh/helm/v3/}" \
  "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2; then
  echo "[cluster] BUILD FAILED: go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION (see the output above)" >&2
  exit 1
fi
mkdir -p "$(dirname "$DEST")"
mv "$TMP/bin" "$DEST.tmp.$$" && mv -T "$DEST.tmp.$$" "$DEST"
echo "[cluster] built helm $HELM_VERSION in $((SECONDS - start))s" >&2
echo "$DEST/helm"
