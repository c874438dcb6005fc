#!/usr/bin/env bash
# Builds the pinned control-plane binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kwok, kwokctl) from Go modules, or reuses them from the cache.
#
#   bash cluster/build.sh        -> progress on stderr; the bin directory as the LAST stdout line
#
# Cache: ${IOT_OPERATOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/iot-operator}/<version set>/bin
# A build happens in a temporary directory next to the cache entry and is renamed into place
# only after every binary was built and answered --version with the pinned version.
# Interrupted (SIGINT, SIGTERM; to stop it at once, signal its process group: go and the
# compilers are in it): it says so, removes the temporary directory (go's work directories are
# inside it) and exits 130/143, publishing nothing; the lock goes with the last process holding
# it, and the next run starts the build again.
# Env: FORCE_BUILD=1 rebuilds even if cached. BUILD_PARALLELISM (default 2) is go build -p.
# Progress: a line per step and at least every 15 s, with the time left estimated from the last
# successful build's step times ($IOT_CACHE_ROOT/build-step-times, written at the end of a build).
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

if [[ "${FORCE_BUILD:-0}" != 1 ]] && binaries_complete; then
  log "using cached binaries ($BUILD_KEY)"
  echo "$BIN_DIR"
  exit 0
fi

command -v go >/dev/null 2>&1 || die "go is not on PATH; Go >= 1.24 is needed to build the control plane"
command -v flock >/dev/null 2>&1 || die "flock (util-linux) is not on PATH"

mkdir -p "$BUILD_ROOT"
# One build per version set at a time (e.g. two test runs starting together).
exec 9>"$BUILD_ROOT/.lock"
if ! flock -n 9; then
  log "another build of $BUILD_KEY is running; waiting for it to finish"
  flock 9
  if binaries_complete; then echo "$BIN_DIR"; exit 0; fi
fi
if [[ "${FORCE_BUILD:-0}" != 1 ]] && binaries_complete; then echo "$BIN_DIR"; exit 0; fi

# --- the wrapper modules must pin exactly the versions in versions.env -------------------------
pins() { grep -Eq "^[[:space:]]*(require )?${1//./\\.}( |\$)" "$2"; }
K8S_STAGING_VERSION="v0.${K8S_VERSION#v1.}"
pins "k8s.io/kubernetes ${K8S_VERSION}" "$CLUSTER_DIR/k8s/go.mod" ||
  die "cluster/k8s/go.mod does not require k8s.io/kubernetes $K8S_VERSION (versions.env)"
if grep -E '^\s+k8s\.io/[a-z-]+ => k8s\.io/[a-z-]+ v' "$CLUSTER_DIR/k8s/go.mod" | grep -v " ${K8S_STAGING_VERSION}\$" >&2; then
  die "cluster/k8s/go.mod: the staging replace lines above are not at $K8S_STAGING_VERSION"
fi
pins "go.etcd.io/etcd/server/v3 ${ETCD_VERSION}" "$CLUSTER_DIR/etcd/go.mod" ||
  die "cluster/etcd/go.mod does not require go.etcd.io/etcd/server/v3 $ETCD_VERSION (versions.env)"
pins "sigs.k8s.io/kwok ${KWOK_VERSION}" "$CLUSTER_DIR/kwok/go.mod" ||
  die "cluster/kwok/go.mod does not require sigs.k8s.io/kwok $KWOK_VERSION (versions.env)"

# --- build environment: static, reproducible, like the upstream release builds ---------------
export CGO_ENABLED=0
export GOFLAGS="-buildvcs=false -mod=readonly"
GO_P=${BUILD_PARALLELISM:-2}

# We hold the lock: any other temporary build directory is left over from a killed build.
rm -rf "$BUILD_ROOT"/.build-*
TMP=$(mktemp -d "$BUILD_ROOT/.build-XXXXXX")
HEARTBEAT_PID=""
cleanup() {
  if [[ -n "$HEARTBEAT_PID" ]]; then kill "$HEARTBEAT_PID" 2>/dev/null || true; fi
  # A compiler stopped by the same signal may still be writing here: try once more.
  rm -rf "$TMP" 2>/dev/null || { sleep 0.3; rm -rf "$TMP"; }
}
trap cleanup EXIT
mkdir -p "$TMP/bin" "$TMP/logs" "$TMP/go-tmp"
# go's work directories, inside ours: a go stopped by a signal leaves none behind in /tmp.
export GOTMPDIR="$TMP/go-tmp"

BUILD_START=$(date +%s)
STEP_TIMES=()
STEP_RECORD=()
STEP_NO=0
STEP_IDS=(download etcd kwok k8s verify)
STEP_TOTAL=${#STEP_IDS[@]}
BUILD_TIMES_FILE="$IOT_CACHE_ROOT/build-step-times"

# Runs once the step being run has ended (go and the compilers end on the same signal), still
# inside that step's redirection to its log: so it says so on our stderr, kept as fd 7.
exec 7>&2
interrupted() { # signal exit-code
  log "build interrupted by SIG$1 in step $STEP_NO/$STEP_TOTAL after $(($(date +%s) - BUILD_START))s; nothing was published (the next run builds again)" 2>&7
  exit "$2"
}
trap 'interrupted INT 130' INT
trap 'interrupted TERM 143' TERM

# last_time ID: seconds step ID took in the last successful build (empty when unknown).
last_time() { [[ -f "$BUILD_TIMES_FILE" ]] && awk -v id="$1" '$1 == id { print $2 }' "$BUILD_TIMES_FILE" || true; }

# remaining_estimate ELAPSED: seconds left in all, from the last build's times of this step
# (less ELAPSED, at least 0) and the steps after it; empty when there was no earlier build.
remaining_estimate() {
  local elapsed=$1 left=0 i t
  for ((i = STEP_NO - 1; i < STEP_TOTAL; i++)); do
    t=$(last_time "${STEP_IDS[$i]}")
    [[ -n "$t" ]] || return 0
    if ((i == STEP_NO - 1)); then t=$((t > elapsed ? t - elapsed : 0)); fi
    left=$((left + t))
  done
  echo "$left"
}

# run_step ID NAME CMD... : runs CMD with its output in a log; prints progress at the start and
# every 15 s (elapsed, packages compiled, time left as estimated from the last build); on failure
# prints which step failed, its exit code and the end of its output, and exits.
run_step() {
  local id=$1 name=$2; shift 2
  STEP_NO=$((STEP_NO + 1))
  local logf="$TMP/logs/step$STEP_NO.log" start rc=0 last
  start=$(date +%s)
  last=$(last_time "$id")
  log "==> step $STEP_NO/$STEP_TOTAL: $name${last:+ (last build: ${last}s)}; $(($(date +%s) - BUILD_START))s into the build"
  (
    while sleep 15; do
      local elapsed left
      elapsed=$(($(date +%s) - start))
      left=$(remaining_estimate "$elapsed")
      log "    ... step $STEP_NO/$STEP_TOTAL $id: ${elapsed}s elapsed, $(grep -c . "$logf" 2>/dev/null || true) packages compiled; ${left:+about ${left}s left in all (from the last build)}${left:-no earlier build to estimate from}"
    done
  ) 9>&- & # its sleep, left to finish when the loop is killed, must not hold the build lock
  HEARTBEAT_PID=$!
  "$@" >"$logf" 2>&1 || rc=$?
  kill "$HEARTBEAT_PID" 2>/dev/null || true
  wait "$HEARTBEAT_PID" 2>/dev/null || true
  HEARTBEAT_PID=""
  local took=$(($(date +%s) - start))
  if [[ $rc -ne 0 ]]; then
    cp "$logf" "$BUILD_ROOT/last-failure.log" 2>/dev/null || true
    log "BUILD FAILED in step $STEP_NO/$STEP_TOTAL '$name' (exit $rc, after ${took}s). Last output:"
    # go build -v lists every package it compiles; show the other lines (the errors).
    if grep -qv '^[a-zA-Z0-9._~/-]*$' "$logf"; then
      grep -v '^[a-zA-Z0-9._~/-]*$' "$logf" | tail -n 40 >&2
    else
      tail -n 20 "$logf" >&2
    fi
    log "full log: $BUILD_ROOT/last-failure.log"
    exit "$rc"
  fi
  log "    done: $name in ${took}s"
  STEP_TIMES+=("$name: ${took}s")
  STEP_RECORD+=("$id $took")
}

download_modules() {
  local m
  for m in k8s etcd kwok; do
    echo "== $m"
    (cd "$CLUSTER_DIR/$m" && go mod download)
  done
}

build_etcd() {
  cd "$CLUSTER_DIR/etcd" && go build -v -p "$GO_P" -trimpath -tags selinux,notest \
    -ldflags "-s -w" -o "$TMP/bin/etcd" go.etcd.io/etcd/server/v3
}

build_kwok() {
  cd "$CLUSTER_DIR/kwok" && go build -v -p "$GO_P" -trimpath -tags selinux,notest \
    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v} -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${K8S_VERSION}" \
    -o "$TMP/bin/" sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl
}

build_k8s() {
  # The version stamps of kubernetes' hack/lib/version.sh (lib/common.sh), as build-node.sh uses them.
  local ldflags
  ldflags=$(k8s_version_ldflags)
  cd "$CLUSTER_DIR/k8s" && go build -v -p "$GO_P" -trimpath -tags selinux,notest -ldflags "$ldflags" \
    -o "$TMP/bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl
}

verify_binaries() {
  local b out
  for b in "${BINARIES[@]}"; do
    [[ -x "$TMP/bin/$b" ]] || { echo "missing binary: $b"; return 1; }
  done
  for b in kube-apiserver kube-controller-manager kube-scheduler; do
    out=$("$TMP/bin/$b" --version 2>&1)
    echo "$b: $out"
    [[ "$out" == "Kubernetes ${K8S_VERSION}" ]] || { echo "$b reports '$out', want 'Kubernetes ${K8S_VERSION}'"; return 1; }
  done
  out=$("$TMP/bin/kubectl" version --client 2>&1 | head -n 1); echo "kubectl: $out"
  [[ "$out" == "Client Version: ${K8S_VERSION}" ]] || { echo "kubectl reports '$out'"; return 1; }
  out=$("$TMP/bin/etcd" --version 2>&1 | head -n 1); echo "etcd: $out"
  [[ "$out" == "etcd Version: ${ETCD_VERSION#v}" ]] || { echo "etcd reports '$out'"; return 1; }
  for b in kwok kwokctl; do
    out=$("$TMP/bin/$b" --version 2>&1 | head -n 1); echo "$b: $out"
    [[ "$out" == *"${KWOK_VERSION}"* ]] || { echo "$b reports '$out', want ${KWOK_VERSION}"; return 1; }
  done
}

log "building $BUILD_KEY with $(go version) (go build -p $GO_P); this takes a while on a cold cache"
run_step download "download Go modules (k8s, etcd, kwok)" download_modules
run_step etcd "build etcd ${ETCD_VERSION}" build_etcd
run_step kwok "build kwok + kwokctl ${KWOK_VERSION}" build_kwok
run_step k8s "build kube-apiserver, kube-controller-manager, kube-scheduler, kubectl ${K8S_VERSION} (one go build)" build_k8s
run_step verify "verify binaries report the pinned versions" verify_binaries

TOTAL=$(($(date +%s) - BUILD_START))
{
  echo "build_key=$BUILD_KEY"
  echo "go=$(go version)"
  echo "built_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "total_seconds=$TOTAL"
  for t in "${STEP_TIMES[@]}"; do echo "step=$t"; done
  cat "$TMP/logs/step$STEP_NO.log"
} >"$TMP/bin/.build-complete"

# Atomic publish: rename the finished directory into place (same filesystem).
if [[ -e "$BIN_DIR" ]]; then
  mv "$BIN_DIR" "$TMP/old-bin"
fi
mv -T "$TMP/bin" "$BIN_DIR"
printf '%s\n' "${STEP_RECORD[@]}" >"$BUILD_TIMES_FILE.tmp.$$" && mv "$BUILD_TIMES_FILE.tmp.$$" "$BUILD_TIMES_FILE"
log "build finished in ${TOTAL}s:"
for t in "${STEP_TIMES[@]}"; do log "    $t"; done
echo "$BIN_DIR"
