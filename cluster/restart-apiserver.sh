#!/usr/bin/env bash
# Stops the kube-apiserver of the running local cluster and starts it again with the same
# command line (same port, certificates and etcd data), then waits for /readyz.
#
#   bash cluster/restart-apiserver.sh [DOWN_SECONDS]
#
# DOWN_SECONDS (default 0, or env APISERVER_DOWN_SECONDS): how long to keep it stopped.
# kwokctl v0.7 has no "start/stop component" command; instead the process is stopped via its pid
# file and `kwokctl start cluster` starts the components that are not running (here: only the
# kube-apiserver) from the command lines recorded in the cluster's kwok.yaml.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

down_seconds=${1:-${APISERVER_DOWN_SECONDS:-0}}
[[ "$down_seconds" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "DOWN_SECONDS must be a number, got '$down_seconds'"
binaries_complete || die "binaries are not built; run cluster/up.sh first"
cluster_exists || die "cluster '$CLUSTER_NAME' does not exist; run cluster/up.sh first"

lock_cluster

t0=$(date +%s.%N)
if old=$(component_pid kube-apiserver:kube-apiserver); then
  log "stopping kube-apiserver (pid $old)"
  kill -TERM "$old"
  for _ in $(seq 1 300); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$old" 2>/dev/null; then
    log "kube-apiserver did not stop within 30s; killing it"
    kill -KILL "$old" 2>/dev/null || true
    sleep 0.5
  fi
  log "kube-apiserver stopped"
else
  old="(not running)"
  log "kube-apiserver was not running"
fi
rm -f "$CLUSTER_WORKDIR/pids/kube-apiserver.pid"

if [[ "$down_seconds" != 0 ]]; then
  log "keeping kube-apiserver down for ${down_seconds}s"
  sleep "$down_seconds"
fi

log "starting kube-apiserver"
kwokctl start cluster >&2 || die "kwokctl start cluster failed (logs: $CLUSTER_WORKDIR/logs/kube-apiserver.log)"
wait_apiserver_ready 120 || die "kube-apiserver did not become ready again (logs: $CLUSTER_WORKDIR/logs/kube-apiserver.log)"
new=$(component_pid kube-apiserver:kube-apiserver) || die "kube-apiserver is not running after the restart"
for c in "${COMPONENTS[@]}"; do
  component_pid "$c" >/dev/null || log "WARNING: component ${c%%:*} is not running"
done
elapsed=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
log "kube-apiserver is back up: pid $old -> $new, /readyz ok, ${elapsed}s after the stop"
echo "kube-apiserver restarted (pid $old -> $new), /readyz ok after ${elapsed}s"
