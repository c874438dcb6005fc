#!/usr/bin/env bash
# Builds (or reuses) what the real node runs from the pinned Kubernetes module: kubelet and
# kube-proxy (the same k8s.io/kubernetes version, build flags and version stamps as the control
# plane, in cluster/build.sh), and the sandbox ("pause") program of cluster/pause.
#
#   bash cluster/build-node.sh   -> progress on stderr; the bin directory as the LAST stdout line
#
# Built only when a real node is asked for (cluster/up.sh --real-node), so that the default cluster
# starts as fast as before. It shares Go's build cache with build.sh: the packages kubelet and
# kube-proxy have in common with the control plane are compiled once. Cache:
# <cache>/<version set>/node-bin, published atomically like build.sh's bin directory.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

NODE_BIN_DIR="$BUILD_ROOT/node-bin"
NODE_STAMP="$NODE_BIN_DIR/.build-complete"
node_binaries_complete() { [[ -f "$NODE_STAMP" && -x "$NODE_BIN_DIR/kubelet" && -x "$NODE_BIN_DIR/kube-proxy" && -x "$NODE_BIN_DIR/pause" ]]; }

if [[ "${FORCE_BUILD:-0}" != 1 ]] && node_binaries_complete; then
  echo "$NODE_BIN_DIR"
  exit 0
fi
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || die "go is not on PATH; Go >= 1.24 is needed to build kubelet and kube-proxy"

mkdir -p "$BUILD_ROOT"
exec 8>"$BUILD_ROOT/.node-lock"
if ! flock -n 8; then
  log "another build of the real node's binaries is running; waiting for it"
  flock 8
fi
if [[ "${FORCE_BUILD:-0}" != 1 ]] && node_binaries_complete; then echo "$NODE_BIN_DIR"; exit 0; fi

rm -rf "$BUILD_ROOT"/.node-build-*
TMP=$(mktemp -d "$BUILD_ROOT/.node-build-XXXXXX")
HEARTBEAT_PID=""
cleanup() {
  if [[ -n "$HEARTBEAT_PID" ]]; then kill "$HEARTBEAT_PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
mkdir -p "$TMP/bin"

export CGO_ENABLED=0
export GOFLAGS="-buildvcs=false -mod=readonly"
start=$SECONDS
log "building kubelet + kube-proxy $K8S_VERSION and pause (go build -p ${BUILD_PARALLELISM:-2}); about 3 minutes after the control plane's build, longer on a cold cache"
(
  while sleep 15; do log "    ... kubelet + kube-proxy: $((SECONDS - start))s elapsed, $(grep -c . "$TMP/build.log" 2>/dev/null || echo 0) packages compiled"; done
) 8>&- &
HEARTBEAT_PID=$!
if ! (cd "$CLUSTER_DIR/k8s" && go build -v -p "${BUILD_PARALLELISM:-2}" -trimpath -tags selinux,notest \
  -ldflags "$(k8s_version_ldflags)" -o "$TMP/bin/" \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy) >"$TMP/build.log" 2>&1; then
  cp "$TMP/build.log" "$BUILD_ROOT/last-failure.log" 2>/dev/null || true
  grep -v '^[a-zA-Z0-9._~/-]*$' "$TMP/build.log" | tail -n 40 >&2 || true
  die "building kubelet and kube-proxy failed (full log: $BUILD_ROOT/last-failure.log)"
fi
(cd "$CLUSTER_DIR/pause" && go build -trimpath -ldflags "-s -w" -o "$TMP/bin/pause" .) >&2 ||
  die "building the pause program (cluster/pause) failed"
kill "$HEARTBEAT_PID" 2>/dev/null || true
HEARTBEAT_PID=""

for b in kubelet kube-proxy; do
  out=$("$TMP/bin/$b" --version 2>&1)
  [[ "$out" == "Kubernetes ${K8S_VERSION}" ]] || die "$b reports '$out', want 'Kubernetes ${K8S_VERSION}'"
done
printf 'build_key=%s\ngo=%s\nbuilt_at=%s\nseconds=%s\n' "$BUILD_KEY" "$(go version)" \
  "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$((SECONDS - start))" >"$TMP/bin/.build-complete"
rm -rf "$NODE_BIN_DIR"
mv -T "$TMP/bin" "$NODE_BIN_DIR"
log "built kubelet, kube-proxy and pause in $((SECONDS - start))s"
echo "$NODE_BIN_DIR"
