#!/usr/bin/env bash
# Provides the Kubernetes controller sharder (timebertt/kubernetes-controller-sharding) for the
# local cluster: the `sharder` binary and the ControllerRing CRD, in one directory laid out as
# `sharder` + `crds/*.yaml`.
#
#   bash cluster/build-sharder.sh   -> progress on stderr; last stdout line: that directory
#
# Built once at SHARDER_COMMIT and cached outside the work tree; a second run builds nothing.
# The module comes from the Go module proxy when it serves it; otherwise from its source in
# SHARDER_SRC (default: ../shared/tools/sharding/src beside the checkout), whose dependencies
# the proxy serves. The CRD is taken from the same source.
set -euo pipefail
SHARDER_COMMIT=f1d25b34e0b3b78ba5763e3ac7ea4903fcedc70d
SHARDER_MODULE=github.com/timebertt/kubernetes-controller-sharding
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARDER_SRC=${SHARDER_SRC:-$REPO_ROOT/../shared/tools/sharding/src}
CACHE_ROOT=${IOT_OPERATOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/iot-operator}
DEST="$CACHE_ROOT/sharder-${SHARDER_COMMIT:0:12}"
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"

log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if [[ -f "$DEST/.build-complete" ]]; then
  echo "$DEST"
  exit 0
fi

mkdir -p "$CACHE_ROOT"
TMP=$(mktemp -d "$CACHE_ROOT/.sharder-build-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
start=$SECONDS
# The module as the proxy serves it, else the source beside the checkout: either way built
# inside its own go.mod, which pins every dependency.
if module_dir=$(GOFLAGS=-mod=mod go mod download -json "$SHARDER_MODULE@$SHARDER_COMMIT" 2>/dev/null |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') && [[ -n "$module_dir" ]]; then
  source_dir=$module_dir
  origin="$SHARDER_MODULE@$SHARDER_COMMIT from the Go module proxy"
elif [[ -f "$SHARDER_SRC/go.mod" ]] && grep -q "^module $SHARDER_MODULE\$" "$SHARDER_SRC/go.mod"; then
  source_dir=$(cd "$SHARDER_SRC" && pwd)
  origin="$source_dir (source of $SHARDER_MODULE at $SHARDER_COMMIT)"
else
  die "the Go module proxy does not serve $SHARDER_MODULE@$SHARDER_COMMIT and SHARDER_SRC=$SHARDER_SRC holds no copy of its source"
fi
log "building the controller sharder from $origin"
cp -r "$source_dir" "$TMP/src"
chmod -R u+w "$TMP/src"
if ! (cd "$TMP/src" && GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 go build -p "${BUILD_PARALLELISM:-2}" -trimpath -ldflags "-s -w" \
  -o "$TMP/out/sharder" ./cmd/sharder >&2); then
  die "go build of the controller sharder failed (see above)"
fi
mkdir -p "$TMP/out/crds"
cp "$TMP/src/config/crds/sharding.timebertt.dev_controllerrings.yaml" "$TMP/out/crds/"
"$TMP/out/sharder" --help >/dev/null 2>&1 || die "the built sharder does not run"
printf 'sharder built from %s with %s\n' "$origin" "$(go version)" >"$TMP/out/.build-complete"
rm -rf "$DEST"
mv -T "$TMP/out" "$DEST"
log "built the controller sharder in $((SECONDS - start))s"
echo "$DEST"
