#!/usr/bin/env bash
# Starts (or reuses) the local control plane: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kwok (fake nodes), run by kwokctl's binary runtime with the binaries built by
# cluster/build.sh. Everything listens on 127.0.0.1.
#
#   bash cluster/up.sh   -> progress on stderr; last stdout line: KUBECONFIG=<absolute path>
#
# Env: CLUSTER_NAME (default iot-operator), CLUSTER_NODES (default 2), CLUSTER_NODE_PODS (pods per
#      node, default 1000), CLUSTER_CONTROLLER_MANAGER_QPS (the controller-manager's client rate
#      limit, --kube-api-qps with a burst of twice that; default: Kubernetes' 20; applies when the
#      cluster is created), CLUSTER_SCHEDULER_QPS (the same for the scheduler; default: its 50),
#      KWOK_WORKDIR (default ~/.kwok; the cluster lives in $KWOK_WORKDIR/clusters/$CLUSTER_NAME),
#      CLUSTER_OLM=1 or --olm (also run the Operator Lifecycle Manager, see lib/olm.sh; binaries
#      from OLM_DIR, else built by build-olm.sh),
#      CLUSTER_SHARDER=1 or --sharder (also run the Kubernetes controller sharder, see
#      lib/sharder.sh; built by build-sharder.sh only then; a cluster that has it keeps it),
#      CLUSTER_REAL_NODE=1 or --real-node (also run one real node whose pods really run, see
#      lib/real-node.sh; fails at once, saying what is missing, where it cannot run);
#      CLUSTER_REAL_NODE=auto (what `npm test` uses): a real node where one can run, else the
#      reason in $CLUSTER_WORKDIR/real-node-unavailable (tests on the real node report it as
#      not run); under CI=true it must run, as with 1.
# Idempotent: a healthy cluster is reused as is; one whose processes are gone (reboot, new
# session) is restarted with its data; one that cannot be restarted is recreated. The project's
# own kwok Stages (cluster/kwok-stages/*.yaml) are added to a cluster that lacks them (or has an
# older copy) by restarting its kwok-controller only.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=lib/olm.sh
source "$CLUSTER_DIR/lib/olm.sh"
# shellcheck source=lib/real-node.sh
source "$CLUSTER_DIR/lib/real-node.sh"
# shellcheck source=lib/sharder.sh
source "$CLUSTER_DIR/lib/sharder.sh"

CLUSTER_OLM=${CLUSTER_OLM:-0}
CLUSTER_SHARDER=${CLUSTER_SHARDER:-0}
CLUSTER_REAL_NODE=${CLUSTER_REAL_NODE:-0}
for arg in "$@"; do
  case "$arg" in
    --olm) CLUSTER_OLM=1 ;;
    --real-node) CLUSTER_REAL_NODE=1 ;;
    --sharder) CLUSTER_SHARDER=1 ;;
    *) die "unknown argument '$arg' (known: --olm, --real-node, --sharder)" ;;
  esac
done
[[ "$CLUSTER_OLM" =~ ^[01]$ ]] || die "CLUSTER_OLM must be 0 or 1, got '$CLUSTER_OLM'"
[[ "$CLUSTER_SHARDER" =~ ^[01]$ ]] || die "CLUSTER_SHARDER must be 0 or 1, got '$CLUSTER_SHARDER'"
[[ "$CLUSTER_REAL_NODE" =~ ^(0|1|auto)$ ]] || die "CLUSTER_REAL_NODE must be 0, 1 or auto, got '$CLUSTER_REAL_NODE'"
if [[ "$CLUSTER_REAL_NODE" == auto && "${CI:-}" == true ]]; then CLUSTER_REAL_NODE=1; fi
REAL_NODE_UNAVAILABLE=""
if [[ "$CLUSTER_REAL_NODE" != 0 ]]; then
  # Said before anything is built or started: the default cluster stays as it is.
  REAL_NODE_UNAVAILABLE=$(real_node_missing | paste -sd ';' | sed 's/;/; /g')
  [[ -z "$REAL_NODE_UNAVAILABLE" || "$CLUSTER_REAL_NODE" == auto ]] || die "a real node cannot run here: $REAL_NODE_UNAVAILABLE"
  if [[ -n "$REAL_NODE_UNAVAILABLE" ]]; then
    log "no real node: $REAL_NODE_UNAVAILABLE"
    CLUSTER_REAL_NODE=0
  else
    CLUSTER_REAL_NODE=1
  fi
fi

[[ "$CLUSTER_NODES" =~ ^[0-9]+$ ]] || die "CLUSTER_NODES must be a number, got '$CLUSTER_NODES'"
CLUSTER_NODE_PODS=${CLUSTER_NODE_PODS:-1000}
[[ "$CLUSTER_NODE_PODS" =~ ^[0-9]+$ ]] || die "CLUSTER_NODE_PODS must be a number, got '$CLUSTER_NODE_PODS'"
CLUSTER_CONTROLLER_MANAGER_QPS=${CLUSTER_CONTROLLER_MANAGER_QPS:-}
CLUSTER_SCHEDULER_QPS=${CLUSTER_SCHEDULER_QPS:-}
for qps_var in CLUSTER_CONTROLLER_MANAGER_QPS CLUSTER_SCHEDULER_QPS; do
  [[ -z "${!qps_var}" || "${!qps_var}" =~ ^[0-9]+$ ]] || die "$qps_var must be a number, got '${!qps_var}'"
done
T0=$SECONDS

BIN_DIR=$(bash "$CLUSTER_DIR/build.sh" | tail -n 1)
[[ -x "$BIN_DIR/kwokctl" ]] || die "build.sh did not produce binaries in '$BIN_DIR'"

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

lock_cluster 300

all_components_running() {
  local c
  for c in "${COMPONENTS[@]}"; do component_pid "$c" >/dev/null || return 1; done
}

kwok_node_count() {
  kctl get nodes -o jsonpath='{range .items[*]}{.metadata.annotations.kwok\.x-k8s\.io/node}{"\n"}{end}' \
    --request-timeout=5s 2>/dev/null | grep -c '^fake$' || true
}

print_result() {
  if [[ "$CLUSTER_OLM" == 1 ]]; then ensure_olm; elif olm_enabled; then restore_olm; fi
  if [[ "$CLUSTER_SHARDER" == 1 ]]; then ensure_sharder; elif sharder_enabled; then restore_sharder; fi
  # A cluster that has a real node keeps it: any later up.sh starts it again.
  if [[ "$CLUSTER_REAL_NODE" == 1 ]] || real_node_enabled && ! real_node_healthy; then real_node_start
  elif real_node_enabled; then real_node_parts_ensure; fi
  if [[ -n "$REAL_NODE_UNAVAILABLE" ]]; then echo "$REAL_NODE_UNAVAILABLE" >"$CLUSTER_WORKDIR/real-node-unavailable"
  else rm -f "$CLUSTER_WORKDIR/real-node-unavailable"; fi
  log "cluster '$CLUSTER_NAME' is up ($((SECONDS - T0))s)"
  echo "KUBECONFIG=$KUBECONFIG_PATH"
}

# The project's own kwok Stages, kept in kwok.yaml (the kwok-controller's --config, written by
# kwokctl only when it creates the cluster) between two marker lines, after kwok's default Stages.
STAGES_BEGIN="# --- begin: stages from cluster/kwok-stages (cluster/up.sh keeps this block current) ---"
STAGES_END="# --- end: stages from cluster/kwok-stages ---"
project_stages_block() {
  local f
  echo "$STAGES_BEGIN"
  for f in "$CLUSTER_DIR"/kwok-stages/*.yaml; do
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
  log "installing the project's kwok Stages ($(cd "$CLUSTER_DIR" && echo kwok-stages/*.yaml)) and restarting kwok-controller"
  local tmp="$CLUSTER_WORKDIR/kwok.yaml.tmp.$$"
  stages_block_filter out >"$tmp"
  project_stages_block >>"$tmp"
  mv -f "$tmp" "$CLUSTER_WORKDIR/kwok.yaml"
  restart_kwok_with_fresh_leases
  component_pid kwok-controller:kwok >/dev/null || die "kwok-controller did not start again after the Stages were installed (log: $CLUSTER_WORKDIR/logs/kwok-controller.log)"
}

# --- fast path: everything is there and healthy ----------------------------------------------
# A cluster made from another configuration (other binaries, or before the API server advertised
# the real node's gateway address and kwok kept to its own nodes) is made anew.
made_by_current_configuration() {
  grep -qF "$BIN_DIR/kube-apiserver" "$CLUSTER_WORKDIR/kwok.yaml" &&
    grep -qF -- "--advertise-address=$REAL_NODE_GATEWAY" "$CLUSTER_WORKDIR/kwok.yaml" &&
    grep -qF -- "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" "$CLUSTER_WORKDIR/kwok.yaml" &&
    grep -qF -- "--kubelet-preferred-address-types=InternalIP" "$CLUSTER_WORKDIR/kwok.yaml" &&
    grep -qF -- "--service-cluster-ip-range=$SERVICE_CIDR" "$CLUSTER_WORKDIR/kwok.yaml"
}

if cluster_exists && made_by_current_configuration &&
  all_components_running && apiserver_ready && (($(kwok_node_count) >= CLUSTER_NODES)) &&
  project_stages_current && { [[ "$CLUSTER_REAL_NODE" == 0 ]] && ! real_node_enabled || real_node_healthy; }; then
  print_result
  exit 0
fi

delete_cluster() {
  if olm_enabled; then CLUSTER_OLM=1; fi # the new cluster gets OLM again
  if real_node_enabled; then CLUSTER_REAL_NODE=1; fi # and its real node
  if sharder_enabled; then CLUSTER_SHARDER=1; fi # and its sharder
  stop_olm
  stop_sharder
  real_node_stop
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
    }' "$CLUSTER_DIR/kwokctl.yaml" >"$config"
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
      # A restarted kwok-controller would ignore the nodes for up to 200 s (see common.sh).
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

print_result
