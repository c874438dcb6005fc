#!/usr/bin/env bash
# The one Go build of the local cluster: builds an engine from its pinned Go module(s), or reuses it
# from the cache.
#
#   bash cluster/engines/build.sh <engine>   -> progress on stderr; LAST stdout line: what to use
#
# Engines (the table is `engine_<name>` below): control-plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kwok, kwokctl; prints their bin directory),
# node (kubelet, kube-proxy, pause; prints their bin directory), coredns, kube-router,
# local-path-provisioner, registry, nats-server, prometheus, promtool, seaweedfs, helm (prints the binary),
# olm (prints a directory holding `olm` and `crds/`; OLM_DIR, when set, is checked and used as it
# is), sharder (prints the binary; its CRD file lies beside it), cert-manager (prints the binary;
# the CRDs of its version lie beside it in crds/).
#
# Guarantees, the same for every engine:
# - Built with GOTOOLCHAIN=local (unless GOTOOLCHAIN is set), CGO_ENABLED=0, -trimpath,
#   -buildvcs=false, `nice`, `go build -p $BUILD_PARALLELISM` (default 2); each wrapper module
#   (engines/<module>/go.mod, go.sum, *.go) pins the engine and every dependency; the work tree is
#   never written.
# - Every binary is checked to report the pinned version (or, where upstream stamps none, to run)
#   before anything is published, or the build fails naming the step, its exit code and the end
#   of its output (the whole output kept in $IOT_CACHE_ROOT/<engine>.last-failure.log).
# - Cached outside the work tree in $IOT_CACHE_ROOT/<cache entry> (names as before this script
#   existed, e.g. coredns-<version>-<hash of the wrapper module's files>, so warm caches stay
#   warm), built in a temporary directory beside it and renamed into place with a
#   .build-complete stamp as its last file; an entry with the stamp is complete and a second run
#   builds nothing. FORCE_BUILD=1 builds again.
# - One build per engine at a time (a lock per engine, $IOT_CACHE_ROOT/.<engine>-build-lock);
#   a second caller waits, then uses what the first published.
# - Progress: a line per step (`step k/n`, its time in the last build) and at least every 15 s
#   (elapsed, packages compiled, time left as estimated from the last build's step times, kept
#   in $IOT_CACHE_ROOT/<engine>.step-times). Interrupted (SIGINT/SIGTERM, to the process group
#   to reach go and its compilers) it says so, removes its temporary directory and exits 130/143:
#   nothing is published, no lock is held.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

ENGINE=${1:-}
ENGINES="control-plane node coredns kube-router local-path-provisioner registry nats-server prometheus promtool seaweedfs helm olm sharder cert-manager"

# --- the table ---------------------------------------------------------------------------------
# Each engine_<name> sets WHAT (what it is), KEY (its cache entry under $IOT_CACHE_ROOT), RESULT
# (what is printed, relative to the entry: a binary or "." for the entry itself), BINARIES (what
# must be executable for the entry to count as complete) and STEPS ("id|name|function" lines, run
# in order; they build into $OUT, which becomes the entry). GOFLAGS and STAMPED may be overridden.
GOFLAGS="-mod=readonly -buildvcs=false"
STAMPED=1

# The wrapper module of an engine: engines/<name>/, pinned in its go.mod.
wrapper_version() { # wrapper module
  awk -v m="$2" '$1 == m { print $2 } $1 == "require" && $2 == m { print $3 }' "$ENGINES_DIR/$1/go.mod"
}
# 8 hex digits over the wrapper module's files: a changed go.mod, go.sum or main.go is a new entry.
wrapper_hash() { # wrapper
  local files=("$ENGINES_DIR/$1"/go.mod "$ENGINES_DIR/$1"/go.sum)
  shopt -s nullglob
  files+=("$ENGINES_DIR/$1"/*.go)
  shopt -u nullglob
  cat "${files[@]}" | sha256sum | cut -c1-8
}

# The -X flags of kubernetes' hack/lib/version.sh (without a git commit: the module zip has none),
# in both version packages, with the module's publication time as the reproducible build date.
# kwokctl chooses command-line flags by the version a binary reports, so they are not cosmetic.
k8s_version_ldflags() {
  local major minor date info ldflags="-s -w" pkg kv
  major=${K8S_VERSION#v}; major=${major%%.*}
  minor=${K8S_VERSION#v*.}; minor=${minor%%.*}
  info=$(cd "$ENGINES_DIR/k8s" && go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | sed -n 's/^\s*"Info": "\(.*\)",$/\1/p')
  date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info" 2>/dev/null || true)
  [[ -n "$date" ]] || date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    for kv in "gitVersion=${K8S_VERSION}" "gitMajor=${major}" "gitMinor=${minor}" "buildDate=${date}" "gitTreeState=clean"; do
      ldflags+=" -X ${pkg}.${kv%%=*}=${kv#*=}"
    done
  done
  echo "$ldflags"
}

go_build() { # wrapper-dir go-build-args...
  local dir=$1; shift
  (cd "$dir" && nice -n 10 go build -v -p "$GO_P" -trimpath "$@")
}

# A binary's version output contains WANT, or the step fails.
expect_version() { # binary want args...
  local out
  out=$("$1" "${@:3}" 2>&1 | head -n 1 || true)
  echo "$(basename "$1"): $out"
  [[ "$out" == *"$2"* ]] || { echo "$(basename "$1") reports '$out', want '$2'"; return 1; }
}

# --- control-plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok,
# kwokctl. The wrapper modules must pin exactly engines/versions.env's versions.
engine_control-plane() {
  WHAT="the control plane ($BUILD_KEY)" KEY="$BUILD_KEY/bin" RESULT=. BINARIES="${CONTROL_PLANE_BINARIES[*]}"
  STEPS="pins|check the wrapper modules pin versions.env|control_plane_pins
download|download Go modules (k8s, etcd, kwok)|control_plane_download
etcd|build etcd ${ETCD_VERSION}|control_plane_etcd
kwok|build kwok + kwokctl ${KWOK_VERSION}|control_plane_kwok
k8s|build kube-apiserver, kube-controller-manager, kube-scheduler, kubectl ${K8S_VERSION} (one go build)|control_plane_k8s
verify|verify binaries report the pinned versions|control_plane_verify"
}
pins() { grep -Eq "^[[:space:]]*(require )?${1//./\\.}( |\$)" "$ENGINES_DIR/$2/go.mod"; }
control_plane_pins() {
  local staging="v0.${K8S_VERSION#v1.}"
  pins "k8s.io/kubernetes ${K8S_VERSION}" k8s || { echo "engines/k8s/go.mod does not require k8s.io/kubernetes $K8S_VERSION"; return 1; }
  if grep -E '^\s+k8s\.io/[a-z-]+ => k8s\.io/[a-z-]+ v' "$ENGINES_DIR/k8s/go.mod" | grep -v " ${staging}\$"; then
    echo "engines/k8s/go.mod: the staging replace lines above are not at $staging"; return 1
  fi
  pins "go.etcd.io/etcd/server/v3 ${ETCD_VERSION}" etcd || { echo "engines/etcd/go.mod does not require go.etcd.io/etcd/server/v3 $ETCD_VERSION"; return 1; }
  pins "sigs.k8s.io/kwok ${KWOK_VERSION}" kwok || { echo "engines/kwok/go.mod does not require sigs.k8s.io/kwok $KWOK_VERSION"; return 1; }
}
control_plane_download() {
  local m
  for m in k8s etcd kwok; do echo "== $m"; (cd "$ENGINES_DIR/$m" && go mod download); done
}
control_plane_etcd() {
  go_build "$ENGINES_DIR/etcd" -tags selinux,notest -ldflags "-s -w" -o "$OUT/etcd" go.etcd.io/etcd/server/v3
}
control_plane_kwok() {
  go_build "$ENGINES_DIR/kwok" -tags selinux,notest \
    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v} -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${K8S_VERSION}" \
    -o "$OUT/" sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl
}
control_plane_k8s() {
  go_build "$ENGINES_DIR/k8s" -tags selinux,notest -ldflags "$(k8s_version_ldflags)" -o "$OUT/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
}
control_plane_verify() {
  local b
  for b in kube-apiserver kube-controller-manager kube-scheduler; do expect_version "$OUT/$b" "Kubernetes ${K8S_VERSION}" --version; done
  expect_version "$OUT/kubectl" "Client Version: ${K8S_VERSION}" version --client
  expect_version "$OUT/etcd" "etcd Version: ${ETCD_VERSION#v}" --version
  for b in kwok kwokctl; do expect_version "$OUT/$b" "${KWOK_VERSION}" --version; done
}

# --- node: kubelet and kube-proxy from the same Kubernetes module, flags and stamps as the
# control plane (the packages they share are compiled once, in Go's build cache), and pause.
engine_node() {
  WHAT="the real node's kubelet, kube-proxy and pause" KEY="$BUILD_KEY/node-bin" RESULT=. BINARIES="kubelet kube-proxy pause"
  STEPS="k8s|build kubelet + kube-proxy ${K8S_VERSION} (one go build)|node_k8s
pause|build pause (engines/pause)|node_pause
verify|verify binaries report the pinned versions|node_verify"
}
node_k8s() {
  go_build "$ENGINES_DIR/k8s" -tags selinux,notest -ldflags "$(k8s_version_ldflags)" -o "$OUT/" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy
}
node_pause() { go_build "$ENGINES_DIR/pause" -ldflags "-s -w" -o "$OUT/pause" .; }
node_verify() {
  local b
  for b in kubelet kube-proxy; do expect_version "$OUT/$b" "Kubernetes ${K8S_VERSION}" --version; done
}

# --- one binary from a wrapper module: engines/<wrapper>/ pins MODULE; PACKAGE is built, stamped
# with -X STAMP=<version> where upstream's release build stamps it.
wrapped_engine() { # wrapper module package stamp-var what [tags] [stamped version]
  WRAPPER=$1 MODULE=$2 PACKAGE=$3 STAMP=$4 WHAT=$5 TAGS=${6:-}
  VERSION=$(wrapper_version "$WRAPPER" "$MODULE")
  [[ "$VERSION" =~ ^v[0-9] ]] || die "engines/$WRAPPER/go.mod does not require $MODULE"
  STAMP_VERSION=${7:-$VERSION}
  KEY="$ENGINE-$VERSION-$(wrapper_hash "$WRAPPER")" RESULT=$ENGINE BINARIES=$ENGINE
  STEPS="build|build $WHAT $VERSION|wrapped_build
verify|verify it reports ${STAMP_VERSION#v}|wrapped_verify"
}
wrapped_build() {
  go_build "$ENGINES_DIR/$WRAPPER" ${TAGS:+-tags "$TAGS"} -ldflags "-s -w${STAMP:+ -X $STAMP=$STAMP_VERSION}" -o "$OUT/$ENGINE" "$PACKAGE"
}
wrapped_verify() { expect_version "$OUT/$ENGINE" "${STAMP_VERSION#v}" --version; }

engine_coredns() { wrapped_engine coredns github.com/coredns/coredns . "" "CoreDNS (the plugins engines/coredns/main.go lists)"; }
engine_kube-router() {
  local m=github.com/cloudnativelabs/kube-router/v2
  wrapped_engine kube-router $m $m/cmd/kube-router $m/pkg/version.Version kube-router
}
engine_local-path-provisioner() {
  local m=github.com/rancher/local-path-provisioner
  wrapped_engine local-path-provisioner $m $m main.VERSION local-path-provisioner
}
engine_registry() {
  local m=github.com/distribution/distribution/v3
  wrapped_engine registry $m $m/cmd/registry $m/version.version "the registry (distribution)"
}
engine_nats-server() {
  local m=github.com/nats-io/nats-server/v2
  wrapped_engine nats-server $m $m "" "NATS Server (the IoT service's broker)"
}
# Prometheus's module v0.3XX.Y is Prometheus 3.XX.Y; only Kubernetes service discovery is built in.
engine_prometheus() {
  local m=github.com/prometheus/prometheus version
  version=$(wrapper_version prometheus $m)
  [[ $version =~ ^v0\.3([0-9][0-9])\.([0-9]+)$ ]] || die "Prometheus module version $version is not v0.3XX.Y"
  wrapped_engine prometheus $m "$m/cmd/$ENGINE" github.com/prometheus/common/version.Version "$ENGINE" \
    remove_all_sd,enable_kubernetes_sd "3.$((10#${BASH_REMATCH[1]})).${BASH_REMATCH[2]}"
}
engine_promtool() { engine_prometheus; }
# SeaweedFS, an S3-compatible object store for the backup tests; it stamps no module version: it is
# checked to run (`weed version`).
engine_seaweedfs() {
  local m=github.com/seaweedfs/seaweedfs
  wrapped_engine seaweedfs $m $m/weed "" "SeaweedFS (S3 for the backup tests)"
  STEPS="build|build SeaweedFS $VERSION|wrapped_build
verify|verify it runs|seaweedfs_verify"
}
seaweedfs_verify() { expect_version "$OUT/$ENGINE" "version" version; }

# --- helm: the Helm 3 CLI from the module proxy, stamped as Helm's Makefile stamps it: its
# version and the Kubernetes minor of its client-go (which `helm template`/`lint` take as the
# cluster's version offline; unstamped it believes in v1.20 and refuses later kubeVersions).
HELM_VERSION=v3.18.6
HELM_K8S_MINOR=33
engine_helm() {
  # Entries made before this script have no .build-complete: an executable helm there counts.
  WHAT="helm $HELM_VERSION" KEY="helm-$HELM_VERSION-k8s-1.$HELM_K8S_MINOR/bin" RESULT=helm BINARIES=helm STAMPED=0
  STEPS="build|go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION|helm_build
verify|verify it reports $HELM_VERSION|helm_verify"
}
helm_build() {
  local dir stamps
  dir=$(GOFLAGS=-mod=mod go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  grep -q "^[[:space:]]k8s.io/client-go v0\.$HELM_K8S_MINOR\." "$dir/go.mod" ||
    { echo "helm $HELM_VERSION does not build with k8s.io/client-go v0.$HELM_K8S_MINOR (update HELM_K8S_MINOR)"; return 1; }
  stamps=(internal/version.version="$HELM_VERSION" internal/version.gitTreeState=clean
    pkg/lint/rules.k8sVersionMajor=1 pkg/lint/rules.k8sVersionMinor="$HELM_K8S_MINOR"
    pkg/chartutil.k8sVersionMajor=1 pkg/chartutil.k8sVersionMinor="$HELM_K8S_MINOR")
  GOBIN="$OUT" GOFLAGS=-buildvcs=false nice -n 10 go install -v -p "$GO_P" -trimpath \
    -ldflags "-s -w ${stamps[*]/#/-X helm.sh/helm/v3/}" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}
helm_verify() { expect_version "$OUT/helm" "$HELM_VERSION" version --short; }

# --- olm: OLM's `olm` operator and its CRDs, built inside a copy of the module (its own go.mod,
# go.sum and vendor/ pin every dependency; `go install pkg@version` would also ask the proxy for
# the version list, which ours refuses).
OLM_VERSION=v0.46.0
OLM_MODULE=github.com/operator-framework/operator-lifecycle-manager
engine_olm() {
  WHAT="olm $OLM_VERSION" KEY="olm-$OLM_VERSION" RESULT=. BINARIES=olm GOFLAGS=-buildvcs=false
  STEPS="build|build $OLM_MODULE/cmd/olm@$OLM_VERSION|olm_build
verify|verify it reports $OLM_VERSION and has its CRDs|olm_verify"
}
olm_build() {
  local dir
  dir=$(GOFLAGS=-mod=mod go mod download -json "$OLM_MODULE@$OLM_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -n "$dir" ]] || { echo "could not download $OLM_MODULE@$OLM_VERSION from $(go env GOPROXY); set OLM_DIR to a directory holding olm and crds/ instead"; return 1; }
  cp -r "$dir" "$TMP/src" && chmod -R u+w "$TMP/src"
  go_build "$TMP/src" -ldflags "-s -w -X $OLM_MODULE/pkg/version.OLMVersion=$OLM_VERSION" -o "$OUT/olm" ./cmd/olm
  mkdir -p "$OUT/crds" && cp "$dir"/deploy/chart/crds/*.yaml "$OUT/crds/" && chmod -R u+w "$OUT/crds"
}
# A usable OLM directory has an executable `olm` and OLM's CRD files under crds/.
olm_dir_check() { # dir
  [[ -x "$1/olm" ]] || { echo "$1 has no executable olm"; return 1; }
  grep -lq 'name: clusterserviceversions.operators.coreos.com' "$1"/crds/*.yaml 2>/dev/null ||
    { echo "$1/crds/ lacks the ClusterServiceVersion CRD"; return 1; }
}
olm_verify() { olm_dir_check "$OUT" && expect_version "$OUT/olm" "$OLM_VERSION" --version; }

# --- sharder: timebertt/kubernetes-controller-sharding's cmd/sharder plus one flag,
# --webhook-port (engines/sharder/main.go: two local clusters need two webhook ports), built in a
# copy of the module (from the proxy, else SHARDER_SRC) with its own go.mod and go.sum; its
# ControllerRing CRD is kept beside the binary so a cluster restarts without the source.
SHARDER_COMMIT=f1d25b34e0b3b78ba5763e3ac7ea4903fcedc70d
SHARDER_MODULE=github.com/timebertt/kubernetes-controller-sharding
SHARDER_CRD_FILE=sharding.timebertt.dev_controllerrings.yaml
engine_sharder() {
  WHAT="the controller sharder" RESULT=sharder BINARIES=sharder GOFLAGS="-mod=mod -buildvcs=false"
  KEY="sharder-${SHARDER_COMMIT:0:12}-$(sha256sum "$ENGINES_DIR/sharder/main.go" | cut -c1-8)"
  STEPS="build|build the controller sharder at ${SHARDER_COMMIT:0:12}|sharder_build
verify|verify it has --webhook-port|sharder_verify"
}
sharder_build() {
  local src=${SHARDER_SRC:-$(dirname "$CLUSTER_DIR")/../shared/tools/sharding/src} dir
  # The proxy first, bounded: ours answers 403 for this module.
  if dir=$(GOFLAGS=-mod=mod timeout 60 go mod download -json "$SHARDER_MODULE@$SHARDER_COMMIT" 2>/dev/null |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') && [[ -n "$dir" ]]; then
    echo "source: $SHARDER_MODULE@$SHARDER_COMMIT from the Go module proxy"
  elif [[ -f "$src/go.mod" ]] && grep -q "^module $SHARDER_MODULE\$" "$src/go.mod"; then
    dir=$(cd "$src" && pwd)
    echo "source: $dir (SHARDER_SRC)"
  else
    echo "the Go module proxy does not serve $SHARDER_MODULE@$SHARDER_COMMIT and SHARDER_SRC=$src holds no copy of its source"; return 1
  fi
  [[ -f "$dir/config/crds/$SHARDER_CRD_FILE" ]] || { echo "$dir has no config/crds/$SHARDER_CRD_FILE"; return 1; }
  cp -r "$dir" "$TMP/src" && chmod -R u+w "$TMP/src"
  mkdir -p "$TMP/src/cmd/sharder-local" && cp "$ENGINES_DIR/sharder/main.go" "$TMP/src/cmd/sharder-local/main.go"
  go_build "$TMP/src" -ldflags "-s -w" -o "$OUT/sharder" ./cmd/sharder-local
  cp "$dir/config/crds/$SHARDER_CRD_FILE" "$OUT/" && chmod u+w,a+r "$OUT/$SHARDER_CRD_FILE"
}
sharder_verify() { "$OUT/sharder" --help 2>&1 | grep -q -- '--webhook-port' || { echo "the built sharder does not run or lacks --webhook-port"; return 1; }; }

# --- cert-manager: the controllers of github.com/cert-manager/cert-manager's pkg/ run by
# engines/cert-manager/main.go (upstream's controller binary is a module of its own, which the module
# proxy does not serve), stamped as upstream stamps its version, and the CRDs of the same version:
# deploy/crds of the pinned module, copied from the module cache into crds/ beside the binary.
CERT_MANAGER_MODULE=github.com/cert-manager/cert-manager
engine_cert-manager() {
  wrapped_engine cert-manager $CERT_MANAGER_MODULE . $CERT_MANAGER_MODULE/pkg/util.AppVersion "the cert-manager controller (engines/cert-manager/main.go)"
  STEPS="build|build the cert-manager controller $VERSION|wrapped_build
crds|copy the CRDs of cert-manager $VERSION from the module cache|cert_manager_crds
verify|verify it reports ${VERSION#v} and has its CRDs|cert_manager_verify"
}
cert_manager_crds() {
  local dir
  dir=$(cd "$ENGINES_DIR/cert-manager" && go mod download -json "$CERT_MANAGER_MODULE" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -n "$dir" && -d "$dir/deploy/crds" ]] || { echo "the module cache has no deploy/crds of $CERT_MANAGER_MODULE@$VERSION"; return 1; }
  mkdir -p "$OUT/crds" && cp "$dir"/deploy/crds/*.yaml "$OUT/crds/" && chmod -R u+w "$OUT/crds"
  ls "$OUT/crds"
}
cert_manager_verify() {
  wrapped_verify || return 1
  grep -lq '^  name: certificates.cert-manager.io$' "$OUT"/crds/*.yaml || { echo "crds/ lacks the Certificate CRD"; return 1; }
}

# --- the build ---------------------------------------------------------------------------------
[[ " $ENGINES " == *" $ENGINE "* ]] || die "unknown engine '$ENGINE' (known: $ENGINES)"
"engine_$ENGINE"

if [[ $ENGINE == olm && -n "${OLM_DIR:-}" ]]; then
  [[ -d "$OLM_DIR" ]] || die "OLM_DIR=$OLM_DIR is not a directory"
  why=$(olm_dir_check "$(cd "$OLM_DIR" && pwd)") || die "OLM_DIR=$OLM_DIR: $why"
  cd "$OLM_DIR" && pwd
  exit 0
fi

DEST="$IOT_CACHE_ROOT/$KEY"
complete() {
  [[ -f "$DEST/.build-complete" || $STAMPED == 0 ]] || return 1
  local b
  for b in $BINARIES; do [[ -x "$DEST/$b" ]] || return 1; done
}
result() { if [[ $RESULT == . ]]; then echo "$DEST"; else echo "$DEST/$RESULT"; fi; }

if [[ "${FORCE_BUILD:-0}" != 1 ]] && complete; then result; exit 0; fi
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || die "go is not on PATH; Go >= 1.24 is needed to build $WHAT"
command -v flock >/dev/null 2>&1 || die "flock (util-linux) is not on PATH"

mkdir -p "$IOT_CACHE_ROOT" "$(dirname "$DEST")"
exec 9>"$IOT_CACHE_ROOT/.$ENGINE-build-lock"
if ! flock -n 9; then
  log "another build of $WHAT is running; waiting for it to finish"
  flock 9
  if complete; then result; exit 0; fi
fi
if [[ "${FORCE_BUILD:-0}" != 1 ]] && complete; then result; exit 0; fi

export CGO_ENABLED=0 GOFLAGS GOTOOLCHAIN=${GOTOOLCHAIN:-local} GOWORK=off
GO_P=${BUILD_PARALLELISM:-2}
# We hold the lock: any other temporary build directory of this engine is left over from a killed build.
rm -rf "$IOT_CACHE_ROOT"/.build-"$ENGINE"-*
TMP=$(mktemp -d "$IOT_CACHE_ROOT/.build-$ENGINE-XXXXXX")
OUT="$TMP/out"
HEARTBEAT_PID=""
cleanup() {
  if [[ -n "$HEARTBEAT_PID" ]]; then kill "$HEARTBEAT_PID" 2>/dev/null || true; fi
  # A compiler stopped by the same signal may still be writing here: try once more.
  rm -rf "$TMP" 2>/dev/null || { sleep 0.3; rm -rf "$TMP"; }
}
trap cleanup EXIT
mkdir -p "$OUT" "$TMP/logs" "$TMP/go-tmp"
# go's work directories, inside ours: a go stopped by a signal leaves none behind in /tmp.
export GOTMPDIR="$TMP/go-tmp"

BUILD_START=$(date +%s)
STEP_TIMES=()
STEP_RECORD=()
STEP_NO=0
mapfile -t STEP_LINES <<<"$STEPS"
STEP_TOTAL=${#STEP_LINES[@]}
TIMES_FILE="$IOT_CACHE_ROOT/$ENGINE.step-times"

# Runs once the step being run has ended (go and the compilers end on the same signal), still
# inside that step's redirection to its log: so it says so on our stderr, kept as fd 7.
exec 7>&2
interrupted() { # signal exit-code
  log "build of $WHAT interrupted by SIG$1 in step $STEP_NO/$STEP_TOTAL after $(($(date +%s) - BUILD_START))s; nothing was published (the next run builds again)" 2>&7
  exit "$2"
}
trap 'interrupted INT 130' INT
trap 'interrupted TERM 143' TERM

# Seconds step ID took in the last successful build (empty when unknown).
last_time() { [[ -f "$TIMES_FILE" ]] && awk -v id="$1" '$1 == id { print $2 }' "$TIMES_FILE" || true; }

# Seconds left in all: the last build's time of this step less ELAPSED (at least 0) and those of
# the steps after it; empty when there was no earlier build.
remaining_estimate() { # elapsed
  local left=0 i t
  for ((i = STEP_NO - 1; i < STEP_TOTAL; i++)); do
    t=$(last_time "${STEP_LINES[$i]%%|*}")
    [[ -n "$t" ]] || return 0
    if ((i == STEP_NO - 1)); then t=$((t > $1 ? t - $1 : 0)); fi
    left=$((left + t))
  done
  echo "$left"
}

run_step() { # "id|name|function"
  local id=${1%%|*} rest=${1#*|} name fn
  name=${rest%|*} fn=${rest##*|}
  STEP_NO=$((STEP_NO + 1))
  local logf="$TMP/logs/step$STEP_NO.log" start rc=0 last took
  start=$(date +%s)
  last=$(last_time "$id")
  log "==> $ENGINE step $STEP_NO/$STEP_TOTAL: $name${last:+ (last build: ${last}s)}; $(($(date +%s) - BUILD_START))s into the build"
  (
    while sleep 15; do
      elapsed=$(($(date +%s) - start))
      left=$(remaining_estimate "$elapsed")
      log "    ... $ENGINE step $STEP_NO/$STEP_TOTAL $id: ${elapsed}s elapsed, $(grep -c . "$logf" 2>/dev/null || true) packages compiled; ${left:+about ${left}s left in all (from the last build)}${left:-no earlier build to estimate from}"
    done
  ) 9>&- & # its sleep, left to finish when the loop is killed, must not hold the build lock
  HEARTBEAT_PID=$!
  "$fn" >"$logf" 2>&1 || rc=$?
  kill "$HEARTBEAT_PID" 2>/dev/null || true
  wait "$HEARTBEAT_PID" 2>/dev/null || true
  HEARTBEAT_PID=""
  took=$(($(date +%s) - start))
  if [[ $rc -ne 0 ]]; then
    cp "$logf" "$IOT_CACHE_ROOT/$ENGINE.last-failure.log" 2>/dev/null || true
    log "BUILD FAILED: $ENGINE step $STEP_NO/$STEP_TOTAL '$name' (exit $rc, after ${took}s). Last output:"
    # go build -v lists every package it compiles; show the other lines (the errors).
    if grep -qv '^[a-zA-Z0-9._~/-]*$' "$logf"; then grep -v '^[a-zA-Z0-9._~/-]*$' "$logf" | tail -n 40 >&2; else tail -n 20 "$logf" >&2; fi
    log "full log: $IOT_CACHE_ROOT/$ENGINE.last-failure.log"
    exit "$rc"
  fi
  log "    done: $name in ${took}s"
  STEP_TIMES+=("$name: ${took}s")
  STEP_RECORD+=("$id $took")
}

log "building $WHAT with $(go version) (go build -p $GO_P, niced); minutes on a cold Go build cache"
for step in "${STEP_LINES[@]}"; do run_step "$step"; done

TOTAL=$(($(date +%s) - BUILD_START))
{
  echo "engine=$ENGINE"
  echo "cache_entry=$KEY"
  echo "go=$(go version)"
  echo "built_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "total_seconds=$TOTAL"
  for t in "${STEP_TIMES[@]}"; do echo "step=$t"; done
  cat "$TMP/logs/step$STEP_NO.log"
} >"$OUT/.build-complete"
chmod -R a+rX "$OUT"

# Publish: the finished directory is renamed into place (same file system).
if [[ -e "$DEST" ]]; then mv -T "$DEST" "$TMP/old"; fi
mv -T "$OUT" "$DEST"
printf '%s\n' "${STEP_RECORD[@]}" >"$TIMES_FILE.tmp.$$" && mv "$TIMES_FILE.tmp.$$" "$TIMES_FILE"
log "built $WHAT in ${TOTAL}s:"
for t in "${STEP_TIMES[@]}"; do log "    $t"; done
result
