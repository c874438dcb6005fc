# The Operator Lifecycle Manager as a process of the local cluster. Sourced by parts/run.sh; do
# not run it.
# shellcheck shell=bash
#
# Guarantees:
# - `ensure` (idempotent; CLUSTER_OLM=1 or `up --olm`) applies OLM's CRDs with server-side apply, creates the `olm`
#   namespace and starts the `olm` operator against the cluster's kubeconfig unless it already
#   runs from the same directory; its pid is in <workdir>/pids/olm.pid, its log in
#   <workdir>/logs/olm.log beside the other components'. The OLM directory used is recorded in
#   <workdir>/olm-dir (`recorded`), so a cluster that has OLM keeps it: later `up` runs (a restart
#   after a reboot included) start it again (`restore`), from OLM_DIR when set, else from the
#   recorded directory — if that is gone, it says so and carries on without OLM rather than
#   build it unasked.
# - `build`: engines/build.sh olm (OLM_DIR when set). `stop` stops it (SIGTERM, SIGKILL after 5 s).
# - `status`: its line (pid, RSS, directory); unhealthy when the cluster has OLM and it does not run.
# Callers hold the cluster lock (cluster/cli).

OLM_NAMESPACE=olm
# How often olm re-examines every object it watches (its --interval; upstream's default is 5m).
# A CSV that is Pending because its ServiceAccount or RBAC is missing is re-checked only then
# (olm does not watch objects it did not label, and stops retrying a failing CSV after 8 quick
# attempts), so this bounds how long it stays Pending once they exist.
OLM_RESYNC_INTERVAL=${OLM_RESYNC_INTERVAL:-30s}
OLM_PID_FILE="$CLUSTER_WORKDIR/pids/olm.pid"
OLM_LOG="$CLUSTER_WORKDIR/logs/olm.log"
OLM_DIR_RECORD="$CLUSTER_WORKDIR/olm-dir"

recorded() { [[ -f "$OLM_DIR_RECORD" ]]; }

olm_pid() { recorded_pid "$OLM_PID_FILE" olm; }

stop() {
  local pid
  if pid=$(olm_pid); then
    log "stopping olm (pid $pid)"
    terminate_process "$pid" 5
  fi
  rm -f "$OLM_PID_FILE"
}

# The directory holding `olm` and `crds/`: OLM_DIR, else the one this cluster used before, else
# a build from Go modules (engines/build.sh olm checks whichever it is given).
olm_home() {
  if [[ -z "${OLM_DIR:-}" ]] && recorded && [[ -x "$(<"$OLM_DIR_RECORD")/olm" ]]; then
    cat "$OLM_DIR_RECORD"
    return
  fi
  build | tail -n 1
}

# olm serves /healthz and /metrics on a port of its own choosing (":8080" in plain HTTP, ":8443"
# with TLS; not configurable upstream). A self-signed certificate moves it to 8443, away from
# the 127.0.0.1:8080 that the operators use by default.
olm_serving_certificate() {
  local dir="$CLUSTER_WORKDIR/pki/olm"
  if [[ ! -f "$dir/tls.crt" ]]; then
    mkdir -p "$dir"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=olm" \
      -keyout "$dir/tls.key" -out "$dir/tls.crt" >/dev/null 2>&1 || die "openssl could not make olm's serving certificate"
  fi
  echo "$dir"
}

# Starts olm when this cluster has it but it does not run; never builds it (ensure may).
restore() {
  if ! recorded; then log "olm: this cluster has no OLM; nothing to restore"; return 0; fi
  if [[ -z "${OLM_DIR:-}" && ! -x "$(<"$OLM_DIR_RECORD")/olm" ]]; then
    log "WARNING: this cluster ran OLM from $(<"$OLM_DIR_RECORD"), which has no olm any more; not starting it (CLUSTER_OLM=1 or OLM_DIR=... installs it again)"
    return 0
  fi
  ensure
}

# olm's health and metrics port is fixed upstream (8443 with TLS), so one olm runs per machine:
# another cluster's olm is stopped (that cluster's next `up` starts it again, taking the port
# back), and a port held by anything else is an error naming it.
free_olm_port() {
  local cmdline pid args other
  for cmdline in /proc/[0-9]*/cmdline; do
    pid=${cmdline#/proc/}; pid=${pid%/cmdline}
    args=$(tr '\0' ' ' <"$cmdline" 2>/dev/null || true)
    [[ "$args" == *" --tls-cert "*"/pki/olm/tls.crt "* ]] || continue
    other=$(sed -n 's#.*--tls-cert [^ ]*/clusters/\([^/]*\)/pki/olm/.*#\1#p' <<<"$args")
    [[ -n "$other" && "$other" != "$CLUSTER_NAME" ]] || continue
    log "stopping the olm of cluster '$other' (pid $pid): olm's port 8443 is fixed, one olm per machine"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  done
  if (exec 3<>/dev/tcp/127.0.0.1/8443) 2>/dev/null; then
    die "port 8443, olm's fixed health and metrics port, is in use by another program; olm cannot start"
  fi
}

ensure() {
  local home pid cert
  home=$(olm_home)
  [[ -x "$home/olm" ]] || die "no olm binary in '$home'"
  if pid=$(olm_pid); then
    runs_binary olm "$pid" "$home/olm" && return 0
    stop
  fi
  log "installing OLM from $home (CRDs, namespace $OLM_NAMESPACE, olm operator)"
  kctl apply --server-side --force-conflicts --field-manager=iot-operator-cluster -f "$home/crds/" >/dev/null ||
    die "could not apply OLM's CRDs from $home/crds/"
  # shellcheck disable=SC2046 # one argument per CRD name
  wait_condition Established 60 $(sed -n 's/^  name: \(.*\.operators\.coreos\.com\)$/crd\/\1/p' "$home"/crds/*.yaml) ||
    die "OLM's CRDs did not become Established within 60s"
  kctl get namespace "$OLM_NAMESPACE" >/dev/null 2>&1 || kctl create namespace "$OLM_NAMESPACE" >/dev/null
  cert=$(olm_serving_certificate)
  free_olm_port
  mkdir -p "$(dirname "$OLM_PID_FILE")" "$(dirname "$OLM_LOG")"
  [[ -f "$OLM_LOG" ]] && mv -f "$OLM_LOG" "${OLM_LOG%.log}.previous.log"
  # A session of its own (it outlives this script), no stdin.
  KUBECONFIG="$KUBECONFIG_PATH" setsid "$home/olm" --namespace "$OLM_NAMESPACE" --writeStatusName "" --interval "$OLM_RESYNC_INTERVAL" \
    --tls-cert "$cert/tls.crt" --tls-key "$cert/tls.key" </dev/null >"$OLM_LOG" 2>&1 &
  echo $! >"$OLM_PID_FILE"
  echo "$home" >"$OLM_DIR_RECORD"
  # Ready once its informers have synced and its workers run.
  wait_started olm "$OLM_PID_FILE" "$OLM_LOG" grep -q 'msg="starting workers..."' "$OLM_LOG"
  log "olm is running (pid $(<"$OLM_PID_FILE"), log $OLM_LOG)"
}

build() { bash "$ENGINES_DIR/build.sh" olm; }

status() {
  local pid=""
  recorded || return 0
  pid=$(olm_pid) || true
  process_status_line olm "$pid" "from $(<"$OLM_DIR_RECORD")"
}
