#!/usr/bin/env bash
# Provides the Operator Lifecycle Manager for the local cluster: the `olm` operator binary and
# OLM's CustomResourceDefinitions, in one directory laid out as `olm` + `crds/*.yaml`.
#
#   bash cluster/build-olm.sh   -> progress on stderr; last stdout line: that directory
#
# With OLM_DIR set, that directory is used as it is (after checking it holds both parts).
# Otherwise `github.com/operator-framework/operator-lifecycle-manager/cmd/olm` is built from Go
# modules at OLM_VERSION and cached outside the work tree, with the CRDs of the same module
# version (deploy/chart/crds/); a second run builds nothing. This needs a Go module proxy that
# serves OLM's module and its dependencies.
set -euo pipefail
OLM_VERSION=v0.46.0
OLM_MODULE=github.com/operator-framework/operator-lifecycle-manager
CACHE_ROOT=${IOT_OPERATOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/iot-operator}
DEST="$CACHE_ROOT/olm-$OLM_VERSION"
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"

log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# A usable OLM directory has an executable `olm` and OLM's CRD files under crds/.
check_olm_dir() { # dir what
  [[ -x "$1/olm" ]] || die "$2 has no executable 'olm' ($1/olm)"
  compgen -G "$1/crds/*.yaml" >/dev/null || die "$2 has no CRD files ($1/crds/*.yaml)"
  grep -lq 'name: clusterserviceversions.operators.coreos.com' "$1"/crds/*.yaml ||
    die "$2 lacks the ClusterServiceVersion CRD in $1/crds/"
}

if [[ -n "${OLM_DIR:-}" ]]; then
  [[ -d "$OLM_DIR" ]] || die "OLM_DIR=$OLM_DIR is not a directory"
  dir=$(cd "$OLM_DIR" && pwd)
  check_olm_dir "$dir" "OLM_DIR=$OLM_DIR"
  echo "$dir"
  exit 0
fi

if [[ -f "$DEST/.build-complete" ]]; then
  echo "$DEST"
  exit 0
fi

mkdir -p "$CACHE_ROOT"
TMP=$(mktemp -d "$CACHE_ROOT/.olm-build-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
log "building olm $OLM_VERSION from Go modules ($OLM_MODULE/cmd/olm)"
start=$SECONDS
if ! module_dir=$(GOFLAGS=-mod=mod go mod download -json "$OLM_MODULE@$OLM_VERSION" 2>"$TMP/download.log" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') || [[ -z "$module_dir" ]]; then
  cat "$TMP/download.log" >&2
  die "could not download $OLM_MODULE@$OLM_VERSION from the Go module proxy ($(go env GOPROXY)); set OLM_DIR to a directory holding olm and crds/ instead"
fi
# Built inside a copy of the module, so that its own go.mod and go.sum pin every dependency
# (`go install pkg@version` would do the same, but also asks the proxy for the module's version
# list, which a proxy serving only some versions refuses).
cp -r "$module_dir" "$TMP/src"
chmod -R u+w "$TMP/src"
if ! (cd "$TMP/src" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -p "${BUILD_PARALLELISM:-2}" -trimpath \
  -ldflags "-s -w -X $OLM_MODULE/pkg/version.OLMVersion=$OLM_VERSION" -o "$TMP/bin/olm" ./cmd/olm >&2); then
  die "go build of $OLM_MODULE/cmd/olm@$OLM_VERSION failed (see above); set OLM_DIR to a directory holding olm and crds/ instead"
fi
mkdir -p "$TMP/out/crds"
mv "$TMP/bin/olm" "$TMP/out/olm"
cp "$module_dir"/deploy/chart/crds/*.yaml "$TMP/out/crds/"
chmod -R u+w "$TMP/out"
check_olm_dir "$TMP/out" "the build"
"$TMP/out/olm" --version | grep -qF "$OLM_VERSION" || die "the built olm does not report version $OLM_VERSION"
printf 'olm %s built from %s@%s with %s\n' "$OLM_VERSION" "$OLM_MODULE" "$OLM_VERSION" "$(go version)" >"$TMP/out/.build-complete"
rm -rf "$DEST"
mv -T "$TMP/out" "$DEST"
log "built olm $OLM_VERSION in $((SECONDS - start))s"
echo "$DEST"
