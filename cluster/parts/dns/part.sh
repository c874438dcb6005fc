# Cluster DNS of the real node: CoreDNS as a pod of kube-system. Sourced by parts/run.sh; do not run it.
# shellcheck shell=bash
# shellcheck source=../node/lib.sh
source "$PARTS_DIR/node/lib.sh"
#
# Guarantees:
# - ensure builds CoreDNS (engines/build.sh coredns, cached), loads its image into the
#   node's containerd and applies cluster-dns.yaml (beside this file) server-side (Deployment
#   `coredns` on the real node, Service `kube-dns` at $CLUSTER_DNS_IP, its ServiceAccount, RBAC and
#   Corefile), then waits, bounded, until the Deployment has rolled out and the Service answers a
#   query from this host. When all that already holds for the same manifest it only checks (one
#   kubectl call and one query) and returns.
# - Names under $CLUSTER_DOMAIN resolve; every other name gets NXDOMAIN at once: no query leaves
#   this machine (the binary has no forward plugin).
# - stop has nothing to stop (and says so): the pod goes with the node, its objects stay in the
#   API server and serve again when the node is back.

CLUSTER_DNS_MANIFEST="$PARTS_DIR/dns/cluster-dns.yaml"
CLUSTER_DNS_FIELD_MANAGER=iot-operator-cluster-dns

# The manifest with its values filled in; its hash is over the text before the hash goes in.
cluster_dns_manifest() { # image
  local text
  text=$(sed -e "s|@COREDNS_IMAGE@|$1|g" -e "s|@CLUSTER_DNS_IP@|$CLUSTER_DNS_IP|g" \
    -e "s|@CLUSTER_DOMAIN@|$CLUSTER_DOMAIN|g" -e "s|@REAL_NODE_LABEL@|$REAL_NODE_LABEL|g" "$CLUSTER_DNS_MANIFEST")
  sed "s|@MANIFEST_SHA256@|$(sha256sum <<<"$text" | cut -c1-16)|g" <<<"$text"
}

# The image of a CoreDNS binary: its tag names the version and the build (the cache directory's hash).
cluster_dns_image() { # binary
  local build
  build=$(basename "$(dirname "$1")")
  echo "localhost/iot-operator/coredns:${build#coredns-}"
}

# A query to the kube-dns Service from this host gets an address for the `kubernetes` Service.
cluster_dns_answers() {
  busybox nslookup -timeout=2 -retry=1 "kubernetes.default.svc.$CLUSTER_DOMAIN" "$CLUSTER_DNS_IP" 2>/dev/null |
    awk '/^Name:/ { named = 1 } named && /^Address:/ { found = 1 } END { exit !found }'
}

# The Deployment of this manifest has rolled out: its one pod, of this template, is available.
cluster_dns_rolled_out() { # manifest-sha256
  [[ "$(kctl -n kube-system get deployment coredns --request-timeout=5s -o jsonpath='{.metadata.annotations.iot-operator\.dev/manifest-sha256} {.metadata.generation} {.status.observedGeneration} {.status.replicas} {.status.updatedReplicas} {.status.availableReplicas}' 2>/dev/null)" =~ ^([^ ]+)\ ([0-9]+)\ ([0-9]+)\ 1\ 1\ 1$ ]] &&
    [[ "${BASH_REMATCH[1]}" == "$1" && "${BASH_REMATCH[2]}" == "${BASH_REMATCH[3]}" ]]
}

cluster_dns_serving() { cluster_dns_rolled_out "$1" && cluster_dns_answers; }

ensure() {
  local binary image manifest sha
  binary=$(build | tail -n 1)
  [[ -x "$binary" ]] || die "engines/build.sh coredns did not produce a binary ('$binary')"
  image=$(cluster_dns_image "$binary")
  manifest=$(cluster_dns_manifest "$image")
  sha=$(sed -n 's/^ *iot-operator.dev\/manifest-sha256: "\(.*\)"$/\1/p' <<<"$manifest" | head -n 1)
  if cluster_dns_serving "$sha"; then return 0; fi

  log "starting cluster DNS: CoreDNS ($image) in kube-system on $REAL_NODE_NAME, Service kube-dns at $CLUSTER_DNS_IP"
  real_node_binary_image "$image" "$binary" 65532:65532
  kctl apply --server-side --force-conflicts --field-manager="$CLUSTER_DNS_FIELD_MANAGER" -f - <<<"$manifest" >/dev/null ||
    die "kubectl apply of $CLUSTER_DNS_MANIFEST failed"
  if ! real_node_wait 120 "cluster DNS answers at $CLUSTER_DNS_IP" cluster_dns_serving "$sha"; then
    kctl -n kube-system get pods -l k8s-app=kube-dns -o wide >&2 || true
    kctl -n kube-system logs deployment/coredns --tail=20 >&2 || true
    die "cluster DNS did not answer within 120 s (pods: kubectl -n kube-system get pods -l k8s-app=kube-dns; logs: kubectl -n kube-system logs deployment/coredns, or $REAL_NODE_DIR/pod-logs/kube-system_coredns-*)"
  fi
}

stop() { log "dns: nothing to stop (CoreDNS is a pod of the real node: it stops with the node, its objects stay)"; }


# One line per CoreDNS pod (phase, or Terminating; ready; address; log); healthy when it answers.
status() {
  local pods name phase ready ip
  recorded || return 0
  pods=$(kctl -n kube-system get pods -l k8s-app=kube-dns --request-timeout=5s \
    -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase}{.metadata.deletionTimestamp} {.status.containerStatuses[0].ready} {.status.podIP}{"\n"}{end}' 2>/dev/null) || pods=""
  if [[ -z "$pods" ]]; then
    printf '  %-28s NOT RUNNING (no pod k8s-app=kube-dns in kube-system)\n' "cluster-dns/coredns"
    return 1
  fi
  while read -r name phase ready ip; do
    [[ "$phase" != Running?* ]] || phase=Terminating
    printf '  %-28s %-8s ready %-5s ip %-12s log kubectl -n kube-system logs %s\n' "cluster-dns/coredns" "$phase" "$ready" "$ip" "$name"
  done <<<"$pods"
  cluster_dns_answers
}

build() { bash "$ENGINES_DIR/build.sh" coredns; }

recorded() { real_node_enabled; }

# The part lives on the real node: it comes back with it.
restore() {
  if recorded; then ensure; else log "dns: this cluster has no real node; nothing to restore"; fi
}
