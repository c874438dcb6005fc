#!/usr/bin/env bash
# Provides the container registry of the real node: distribution's `registry` (cmd/registry of
# github.com/distribution/distribution/v3, the version pinned by cluster/registry/go.mod).
#
#   bash cluster/build-registry.sh   -> progress on stderr; last stdout line: the binary's path
#
# Guarantees:
# - Built from the Go module proxy through the wrapper module cluster/registry (its go.mod and
#   go.sum pin distribution and every dependency), with GOTOOLCHAIN=local, CGO_ENABLED=0, -trimpath.
# - Cached outside the work tree in $IOT_CACHE_ROOT/registry-<version>-<hash of go.mod, go.sum>/
#   and published atomically (a directory holding .build-complete is complete); a second run
#   builds nothing. Concurrent runs wait for each other.
# - The binary reports the pinned version (`registry --version`), or the build fails.
# Called only by registry_ensure (cluster/lib/registry.sh), i.e. only for a cluster with a real node.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

MODULE=github.com/distribution/distribution/v3
WRAPPER="$CLUSTER_DIR/registry"
VERSION=$(sed -n "s|^\s*$MODULE \(v[^ ]*\).*|\1|p" "$WRAPPER/go.mod")
[[ -n "$VERSION" ]] || die "$WRAPPER/go.mod does not require $MODULE"
DEST="$IOT_CACHE_ROOT/registry-$VERSION-$(cat "$WRAPPER/go.mod" "$WRAPPER/go.sum" | sha256sum | cut -c1-8)"
complete() { [[ -f "$DEST/.build-complete" && -x "$DEST/registry" ]]; }

if complete; then
  echo "$DEST/registry"
  exit 0
fi
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || die "go is not on PATH; Go >= 1.26 is needed to build the registry"

mkdir -p "$IOT_CACHE_ROOT"
exec 8>"$IOT_CACHE_ROOT/.registry-build-lock"
if ! flock -n 8; then
  log "another build of the registry is running; waiting for it"
  flock 8
fi
if complete; then echo "$DEST/registry"; exit 0; fi

TMP=$(mktemp -d "$IOT_CACHE_ROOT/.registry-build-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
start=$SECONDS
log "building the registry ($MODULE $VERSION, go build -p ${BUILD_PARALLELISM:-2}); about 4 minutes on a cold Go build cache"
if ! (cd "$WRAPPER" && GOWORK=off GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
  nice -n 10 go build -p "${BUILD_PARALLELISM:-2}" -trimpath \
  -ldflags "-s -w -X $MODULE/version.version=$VERSION" -o "$TMP/registry" "$MODULE/cmd/registry" >&2); then
  die "go build of the registry failed (see above)"
fi
out=$("$TMP/registry" --version 2>&1) || die "the built registry does not run: $out"
[[ "$out" == *" $VERSION"* ]] || die "the built registry reports '$out', want $VERSION"
printf 'registry %s built with %s in %ss\n' "$VERSION" "$(go version)" "$((SECONDS - start))" >"$TMP/.build-complete"
chmod -R a+rX "$TMP"
rm -rf "$DEST"
mv -T "$TMP" "$DEST"
trap - EXIT
log "built the registry in $((SECONDS - start))s: $DEST/registry"
echo "$DEST/registry"
