#!/usr/bin/env bash
# Stops the kube-apiserver of the running local cluster and starts it again with the same
# command line (same port, certificates and etcd data), then waits for /readyz.
#
#   bash cluster/restart-apiserver.sh [DOWN_SECONDS]
#
# DOWN_SECONDS (default 0, or env APISERVER_DOWN_SECONDS): how long to keep it stopped.
# APISERVER_STOP_GRACE_SECONDS (default 2): time between SIGTERM and SIGKILL; 0 kills at once.
# RESTART_CONTROLLERS (default 1): afterwards also restart kube-controller-manager, kube-scheduler
# and kwok-controller, whose informers would otherwise back off for up to a minute or more.
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
restart_controllers=${RESTART_CONTROLLERS:-1}
binaries_complete || die "binaries are not built; run cluster/up.sh first"
cluster_exists || die "cluster '$CLUSTER_NAME' does not exist; run cluster/up.sh first"

lock_cluster 300

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
