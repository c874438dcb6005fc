#!/usr/bin/env bash
# Provides one of the engines of the real node's cluster parts, built from Go modules:
#
#   bash cluster/build-engine.sh coredns|kube-router|local-path-provisioner|registry|prometheus|promtool|nats-server
#     -> progress on stderr; last stdout line: the binary's path
#
# Guarantees:
# - The engine is built through its wrapper module cluster/<engine>/ (go.mod and go.sum pin the
#   engine and every dependency; CoreDNS's also holds the main package that picks its plugins),
#   with GOTOOLCHAIN=local, CGO_ENABLED=0, -trimpath, niced; the work tree is never written.
# - The binary reports the version that go.mod pins (stamped as upstream's release build stamps
#   it), or the build fails.
# - Cached outside the work tree in $IOT_CACHE_ROOT/<engine>-<version>-<hash of the wrapper
#   module>/ and published atomically (a directory holding .build-complete is complete); a second
#   run builds nothing. Concurrent builds of one engine wait for each other.
# - Called only by the parts' ensure functions (cluster/lib/*.sh), i.e. only for a cluster with a
#   real node, by the monitoring tests (prometheus, promtool) and by the IoT service's tests
#   (nats-server): the default cluster builds none.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

ENGINE=${1:-}
# module, package to build, version stamp (-X) or "", what it is; optionally the wrapper module's
# folder (default: the engine's name), build tags, and the stamped version (default: the module's).
WRAPPER_NAME=$ENGINE TAGS="" STAMP_VERSION=""
# Prometheus's module v0.3XX.Y is Prometheus 3.XX.Y; only Kubernetes service discovery is built in.
PROMETHEUS_TAGS=remove_all_sd,enable_kubernetes_sd
case "$ENGINE" in
  coredns) MODULE=github.com/coredns/coredns PACKAGE=. STAMP="" WHAT="CoreDNS (the plugins cluster/coredns/main.go lists)" ;;
  kube-router) MODULE=github.com/cloudnativelabs/kube-router/v2 PACKAGE=$MODULE/cmd/kube-router STAMP=$MODULE/pkg/version.Version WHAT="kube-router" ;;
  local-path-provisioner) MODULE=github.com/rancher/local-path-provisioner PACKAGE=$MODULE STAMP=main.VERSION WHAT="local-path-provisioner" ;;
  registry) MODULE=github.com/distribution/distribution/v3 PACKAGE=$MODULE/cmd/registry STAMP=$MODULE/version.version WHAT="the registry (distribution)" ;;
  nats-server) MODULE=github.com/nats-io/nats-server/v2 PACKAGE=$MODULE STAMP="" WHAT="NATS Server (the IoT service's broker)" ;;
  prometheus | promtool)
    MODULE=github.com/prometheus/prometheus PACKAGE=$MODULE/cmd/$ENGINE STAMP=github.com/prometheus/common/version.Version
    WHAT=$ENGINE WRAPPER_NAME=prometheus TAGS=$PROMETHEUS_TAGS ;;
  *) die "unknown engine '$ENGINE' (known: coredns, kube-router, local-path-provisioner, registry, prometheus, promtool, nats-server)" ;;
esac
WRAPPER="$CLUSTER_DIR/$WRAPPER_NAME"
VERSION=$(awk -v m="$MODULE" '$1 == m { print $2 } $1 == "require" && $2 == m { print $3 }' "$WRAPPER/go.mod")
[[ "$VERSION" =~ ^v[0-9] ]] || die "$WRAPPER/go.mod does not require $MODULE"
if [[ $MODULE == github.com/prometheus/prometheus ]]; then
  [[ $VERSION =~ ^v0\.3([0-9][0-9])\.([0-9]+)$ ]] || die "Prometheus module version $VERSION is not v0.3XX.Y"
  STAMP_VERSION="3.$((10#${BASH_REMATCH[1]})).${BASH_REMATCH[2]}"
fi
STAMP_VERSION=${STAMP_VERSION:-$VERSION}
shopt -s nullglob
WRAPPER_FILES=("$WRAPPER"/go.mod "$WRAPPER"/go.sum "$WRAPPER"/*.go)
shopt -u nullglob
DEST="$IOT_CACHE_ROOT/$ENGINE-$VERSION-$(cat "${WRAPPER_FILES[@]}" | sha256sum | cut -c1-8)"
complete() { [[ -f "$DEST/.build-complete" && -x "$DEST/$ENGINE" ]]; }

if complete; then
  echo "$DEST/$ENGINE"
  exit 0
fi
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || die "go is not on PATH; Go >= 1.26 is needed to build $WHAT"

mkdir -p "$IOT_CACHE_ROOT"
exec 8>"$IOT_CACHE_ROOT/.$ENGINE-build-lock"
if ! flock -n 8; then
  log "another build of $WHAT is running; waiting for it"
  flock 8
fi
if complete; then echo "$DEST/$ENGINE"; exit 0; fi

TMP=$(mktemp -d "$IOT_CACHE_ROOT/.$ENGINE-build-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
mkdir "$TMP/out"
start=$SECONDS
log "building $WHAT $VERSION from Go modules (go build -p ${BUILD_PARALLELISM:-2}, niced; 2-4 minutes with an empty Go build cache)"
if ! (cd "$WRAPPER" && GOWORK=off GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
  nice -n 10 go build -p "${BUILD_PARALLELISM:-2}" -trimpath ${TAGS:+-tags "$TAGS"} -ldflags "-s -w${STAMP:+ -X $STAMP=$STAMP_VERSION}" \
  -o "$TMP/out/$ENGINE" "$PACKAGE") >"$TMP/build.log" 2>&1; then
  tail -n 40 "$TMP/build.log" >&2
  die "go build of $WHAT failed (see above)"
fi
out=$("$TMP/out/$ENGINE" --version 2>&1 || true)
[[ "$out" == *"${STAMP_VERSION#v}"* ]] || die "the built $ENGINE does not run or does not report ${STAMP_VERSION#v}: $out"
printf '%s %s built with %s in %ss\n' "$ENGINE" "$VERSION" "$(go version)" "$((SECONDS - start))" >"$TMP/out/.build-complete"
chmod -R a+rX "$TMP/out"
rm -rf "$DEST"
mv -T "$TMP/out" "$DEST"
log "built $WHAT in $((SECONDS - start))s: $DEST/$ENGINE"
echo "$DEST/$ENGINE"
