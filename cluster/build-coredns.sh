#!/usr/bin/env bash
# Provides CoreDNS for the real node's cluster DNS (cluster/lib/cluster-dns.sh): one static binary.
#
#   bash cluster/build-coredns.sh   -> progress on stderr; last stdout line: the binary's path
#
# Guarantees:
# - The binary is github.com/coredns/coredns at the version cluster/coredns/go.mod pins (every
#   dependency pinned by its go.sum), with only the plugins cluster/coredns/main.go lists; built
#   from the Go module proxy with GOTOOLCHAIN=local, CGO_ENABLED=0, -trimpath.
# - Built once per version of cluster/coredns/ (go.mod, go.sum, main.go), cached outside the work
#   tree in $IOT_CACHE_ROOT/coredns-<version>-<hash>/ and published atomically (a directory holding
#   .build-complete is complete); a second run builds nothing. The work tree is not written to.
# - It is checked before it is published: it runs and lists the kubernetes plugin and no forward.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"

WRAPPER="$CLUSTER_DIR/coredns"
COREDNS_VERSION=$(sed -n 's/^require github.com\/coredns\/coredns \(v[^ ]*\)$/\1/p' "$WRAPPER/go.mod")
[[ -n "$COREDNS_VERSION" ]] || die "$WRAPPER/go.mod does not require github.com/coredns/coredns on one line"
DEST="$IOT_CACHE_ROOT/coredns-$COREDNS_VERSION-$(cat "$WRAPPER"/go.mod "$WRAPPER"/go.sum "$WRAPPER"/main.go | sha256sum | cut -c1-8)"

if [[ -f "$DEST/.build-complete" && -x "$DEST/coredns" ]]; then
  echo "$DEST/coredns"
  exit 0
fi

mkdir -p "$IOT_CACHE_ROOT"
TMP=$(mktemp -d "$IOT_CACHE_ROOT/.coredns-build-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
start=$SECONDS
log "building CoreDNS $COREDNS_VERSION (its kubernetes plugin and the few others cluster/coredns/main.go lists; 2.5 CPU-minutes with an empty Go build cache)"
if ! (cd "$WRAPPER" && GOWORK=off GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
  nice -n 10 go build -p "${BUILD_PARALLELISM:-2}" -trimpath -ldflags "-s -w" -o "$TMP/coredns" . >&2); then
  die "go build of CoreDNS failed (see above)"
fi
plugins=$("$TMP/coredns" -plugins) || die "the built CoreDNS does not run"
grep -qx kubernetes <<<"$plugins" || die "the built CoreDNS lacks the kubernetes plugin: $plugins"
! grep -qx forward <<<"$plugins" || die "the built CoreDNS has the forward plugin"
printf 'CoreDNS %s built with %s in %ss\n' "$COREDNS_VERSION" "$(go version)" "$((SECONDS - start))" >"$TMP/.build-complete"
mkdir "$TMP/out"
mv "$TMP/coredns" "$TMP/.build-complete" "$TMP/out/"
rm -rf "$DEST"
mv -T "$TMP/out" "$DEST"
log "built CoreDNS in $((SECONDS - start))s: $DEST/coredns"
echo "$DEST/coredns"
