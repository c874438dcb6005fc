# Shared settings for the cluster/*.sh scripts. Source it; do not run it.
# shellcheck shell=bash

CLUSTER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../versions.env
source "$CLUSTER_DIR/versions.env"

# Where built binaries are cached: outside the work tree, one directory per version set.
IOT_CACHE_ROOT=${IOT_OPERATOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/iot-operator}
BUILD_KEY="k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}-kwok-${KWOK_VERSION}"
BUILD_ROOT="$IOT_CACHE_ROOT/$BUILD_KEY"
BIN_DIR="$BUILD_ROOT/bin"
# Written as the last act of a fully successful build, inside the directory that is moved
# into place atomically: if it exists, every binary was built and verified.
BUILD_STAMP="$BIN_DIR/.build-complete"
BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl)

CLUSTER_NAME=${CLUSTER_NAME:-iot-operator}
CLUSTER_NODES=${CLUSTER_NODES:-2}
# kwokctl keeps every cluster under $KWOK_WORKDIR/clusters/<name> (default ~/.kwok).
KWOK_WORKDIR=${KWOK_WORKDIR:-$HOME/.kwok}
export KWOK_WORKDIR
CLUSTER_WORKDIR="$KWOK_WORKDIR/clusters/$CLUSTER_NAME"
KUBECONFIG_PATH="$CLUSTER_WORKDIR/kubeconfig.yaml"

log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

binaries_complete() {
  [[ -f "$BUILD_STAMP" ]] || return 1
  local b
  for b in "${BINARIES[@]}"; do [[ -x "$BIN_DIR/$b" ]] || return 1; done
}
