#!/usr/bin/env bash
# Stops the kube-apiserver of the running local cluster and starts it again with the same
# command line (same port, certificates and etcd data), then waits for /readyz.
#
#   bash cluster/restart-apiserver.sh [DOWN_SECONDS]
#
# DOWN_SECONDS (default 0, or env APISERVER_DOWN_SECONDS): how long to keep it stopped.
# APISERVER_STOP_GRACE_SECONDS (default 2): time between SIGTERM and SIGKILL; 0 kills at once.
# kwokctl v0.7 has no "start/stop component" command; instead the process is stopped via its pid
# file and `kwokctl start cluster` starts the components that are not running (here: only the
# kube-apiserver) from the command lines recorded in the cluster's kwok.yaml.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

down_seconds=${1:-${APISERVER_DOWN_SECONDS:-0}}
[[ "$down_seconds" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "DOWN_SECONDS must be a number, got '$down_seconds'"
grace=${APISERVER_STOP_GRACE_SECONDS:-2}
[[ "$grace" =~ ^[0-9]+$ ]] || die "APISERVER_STOP_GRACE_SECONDS must be a whole number, got '$grace'"
binaries_complete || die "binaries are not built; run cluster/up.sh first"
cluster_exists || die "cluster '$CLUSTER_NAME' does not exist; run cluster/up.sh first"

lock_cluster

t0=$(date +%s.%N)
if old=$(component_pid kube-apiserver:kube-apiserver); then
  # SIGTERM first: the API server stops listening at once, but then drains open connections
  # (watches) for up to 60 s before it exits. We do not wait for that: after the grace period
  # it gets SIGKILL, as kwokctl itself does when it stops a component.
  log "stopping kube-apiserver (pid $old; SIGTERM, SIGKILL after ${grace}s)"
  kill -TERM "$old"
  for _ in $(seq 1 $((grace * 10))); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$old" 2>/dev/null; then
    kill -KILL "$old" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
  fi
  log "kube-apiserver stopped"
else
  old="(not running)"
  log "kube-apiserver was not running"
fi
rm -f "$CLUSTER_WORKDIR/pids/kube-apiserver.pid"
# kwokctl truncates a component's log when it starts it: keep the old one.
cp -f "$CLUSTER_WORKDIR/logs/kube-apiserver.log" "$CLUSTER_WORKDIR/logs/kube-apiserver.previous.log" 2>/dev/null || true

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
