#!/usr/bin/env bash
# Prints the state of the local cluster: existence, reachability, versions, nodes, component
# PIDs and listening addresses. Exit code: 0 running and reachable, 1 exists but unhealthy,
# 3 does not exist. Env: CLUSTER_NAME (default iot-operator), KWOK_WORKDIR.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=lib/olm.sh
source "$CLUSTER_DIR/lib/olm.sh"
# shellcheck source=lib/sharder.sh
source "$CLUSTER_DIR/lib/sharder.sh"
# shellcheck source=lib/real-node.sh
source "$CLUSTER_DIR/lib/real-node.sh"

echo "cluster:     $CLUSTER_NAME"
echo "workdir:     $CLUSTER_WORKDIR"
echo "pinned:      kubernetes $K8S_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION"
if binaries_complete; then echo "binaries:    $BIN_DIR (built)"; else echo "binaries:    $BIN_DIR (not built; run cluster/build.sh)"; fi
if ! cluster_exists; then
  echo "exists:      no"
  exit 3
fi
echo "exists:      yes"
echo "kubeconfig:  $KUBECONFIG_PATH"

healthy=1
echo "components:"
for c in "${COMPONENTS[@]}"; do
  name=${c%%:*}
  if pid=$(component_pid "$c"); then
    rss=$(awk '/^VmRSS/ {printf "%d MiB", $2/1024}' "/proc/$pid/status" 2>/dev/null || echo "?")
    listen=$(ss -Hltnp 2>/dev/null | awk -v p="pid=$pid," '$0 ~ p {print $4}' | sort -u | tr '\n' ' ')
    printf '  %-24s pid %-8s rss %-9s listening %s\n' "$name" "$pid" "$rss" "${listen:-?}"
  else
    printf '  %-24s NOT RUNNING\n' "$name"
    healthy=0
  fi
done
if olm_enabled; then
  if pid=$(olm_pid); then
    printf '  %-24s pid %-8s rss %-9s from %s\n' olm "$pid" "$(awk '/^VmRSS/ {printf "%d MiB", $2/1024}' "/proc/$pid/status" 2>/dev/null || echo "?")" "$(<"$OLM_DIR_RECORD")"
  else
    printf '  %-24s NOT RUNNING\n' olm
    healthy=0
  fi
fi
if sharder_enabled; then
  if pid=$(sharder_pid); then
    printf '  %-24s pid %-8s rss %-9s webhook %s, health 127.0.0.1:%s, metrics 127.0.0.1:%s\n' sharder "$pid" \
      "$(awk '/^VmRSS/ {printf "%d MiB", $2/1024}' "/proc/$pid/status" 2>/dev/null || echo "?")" \
      "$(sharder_webhook_url || echo "?")" "$(sharder_port health || echo "?")" "$(sharder_port metrics || echo "?")"
  else
    printf '  %-24s NOT RUNNING\n' sharder
    healthy=0
  fi
fi

if real_node_enabled; then
  real_node_status_lines
  real_node_processes_running && real_node_parts_running || healthy=0
fi

if binaries_complete && apiserver_ready; then
  echo "reachable:   yes (/readyz ok)"
  server=$(kctl version -o json --request-timeout=5s 2>/dev/null | sed -n '/serverVersion/,/}/s/.*"gitVersion": "\(.*\)".*/\1/p')
  echo "versions:    server $server, $("$BIN_DIR/kubectl" version --client 2>/dev/null | head -n1), etcd $("$BIN_DIR/etcd" --version | sed -n 's/etcd Version: //p'), kwok $("$BIN_DIR/kwok" --version 2>/dev/null | awk '{print $3}')"
  total=$(kctl get nodes -o name 2>/dev/null | grep -c . || true)
  ready=$(kctl get nodes -o jsonpath='{range .items[*]}{range .status.conditions[?(@.type=="Ready")]}{.status}{"\n"}{end}{end}' 2>/dev/null | grep -c '^True$' || true)
  echo "nodes:       $total ($ready Ready)"
  if real_node_enabled; then
    if real_node_ready; then echo "real node:   $REAL_NODE_NAME Ready (pods on $REAL_NODE_POD_SUBNET, containerd $REAL_NODE_SOCKET)"
    else echo "real node:   $REAL_NODE_NAME NOT READY (logs: $REAL_NODE_DIR/logs)"; healthy=0; fi
  fi
else
  echo "reachable:   no"
  healthy=0
fi
[[ $healthy == 1 ]] || exit 1
