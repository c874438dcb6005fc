# The real node's private image registry: distribution's `registry` with htpasswd authentication
# and TLS, as users' clusters pull from. Sourced by parts/run.sh; do not run it.
# shellcheck shell=bash
# shellcheck source=../node/lib.sh
source "$PARTS_DIR/node/lib.sh"
#
# Guarantees:
# - `ensure` (idempotent; ≈0.1 s when it already runs from the pinned binary) builds the
#   binary once (engines/build.sh registry), makes what the registry needs and starts it as a host
#   process of the real node listening on $REGISTRY_ADDRESS (127.0.0.1:5443) only, then returns
#   once it answers over TLS. containerd pulls from the host's network namespace, and the registry
#   must run before anything can be pulled: it is not a pod.
# - Layout under $REGISTRY_HOME (<workdir>/registry, removed by `down` with the workdir):
#   address (host:port, what image references name), certs/ca.crt (the registry's CA: what a
#   client trusts; buildah's --cert-dir), pki/ (that CA's key and the serving certificate for IP
#   127.0.0.1, made with openssl), auth/ (root only: htpasswd with bcrypt, password, auth.json —
#   the credentials as `docker login` writes them), config.yml, data/ (the images; kept across
#   node restarts). Pid and log: <workdir>/real-node/{pids,logs}/registry.*.
# - Anonymous requests are refused (401); one user, $REGISTRY_USER, whose password is generated
#   per cluster. `rotate-password` gives it a new one (htpasswd, password, auth.json);
#   the registry reads the new htpasswd on the next request, no restart.
# - containerd trusts the CA through $REAL_NODE_REGISTRY_HOSTS_DIR/<address>/hosts.toml; the
#   kubelet pulls with the credentials of a pod's imagePullSecrets. Nothing under /etc changes.
# - The registry sends nothing anywhere: no proxy, no notifications, no redis, tracing exporter
#   off (OTEL_TRACES_EXPORTER=none); its log goes to its log file.
# - `stop` stops the process (images, credentials and certificates stay).

REGISTRY_HOME="$CLUSTER_WORKDIR/registry"
REGISTRY_ADDRESS=127.0.0.1:5443
REGISTRY_USER=iot-operator
REGISTRY_PROCESS=registry:registry

registry_pid() { real_node_pid "$REGISTRY_PROCESS"; }

# The registry answers over TLS with our CA, refusing the anonymous request (401).
registry_answers() {
  [[ "$(curl -sS --max-time 2 --cacert "$REGISTRY_HOME/certs/ca.crt" -o /dev/null -w '%{http_code}' \
    "https://$REGISTRY_ADDRESS/v2/" 2>/dev/null)" == 401 ]]
}

registry_running() { registry_pid >/dev/null && registry_answers; }

# The registry's own CA and a serving certificate for the address's IP.
registry_certificates() {
  local pki="$REGISTRY_HOME/pki" certs="$REGISTRY_HOME/certs"
  [[ -f "$pki/tls.crt" && -f "$pki/tls.key" && -f "$certs/ca.crt" ]] && return 0
  mkdir -p "$pki" "$certs"
  chmod 700 "$pki"
  if ! {
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=iot-operator-registry-ca-$CLUSTER_NAME" \
      -keyout "$pki/ca.key" -out "$certs/ca.crt" &&
      openssl req -newkey rsa:2048 -nodes -subj "/CN=$REGISTRY_ADDRESS" -keyout "$pki/tls.key" -out "$pki/tls.csr" &&
      openssl x509 -req -in "$pki/tls.csr" -CA "$certs/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 3650 \
        -extfile <(printf 'subjectAltName=IP:%s\nextendedKeyUsage=serverAuth\n' "${REGISTRY_ADDRESS%:*}") -out "$pki/tls.crt"
  } >/dev/null 2>&1; then
    die "openssl could not make the registry's certificates in $pki"
  fi
  rm -f "$pki/tls.csr" "$certs/ca.srl" "$pki/ca.srl"
}

# Writes PASSWORD as the user's: htpasswd first (what the registry checks), then the files clients read.
registry_set_password() { # password
  local auth="$REGISTRY_HOME/auth" mask
  mask=$(umask)
  umask 077
  mkdir -p "$auth"
  # htpasswd's default bcrypt cost (5): each request is checked, and the password is 192 random bits.
  if ! htpasswd -Bbn "$REGISTRY_USER" "$1" >"$auth/htpasswd.tmp" 2>/dev/null; then
    umask "$mask"
    die "htpasswd could not hash the registry's password"
  fi
  mv -f "$auth/htpasswd.tmp" "$auth/htpasswd"
  printf '%s\n' "$1" >"$auth/password.tmp"
  mv -f "$auth/password.tmp" "$auth/password"
  printf '{"auths":{"%s":{"auth":"%s"}}}\n' "$REGISTRY_ADDRESS" "$(printf '%s:%s' "$REGISTRY_USER" "$1" | base64 -w0)" >"$auth/auth.json.tmp"
  mv -f "$auth/auth.json.tmp" "$auth/auth.json"
  umask "$mask"
}

registry_new_password() { openssl rand -hex 24; }

registry_credentials() {
  [[ -s "$REGISTRY_HOME/auth/htpasswd" && -s "$REGISTRY_HOME/auth/password" && -s "$REGISTRY_HOME/auth/auth.json" ]] ||
    registry_set_password "$(registry_new_password)"
}

# A new password for the user; prints it.
rotate_password() {
  local password
  password=$(registry_new_password)
  registry_set_password "$password"
  echo "$password"
}

registry_write_config() {
  # It holds the secret that signs upload state: root only.
  (umask 077 && cat >"$REGISTRY_HOME/config.yml.tmp") <<EOF
# distribution's configuration, written by cluster/parts/registry.
version: 0.1
log:
  level: info
  formatter: text
storage:
  filesystem:
    rootdirectory: $REGISTRY_HOME/data
  delete:
    enabled: true
http:
  addr: $REGISTRY_ADDRESS
  secret: $(openssl rand -hex 16)
  tls:
    certificate: $REGISTRY_HOME/pki/tls.crt
    key: $REGISTRY_HOME/pki/tls.key
  headers:
    X-Content-Type-Options: [nosniff]
auth:
  htpasswd:
    realm: iot-operator-registry
    path: $REGISTRY_HOME/auth/htpasswd
EOF
  mv -f "$REGISTRY_HOME/config.yml.tmp" "$REGISTRY_HOME/config.yml"
  echo "$REGISTRY_ADDRESS" >"$REGISTRY_HOME/address"
}

# containerd's per-registry configuration: the endpoint and the CA that signs its certificate.
# One endpoint, the `server` itself with the CA: containerd tries every [host."..."] entry and then
# the server, and reports the last one's error, so a server without the CA behind a host entry
# with it turned "not found" (404 from the entry) into "x509: certificate signed by unknown
# authority" (from the server) — what the kubelet then tells the user. The empty [host] table is
# there because containerd 1.6 ignores a hosts.toml without one.
registry_write_hosts_toml() {
  local dir="$REAL_NODE_REGISTRY_HOSTS_DIR/$REGISTRY_ADDRESS"
  mkdir -p "$dir"
  cat >"$dir/hosts.toml.tmp" <<EOF
# The cluster's registry (cluster/parts/registry): TLS with the cluster's own CA.
server = "https://$REGISTRY_ADDRESS"
capabilities = ["pull", "resolve"]
ca = "$REGISTRY_HOME/certs/ca.crt"
[host]
EOF
  mv -f "$dir/hosts.toml.tmp" "$dir/hosts.toml"
}

ensure() {
  local bin pid
  bin=$(build | tail -n 1)
  [[ -x "$bin" ]] || die "engines/build.sh registry did not produce the registry ('$bin')"
  registry_write_hosts_toml
  if pid=$(registry_pid) && [[ "$(readlink "/proc/$pid/exe")" == "$bin" ]] && registry_answers; then return 0; fi
  stop
  real_node_install_packages
  log "starting the registry on $REGISTRY_ADDRESS (htpasswd, TLS; data in $REGISTRY_HOME/data)"
  mkdir -p "$REGISTRY_HOME/data"
  registry_certificates
  registry_credentials
  registry_write_config
  real_node_spawn registry env OTEL_TRACES_EXPORTER=none "$bin" serve "$REGISTRY_HOME/config.yml"
  real_node_wait 30 "the registry answers on https://$REGISTRY_ADDRESS" registry_running ||
    die "the registry did not start (log: $REAL_NODE_DIR/logs/registry.log): $(tail -n 5 "$REAL_NODE_DIR/logs/registry.log")"
}

stop() {
  local pid
  if pid=$(registry_pid); then terminate_process "$pid" 5; fi
  rm -f "$REAL_NODE_DIR/pids/registry.pid"
}

status() {
  recorded || return 0
  real_node_process_status_line "$REGISTRY_PROCESS"
  registry_running
}

build() { bash "$ENGINES_DIR/build.sh" registry; }

recorded() { real_node_enabled; }

# The part lives on the real node: it comes back with it.
restore() {
  if recorded; then ensure; else log "registry: this cluster has no real node; nothing to restore"; fi
}
