# The real node: containerd, kubelet, kube-proxy (engines/build.sh node), the CNI bridge and the
# sandbox image, as plain processes of this machine (what it guarantees: lib.sh beside this file).
# Sourced by parts/run.sh; do not run it.
# shellcheck shell=bash
#
# - ensure: unless the node is healthy (its processes run and it is Ready), installs the Debian
#   packages it needs, builds kubelet/kube-proxy/pause, clears what a previous run left and starts
#   it; returns once it is Ready. Fails at once, saying what is missing, where a node cannot run.
# - restore: ensure, for a cluster that has a real node (recorded); nothing otherwise.
# - stop: the parts it hosts first (NODE_HOSTED_PARTS, reverse order), then kubelet, kube-proxy,
#   every pod, containerd, the forwarder; mounts, kube-proxy's rules and the pod network go; images
#   and volumes stay.
# - status: a line per process and whether the node is Ready; nothing for a cluster without one.
# - recorded: this cluster has a real node. `missing` prints what keeps a node from running here.
# shellcheck source=lib.sh
source "$PARTS_DIR/node/lib.sh"

build() { bash "$ENGINES_DIR/build.sh" node; }

recorded() { real_node_enabled; }

missing() { real_node_missing; }

restore() {
  if recorded; then ensure; else log "node: this cluster has no real node; nothing to restore"; fi
}

status() {
  local p healthy=1
  recorded || return 0
  for p in "${REAL_NODE_PROCESSES[@]}"; do real_node_process_status_line "$p"; done
  real_node_processes_running || healthy=0
  if real_node_ready; then echo "real node:   $REAL_NODE_NAME Ready (pods on $REAL_NODE_POD_SUBNET, containerd $REAL_NODE_SOCKET)"
  else echo "real node:   $REAL_NODE_NAME NOT READY (logs: $REAL_NODE_DIR/logs)"; healthy=0; fi
  ((healthy == 1))
}

ensure() {
  local missing owner node_bin port kubelet_started
  if real_node_healthy; then return 0; fi
  missing=$(real_node_missing)
  [[ -z "$missing" ]] || die "a real node cannot run here: $(echo "$missing" | paste -sd ';' | sed 's/;/; /g')"
  mkdir -p "$(dirname "$REAL_NODE_OWNER_FILE")"
  owner=$(cat "$REAL_NODE_OWNER_FILE" 2>/dev/null || true)
  if [[ -n "$owner" && "$owner" != "$CLUSTER_NAME" && -d "$KWOK_WORKDIR/clusters/$owner/real-node" ]] &&
    ip link show "$REAL_NODE_BRIDGE" >/dev/null 2>&1; then
    die "cluster '$owner' has this machine's real node; stop it first (CLUSTER_NAME=$owner npm run cluster:down)"
  fi
  real_node_install_packages
  node_bin=$(build | tail -n 1)
  [[ -x "$node_bin/kubelet" ]] || die "engines/build.sh node did not produce kubelet in '$node_bin'"
  port=$(component_port kubeApiserverPort)
  [[ -n "$port" ]] || die "cannot read the API server's port from $CLUSTER_WORKDIR/kwok.yaml"
  log "starting the real node $REAL_NODE_NAME (containerd, kubelet, kube-proxy; pods on $REAL_NODE_POD_SUBNET)"
  # Whatever a previous run left (dead processes, pods, mounts) goes first; images stay.
  stop quiet
  echo "$CLUSTER_NAME" >"$REAL_NODE_OWNER_FILE"
  touch "$REAL_NODE_DIR/enabled" 2>/dev/null || { mkdir -p "$REAL_NODE_DIR" && touch "$REAL_NODE_DIR/enabled"; }
  real_node_write_config "$node_bin" "$port"
  real_node_network_up
  real_node_cgroups

  real_node_spawn apiserver-forward socat "TCP-LISTEN:$port,bind=$REAL_NODE_GATEWAY,fork,reuseaddr" "TCP:127.0.0.1:$port"
  real_node_spawn containerd containerd --config "$REAL_NODE_DIR/containerd/config.toml"
  real_node_wait 30 "containerd answers on $REAL_NODE_SOCKET" ctr --address "$REAL_NODE_SOCKET" version ||
    die "containerd did not start (log: $REAL_NODE_DIR/logs/containerd.log): $(tail -n 5 "$REAL_NODE_DIR/logs/containerd.log")"
  real_node_binary_image "$PAUSE_IMAGE" "$node_bin/pause" 65535:65535
  kubelet_started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  real_node_spawn kubelet "$node_bin/kubelet" --config "$REAL_NODE_DIR/kubelet.yaml" \
    --kubeconfig "$REAL_NODE_DIR/kubelet.kubeconfig" --hostname-override "$REAL_NODE_NAME" \
    --node-ip "$REAL_NODE_GATEWAY" --root-dir "$REAL_NODE_DIR/kubelet" --cert-dir "$REAL_NODE_DIR/kubelet-pki" \
    --node-labels "$REAL_NODE_LABEL=true"
  real_node_spawn kube-proxy "$node_bin/kube-proxy" --config "$REAL_NODE_DIR/kube-proxy.yaml"
  if ! real_node_wait 120 "node $REAL_NODE_NAME is Ready" real_node_ready_since "$kubelet_started"; then
    tail -n 20 "$REAL_NODE_DIR/logs/kubelet.log" >&2
    die "node $REAL_NODE_NAME did not become Ready within 120 s (logs: $REAL_NODE_DIR/logs)"
  fi
  real_node_processes_running || die "a process of the real node exited (logs: $REAL_NODE_DIR/logs)"
}

# Unmounts everything under DIR, deepest first.
real_node_unmount_under() {
  local m
  while read -r m; do umount -l "$m" 2>/dev/null || true; done < <(awk -v d="$1/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r)
}

# Kills every process in the kubelet's cgroup tree, then removes the tree.
real_node_kill_pods() {
  local h procs
  for h in /sys/fs/cgroup/*/"$REAL_NODE_CGROUP"; do
    [[ -d "$h" ]] || continue
    # Cgroups of pods killed a moment ago vanish while find walks them: what it could read is enough.
    procs=$(find "$h" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u) || true
    if [[ -n "$procs" ]]; then kill -KILL $procs 2>/dev/null || true; fi
  done
  sleep 0.2
  for h in /sys/fs/cgroup/*/"$REAL_NODE_CGROUP"; do
    if [[ -d "$h" ]]; then find "$h" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
  done
  return 0
}

# Stops the real node: kubelet and kube-proxy, every pod's processes, containerd and its shims,
# the forwarder; unmounts what they mounted; removes kube-proxy's rules and the pod network. The
# images in containerd's root are kept (the next start loads nothing again).
stop() { # [quiet]
  [[ -d "$REAL_NODE_DIR" ]] || return 0
  [[ "${1:-}" == quiet ]] || log "stopping the real node $REAL_NODE_NAME"
  local p pid name shims part
  for ((part = ${#NODE_HOSTED_PARTS[@]} - 1; part >= 0; part--)); do bash "$PARTS_DIR/run.sh" "${NODE_HOSTED_PARTS[part]}" stop; done
  for p in kubelet:kubelet kube-proxy:kube-proxy; do
    if pid=$(real_node_pid "$p"); then kill -TERM "$pid" 2>/dev/null || true; fi
  done
  real_node_kill_pods
  shims=$(pgrep -f "containerd-shim-runc-v2 .*-address $REAL_NODE_SOCKET" || true)
  if [[ -n "$shims" ]]; then kill -KILL $shims 2>/dev/null || true; fi
  for p in "${REAL_NODE_PROCESSES[@]}"; do
    name=${p%%:*}
    if pid=$(real_node_pid "$p"); then terminate_process "$pid" 3; fi
    rm -f "$REAL_NODE_DIR/pids/$name.pid"
  done
  local node_bin="$BUILD_ROOT/node-bin"
  if [[ -x "$node_bin/kube-proxy" ]]; then "$node_bin/kube-proxy" --cleanup >/dev/null 2>&1 || true; fi
  real_node_unmount_under "$REAL_NODE_DIR"
  rm -rf "$REAL_NODE_DIR/containerd/state" "$REAL_NODE_DIR/kubelet" "$REAL_NODE_DIR/cni/ipam"
  real_node_network_down
  if [[ "$(cat "$REAL_NODE_OWNER_FILE" 2>/dev/null)" == "$CLUSTER_NAME" ]]; then rm -f "$REAL_NODE_OWNER_FILE"; fi
  return 0
}


