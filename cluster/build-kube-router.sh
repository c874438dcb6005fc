#!/usr/bin/env bash
# Provides kube-router (github.com/cloudnativelabs/kube-router/v2) for the real node's NetworkPolicy
# enforcement (cluster/lib/network-policy.sh).
#
#   bash cluster/build-kube-router.sh   -> progress on stderr; last stdout line: the binary's path
#
# Guarantees:
# - Built from the Go module proxy's copy of the module, as a dependency of the wrapper module
#   cluster/kube-router/ (its go.mod and go.sum pin kube-router and every dependency, several raised
#   above what kube-router's own go.mod asks: see cluster/README.md), with GOTOOLCHAIN=local,
#   CGO_ENABLED=0, -trimpath; the work tree is never written.
# - Cached outside the work tree in $IOT_CACHE_ROOT/kube-router-<version>-<hash of go.mod+go.sum>/,
#   published atomically (a directory holding .build-complete is complete); a second run builds
#   nothing. Concurrent runs wait for each other.
# - Only called when a real node is asked for: the default cluster builds nothing of this.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

KUBE_ROUTER_MODULE=github.com/cloudnativelabs/kube-router/v2
WRAPPER="$CLUSTER_DIR/kube-router"
KUBE_ROUTER_VERSION=$(awk -v m="$KUBE_ROUTER_MODULE" '$1 == m { print $2 }' "$WRAPPER/go.mod")
[[ -n "$KUBE_ROUTER_VERSION" ]] || die "$WRAPPER/go.mod does not require $KUBE_ROUTER_MODULE"
DEST="$IOT_CACHE_ROOT/kube-router-$KUBE_ROUTER_VERSION-$(cat "$WRAPPER/go.mod" "$WRAPPER/go.sum" | sha256sum | cut -c1-8)"

complete() { [[ -f "$DEST/.build-complete" && -x "$DEST/kube-router" ]]; }
if complete; then
  echo "$DEST/kube-router"
  exit 0
fi
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || die "go is not on PATH: Go >= 1.26 is needed to build kube-router"

mkdir -p "$IOT_CACHE_ROOT"
exec 8>"$IOT_CACHE_ROOT/.kube-router-lock"
if ! flock -n 8; then
  log "another build of kube-router is running; waiting for it"
  flock 8
fi
if complete; then echo "$DEST/kube-router"; exit 0; fi

TMP=$(mktemp -d "$IOT_CACHE_ROOT/.kube-router-build-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
start=$SECONDS
log "building kube-router $KUBE_ROUTER_VERSION (go build -p ${BUILD_PARALLELISM:-2}, niced; about 4 minutes with an empty Go build cache)"
if ! (cd "$WRAPPER" && GOWORK=off GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
  nice -n 10 go build -p "${BUILD_PARALLELISM:-2}" -trimpath \
  -ldflags "-s -w -X $KUBE_ROUTER_MODULE/pkg/version.Version=$KUBE_ROUTER_VERSION" \
  -o "$TMP/kube-router" "$KUBE_ROUTER_MODULE/cmd/kube-router") >"$TMP/build.log" 2>&1; then
  tail -n 40 "$TMP/build.log" >&2
  die "go build of kube-router failed (see above)"
fi
out=$("$TMP/kube-router" --version 2>&1 || true)
[[ "$out" == *"$KUBE_ROUTER_VERSION"* ]] || die "the built kube-router does not run or reports '$out'"
printf 'kube-router %s built with %s in %ss\n' "$KUBE_ROUTER_VERSION" "$(go version)" "$((SECONDS - start))" >"$TMP/.build-complete"
rm -f "$TMP/build.log"
rm -rf "$DEST"
mv -T "$TMP" "$DEST"
trap - EXIT
log "built kube-router in $((SECONDS - start))s: $DEST/kube-router"
echo "$DEST/kube-router"
