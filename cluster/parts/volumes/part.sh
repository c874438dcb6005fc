# The real node's volumes: rancher/local-path-provisioner, and the cluster's default StorageClass
# `standard` (as kind ships it). Sourced by parts/run.sh; do not run it.
# shellcheck shell=bash
# shellcheck source=../node/lib.sh
source "$PARTS_DIR/node/lib.sh"
#
# Guarantees:
# - Only a cluster with a real node gets them (cluster/cli ensures them with the node
#   only): the default cluster has no StorageClass and builds nothing more.
# - The provisioner runs as upstream runs it, a Deployment in namespace local-path-storage, its
#   pod on the real node, from an image of the binary built by engines/build.sh local-path-provisioner;
#   its helper pods run an image of Debian's busybox-static. Both images are made here and loaded
#   into the node's containerd (nothing is pulled).
# - A claim binds when its first pod is scheduled (WaitForFirstConsumer) to a directory under
#   $REAL_NODE_DIR/local-path/ on the real node, kept across node restarts like a disk, removed
#   when the claim is deleted (reclaimPolicy Delete) and with the whole cluster by `down`.
#   Claims of pods on kwok nodes bind too (parts/control-plane/kwok-stages/local-path-helper-pod.yaml), to a
#   directory that exists on no disk.
# - ensure is idempotent: when the provisioner is available and the applied manifest
#   is the current one it returns after one query; otherwise it applies the manifest server-side
#   and waits (bounded) until the provisioner's pod is available.

LOCAL_PATH_VERSION=v0.0.30
LOCAL_PATH_NAMESPACE=local-path-storage
LOCAL_PATH_DATA_DIR="$REAL_NODE_DIR/local-path"
LOCAL_PATH_IMAGE=localhost/iot-operator/local-path-provisioner:$LOCAL_PATH_VERSION
LOCAL_PATH_MANIFEST="$PARTS_DIR/volumes/local-path-storage.yaml"
# The manifest as last applied (placeholders filled in): a differing one is applied again.
LOCAL_PATH_APPLIED="$REAL_NODE_DIR/local-path-storage.applied.yaml"

# Tag of the helper image: the installed busybox-static's version (e.g. 1.35.0-4-deb12u1-b1).
local_path_helper_image() {
  local version
  version=$(dpkg-query -W -f '${Version}' busybox-static) || die "busybox-static is not installed"
  version=${version#*:}
  echo "localhost/iot-operator/local-path-helper:${version//[^A-Za-z0-9_.-]/-}"
}

local_path_rendered_manifest() { # helper-image
  sed -e "s|@DATA_DIR@|$LOCAL_PATH_DATA_DIR|g" -e "s|@PROVISIONER_IMAGE@|$LOCAL_PATH_IMAGE|g" \
    -e "s|@HELPER_IMAGE@|$1|g" -e "s|@REAL_NODE_LABEL@|$REAL_NODE_LABEL|g" "$LOCAL_PATH_MANIFEST"
}

local_path_running() {
  [[ "$(kctl -n "$LOCAL_PATH_NAMESPACE" get deployment local-path-provisioner -o jsonpath='{.status.availableReplicas}' --request-timeout=5s 2>/dev/null)" == 1 ]]
}

ensure() {
  local binary helper manifest
  if [[ -f "$LOCAL_PATH_APPLIED" ]] && local_path_running && dpkg -s busybox-static >/dev/null 2>&1 &&
    local_path_rendered_manifest "$(local_path_helper_image)" | cmp -s - "$LOCAL_PATH_APPLIED"; then
    return 0
  fi
  log "starting the real node's volume provisioner (local-path-provisioner $LOCAL_PATH_VERSION, default StorageClass standard)"
  real_node_install_packages
  binary=$(build | tail -n 1)
  [[ -x "$binary" ]] || die "engines/build.sh local-path-provisioner did not produce a binary ('$binary')"
  real_node_binary_image "$LOCAL_PATH_IMAGE" "$binary" 65532:65532
  helper=$(local_path_helper_image)
  real_node_image "$helper" /bin/busybox 0:0 real_node_busybox_layer
  mkdir -p "$LOCAL_PATH_DATA_DIR"
  manifest=$(local_path_rendered_manifest "$helper")
  echo "$manifest" | kctl apply --server-side --force-conflicts --field-manager=iot-operator-cluster -f - >/dev/null ||
    die "could not apply $LOCAL_PATH_MANIFEST"
  if ! real_node_wait 120 "local-path-provisioner is available" local_path_running; then
    kctl -n "$LOCAL_PATH_NAMESPACE" get pods -o wide >&2 || true
    die "local-path-provisioner did not become available within 120 s (kubectl -n $LOCAL_PATH_NAMESPACE logs deploy/local-path-provisioner)"
  fi
  echo "$manifest" >"$LOCAL_PATH_APPLIED"
}

# The provisioner is a pod of the node: it stops with the node's pods. The volumes' data stays
# (their PersistentVolumes still name it), as does the applied manifest: after a node restart the
# Deployment's pod comes back by itself.
stop() { log "volumes: nothing to stop (the provisioner is a pod of the real node: it stops with the node, volumes stay)"; }

# The provisioner's pods; healthy when it is available.
status() {
  local lines name phase node
  recorded || return 0
  lines=$(kctl -n "$LOCAL_PATH_NAMESPACE" get pods -l app=local-path-provisioner --request-timeout=5s \
    -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase} {.spec.nodeName}{"\n"}{end}' 2>/dev/null) || lines=""
  if [[ -z "$lines" ]]; then
    printf '  %-28s NOT RUNNING (kubectl -n %s describe deployment local-path-provisioner)\n' local-path/provisioner "$LOCAL_PATH_NAMESPACE"
    return 1
  fi
  while read -r name phase node; do
    printf '  %-28s pod %s %s on %s, volumes in %s\n' local-path/provisioner "$name" "$phase" "$node" "$LOCAL_PATH_DATA_DIR"
  done <<<"$lines"
  local_path_running
}

build() { bash "$ENGINES_DIR/build.sh" local-path-provisioner; }

recorded() { real_node_enabled; }

# The part lives on the real node: it comes back with it.
restore() {
  if recorded; then ensure; else log "volumes: this cluster has no real node; nothing to restore"; fi
}
