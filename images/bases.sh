#!/usr/bin/env bash
# Makes the base images of the operator images from Debian 13 (trixie) packages, for machines
# that reach Debian's mirror but no image registry, into buildah's local storage. Two sets:
#
#   node  localhost/iot-operator/node:20-trixie        Node.js 20 (Debian's nodejs) + CA certificates,
#                                                      user and group `node` (1000) as in the public
#                                                      node images; apt kept (images may add packages)
#         localhost/iot-operator/node-build:20-trixie  the same + npm (the Dockerfiles' build stage)
#   go    localhost/iot-operator/golang:1.24-trixie    Go 1.24 + git (Armada's helm stage)
#
#   bash images/bases.sh [node] [go]   -> progress on stderr; the build arguments that select the
#                                         named sets (default: both) on stdout
#
# Guarantees: idempotent and cached per set: a set is made again only when this script or the
# machine's own CA certificates change (their hash is recorded in
# $IOT_OPERATOR_CACHE_DIR/images/<set>.sha256) or one of its images is missing; a set nobody asked
# for is never made (the IoT service's images need only `node`). It installs what it needs
# (debootstrap, buildah) with apt-get, waiting for another apt-get to finish. Nothing is pulled
# from a registry: debootstrap fetches Debian's packages from DEBIAN_MIRROR (default
# http://deb.debian.org/debian), and buildah commits the resulting directories as single-layer
# images.
# Slim like Debian's official slim images: no apt lists or caches, docs (copyright files kept), man
# pages or locales, and apt/dpkg configured to keep it so for packages installed later. No trace of
# the machine that made them (its resolv.conf and host name), except its own CA certificates
# (/usr/local/share/ca-certificates, e.g. a proxy's): those are trusted in the bases too, by the
# system store and by Node.js (NODE_EXTRA_CA_CERTS), so that a build reaches npm, Debian and the Go
# module proxy the way this machine does.
set -euo pipefail
SCRIPT=$(readlink -f "${BASH_SOURCE[0]}")
CACHE_ROOT=${IOT_OPERATOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/iot-operator}
WORK="$CACHE_ROOT/images"
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
SUITE=trixie
NODE_IMAGE=localhost/iot-operator/node:20-trixie
NODE_BUILD_IMAGE=localhost/iot-operator/node-build:20-trixie
GO_IMAGE=localhost/iot-operator/golang:1.24-trixie

log() { printf '[images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

SETS=("$@")
((${#SETS[@]} > 0)) || SETS=(node go)
for set in "${SETS[@]}"; do [[ $set == node || $set == go ]] || die "unknown base set '$set' (known: node, go)"; done
wanted() { [[ " ${SETS[*]} " == *" $1 "* ]]; }

build_args() {
  local args=()
  if wanted node; then args+=(--build-arg "NODE_IMAGE=$NODE_IMAGE" --build-arg "NODE_BUILD_IMAGE=$NODE_BUILD_IMAGE"); fi
  if wanted go; then args+=(--build-arg "GO_IMAGE=$GO_IMAGE"); fi
  echo "${args[*]}"
}

have_image() { buildah inspect --type image "$1" >/dev/null 2>&1; }

mkdir -p "$WORK"
exec 7>"$WORK/.lock"
flock 7
hash=$(cat "$SCRIPT" /usr/local/share/ca-certificates/*.crt 2>/dev/null | sha256sum | cut -d' ' -f1)
current() { # set images...
  local set=$1 image
  shift
  [[ "$(cat "$WORK/$set.sha256" 2>/dev/null)" == "$hash" ]] || return 1
  for image in "$@"; do have_image "$image" || return 1; done
}
make_node=0 make_go=0
if wanted node && ! current node "$NODE_IMAGE" "$NODE_BUILD_IMAGE"; then make_node=1; fi
if wanted go && ! current go "$GO_IMAGE"; then make_go=1; fi
if ((make_node == 0 && make_go == 0)); then
  build_args
  exit 0
fi

missing=()
for p in debootstrap buildah; do command -v "$p" >/dev/null || missing+=("$p"); done
if ((${#missing[@]} > 0)); then
  log "installing ${missing[*]}"
  apt-get -o DPkg::Lock::Timeout=600 update -qq >&2 &&
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
    die "apt-get install ${missing[*]} failed"
fi

# debootstrap ROOT PACKAGES: a minimal Debian 13 with PACKAGES, without caches, docs and locales.
bootstrap() {
  local root=$1 packages=$2
  rm -rf "$root"
  log "debootstrap $SUITE + $packages"
  debootstrap --variant=minbase --include="$packages" "$SUITE" "$root" "$MIRROR" >"$root.log" 2>&1 ||
    { tail -n 20 "$root.log" >&2; die "debootstrap of $SUITE failed (log: $root.log)"; }
}

# apt-get ARGS... in ROOT (non-interactive, no pseudo-terminal: the chroot has no /dev/pts).
apt_in() {
  local root=$1
  shift
  chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get -qq -o Dpkg::Use-Pty=0 "$@" >>"$root.log" 2>&1 ||
    { tail -n 20 "$root.log" >&2; die "apt-get $* failed in $root (log: $root.log)"; }
}

# ROOT's package sources as in Debian's official images (the release, its updates and its
# security updates), and every installed package brought up to date with them.
sources_and_upgrade() {
  local root=$1
  rm -f "$root/etc/apt/sources.list"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main

Types: deb
URIs: $SECURITY_MIRROR
Suites: $SUITE-security
Components: main
SOURCES
  apt_in "$root" update
  apt_in "$root" upgrade -y
}

# The machine's own CA certificates, trusted in ROOT as on this machine.
trust_local_cas() {
  local root=$1
  compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null || return 0
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null 2>&1 || die "update-ca-certificates failed in $root"
}

# apt and dpkg configured as in Debian's official (slim) images, so that packages installed later
# (npm in the build base, git in Armada's image) leave no .deb files, package caches, lists,
# translations, docs, man pages or locales behind either.
slim_config() {
  local root=$1
  cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'CONF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CONF
  cat >"$root/etc/apt/apt.conf.d/docker-no-languages" <<'CONF'
Acquire::Languages "none";
CONF
  cat >"$root/etc/apt/apt.conf.d/docker-gzip-indexes" <<'CONF'
Acquire::GzipIndexes "true";
CONF
  cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'CONF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
CONF
}

# What the dpkg configuration above excludes, removed from what debootstrap already installed
# (copyright files stay), and every cache and log.
trim() {
  local root=$1
  rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/usr/share/man/* "$root"/usr/share/groff/* \
    "$root"/usr/share/info/* "$root"/usr/share/lintian/* "$root"/usr/share/locale/* "$root"/var/log/* "$root"/tmp/* \
    "$root"/var/cache/debconf/*-old "$root"/var/lib/dpkg/*-old
  find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete 2>/dev/null || true
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
}

# commit ROOT IMAGE CMD: the directory as a one-layer image.
commit() {
  local root=$1 image=$2 cmd=$3 c mnt
  c=$(buildah from scratch)
  mnt=$(buildah mount "$c")
  cp -a "$root/." "$mnt/"
  # debootstrap copied this machine's resolver and host name; a container gets its own at run time.
  rm -f "$mnt/etc/resolv.conf"
  echo localhost >"$mnt/etc/hostname"
  buildah umount "$c" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt --cmd "$cmd" \
    --label "org.opencontainers.image.description=made by iot-operator images/bases.sh from Debian $SUITE packages" "$c"
  buildah commit -q --rm "$c" "$image" >/dev/null
  log "made $image ($(buildah images --format '{{.Size}}' "$image" | head -n 1))"
}

start=$SECONDS
if ((make_node)); then
  node_root="$WORK/node-root"
  bootstrap "$node_root" nodejs,ca-certificates
  slim_config "$node_root"
  sources_and_upgrade "$node_root"
  chroot "$node_root" sh -c 'groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/sh --create-home node'
  trust_local_cas "$node_root"
  trim "$node_root"
  commit "$node_root" "$NODE_IMAGE" node
  log "Node.js $(chroot "$node_root" node --version) in $NODE_IMAGE"
  apt_in "$node_root" update
  apt_in "$node_root" install -y --no-install-recommends npm
  trim "$node_root"
  commit "$node_root" "$NODE_BUILD_IMAGE" node
  rm -rf "$node_root"
  echo "$hash" >"$WORK/node.sha256"
fi

if ((make_go)); then
  go_root="$WORK/go-root"
  bootstrap "$go_root" golang-go,git,ca-certificates
  slim_config "$go_root"
  sources_and_upgrade "$go_root"
  trust_local_cas "$go_root"
  trim "$go_root"
  commit "$go_root" "$GO_IMAGE" bash
  rm -rf "$go_root"
  echo "$hash" >"$WORK/go.sha256"
fi

log "base images (${SETS[*]}) made in $((SECONDS - start)) s"
build_args
