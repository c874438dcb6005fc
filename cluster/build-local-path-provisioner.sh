#!/usr/bin/env bash
# Provides rancher/local-path-provisioner, the volume provisioner of the real node
# (cluster/lib/local-path.sh), built from Go modules.
#
#   bash cluster/build-local-path-provisioner.sh   -> progress on stderr; last stdout line: the binary's path
#
# Guarantees:
# - The version is the one cluster/local-path-provisioner/go.mod requires (LOCAL_PATH_VERSION
#   below must agree); every dependency is pinned by that wrapper module's go.sum.
# - Built once per version and wrapper module (go.mod + go.sum hash), statically
#   (CGO_ENABLED=0, -trimpath, GOTOOLCHAIN=local), stamped with its version as upstream's build
#   stamps it, cached outside the work tree in $IOT_OPERATOR_CACHE_DIR/local-path-provisioner-<version>-<hash>/
#   and published atomically (a directory holding .build-complete is complete); a second run
#   builds nothing.
set -euo pipefail
LOCAL_PATH_VERSION=v0.0.30
LOCAL_PATH_MODULE=github.com/rancher/local-path-provisioner
CLUSTER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WRAPPER="$CLUSTER_DIR/local-path-provisioner"
CACHE_ROOT=${IOT_OPERATOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/iot-operator}
DEST="$CACHE_ROOT/local-path-provisioner-$LOCAL_PATH_VERSION-$(cat "$WRAPPER/go.mod" "$WRAPPER/go.sum" | sha256sum | cut -c1-8)"
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"

log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if [[ -f "$DEST/.build-complete" && -x "$DEST/local-path-provisioner" ]]; then
  echo "$DEST/local-path-provisioner"
  exit 0
fi
grep -q "^[[:space:]]*$LOCAL_PATH_MODULE $LOCAL_PATH_VERSION\b" "$WRAPPER/go.mod" ||
  die "$WRAPPER/go.mod does not require $LOCAL_PATH_MODULE $LOCAL_PATH_VERSION"

mkdir -p "$CACHE_ROOT"
TMP=$(mktemp -d "$CACHE_ROOT/.local-path-provisioner-build-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
start=$SECONDS
log "building local-path-provisioner $LOCAL_PATH_VERSION from Go modules (about 2 minutes with an empty Go build cache)"
if ! (cd "$WRAPPER" && GOWORK=off GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
  nice -n 10 go build -p "${BUILD_PARALLELISM:-2}" -trimpath -ldflags "-s -w -X main.VERSION=$LOCAL_PATH_VERSION" \
  -o "$TMP/out/local-path-provisioner" "$LOCAL_PATH_MODULE" >&2); then
  die "go build of local-path-provisioner failed (see above)"
fi
"$TMP/out/local-path-provisioner" --version 2>&1 | grep -qF "$LOCAL_PATH_VERSION" ||
  die "the built local-path-provisioner does not report $LOCAL_PATH_VERSION"
printf 'local-path-provisioner %s built with %s in %ss\n' "$LOCAL_PATH_VERSION" "$(go version)" "$((SECONDS - start))" >"$TMP/out/.build-complete"
rm -rf "$DEST"
mv -T "$TMP/out" "$DEST"
log "built local-path-provisioner in $((SECONDS - start))s: $DEST/local-path-provisioner"
echo "$DEST/local-path-provisioner"
