# The control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (fake
# nodes), run by kwokctl's binary runtime with the binaries of `engines/build.sh control-plane`,
# every one listening on 127.0.0.1. Sourced by parts/run.sh; do not run it.
# shellcheck shell=bash
#
# Guarantees:
# - ensure (and restore, the same): a healthy cluster made from the current binaries and
#   kwokctl.yaml, with the project's kwok Stages and at least CLUSTER_NODES fake nodes, is left as
#   it is (≈0.2 s); one whose processes are gone (reboot, kill -9) is restarted on its data, kwok
#   given fresh node leases; one that cannot be restarted, or was made from other binaries or
#   another configuration, is deleted (the other parts first, in reverse start order:
#   CLUSTER_PARTS) and made again. A new cluster gets CLUSTER_NODES kwok nodes of
#   CLUSTER_NODE_PODS pods each and the controller-manager's and scheduler's client rate limits
#   (CLUSTER_CONTROLLER_MANAGER_QPS, CLUSTER_SCHEDULER_QPS; burst twice that). It returns once the
#   API server is ready, the nodes are Ready and the `default` ServiceAccount exists.
# - The project's kwok Stages (kwok-stages/*.yaml) are kept in the cluster's kwok.yaml after kwok's
#   defaults; a cluster lacking them (or holding an older copy) gets them by a restart of its
#   kwok-controller only.
# - stop deletes the cluster: kwokctl delete, then any process it left is killed, then the
#   workdir goes (etcd data, certificates, logs). No error when there is no cluster.
# - status prints the pinned versions, the components (pid, RSS, listening addresses),
#   reachability, server versions and nodes; returns 0 healthy, 1 unhealthy, 3 absent.
# - recorded: the cluster exists. Its own command: restart-apiserver [DOWN_SECONDS] (below).
# - The callers (cluster/cli) hold the cluster's lock.

CLUSTER_NODE_PODS=${CLUSTER_NODE_PODS:-1000}
CLUSTER_CONTROLLER_MANAGER_QPS=${CLUSTER_CONTROLLER_MANAGER_QPS:-}
CLUSTER_SCHEDULER_QPS=${CLUSTER_SCHEDULER_QPS:-}

build() { bash "$ENGINES_DIR/build.sh" control-plane; }

# kwokctl must never download anything: every binary is named, kubectl included.
export KWOK_KUBECTL_BINARY="$BIN_DIR/kubectl"
export PATH="$BIN_DIR:$PATH"
KWOKCTL_BINARY_FLAGS=(
  --runtime binary
  --etcd-binary "$BIN_DIR/etcd"
  --kube-apiserver-binary "$BIN_DIR/kube-apiserver"
  --kube-controller-manager-binary "$BIN_DIR/kube-controller-manager"
  --kube-scheduler-binary "$BIN_DIR/kube-scheduler"
  --kwok-controller-binary "$BIN_DIR/kwok"
)

all_components_running() {
  local c
  for c in "${COMPONENTS[@]}"; do component_pid "$c" >/dev/null || return 1; done
}

kwok_node_count() {
  kctl get nodes -o jsonpath='{range .items[*]}{.metadata.annotations.kwok\.x-k8s\.io/node}{"\n"}{end}' \
    --request-timeout=5s 2>/dev/null | grep -c '^fake$' || true
}

# The project's own kwok Stages, kept in kwok.yaml (the kwok-controller's --config, written by
# kwokctl only when it creates the cluster) between two marker lines, after kwok's default Stages.
STAGES_BEGIN="# --- begin: stages from cluster/kwok-stages (cluster/up.sh keeps this block current) ---"
STAGES_END="# --- end: stages from cluster/kwok-stages ---"
project_stages_block() {
  local f
  echo "$STAGES_BEGIN"
  for f in "$PARTS_DIR"/control-plane/kwok-stages/*.yaml; do
    [[ -f "$f" ]] || continue # no Stage files: an empty block
    echo "---"
    cat "$f"
  done
  echo "$STAGES_END"
}
# Prints kwok.yaml's marked block (keep=in) or everything else (keep=out).
stages_block_filter() { # in|out
  awk -v begin="$STAGES_BEGIN" -v end="$STAGES_END" -v keep="$1" '
    $0 == begin { inside = 1 }
    (inside && keep == "in") || (!inside && keep == "out") { print }
    $0 == end { inside = 0 }' "$CLUSTER_WORKDIR/kwok.yaml"
}
project_stages_current() { [[ "$(stages_block_filter in)" == "$(project_stages_block)" ]]; }
# Replaces the block in kwok.yaml and restarts the kwok-controller so that it reads it (it reads
# its Stages at start only). Nothing else of the cluster is touched.
install_project_stages() {
  project_stages_current && return 0
  log "installing the project's kwok Stages ($(cd "$PARTS_DIR/control-plane" && echo kwok-stages/*.yaml)) and restarting kwok-controller"
  local tmp="$CLUSTER_WORKDIR/kwok.yaml.tmp.$$"
  stages_block_filter out >"$tmp"
  project_stages_block >>"$tmp"
  mv -f "$tmp" "$CLUSTER_WORKDIR/kwok.yaml"
  restart_kwok_with_fresh_leases
  component_pid kwok-controller:kwok >/dev/null || die "kwok-controller did not start again after the Stages were installed (log: $CLUSTER_WORKDIR/logs/kwok-controller.log)"
}

# A cluster made from another configuration (other binaries, or before the API server advertised
# the real node's gateway address and kwok kept to its own nodes) is made anew.
made_by_current_configuration() {
  grep -qF "$BIN_DIR/kube-apiserver" "$CLUSTER_WORKDIR/kwok.yaml" &&
    grep -qF -- "--advertise-address=$REAL_NODE_GATEWAY" "$CLUSTER_WORKDIR/kwok.yaml" &&
    grep -qF -- "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" "$CLUSTER_WORKDIR/kwok.yaml" &&
    grep -qF -- "--kubelet-preferred-address-types=InternalIP" "$CLUSTER_WORKDIR/kwok.yaml" &&
    grep -qF -- "--service-cluster-ip-range=$SERVICE_CIDR" "$CLUSTER_WORKDIR/kwok.yaml"
}

# The other parts first (in reverse start order; the orchestrator, which knew before this ran
# which parts the cluster had, starts them again on the new cluster), then the control plane.
delete_cluster() {
  local parts p
  read -ra parts <<<"${CLUSTER_PARTS:?the parts in start order (set by cluster/cli)}"
  for ((p = ${#parts[@]} - 1; p >= 0; p--)); do
    [[ "${parts[p]}" == control-plane ]] || bash "$PARTS_DIR/run.sh" "${parts[p]}" stop
  done
  kwokctl delete cluster --kubeconfig "$KUBECONFIG_PATH" >&2 || true
  rm -rf "$CLUSTER_WORKDIR"
}

# kwokctl.yaml with the cluster's directory filled in, and the controller-manager's and the
# scheduler's client rate limits added when they are asked for.
kwokctl_config() {
  local config
  config=$(mktemp "${TMPDIR:-/tmp}/kwokctl-$CLUSTER_NAME-XXXXXX.yaml")
  awk -v kcm="$CLUSTER_CONTROLLER_MANAGER_QPS" -v sched="$CLUSTER_SCHEDULER_QPS" -v workdir="$CLUSTER_WORKDIR" '
    { gsub(/@CLUSTER_WORKDIR@/, workdir); print }
    /^  - name: kube-controller-manager$/ { qps = kcm }
    /^  - name: kube-scheduler$/ { qps = sched }
    qps != "" && /^    extraArgs:$/ {
      printf "      - key: kube-api-qps\n        value: \"%d\"\n      - key: kube-api-burst\n        value: \"%d\"\n", qps, 2 * qps
      qps = ""
    }' "$PARTS_DIR/control-plane/kwokctl.yaml" >"$config"
  local want=0
  [[ -z "$CLUSTER_CONTROLLER_MANAGER_QPS" ]] || want=$((want + 1))
  [[ -z "$CLUSTER_SCHEDULER_QPS" ]] || want=$((want + 1))
  (($(grep -c 'kube-api-qps' "$config") == want)) ||
    die "could not add the client rate limits to kwokctl.yaml"
  echo "$config"
}

create_cluster() {
  log "creating cluster '$CLUSTER_NAME' (kwokctl binary runtime, $BUILD_KEY${CLUSTER_CONTROLLER_MANAGER_QPS:+, controller-manager QPS $CLUSTER_CONTROLLER_MANAGER_QPS}${CLUSTER_SCHEDULER_QPS:+, scheduler QPS $CLUSTER_SCHEDULER_QPS})"
  local config created=0
  config=$(kwokctl_config)
  kwokctl create cluster --config "$config" "${KWOKCTL_BINARY_FLAGS[@]}" --kubeconfig "" --timeout 5m >&2 && created=1
  # kwokctl keeps its own copy of the configuration in the cluster's kwok.yaml.
  rm -f "$config"
  if ((created == 0)); then
    log "kwokctl create cluster failed; component logs are in $CLUSTER_WORKDIR/logs:"
    tail -n 20 "$CLUSTER_WORKDIR"/logs/*.log >&2 2>/dev/null || true
    die "could not create cluster '$CLUSTER_NAME'"
  fi
}

ensure() {
  local bin nodes deadline c
  bin=$(build | tail -n 1)
  [[ "$bin" == "$BIN_DIR" && -x "$BIN_DIR/kwokctl" ]] || die "engines/build.sh control-plane did not produce binaries in '$BIN_DIR' ('$bin')"
  if cluster_exists && made_by_current_configuration && all_components_running && apiserver_ready &&
    (($(kwok_node_count) >= CLUSTER_NODES)) && project_stages_current; then
    return 0
  fi
  if cluster_exists && ! made_by_current_configuration; then
    log "cluster '$CLUSTER_NAME' was created with other binaries than $BUILD_KEY or another configuration; recreating it"
    delete_cluster
  fi

  if cluster_exists; then
    if ! all_components_running; then
      # Stale pid files (e.g. from before a reboot) may point at unrelated processes: drop them
      # so that kwokctl starts every component that is not really running.
      for c in "${COMPONENTS[@]}"; do
        if ! component_pid "$c" >/dev/null; then
          log "component ${c%%:*} is not running; (re)starting it"
          rm -f "$CLUSTER_WORKDIR/pids/${c%%:*}.pid"
          # kwokctl truncates a component's log when it starts it: keep the old one.
          cp -f "$CLUSTER_WORKDIR/logs/${c%%:*}.log" "$CLUSTER_WORKDIR/logs/${c%%:*}.previous.log" 2>/dev/null || true
        fi
      done
      # A component whose port another process took meanwhile (e.g. a cluster created while this
      # one was stopped) never comes up, and kwokctl waits for it without end: bound the wait.
      if ! KWOKCTL_TIMEOUT=120 kwokctl start cluster >&2 || ! wait_apiserver_ready 60; then
        log "could not restart the existing cluster; deleting and recreating it"
        delete_cluster
      else
        # A restarted kwok-controller would ignore the nodes for up to 200 s (see lib.sh).
        restart_kwok_with_fresh_leases
      fi
    elif ! wait_apiserver_ready 30; then
      log "cluster processes run but the API server is not ready; recreating the cluster"
      delete_cluster
    fi
  fi

  if ! cluster_exists; then
    create_cluster
  fi

  wait_apiserver_ready 120 || die "kube-apiserver of '$CLUSTER_NAME' did not become ready (logs: $CLUSTER_WORKDIR/logs)"
  all_components_running || {
    for c in "${COMPONENTS[@]}"; do component_pid "$c" >/dev/null || log "component ${c%%:*} is not running"; done
    die "not every component is running (logs: $CLUSTER_WORKDIR/logs)"
  }

  install_project_stages

  nodes=$(kwok_node_count)
  if ((nodes < CLUSTER_NODES)); then
    log "scaling fake (kwok) nodes from $nodes to $CLUSTER_NODES"
    # Each fake node takes CLUSTER_NODE_PODS pods (kubelet's default of 110 is far too few for
    # benchmarks of a hundred 7-pod instances on two nodes).
    kwokctl scale node --replicas "$CLUSTER_NODES" --param ".allocatable.pods=$CLUSTER_NODE_PODS" >&2
  fi
  if ((CLUSTER_NODES > 0)); then
    wait_condition Ready 120 nodes --all ||
      die "nodes did not become Ready within 120s: $(kctl get nodes 2>&1)"
  fi
  # The controller-manager is working once it has created the default ServiceAccount.
  deadline=$((SECONDS + 60))
  until kctl get serviceaccount default -n default -o name >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "kube-controller-manager did not create the default ServiceAccount within 60s"
    sleep 0.5
  done
}

# After a restart of the machine or the cluster's processes, ensure restarts them on their data.
restore() { ensure; }

recorded() { cluster_exists; }

stop() {
  local c pid pids=() left=()
  if [[ ! -d "$CLUSTER_WORKDIR" ]]; then
    log "cluster '$CLUSTER_NAME' does not exist; nothing to do"
    return 0
  fi
  # Remember the live processes first: the pid files go away with the workdir.
  for c in "${COMPONENTS[@]}"; do
    if pid=$(component_pid "$c"); then pids+=("$pid"); fi
  done
  if [[ -x "$BIN_DIR/kwokctl" ]] && cluster_exists; then
    log "deleting cluster '$CLUSTER_NAME'"
    kwokctl delete cluster --kubeconfig "$KUBECONFIG_PATH" >&2 || log "kwokctl delete cluster failed; cleaning up by hand"
  fi
  # Whatever kwokctl did not stop (or if it could not run): TERM, then KILL after 2 s (the API
  # server would otherwise drain its connections for up to 60 s).
  for pid in "${pids[@]}"; do
    if process_alive "$pid"; then left+=("$pid"); fi
  done
  if ((${#left[@]} > 0)); then
    log "stopping remaining processes: ${left[*]}"
    for pid in "${left[@]}"; do terminate_process "$pid" 2 & done
    wait
  fi
  rm -rf "$CLUSTER_WORKDIR"
  log "cluster '$CLUSTER_NAME' removed"
}

status() {
  local healthy=1 c pid rss listen server total ready
  echo "cluster:     $CLUSTER_NAME"
  echo "workdir:     $CLUSTER_WORKDIR"
  echo "pinned:      kubernetes $K8S_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION"
  if binaries_complete; then echo "binaries:    $BIN_DIR (built)"; else echo "binaries:    $BIN_DIR (not built: bash cluster/engines/build.sh control-plane)"; fi
  if ! cluster_exists; then
    echo "exists:      no"
    return 3
  fi
  echo "exists:      yes"
  echo "kubeconfig:  $KUBECONFIG_PATH"
  if binaries_complete && apiserver_ready; then
    echo "reachable:   yes (/readyz ok)"
    server=$(kctl version -o json --request-timeout=5s 2>/dev/null | sed -n '/serverVersion/,/}/s/.*"gitVersion": "\(.*\)".*/\1/p')
    echo "versions:    server $server, $("$BIN_DIR/kubectl" version --client 2>/dev/null | head -n1), etcd $("$BIN_DIR/etcd" --version | sed -n 's/etcd Version: //p'), kwok $("$BIN_DIR/kwok" --version 2>/dev/null | awk '{print $3}')"
    total=$(kctl get nodes -o name 2>/dev/null | grep -c . || true)
    ready=$(kctl get nodes -o jsonpath='{range .items[*]}{range .status.conditions[?(@.type=="Ready")]}{.status}{"\n"}{end}{end}' 2>/dev/null | grep -c '^True$' || true)
    echo "nodes:       $total ($ready Ready)"
  else
    echo "reachable:   no"
    healthy=0
  fi
  echo "components:"
  for c in "${COMPONENTS[@]}"; do
    if pid=$(component_pid "$c"); then
      rss=$(process_rss "$pid")
      listen=$(ss -Hltnp 2>/dev/null | awk -v p="pid=$pid," '$0 ~ p {print $4}' | sort -u | tr '\n' ' ')
      printf '  %-24s pid %-8s rss %-9s listening %s\n' "${c%%:*}" "$pid" "$rss" "${listen:-?}"
    else
      printf '  %-24s NOT RUNNING\n' "${c%%:*}"
      healthy=0
    fi
  done
  ((healthy == 1))
}

# Stops the kube-apiserver and starts it again with the same command line (same port,
# certificates and etcd data), then waits for /readyz and for its discovery to name every CRD's
# resource. It first waits (up to 60 s) until no namespace is being deleted: a deletion that
# spans the restart can leave the namespace's custom resources in etcd with no namespace (the
# namespace controller's discovery misses them for a moment after /readyz). DOWN_SECONDS (default 0, or env
# APISERVER_DOWN_SECONDS): how long to keep it stopped. APISERVER_STOP_GRACE_SECONDS (default 2):
# time between SIGTERM and SIGKILL. RESTART_CONTROLLERS (default 1): afterwards also restart
# kube-controller-manager, kube-scheduler and kwok-controller, whose informers would otherwise
# back off for up to a minute or more. kwokctl v0.7 has no "start/stop component" command: the
# process is stopped via its pid file and `kwokctl start cluster` starts the components that do
# not run from the command lines recorded in kwok.yaml. Last stdout line:
# `kube-apiserver restarted (pid OLD -> NEW), /readyz ok after N s`.
restart_apiserver() { # [DOWN_SECONDS]
  local down_seconds grace restart_controllers t0 old new elapsed deadline opt c
  down_seconds=${1:-${APISERVER_DOWN_SECONDS:-0}}
  [[ "$down_seconds" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "DOWN_SECONDS must be a number, got '$down_seconds'"
  grace=${APISERVER_STOP_GRACE_SECONDS:-2}
  [[ "$grace" =~ ^[0-9]+$ ]] || die "APISERVER_STOP_GRACE_SECONDS must be a whole number, got '$grace'"
  restart_controllers=${RESTART_CONTROLLERS:-1}
  binaries_complete || die "binaries are not built; run cluster up first"
  cluster_exists || die "cluster '$CLUSTER_NAME' does not exist; run cluster up first"

  wait_no_terminating_namespaces 60 || log "restarting anyway"
  t0=$(date +%s.%N)
  if old=$(component_pid kube-apiserver:kube-apiserver); then
    # SIGTERM first: the API server stops listening at once, but then drains open connections
    # (watches) for up to 60 s before it exits. We do not wait for that: after the grace period
    # it gets SIGKILL, as kwokctl itself does when it stops a component.
    log "stopping kube-apiserver (pid $old; SIGTERM, SIGKILL after ${grace}s)"
    stop_component kube-apiserver:kube-apiserver "$grace"
    log "kube-apiserver stopped"
  else
    old="(not running)"
    log "kube-apiserver was not running"
    stop_component kube-apiserver:kube-apiserver 0
  fi

  if [[ "$down_seconds" != 0 ]]; then
    log "keeping kube-apiserver down for ${down_seconds}s"
    sleep "$down_seconds"
  fi

  log "starting kube-apiserver"
  kwokctl start cluster >&2 || die "kwokctl start cluster failed (logs: $CLUSTER_WORKDIR/logs/kube-apiserver.log)"
  wait_apiserver_ready 120 || die "kube-apiserver did not become ready again (logs: $CLUSTER_WORKDIR/logs/kube-apiserver.log)"
  new=$(component_pid kube-apiserver:kube-apiserver) || die "kube-apiserver is not running after the restart"
  elapsed=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  log "kube-apiserver is back up: pid $old -> $new, /readyz ok, ${elapsed}s after the stop"

  wait_crd_discovery 60 || log "restarting the controllers anyway"

  if [[ "$restart_controllers" == 1 ]]; then
    # client-go reflectors back off exponentially while the API server is away (0.8 s doubling
    # to 30 s, with up to 100 % jitter, reset only after 2 quiet minutes): after a restart the
    # controller-manager's informers may stay silent for a minute or more, so e.g. a new
    # Deployment gets no pods. Restarting the built-in controllers (stateless here; no leader
    # election) makes the control plane answer at once. RESTART_CONTROLLERS=0 skips this.
    log "restarting kube-controller-manager, kube-scheduler and kwok-controller (fresh informers)"
    for c in kube-controller-manager:kube-controller-manager kube-scheduler:kube-scheduler; do
      stop_component "$c" 2 &
    done
    wait
    restart_kwok_with_fresh_leases || die "kwokctl start cluster failed (logs: $CLUSTER_WORKDIR/logs)"
    deadline=$((SECONDS + 60))
    for opt in kubeControllerManagerPort kubeSchedulerPort kwokControllerPort; do
      until component_healthy "$(component_port "$opt")"; do
        ((SECONDS < deadline)) || die "component with $opt did not become healthy within 60s (logs: $CLUSTER_WORKDIR/logs)"
        sleep 0.2
      done
    done
  fi
  for c in "${COMPONENTS[@]}"; do
    component_pid "$c" >/dev/null || log "WARNING: component ${c%%:*} is not running"
  done
  echo "kube-apiserver restarted (pid $old -> $new), /readyz ok after ${elapsed}s"
}
