# The Kubernetes controller sharder as a process of the local cluster. Sourced by parts/run.sh;
# do not run it.
# shellcheck shell=bash
#
# Guarantees:
# - `ensure [binary]` (idempotent; CLUSTER_SHARDER=1 or `up --sharder`) applies the ControllerRing CRD with server-side apply,
#   creates the `sharding-system` namespace, makes the webhook's CA and serving certificate for
#   127.0.0.1 with openssl (no cert-manager) and starts the `sharder` against the cluster's admin
#   kubeconfig, unless it already runs from the same binary. Without an argument the binary comes
#   from `build` (engines/build.sh sharder: built once, cached). It returns once the sharder's /readyz
#   answers ok and its webhook completes a TLS handshake with that CA.
# - Layout: <workdir>/sharder/ holds config.yaml (the SharderConfig), ports (webhook, health and
#   metrics ports) and certs/ (ca.crt, ca.key, tls.crt, tls.key); pid in <workdir>/pids/sharder.pid,
#   log in <workdir>/logs/sharder.log (the previous one kept as sharder.previous.log).
# - Ports: picked at the first start among free ports of 20000-29999 that no other part or local
#   cluster has recorded (lib.sh choose_ports), and kept in <workdir>/sharder/ports; a recorded
#   port that another program has taken meanwhile is replaced by a free one at the next start (the
#   sharder then rewrites each ring's webhook URL). So clusters with a sharder each can run side by
#   side. Health and metrics listen on 127.0.0.1; the webhook on every interface (upstream has no
#   setting for its host).
# - The binary used is recorded in <workdir>/sharder-binary: a cluster that has the sharder keeps
#   it (`recorded`), later `up` runs (a restart after a reboot included) start it again (`restore`)
#   without building anything; if that binary is gone it says so and carries on without it.
# - `stop` stops it (SIGTERM, SIGKILL after 5 s). `status` prints its line (pid, RSS, webhook URL
#   the API server calls, health and metrics ports); unhealthy when the cluster has it and it
#   does not run.
# Callers hold the cluster lock (cluster/cli).

SHARDER_NAMESPACE=sharding-system
SHARDER_CRD=controllerrings.sharding.timebertt.dev
SHARDER_HOME="$CLUSTER_WORKDIR/sharder"
SHARDER_CONFIG="$SHARDER_HOME/config.yaml"
SHARDER_PORTS="$SHARDER_HOME/ports"
SHARDER_CERTS="$SHARDER_HOME/certs"
SHARDER_PID_FILE="$CLUSTER_WORKDIR/pids/sharder.pid"
SHARDER_LOG="$CLUSTER_WORKDIR/logs/sharder.log"
SHARDER_BINARY_RECORD="$CLUSTER_WORKDIR/sharder-binary"
# Written by an earlier version of these scripts (the directory of an unflagged build).
SHARDER_LEGACY_RECORD="$CLUSTER_WORKDIR/sharder-dir"

recorded() { [[ -f "$SHARDER_BINARY_RECORD" || -f "$SHARDER_LEGACY_RECORD" ]]; }

sharder_pid() { recorded_pid "$SHARDER_PID_FILE" sharder; }

stop() {
  local pid
  if pid=$(sharder_pid); then
    log "stopping the controller sharder (pid $pid)"
    terminate_process "$pid" 5
  fi
  rm -f "$SHARDER_PID_FILE"
}

sharder_port() { # webhook|health|metrics
  recorded_port "$SHARDER_PORTS" "$1"
}

sharder_webhook_url() {
  local port
  port=$(sharder_port webhook) && [[ -n "$port" ]] && echo "https://127.0.0.1:$port"
}

# The webhook's CA and its serving certificate for IP 127.0.0.1 (where the API server calls it).
sharder_certificates() {
  local dir=$SHARDER_CERTS
  [[ -f "$dir/tls.crt" && -f "$dir/tls.key" && -f "$dir/ca.crt" ]] && return 0
  mkdir -p "$dir"
  if ! {
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=sharder-webhook-ca-$CLUSTER_NAME" \
      -keyout "$dir/ca.key" -out "$dir/ca.crt" &&
      openssl req -newkey rsa:2048 -nodes -subj "/CN=sharder-webhook" -keyout "$dir/tls.key" -out "$dir/tls.csr" &&
      openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 3650 \
        -extfile <(printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n') -out "$dir/tls.crt"
  } >/dev/null 2>&1; then
    die "openssl could not make the sharder webhook's certificates in $dir"
  fi
  rm -f "$dir/tls.csr" "$dir/ca.srl"
}

sharder_write_config() {
  cat >"$SHARDER_CONFIG" <<YAML
apiVersion: config.sharding.timebertt.dev/v1alpha1
kind: SharderConfig
# One process per cluster: no leader election.
leaderElection:
  leaderElect: false
health:
  bindAddress: 127.0.0.1:$(sharder_port health)
metrics:
  bindAddress: 127.0.0.1:$(sharder_port metrics)
webhook:
  server:
    certDir: $SHARDER_CERTS
  config:
    clientConfig:
      # The sharder appends each ring's path (/webhooks/sharder/controllerring/<name>).
      url: $(sharder_webhook_url)
      caBundle: $(base64 -w0 "$SHARDER_CERTS/ca.crt")
YAML
}

# Ready: /readyz answers ok and the webhook completes a TLS handshake with our CA (any HTTP answer).
sharder_ready() {
  [[ "$(curl -fsS --max-time 2 "http://127.0.0.1:$(sharder_port health)/readyz" 2>/dev/null)" == ok ]] &&
    [[ "$(curl -sS --max-time 2 --cacert "$SHARDER_CERTS/ca.crt" -o /dev/null -w '%{http_code}' "$(sharder_webhook_url)/" 2>/dev/null)" != 000 ]]
}

# Starts the sharder when this cluster has it but it does not run; never builds it (except once
# for a cluster recorded by an earlier version of these scripts, whose binary lacks --webhook-port).
restore() {
  local bin=""
  if ! recorded; then log "sharder: this cluster has no sharder; nothing to restore"; return 0; fi
  [[ -f "$SHARDER_BINARY_RECORD" ]] && bin=$(<"$SHARDER_BINARY_RECORD")
  if [[ -z "$bin" ]]; then ensure; return; fi
  if [[ ! -x "$bin" ]]; then
    log "WARNING: this cluster ran the sharder $bin, which is gone; not starting it (CLUSTER_SHARDER=1 builds it again)"
    return 0
  fi
  ensure "$bin"
}

ensure() { # [sharder binary]
  local bin=${1:-} pid
  [[ -n "$bin" ]] || bin=$(build | tail -n 1)
  [[ -x "$bin" && -f "$(dirname "$bin")/sharding.timebertt.dev_controllerrings.yaml" ]] || die "no sharder binary with its CRD file beside it at '$bin'"
  if pid=$(sharder_pid); then
    runs_binary "the sharder" "$pid" "$bin" && return 0
    stop
  fi
  log "installing the controller sharder from $bin (ControllerRing CRD, namespace $SHARDER_NAMESPACE, webhook certificate, sharder)"
  kctl apply --server-side --force-conflicts --field-manager=iot-operator-cluster -f "$(dirname "$bin")/sharding.timebertt.dev_controllerrings.yaml" >/dev/null ||
    die "could not apply the ControllerRing CRD from $(dirname "$bin")/sharding.timebertt.dev_controllerrings.yaml"
  wait_condition Established 60 "crd/$SHARDER_CRD" ||
    die "the ControllerRing CRD did not become Established within 60s"
  kctl get namespace "$SHARDER_NAMESPACE" >/dev/null 2>&1 || kctl create namespace "$SHARDER_NAMESPACE" >/dev/null
  mkdir -p "$SHARDER_HOME" "$(dirname "$SHARDER_PID_FILE")" "$(dirname "$SHARDER_LOG")"
  sharder_certificates
  choose_ports "$SHARDER_PORTS" "the sharder" webhook health metrics
  sharder_write_config
  [[ -f "$SHARDER_LOG" ]] && mv -f "$SHARDER_LOG" "${SHARDER_LOG%.log}.previous.log"
  # A session of its own (it outlives this script), no stdin.
  KUBECONFIG="$KUBECONFIG_PATH" setsid "$bin" --config="$SHARDER_CONFIG" --webhook-port="$(sharder_port webhook)" \
    </dev/null >"$SHARDER_LOG" 2>&1 &
  echo $! >"$SHARDER_PID_FILE"
  echo "$bin" >"$SHARDER_BINARY_RECORD"
  rm -f "$SHARDER_LEGACY_RECORD"
  wait_started "the sharder" "$SHARDER_PID_FILE" "$SHARDER_LOG" sharder_ready
  log "the controller sharder is running (pid $(<"$SHARDER_PID_FILE"), webhook $(sharder_webhook_url), health 127.0.0.1:$(sharder_port health), log $SHARDER_LOG)"
}

build() { bash "$ENGINES_DIR/build.sh" sharder; }

status() {
  local pid=""
  recorded || return 0
  pid=$(sharder_pid) || true
  process_status_line sharder "$pid" "webhook $(sharder_webhook_url || echo "?"), health 127.0.0.1:$(sharder_port health || echo "?"), metrics 127.0.0.1:$(sharder_port metrics || echo "?")"
}
