# NetworkPolicy enforcement on the real node: kube-router's network policy controller alone (its
# firewall; no router, no service proxy), as k3s embeds it. Sourced by parts/run.sh; do not run it.
# shellcheck shell=bash
# shellcheck source=../node/lib.sh
source "$PARTS_DIR/node/lib.sh"
#
# Guarantees:
# - `ensure` (idempotent; ≈0 s when kube-router already runs) builds kube-router
#   once (engines/build.sh kube-router), gives it a kubeconfig of its own (a client certificate for
#   user iot-operator:kube-router, bound to a ClusterRole that may only get, list and watch pods,
#   namespaces, nodes, services, endpoints, endpointslices and networkpolicies) and starts it as a
#   host process of the real node: it writes the host's iptables filter rules and ipsets, so it
#   is no pod. It returns once kube-router's chains are hooked into INPUT, FORWARD and OUTPUT.
# - kube-router listens on nothing but its metrics on 127.0.0.1:$NETWORK_POLICY_METRICS_PORT (its
#   health port cannot be bound to loopback, so it is off); it speaks no BGP, adds no route, proxies
#   no Service (kube-proxy does) and writes no CNI configuration.
# - kube-router puts its own jumps first in FORWARD and accepts what the policies allow there, before
#   the node's rule that nothing from the pod subnet leaves through another interface: that rule
#   is kept in force by a copy in the mangle table's FORWARD chain, which runs before any filter chain.
# - `stop` stops kube-router and removes its chains (KUBE-ROUTER-*, KUBE-POD-FW-*,
#   KUBE-NWPLCY-*), its ipsets (KUBE-SRC-*, KUBE-DST-*) and the mangle rule; the kubeconfig and
#   certificate stay. Pid and log: <workdir>/real-node/{pids,logs}/kube-router.*.

NETWORK_POLICY_PROCESS=kube-router:kube-router
NETWORK_POLICY_DIR="$REAL_NODE_DIR/kube-router"
NETWORK_POLICY_USER=iot-operator:kube-router
NETWORK_POLICY_METRICS_PORT=20245

network_policy_pid() { real_node_pid "$NETWORK_POLICY_PROCESS"; }

# kube-router's jumps are in INPUT, FORWARD and OUTPUT: its first sync is done.
network_policy_hooked() {
  local chain
  for chain in INPUT FORWARD OUTPUT; do
    iptables -S "$chain" 2>/dev/null | grep -q -- "-j KUBE-ROUTER-$chain" || return 1
  done
}

network_policy_running() { network_policy_pid >/dev/null && network_policy_hooked; }

network_policy_guard() { # -I|-D
  iptables -t mangle "$1" FORWARD -s "$REAL_NODE_POD_SUBNET" ! -o "$REAL_NODE_BRIDGE" -j DROP
}

# A client certificate signed by the cluster's CA, a kubeconfig with it, and the read-only rights.
network_policy_credentials() {
  local dir=$NETWORK_POLICY_DIR pki="$CLUSTER_WORKDIR/pki" port
  port=$(component_port kubeApiserverPort)
  [[ -n "$port" ]] || die "cannot read the API server's port from $CLUSTER_WORKDIR/kwok.yaml"
  mkdir -p "$dir"
  chmod 700 "$dir"
  if [[ ! -f "$dir/kube-router.crt" ]]; then
    openssl req -new -newkey rsa:2048 -nodes -keyout "$dir/kube-router.key" -out "$dir/kube-router.csr" \
      -subj "/CN=$NETWORK_POLICY_USER" 2>/dev/null &&
      openssl x509 -req -in "$dir/kube-router.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
        -out "$dir/kube-router.crt.tmp" -days 3650 2>/dev/null ||
      die "cannot sign kube-router's client certificate with $pki/ca.key"
    rm -f "$dir/kube-router.csr"
    mv -f "$dir/kube-router.crt.tmp" "$dir/kube-router.crt"
  fi
  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: { server: "https://127.0.0.1:$port", certificate-authority: "$pki/ca.crt" }
users:
- name: kube-router
  user: { client-certificate: "$dir/kube-router.crt", client-key: "$dir/kube-router.key" }
contexts:
- name: kube-router
  context: { cluster: local, user: kube-router }
current-context: kube-router
EOF
  kctl apply -f - >/dev/null <<EOF || die "cannot grant kube-router its read-only rights"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: { name: "$NETWORK_POLICY_USER" }
rules:
- { apiGroups: [""], resources: [pods, namespaces, nodes, services, endpoints], verbs: [get, list, watch] }
- { apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [get, list, watch] }
- { apiGroups: [networking.k8s.io], resources: [networkpolicies], verbs: [get, list, watch] }
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: "$NETWORK_POLICY_USER" }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "$NETWORK_POLICY_USER" }
subjects:
- { apiGroup: rbac.authorization.k8s.io, kind: User, name: "$NETWORK_POLICY_USER" }
EOF
}

ensure() {
  if network_policy_running; then
    iptables -t mangle -C FORWARD -s "$REAL_NODE_POD_SUBNET" ! -o "$REAL_NODE_BRIDGE" -j DROP 2>/dev/null || network_policy_guard -I
    return 0
  fi
  command -v ipset >/dev/null || real_node_install_packages
  local binary
  binary=$(build | tail -n 1)
  [[ -x "$binary" ]] || die "engines/build.sh kube-router did not produce a binary ('$binary')"
  stop
  network_policy_credentials
  network_policy_guard -I
  log "starting kube-router's network policy controller (NetworkPolicy enforcement on $REAL_NODE_NAME)"
  real_node_spawn kube-router "$binary" --kubeconfig="$NETWORK_POLICY_DIR/kubeconfig" \
    --hostname-override="$REAL_NODE_NAME" --run-firewall=true --run-router=false --run-service-proxy=false \
    --enable-cni=false --enable-ipv6=false --service-cluster-ip-range="$SERVICE_CIDR" \
    --health-port=0 --metrics-addr=127.0.0.1 --metrics-port="$NETWORK_POLICY_METRICS_PORT"
  real_node_wait 60 "kube-router enforces NetworkPolicies (chains hooked into INPUT, FORWARD, OUTPUT)" network_policy_running ||
    die "kube-router did not hook its chains within 60 s (log: $REAL_NODE_DIR/logs/kube-router.log): $(tail -n 5 "$REAL_NODE_DIR/logs/kube-router.log")"
}

stop() {
  local pid rules set
  if pid=$(network_policy_pid); then terminate_process "$pid" 5; fi
  rm -f "$REAL_NODE_DIR/pids/kube-router.pid"
  while network_policy_guard -D 2>/dev/null; do :; done
  # Its chains: the jumps to them first, then their rules, then the chains themselves.
  rules=$(iptables-save -t filter 2>/dev/null) || return 0
  if grep -qE '^:(KUBE-ROUTER-|KUBE-POD-FW-|KUBE-NWPLCY-)' <<<"$rules"; then
    {
      echo '*filter'
      grep -E '^-A (INPUT|FORWARD|OUTPUT) .*-j KUBE-ROUTER-' <<<"$rules" | sed 's/^-A /-D /' || true
      grep -oE '^:(KUBE-ROUTER-|KUBE-POD-FW-|KUBE-NWPLCY-)[^ ]*' <<<"$rules" | sed 's/^:/-F /' || true
      grep -oE '^:(KUBE-ROUTER-|KUBE-POD-FW-|KUBE-NWPLCY-)[^ ]*' <<<"$rules" | sed 's/^:/-X /' || true
      echo COMMIT
    } | iptables-restore --noflush || log "could not remove every kube-router chain (iptables-save -t filter shows what is left)"
  fi
  if command -v ipset >/dev/null; then
    for set in $(ipset list -n 2>/dev/null | grep -E '^(KUBE-SRC-|KUBE-DST-)' || true); do
      ipset destroy "$set" 2>/dev/null || true
    done
  fi
  return 0
}

status() {
  recorded || return 0
  real_node_process_status_line "$NETWORK_POLICY_PROCESS"
  network_policy_running
}

build() { bash "$ENGINES_DIR/build.sh" kube-router; }

recorded() { real_node_enabled; }

# The part lives on the real node: it comes back with it.
restore() {
  if recorded; then ensure; else log "network-policy: this cluster has no real node; nothing to restore"; fi
}
