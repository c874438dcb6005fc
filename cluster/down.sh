#!/usr/bin/env bash
# Stops every process of the local cluster and removes its state (etcd data, certificates, logs).
# No error if the cluster does not exist. Env: CLUSTER_NAME (default iot-operator), KWOK_WORKDIR.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=lib/olm.sh
source "$CLUSTER_DIR/lib/olm.sh"
# shellcheck source=lib/real-node.sh
source "$CLUSTER_DIR/lib/real-node.sh"
# shellcheck source=lib/sharder.sh
source "$CLUSTER_DIR/lib/sharder.sh"

lock_cluster 300

if [[ ! -d "$CLUSTER_WORKDIR" ]]; then
  log "cluster '$CLUSTER_NAME' does not exist; nothing to do"
  exit 0
fi

stop_olm
stop_sharder
real_node_stop

# Remember the live processes first: the pid files go away with the workdir.
pids=()
for c in "${COMPONENTS[@]}"; do
  if pid=$(component_pid "$c"); then pids+=("$pid"); fi
done

if [[ -x "$BIN_DIR/kwokctl" ]] && cluster_exists; then
  log "deleting cluster '$CLUSTER_NAME'"
  kwokctl delete cluster --kubeconfig "$KUBECONFIG_PATH" >&2 || log "kwokctl delete cluster failed; cleaning up by hand"
fi

# Whatever kwokctl did not stop (or if it could not run): TERM, then KILL after 2 s (the API
# server would otherwise drain its connections for up to 60 s).
alive() { local p; for p in "${pids[@]}"; do if process_alive "$p"; then echo "$p"; fi; done; return 0; }
# kwokctl sends SIGKILL; give the processes a moment to disappear.
for _ in $(seq 1 30); do [[ -z "$(alive)" ]] && break; sleep 0.1; done
mapfile -t left < <(alive)
if ((${#left[@]} > 0)); then
  log "stopping remaining processes: ${left[*]}"
  kill -TERM "${left[@]}" 2>/dev/null || true
  for _ in $(seq 1 20); do [[ -z "$(alive)" ]] && break; sleep 0.1; done
  mapfile -t left < <(alive)
  if ((${#left[@]} > 0)); then kill -KILL "${left[@]}" 2>/dev/null || true; fi
fi
rm -rf "$CLUSTER_WORKDIR"
log "cluster '$CLUSTER_NAME' removed"
