# cert-manager's controller as a process of the local cluster. Sourced by parts/run.sh; do not run
# it.
# shellcheck shell=bash
#
# Guarantees:
# - `ensure [binary]` (idempotent; CLUSTER_CERT_MANAGER=1 or `up --cert-manager`) applies the CRDs
#   of the binary's cert-manager version (crds/ beside it, copied by the build from that version's
#   module) with server-side apply, waits until they are Established, creates the `cert-manager`
#   namespace (where the Secrets of ClusterIssuers live: the controller's cluster resource
#   namespace) and starts the controller against the cluster's admin kubeconfig, unless it already
#   runs from the same binary. Without an argument the binary comes from `build`
#   (engines/build.sh cert-manager: built once, cached). It returns once the controller's /readyz
#   answers ok (its informer caches synced).
# - The controller alone: no cert-manager webhook and no cainjector. Certificates from CA and
#   SelfSigned Issuers and ClusterIssuers are issued (engines/cert-manager/main.go lists what is
#   built in); what the webhook would add is not there: no validation or defaulting of
#   cert-manager's resources beyond their CRD schemas, no requester identity on
#   CertificateRequests.
# - Layout: <workdir>/cert-manager/ports holds its health port; pid in
#   <workdir>/pids/cert-manager.pid, log in <workdir>/logs/cert-manager.log (the previous one kept as
#   cert-manager.previous.log).
# - Port: picked at the first start among free ports of 20000-29999 that no other part or local
#   cluster has recorded (lib.sh choose_ports), kept, and replaced by a free one when another
#   program has taken it; it listens on 127.0.0.1.
# - The binary used is recorded in <workdir>/cert-manager-binary: a cluster that has cert-manager
#   keeps it (`recorded`), later `up` runs (a restart after a reboot included) start it again
#   (`restore`) without building anything; if that binary is gone it says so and carries on
#   without it.
# - `stop` stops it (SIGTERM, SIGKILL after 5 s); the CRDs and what was issued stay. `status`
#   prints its line (pid, RSS, version, health port); unhealthy when the cluster has it and it does
#   not run.
# Callers hold the cluster lock (cluster/cli).

CERT_MANAGER_NAMESPACE=cert-manager
CERT_MANAGER_HOME="$CLUSTER_WORKDIR/cert-manager"
CERT_MANAGER_PORTS="$CERT_MANAGER_HOME/ports"
CERT_MANAGER_PID_FILE="$CLUSTER_WORKDIR/pids/cert-manager.pid"
CERT_MANAGER_LOG="$CLUSTER_WORKDIR/logs/cert-manager.log"
CERT_MANAGER_BINARY_RECORD="$CLUSTER_WORKDIR/cert-manager-binary"

recorded() { [[ -f "$CERT_MANAGER_BINARY_RECORD" ]]; }

cert_manager_pid() { recorded_pid "$CERT_MANAGER_PID_FILE" cert-manager; }

cert_manager_health() { echo "127.0.0.1:$(recorded_port "$CERT_MANAGER_PORTS" health)"; }

cert_manager_ready() {
  [[ "$(curl -fsS --max-time 2 "http://$(cert_manager_health)/readyz" 2>/dev/null)" == ok ]]
}

stop() {
  local pid
  if pid=$(cert_manager_pid); then
    log "stopping cert-manager (pid $pid)"
    terminate_process "$pid" 5
  fi
  rm -f "$CERT_MANAGER_PID_FILE"
}

# Starts cert-manager when this cluster has it but it does not run; never builds it.
restore() {
  local bin
  if ! recorded; then log "cert-manager: this cluster has no cert-manager; nothing to restore"; return 0; fi
  bin=$(<"$CERT_MANAGER_BINARY_RECORD")
  if [[ ! -x "$bin" ]]; then
    log "WARNING: this cluster ran cert-manager $bin, which is gone; not starting it (CLUSTER_CERT_MANAGER=1 builds it again)"
    return 0
  fi
  ensure "$bin"
}

ensure() { # [cert-manager binary]
  local bin=${1:-} pid crds
  [[ -n "$bin" ]] || bin=$(build | tail -n 1)
  crds="$(dirname "$bin")/crds"
  [[ -x "$bin" && -d "$crds" ]] || die "no cert-manager binary with its crds/ beside it at '$bin'"
  if pid=$(cert_manager_pid); then
    runs_binary cert-manager "$pid" "$bin" && return 0
    stop
  fi
  log "installing cert-manager from $bin (its CRDs, namespace $CERT_MANAGER_NAMESPACE, the controller)"
  kctl apply --server-side --force-conflicts --field-manager=iot-operator-cluster -f "$crds" >/dev/null ||
    die "could not apply cert-manager's CRDs from $crds"
  wait_condition Established 60 crd/certificates.cert-manager.io crd/certificaterequests.cert-manager.io \
    crd/issuers.cert-manager.io crd/clusterissuers.cert-manager.io ||
    die "cert-manager's CRDs did not become Established within 60s"
  kctl get namespace "$CERT_MANAGER_NAMESPACE" >/dev/null 2>&1 || kctl create namespace "$CERT_MANAGER_NAMESPACE" >/dev/null
  mkdir -p "$CERT_MANAGER_HOME" "$(dirname "$CERT_MANAGER_PID_FILE")" "$(dirname "$CERT_MANAGER_LOG")"
  choose_ports "$CERT_MANAGER_PORTS" cert-manager health
  [[ -f "$CERT_MANAGER_LOG" ]] && mv -f "$CERT_MANAGER_LOG" "${CERT_MANAGER_LOG%.log}.previous.log"
  # A session of its own (it outlives this script), no stdin.
  setsid "$bin" --kubeconfig="$KUBECONFIG_PATH" --cluster-resource-namespace="$CERT_MANAGER_NAMESPACE" \
    --health-address="$(cert_manager_health)" </dev/null >"$CERT_MANAGER_LOG" 2>&1 &
  echo $! >"$CERT_MANAGER_PID_FILE"
  echo "$bin" >"$CERT_MANAGER_BINARY_RECORD"
  wait_started "cert-manager" "$CERT_MANAGER_PID_FILE" "$CERT_MANAGER_LOG" cert_manager_ready
  log "cert-manager is running (pid $(<"$CERT_MANAGER_PID_FILE"), health $(cert_manager_health), log $CERT_MANAGER_LOG)"
}

build() { bash "$ENGINES_DIR/build.sh" cert-manager; }

status() {
  local pid="" bin=""
  recorded || return 0
  pid=$(cert_manager_pid) || true
  bin=$(<"$CERT_MANAGER_BINARY_RECORD")
  process_status_line cert-manager "$pid" "$(basename "$(dirname "$bin")"), health $(cert_manager_health)"
}
