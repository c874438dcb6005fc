# The Kubernetes controller sharder as a process of the local cluster. Source it after common.sh.
# shellcheck shell=bash
#
# Guarantees:
# - `ensure_sharder` (idempotent) applies the ControllerRing CRD with server-side apply, creates
#   the `sharding-system` namespace, makes the webhook's serving certificate (a CA of its own and
#   a certificate for 127.0.0.1, under <workdir>/pki/sharder; no cert-manager) and starts the
#   `sharder` against the cluster's kubeconfig unless it already runs; its config (the webhook
#   URL https://127.0.0.1:9443 with the CA bundle, health on 127.0.0.1:9440, leader election off)
#   is <workdir>/sharder/config.yaml, its pid in <workdir>/pids/sharder.pid, its log in
#   <workdir>/logs/sharder.log. It returns once /readyz answers and the webhook accepts TLS.
# - The directory it ran from is recorded in <workdir>/sharder-dir: later up.sh runs (a restart
#   after a reboot included) start it again (`restore_sharder`) without building anything.
# - The webhook's port 9443 is fixed upstream, so one sharder runs per machine: another cluster's
#   sharder is stopped first (that cluster's next up.sh starts it again).
# - `stop_sharder` stops it (SIGTERM, SIGKILL after 5 s); down.sh calls it. `sharder_pid` prints
#   its pid when it runs.
# Callers hold the cluster lock (lock_cluster).

SHARDER_NAMESPACE=sharding-system
SHARDER_WEBHOOK_PORT=9443
SHARDER_HEALTH_ADDRESS=127.0.0.1:9440
SHARDER_PID_FILE="$CLUSTER_WORKDIR/pids/sharder.pid"
SHARDER_LOG="$CLUSTER_WORKDIR/logs/sharder.log"
SHARDER_DIR_RECORD="$CLUSTER_WORKDIR/sharder-dir"

sharder_enabled() { [[ -f "$SHARDER_DIR_RECORD" ]]; }

sharder_pid() {
  local pid exe
  [[ -f "$SHARDER_PID_FILE" ]] || return 1
  pid=$(<"$SHARDER_PID_FILE")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [[ "$(basename "$exe")" == sharder ]] || return 1
  process_alive "$pid" || return 1
  echo "$pid"
}

stop_sharder() {
  local pid
  if pid=$(sharder_pid); then
    log "stopping the controller sharder (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do process_alive "$pid" || break; sleep 0.1; done
    if process_alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$SHARDER_PID_FILE"
}

# The webhook's CA and serving certificate (for 127.0.0.1, where the API server calls it).
sharder_certificates() {
  local dir="$CLUSTER_WORKDIR/pki/sharder"
  if [[ ! -f "$dir/tls.crt" ]]; then
    mkdir -p "$dir"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=sharder-webhook-ca" \
      -keyout "$dir/ca.key" -out "$dir/ca.crt" >/dev/null 2>&1 &&
      openssl req -newkey rsa:2048 -nodes -subj "/CN=sharder-webhook" -keyout "$dir/tls.key" -out "$dir/tls.csr" >/dev/null 2>&1 &&
      openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 3650 \
        -extfile <(printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n') -out "$dir/tls.crt" >/dev/null 2>&1 ||
      die "openssl could not make the sharder webhook's certificates"
    rm -f "$dir/tls.csr"
  fi
  echo "$dir"
}

# Another cluster's sharder holds the fixed webhook port: stop it; anything else there is an error.
free_sharder_port() {
  local cmdline pid args other
  for cmdline in /proc/[0-9]*/cmdline; do
    pid=${cmdline#/proc/}; pid=${pid%/cmdline}
    args=$(tr '\0' ' ' <"$cmdline" 2>/dev/null || true)
    [[ "$args" == *"/clusters/"*"/sharder/config.yaml"* ]] || continue
    other=$(sed -n 's#.*/clusters/\([^/]*\)/sharder/config.yaml.*#\1#p' <<<"$args")
    [[ -n "$other" && "$other" != "$CLUSTER_NAME" ]] || continue
    log "stopping the controller sharder of cluster '$other' (pid $pid): its webhook port $SHARDER_WEBHOOK_PORT is fixed, one sharder per machine"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  done
  if (exec 3<>"/dev/tcp/127.0.0.1/$SHARDER_WEBHOOK_PORT") 2>/dev/null; then
    die "port $SHARDER_WEBHOOK_PORT, the sharder webhook's fixed port, is in use by another program; the sharder cannot start"
  fi
}

# Ready: /readyz answers ok and the webhook completes a TLS handshake with the cluster's CA.
sharder_ready() { # certificate directory
  [[ "$(curl -fsS --max-time 2 "http://$SHARDER_HEALTH_ADDRESS/readyz" 2>/dev/null)" == ok ]] &&
    [[ "$(curl -sS --max-time 2 --cacert "$1/ca.crt" -o /dev/null -w '%{http_code}' "https://127.0.0.1:$SHARDER_WEBHOOK_PORT/" 2>/dev/null)" != 000 ]]
}

# Starts the sharder when this cluster has it but it does not run; never builds it.
restore_sharder() {
  if [[ ! -x "$(<"$SHARDER_DIR_RECORD")/sharder" ]]; then
    log "WARNING: this cluster ran the sharder from $(<"$SHARDER_DIR_RECORD"), which has no sharder any more; not starting it (CLUSTER_SHARDER=1 builds it again)"
    return 0
  fi
  ensure_sharder "$(<"$SHARDER_DIR_RECORD")"
}

ensure_sharder() { # [directory holding sharder and crds/]
  local home=${1:-} certs config
  if sharder_pid >/dev/null; then return 0; fi
  [[ -n "$home" ]] || home=$(bash "$CLUSTER_DIR/build-sharder.sh" | tail -n 1)
  [[ -x "$home/sharder" ]] || die "no sharder binary in '$home'"
  log "installing the controller sharder from $home (ControllerRing CRD, namespace $SHARDER_NAMESPACE, webhook on 127.0.0.1:$SHARDER_WEBHOOK_PORT)"
  kctl apply --server-side --force-conflicts --field-manager=iot-operator-cluster -f "$home/crds/" >/dev/null ||
    die "could not apply the ControllerRing CRD from $home/crds/"
  kctl wait --for=condition=Established --timeout=60s crd/controllerrings.sharding.timebertt.dev >/dev/null ||
    die "the ControllerRing CRD did not become Established within 60s"
  kctl get namespace "$SHARDER_NAMESPACE" >/dev/null 2>&1 || kctl create namespace "$SHARDER_NAMESPACE" >/dev/null
  certs=$(sharder_certificates)
  config="$CLUSTER_WORKDIR/sharder/config.yaml"
  mkdir -p "$(dirname "$config")" "$(dirname "$SHARDER_PID_FILE")" "$(dirname "$SHARDER_LOG")"
  cat >"$config" <<EOF
apiVersion: config.sharding.timebertt.dev/v1alpha1
kind: SharderConfig
leaderElection:
  leaderElect: false
health:
  bindAddress: $SHARDER_HEALTH_ADDRESS
metrics:
  bindAddress: "0"
webhook:
  server:
    certDir: $certs
  config:
    clientConfig:
      url: https://127.0.0.1:$SHARDER_WEBHOOK_PORT
      caBundle: $(base64 -w0 "$certs/ca.crt")
EOF
  free_sharder_port
  [[ -f "$SHARDER_LOG" ]] && mv -f "$SHARDER_LOG" "${SHARDER_LOG%.log}.previous.log"
  # A session of its own (it outlives this script), no stdin, and not our lock on fd 9.
  KUBECONFIG="$KUBECONFIG_PATH" setsid "$home/sharder" --config="$config" </dev/null >"$SHARDER_LOG" 2>&1 9>&- &
  echo $! >"$SHARDER_PID_FILE"
  echo "$home" >"$SHARDER_DIR_RECORD"
  local deadline=$((SECONDS + 60))
  until sharder_ready "$certs"; do
    process_alive "$(<"$SHARDER_PID_FILE")" || die "the sharder exited at start; the end of $SHARDER_LOG: $(tail -n 5 "$SHARDER_LOG")"
    ((SECONDS < deadline)) || die "the sharder was not ready within 60s (log: $SHARDER_LOG)"
    sleep 0.3
  done
  log "the controller sharder is running (pid $(<"$SHARDER_PID_FILE"), log $SHARDER_LOG)"
}
