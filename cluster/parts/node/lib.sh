# What the real node and the parts it hosts share: its paths, network, processes, images. Source
# it after lib.sh (node/part.sh and every part the node hosts do); do not run it.
# shellcheck shell=bash
#
# The real node: one Kubernetes node whose pods really run, beside the kwok nodes.
#
# Guarantees:
# - containerd, kubelet and kube-proxy (and a TCP forwarder that lets pods reach the API server)
#   run as plain processes owned by the cluster: pid files, state and logs under
#   $CLUSTER_WORKDIR/real-node/, started by `up --real-node` (or CLUSTER_REAL_NODE=1), started
#   again by any later `up` of a cluster that has one, stopped (pods, mounts, network) by `down`,
#   shown by `status`. No systemd, nothing under /etc.
# - The node is named real-node-0, labelled node.iot-operator.dev/real=true and tainted
#   node.iot-operator.dev/real=true:NoSchedule: only pods that ask for it land there; kwok leaves
#   it alone (kwok manages only nodes annotated kwok.x-k8s.io/node=fake).
# - The pod network lives on this machine only: a bridge (iotrn0, 10.244.0.0/24, gateway
#   10.244.0.1) and the network namespaces containerd creates for pods. Pods get routes to the
#   pod subnet and the Service range only, the host forwards nothing out of the pod subnet, and no
#   address is masqueraded to the outside.
# - Pods reach the API server through the `kubernetes` Service: the API server advertises the
#   bridge's gateway address (kwokctl.yaml), kube-proxy sends the Service there, and a forwarder
#   listening on that address only passes the connection to the API server on 127.0.0.1.
# - Images are pulled only from the cluster's own registry (parts/registry), where `npm run
#   image:build` pushes operator images; the sandbox image is built here from engines/pause and loaded.
# - The parts users' clusters have run on it (NODE_HOSTED_PARTS: NetworkPolicy enforcement, a
#   private registry, cluster DNS, volumes); the node's stop stops them first, in reverse order.
# - Where a real node cannot run, real_node_missing says what is missing before anything starts.

REAL_NODE_DIR="$CLUSTER_WORKDIR/real-node"
REAL_NODE_NAME=real-node-0
REAL_NODE_LABEL=node.iot-operator.dev/real
REAL_NODE_BRIDGE=iotrn0
REAL_NODE_POD_SUBNET=10.244.0.0/24
REAL_NODE_CGROUP=iot-operator-real-node
REAL_NODE_SOCKET="$REAL_NODE_DIR/containerd/containerd.sock"
REAL_NODE_REGISTRY_HOSTS_DIR="$REAL_NODE_DIR/containerd/certs.d"
# The kube-dns Service's address (in SERVICE_CIDR) and the cluster's domain, as kubeadm and kind set them.
CLUSTER_DNS_IP=10.96.0.10
CLUSTER_DOMAIN=cluster.local
PAUSE_IMAGE=localhost/iot-operator/pause:3.10
# busybox-static: the volume provisioner's helper image, and nslookup for cluster DNS's check;
# apache2-utils: htpasswd for the registry's bcrypt entries; ipset: driven by kube-router.
REAL_NODE_PACKAGES=(containerd runc containernetworking-plugins iptables conntrack buildah socat busybox-static apache2-utils ipset)
# One real node per machine: its bridge, subnet and ports are fixed. The owning cluster is recorded here.
REAL_NODE_OWNER_FILE="$KWOK_WORKDIR/iot-operator-locks/real-node.owner"
# Processes of the real node, in start order: "name:binary".
REAL_NODE_PROCESSES=(apiserver-forward:socat containerd:containerd kubelet:kubelet kube-proxy:kube-proxy)

# The parts the node hosts, in start order (cluster/cli starts them after the node).
NODE_HOSTED_PARTS=(network-policy registry dns volumes)

real_node_enabled() { [[ -f "$REAL_NODE_DIR/enabled" ]]; }

# Prints what keeps a real node from running here, one reason a line; nothing when it can run.
real_node_missing() {
  [[ "$(id -u)" == 0 ]] || echo "not root: containerd, kubelet and the pod network need root (uid 0)"
  local probe=/sys/fs/cgroup/memory/.iot-operator-probe-$$
  if [[ -d /sys/fs/cgroup/memory ]]; then
    if mkdir "$probe" 2>/dev/null; then rmdir "$probe"; else echo "the memory cgroup (/sys/fs/cgroup/memory) is not writable: the container is not privileged"; fi
  elif [[ ! -f /sys/fs/cgroup/cgroup.controllers ]]; then
    echo "no cgroup file system under /sys/fs/cgroup"
  fi
  local p missing=()
  for p in "${REAL_NODE_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if ((${#missing[@]} > 0)) && ! command -v apt-get >/dev/null; then
    echo "Debian packages ${missing[*]} are not installed and there is no apt-get to install them"
  fi
  grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || echo "the kernel has no overlay file system (containerd's snapshotter needs it)"
  ip link add "$REAL_NODE_BRIDGE-probe" type bridge 2>/dev/null && ip link del "$REAL_NODE_BRIDGE-probe" ||
    echo "cannot create a network bridge (needs CAP_NET_ADMIN and the bridge module)"
}

real_node_install_packages() {
  local p missing=()
  for p in "${REAL_NODE_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  ((${#missing[@]} == 0)) && return 0
  log "installing Debian packages for the real node: ${missing[*]}"
  # another apt-get may be running beside this one (images/bases.sh, while npm start builds images): wait for it
  apt-get -o DPkg::Lock::Timeout=600 update -qq >&2 || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
    die "apt-get install ${missing[*]} failed"
}

real_node_pid() { recorded_pid "$REAL_NODE_DIR/pids/${1%%:*}.pid" "${1#*:}"; } # name:binary

real_node_processes_running() {
  local p
  for p in "${REAL_NODE_PROCESSES[@]}"; do real_node_pid "$p" >/dev/null || return 1; done
}

# Ready as posted by a kubelet that heartbeat at or after SINCE (RFC 3339, UTC, seconds; empty:
# any time): the Node of a restarted kubelet still shows the last Ready of the one before until
# the new one posts.
real_node_ready_since() { # since
  local status
  status=$(kctl get node "$REAL_NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}' --request-timeout=5s 2>/dev/null) || return 1
  [[ "${status%% *}" == True && ! "${status#* }" < "$1" ]]
}

real_node_ready() { real_node_ready_since ''; }

real_node_healthy() { real_node_processes_running && real_node_ready; }

# Starts NAME from BINARY ARGS... in a session of its own, output to logs/NAME.log (the previous
# log kept as NAME.previous.log), pid in pids/NAME.pid.
real_node_spawn() { # name binary args...
  local name=$1; shift
  mkdir -p "$REAL_NODE_DIR/pids" "$REAL_NODE_DIR/logs"
  [[ ! -f "$REAL_NODE_DIR/logs/$name.log" ]] || mv -f "$REAL_NODE_DIR/logs/$name.log" "$REAL_NODE_DIR/logs/$name.previous.log"
  setsid "$@" >"$REAL_NODE_DIR/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$REAL_NODE_DIR/pids/$name.pid"
}

real_node_wait() { # seconds description command...
  local deadline=$((SECONDS + $1)) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.3
  done
  log "    $what"
}

# --- network -----------------------------------------------------------------------------------
real_node_network_up() {
  if ! ip link show "$REAL_NODE_BRIDGE" >/dev/null 2>&1; then
    ip link add "$REAL_NODE_BRIDGE" type bridge || die "cannot create bridge $REAL_NODE_BRIDGE"
  fi
  ip addr replace "$REAL_NODE_GATEWAY/${REAL_NODE_POD_SUBNET#*/}" dev "$REAL_NODE_BRIDGE"
  ip link set "$REAL_NODE_BRIDGE" up
  # Host-originated traffic to a Service address that kube-proxy has not rewritten stays on the bridge.
  ip route replace "$SERVICE_CIDR" dev "$REAL_NODE_BRIDGE"
  # Nothing from the pod subnet leaves through another interface.
  iptables -C FORWARD -s "$REAL_NODE_POD_SUBNET" ! -o "$REAL_NODE_BRIDGE" -j DROP 2>/dev/null ||
    iptables -I FORWARD -s "$REAL_NODE_POD_SUBNET" ! -o "$REAL_NODE_BRIDGE" -j DROP
  # Service traffic between two pods of the bridge passes through iptables (kube-proxy's rules).
  modprobe br_netfilter 2>/dev/null || true
  if [[ -w /proc/sys/net/bridge/bridge-nf-call-iptables ]]; then echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables; fi
}

real_node_network_down() {
  iptables -D FORWARD -s "$REAL_NODE_POD_SUBNET" ! -o "$REAL_NODE_BRIDGE" -j DROP 2>/dev/null || true
  ip route del "$SERVICE_CIDR" dev "$REAL_NODE_BRIDGE" 2>/dev/null || true
  ip link del "$REAL_NODE_BRIDGE" 2>/dev/null || true
}

# --- configuration files -----------------------------------------------------------------------
real_node_write_config() { # node-bin-dir apiserver-port
  local dir=$REAL_NODE_DIR pki="$CLUSTER_WORKDIR/pki"
  mkdir -p "$dir"/{containerd/root,containerd/state,cni/net.d,cni/ipam,kubelet,kubelet-pki,pod-logs}
  cat >"$dir/containerd/config.toml" <<EOF
# containerd of the real node (cluster/parts/node): its own root, state and socket.
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$REAL_NODE_SOCKET"
[ttrpc]
  address = "$REAL_NODE_SOCKET.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  # This machine refuses to lower a process's oom_score_adj below its own (the kubelet asks
  # -998 for sandboxes): clamp instead of failing every sandbox.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
  # Per-registry hosts.toml (endpoint, CA): the cluster's registry writes its own (parts/registry).
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$REAL_NODE_REGISTRY_HOSTS_DIR"
EOF
  cat >"$dir/cni/net.d/10-real-node.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "real-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$REAL_NODE_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$dir/cni/ipam",
        "ranges": [[{ "subnet": "$REAL_NODE_POD_SUBNET", "gateway": "$REAL_NODE_GATEWAY" }]],
        "routes": [{ "dst": "$SERVICE_CIDR" }]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
  # The kubelet's client certificate: system:node:<name> in system:nodes, as the Node authorizer wants.
  if [[ ! -f "$dir/kubelet-pki/kubelet.crt" ]]; then
    openssl req -new -newkey rsa:2048 -nodes -keyout "$dir/kubelet-pki/kubelet.key" -out "$dir/kubelet-pki/kubelet.csr" \
      -subj "/O=system:nodes/CN=system:node:$REAL_NODE_NAME" 2>/dev/null
    openssl x509 -req -in "$dir/kubelet-pki/kubelet.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
      -out "$dir/kubelet-pki/kubelet.crt" -days 3650 2>/dev/null || die "cannot sign the kubelet's certificate with $pki/ca.key"
  fi
  cat >"$dir/kubelet.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: { server: "https://127.0.0.1:$2", certificate-authority: "$pki/ca.crt" }
users:
- name: kubelet
  user: { client-certificate: "$dir/kubelet-pki/kubelet.crt", client-key: "$dir/kubelet-pki/kubelet.key" }
contexts:
- name: kubelet
  context: { cluster: local, user: kubelet }
current-context: kubelet
EOF
  cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# Its API (logs, exec) on the bridge only; health on loopback.
address: $REAL_NODE_GATEWAY
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: "$pki/ca.crt" }
authorization: { mode: Webhook }
containerRuntimeEndpoint: "unix://$REAL_NODE_SOCKET"
cgroupDriver: cgroupfs
cgroupRoot: /$REAL_NODE_CGROUP
failSwapOn: false
# Images are loaded by hand and cannot be pulled again: never collect them, never evict for disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: { memory.available: "100Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%" }
registerWithTaints:
- { key: "$REAL_NODE_LABEL", value: "true", effect: NoSchedule }
maxPods: 60
# Cluster DNS (parts/dns): pods with dnsPolicy ClusterFirst ask the kube-dns Service. The
# host's resolv.conf is never given to pods (its servers are off this machine).
clusterDNS: ["$CLUSTER_DNS_IP"]
clusterDomain: $CLUSTER_DOMAIN
resolvConf: ""
podLogsDir: "$dir/pod-logs"
serializeImagePulls: false
EOF
  cat >"$dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: { kubeconfig: "$KUBECONFIG_PATH" }
hostnameOverride: $REAL_NODE_NAME
mode: iptables
clusterCIDR: $REAL_NODE_POD_SUBNET
bindAddress: 127.0.0.1
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
nodePortAddresses: ["$REAL_NODE_GATEWAY/32"]
iptables: { localhostNodePorts: false }
# Leave the machine's conntrack table size as it is.
conntrack: { maxPerCore: 0 }
EOF
}

# The kubelet's cgroup root, in every cgroup v1 hierarchy (a cpuset needs its cpus and mems set).
real_node_cgroups() {
  local h
  for h in /sys/fs/cgroup/*/; do
    [[ -f "$h/cgroup.procs" && "$h" != */unified/ ]] || continue
    mkdir -p "$h$REAL_NODE_CGROUP"
    if [[ -f "$h/cpuset.cpus" ]]; then
      cat "$h/cpuset.cpus" >"$h$REAL_NODE_CGROUP/cpuset.cpus"
      cat "$h/cpuset.mems" >"$h$REAL_NODE_CGROUP/cpuset.mems"
    fi
  done
}

# Loads IMAGE into the node's containerd unless it is there, from an OCI archive kept in the build
# cache and made again when SOURCE is newer: a `buildah from scratch` container that LAYER (a
# function: container source) fills, run as USER.
real_node_image() { # image source user layer
  local ctr=(ctr --address "$REAL_NODE_SOCKET" -n k8s.io) image=$1 archive c
  archive="$BUILD_ROOT/images/$(echo "$image" | tr '/:' '__').tar"
  "${ctr[@]}" images ls -q | grep -qxF "$image" && return 0
  if [[ ! -f "$archive" || "$archive" -ot "$2" ]]; then
    mkdir -p "$(dirname "$archive")"
    c=$(buildah from scratch)
    "$4" "$c" "$2"
    buildah config --user "$3" "$c"
    buildah commit -q --rm "$c" "$image" >/dev/null
    rm -f "$archive.tmp"
    buildah push -q "$image" "oci-archive:$archive.tmp:$image" >&2 && mv -f "$archive.tmp" "$archive" ||
      die "could not build the image $image"
  fi
  "${ctr[@]}" images import --index-name "$image" "$archive" >/dev/null || die "could not load $image into the real node's containerd"
}

# Layers for real_node_image: one static binary at /<its name>, its entrypoint; Debian's
# busybox-static with every applet under /bin.
real_node_binary_layer() { # container binary
  buildah copy "$1" "$2" "/$(basename "$2")" >/dev/null
  buildah config --entrypoint "[\"/$(basename "$2")\"]" "$1"
}
real_node_busybox_layer() { # container /bin/busybox
  buildah copy "$1" "$2" /bin/busybox >/dev/null
  buildah run --isolation chroot "$1" /bin/busybox --install -s /bin
}

real_node_binary_image() { real_node_image "$1" "$2" "$3" real_node_binary_layer; } # image binary user


# For the status of the node and the parts it hosts: one line for a process of the node (name:binary): pid, RSS and log, or NOT RUNNING.
real_node_process_status_line() { # name:binary
  local pid rss log="$REAL_NODE_DIR/logs/${1%%:*}.log"
  if pid=$(real_node_pid "$1"); then
    rss=$(process_rss "$pid")
    printf '  %-28s pid %-8s rss %-9s log %s\n' "real-node/${1%%:*}" "$pid" "$rss" "$log"
  else
    printf '  %-28s NOT RUNNING (log %s)\n' "real-node/${1%%:*}" "$log"
  fi
}
