#!/usr/bin/env bash
# Provides the Kubernetes controller sharder (timebertt/kubernetes-controller-sharding) for the
# local cluster: the `sharder` binary and, beside it, the ControllerRing CRD of the same source
# (sharding.timebertt.dev_controllerrings.yaml), so that a cluster restarts without the source.
#
#   bash cluster/build-sharder.sh   -> progress on stderr; last stdout line: the binary's path
#
# Guarantees:
# - Built once per SHARDER_COMMIT and version of cluster/sharder/main.go, cached outside the work
#   tree in $IOT_OPERATOR_CACHE_DIR/sharder-<commit>-<main.go hash>/ and published atomically
#   (a directory holding .build-complete is complete); a second run builds nothing (≈0 s).
# - The source is the module as the Go module proxy serves it at SHARDER_COMMIT (a short, quiet
#   attempt), else SHARDER_SRC (default: ../shared/tools/sharding/src beside the repository),
#   which must be that module. Its own go.mod and go.sum pin every dependency.
# - The binary is upstream's cmd/sharder plus one flag, --webhook-port (cluster/sharder/main.go:
#   upstream cannot move its webhook off port 9443, and two local clusters need two ports). It is
#   built in a copy of the source; the source itself is never changed.
set -euo pipefail
SHARDER_COMMIT=f1d25b34e0b3b78ba5763e3ac7ea4903fcedc70d
SHARDER_MODULE=github.com/timebertt/kubernetes-controller-sharding
CRD_FILE=sharding.timebertt.dev_controllerrings.yaml
CLUSTER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(dirname "$CLUSTER_DIR")
SHARDER_SRC=${SHARDER_SRC:-$REPO_ROOT/../shared/tools/sharding/src}
CACHE_ROOT=${IOT_OPERATOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/iot-operator}
MAIN_GO="$CLUSTER_DIR/sharder/main.go"
DEST="$CACHE_ROOT/sharder-${SHARDER_COMMIT:0:12}-$(sha256sum "$MAIN_GO" | cut -c1-8)"
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"

log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if [[ -f "$DEST/.build-complete" && -x "$DEST/sharder" ]]; then
  echo "$DEST/sharder"
  exit 0
fi

mkdir -p "$CACHE_ROOT"
TMP=$(mktemp -d "$CACHE_ROOT/.sharder-build-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
start=$SECONDS
# The proxy first: `go mod download` rather than `go install pkg@commit`, because the flag above
# is built in beside upstream's main package. Our proxy answers 403 for this module: bounded and
# quiet, then the source beside the repository.
if module_dir=$(GOWORK=off GOFLAGS=-mod=mod timeout 60 go mod download -json "$SHARDER_MODULE@$SHARDER_COMMIT" 2>/dev/null |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') && [[ -n "$module_dir" ]]; then
  source_dir=$module_dir
  origin="$SHARDER_MODULE@$SHARDER_COMMIT from the Go module proxy"
elif [[ -f "$SHARDER_SRC/go.mod" ]] && grep -q "^module $SHARDER_MODULE\$" "$SHARDER_SRC/go.mod"; then
  source_dir=$(cd "$SHARDER_SRC" && pwd)
  origin="$source_dir (the source of $SHARDER_MODULE at ${SHARDER_COMMIT:0:12})"
else
  die "the Go module proxy does not serve $SHARDER_MODULE@$SHARDER_COMMIT and SHARDER_SRC=$SHARDER_SRC holds no copy of its source"
fi
[[ -f "$source_dir/config/crds/$CRD_FILE" ]] || die "$source_dir has no config/crds/$CRD_FILE"
log "building the controller sharder from $origin (about 2 minutes with an empty Go build cache)"
cp -r "$source_dir" "$TMP/src"
chmod -R u+w "$TMP/src"
mkdir -p "$TMP/src/cmd/sharder-local" "$TMP/out"
cp "$MAIN_GO" "$TMP/src/cmd/sharder-local/main.go"
if ! (cd "$TMP/src" && GOWORK=off GOTOOLCHAIN=local GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 \
  go build -p "${BUILD_PARALLELISM:-2}" -trimpath -ldflags "-s -w" -o "$TMP/out/sharder" ./cmd/sharder-local >&2); then
  die "go build of the controller sharder failed (see above)"
fi
cp "$source_dir/config/crds/$CRD_FILE" "$TMP/out/"
chmod -R u+w,a+r "$TMP/out"
"$TMP/out/sharder" --help 2>&1 | grep -q -- '--webhook-port' || die "the built sharder does not run or lacks --webhook-port"
printf 'sharder built from %s with %s in %ss\n' "$origin" "$(go version)" "$((SECONDS - start))" >"$TMP/out/.build-complete"
rm -rf "$DEST"
mv -T "$TMP/out" "$DEST"
log "built the controller sharder in $((SECONDS - start))s: $DEST/sharder"
echo "$DEST/sharder"
