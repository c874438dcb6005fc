# What cluster/engines/build.sh and every cluster/parts/<part>/part.sh share: the cluster's and the
# cache's paths, logging, kubectl/kwokctl for the cluster, process helpers. Source it; do not run it.
# shellcheck shell=bash
#
# Guarantees: sourcing it defines variables and functions only (no file is written, nothing runs);
# progress goes to stderr as `[cluster HH:MM:SS] ...` lines (log), a fatal error exits 1 (die).

CLUSTER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ENGINES_DIR="$CLUSTER_DIR/engines"
PARTS_DIR="$CLUSTER_DIR/parts"
# shellcheck source=engines/versions.env
source "$ENGINES_DIR/versions.env"

# Where built binaries are cached: outside the work tree, one directory per version set.
IOT_CACHE_ROOT=${IOT_OPERATOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/iot-operator}
BUILD_KEY="k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}-kwok-${KWOK_VERSION}"
BUILD_ROOT="$IOT_CACHE_ROOT/$BUILD_KEY"
BIN_DIR="$BUILD_ROOT/bin"
# Written as the last act of a fully successful build, inside the directory that is moved
# into place atomically: if it exists, every binary was built and verified.
BUILD_STAMP="$BIN_DIR/.build-complete"
CONTROL_PLANE_BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl)

CLUSTER_NAME=${CLUSTER_NAME:-iot-operator}
CLUSTER_NODES=${CLUSTER_NODES:-2}
# kwokctl keeps every cluster under $KWOK_WORKDIR/clusters/<name> (default ~/.kwok).
KWOK_WORKDIR=${KWOK_WORKDIR:-$HOME/.kwok}
export KWOK_WORKDIR
CLUSTER_WORKDIR="$KWOK_WORKDIR/clusters/$CLUSTER_NAME"
KUBECONFIG_PATH="$CLUSTER_WORKDIR/kubeconfig.yaml"
# The cluster's network, fixed by parts/control-plane/kwokctl.yaml: kube-apiserver's
# --service-cluster-ip-range, and the real node's bridge gateway that the API server advertises.
SERVICE_CIDR=10.96.0.0/16
REAL_NODE_GATEWAY=10.244.0.1
# Note: kwokctl create/delete would add/remove a context in ~/.kube/config by default. We never
# touch it: create gets --kubeconfig "" and delete gets the cluster's own kubeconfig (which it
# removes anyway; an empty path is an error for delete).

log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

binaries_complete() {
  [[ -f "$BUILD_STAMP" ]] || return 1
  local b
  for b in "${CONTROL_PLANE_BINARIES[@]}"; do [[ -x "$BIN_DIR/$b" ]] || return 1; done
}

# Components that kwokctl runs for our cluster: "<component>:<binary>". kwokctl links each
# binary into <workdir>/bin/<component> and records its pid in <workdir>/pids/<component>.pid.
COMPONENTS=(etcd:etcd kube-apiserver:kube-apiserver kube-controller-manager:kube-controller-manager
  kube-scheduler:kube-scheduler kwok-controller:kwok)

cluster_exists() { [[ -f "$CLUSTER_WORKDIR/kwok.yaml" ]]; }

# Prints the pid recorded in a pid file if that process is alive and really runs `binary` (a pid
# file left over from before a reboot may name an unrelated process).
recorded_pid() { # pid-file binary
  local pid exe
  [[ -f "$1" ]] || return 1
  pid=$(<"$1")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [[ "$(basename "$exe")" == "$2" ]] || return 1
  process_alive "$pid" || return 1
  echo "$pid"
}

# Whether process `pid` runs `binary` itself (the same file, links resolved); when it runs another
# build, says so and that it is restarted (the caller stops it then).
runs_binary() { # what pid binary
  local exe
  exe=$(readlink -f "/proc/$2/exe" 2>/dev/null || true)
  [[ "$exe" == "$(readlink -f "$3")" ]] && return 0
  log "$1 runs from $exe, not $3; restarting it"
  return 1
}

# The pid of a component of kwokctl's (its pid file under <workdir>/pids), as recorded_pid.
component_pid() { # "component:binary"
  recorded_pid "$CLUSTER_WORKDIR/pids/${1%%:*}.pid" "${1#*:}"
}

# Runs kwokctl for our cluster. With KWOKCTL_TIMEOUT
# (seconds) set, the call is stopped after that long; only calls that set it run under `timeout`,
# which puts kwokctl in a process group of its own (Ctrl-C at the terminal no longer reaches it).
# kwokctl logs JSON lines when its stderr is not a terminal (and it is not, here): they are told
# as the scripts' own `[cluster …]` lines; its stdout is left as it is.
kwokctl() {
  { KWOK_KUBECTL_BINARY="$BIN_DIR/kubectl" ${KWOKCTL_TIMEOUT:+timeout "$KWOKCTL_TIMEOUT"} \
    "$BIN_DIR/kwokctl" --name "$CLUSTER_NAME" "$@" 2>&1 1>&3 3>&- | kwokctl_log_lines >&2
    return "${PIPESTATUS[0]}"; } 3>&1
}

# One `[cluster HH:MM:SS] kwokctl: <message> (<elapsed>; <error>)` line per JSON log line of
# kwokctl's; any other line passes unchanged.
kwokctl_log_lines() {
  local line msg level extra
  while IFS= read -r line; do
    if [[ "$line" != '{'*'"msg":"'* ]]; then printf '%s\n' "$line"; continue; fi
    msg=$(sed -n 's/.*"msg":"\(\([^"\\]\|\\.\)*\)".*/\1/p' <<<"$line")
    level=$(sed -n 's/.*"level":"\([A-Z]*\)".*/\1/p' <<<"$line")
    extra=$(sed -n 's/.*"elapsed":{[^}]*"human":"\([^"]*\)"}.*/\1/p' <<<"$line")
    extra+=$(sed -n 's/.*"err":"\(\([^"\\]\|\\.\)*\)".*/; \1/p' <<<"$line")
    [[ "$level" == INFO || -z "$level" ]] && level="" || level+=": "
    log "kwokctl: $level$msg${extra:+ (${extra#; })}"
  done
}

kctl() { "$BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_PATH" "$@"; }

apiserver_ready() { [[ "$(kctl get --raw /readyz --request-timeout=3s 2>/dev/null)" == ok ]]; }

wait_apiserver_ready() { # timeout-seconds
  local deadline=$((SECONDS + $1)) last=""
  until apiserver_ready; do
    if ((SECONDS >= deadline)); then
      last=$(kctl get --raw '/readyz?verbose' --request-timeout=3s 2>&1 | grep -v '\] ok$' | tail -n 5 || true)
      log "kube-apiserver /readyz not ok after $1s; last answer: ${last:-<none>}"
      return 1
    fi
    sleep 0.3
  done
}

# Calls CHECK every INTERVAL seconds until it succeeds; after TIMEOUT seconds logs MESSAGE with
# what CHECK printed last and returns 1.
wait_until() { # timeout-seconds interval-seconds message check
  local deadline=$((SECONDS + $1)) last
  until last=$("$4"); do
    if ((SECONDS >= deadline)); then
      log "$3: $last"
      return 1
    fi
    sleep "$2"
  done
}

# Succeeds when no namespace is being deleted; else prints those that are.
no_namespace_terminating() {
  local names
  names=$(kctl get namespaces -o jsonpath='{range .items[?(@.status.phase=="Terminating")]}{.metadata.name}{" "}{end}' --request-timeout=5s 2>/dev/null) || names="?"
  echo "$names"
  [[ -z "$names" ]]
}

# Succeeds when the API server's discovery names the resource of every CRD (plural.group); else
# prints those it lacks.
every_crd_discovered() {
  local crds served missing
  crds=$(kctl get crd -o jsonpath='{range .items[*]}{.spec.names.plural}.{.spec.group}{"\n"}{end}' --request-timeout=5s 2>/dev/null) || crds="?"
  served=$(kctl api-resources -o name --request-timeout=5s 2>/dev/null || true)
  missing=$(comm -23 <(sort -u <<<"$crds") <(sort -u <<<"$served") | tr '\n' ' ')
  echo "$missing"
  [[ -z "${missing// /}" ]]
}

# An API server restart waits for both: a namespace whose deletion spans the restart may be
# finished by a namespace controller that looks at discovery a moment after /readyz, before it
# names the CRDs' resources, which then stay in etcd with no namespace.
wait_no_terminating_namespaces() { wait_until "$1" 1 "namespaces still being deleted after $1s" no_namespace_terminating; }
wait_crd_discovery() { wait_until "$1" 0.3 "discovery still lacks after $1s" every_crd_discovered; }

# kubectl wait --for=condition=X, asked again until the deadline: kubectl gives up at once, instead
# of waiting, on an object whose status has no conditions yet (a CRD or node just created:
# ".status.conditions accessor error: <nil> is of the type <nil>").
wait_condition() { # condition timeout-seconds object...
  local condition=$1 deadline=$((SECONDS + $2)) answer
  shift 2
  until answer=$(kctl wait --for="condition=$condition" --timeout=5s "$@" 2>&1); do
    if ((SECONDS >= deadline)); then
      log "kubectl wait --for=condition=$condition, last answer: ${answer##*$'\n'}"
      return 1
    fi
    sleep 1
  done
}

# Port of a component as recorded by kwokctl in kwok.yaml (option name, e.g. kubeSchedulerPort).
component_port() { sed -n "s/^  $1: \([0-9]*\)\$/\1/p" "$CLUSTER_WORKDIR/kwok.yaml" | head -n 1; }

# /healthz of a component's own HTTPS endpoint (always allowed without authorization).
component_healthy() { # port
  [[ -n "$1" ]] && [[ "$(kctl --server "https://127.0.0.1:$1" --insecure-skip-tls-verify \
    get --raw /healthz --request-timeout=2s 2>/dev/null)" == ok ]]
}

# True if something listens on the TCP port (any address).
port_listening() { # port
  ss -Hltn "sport = :$1" 2>/dev/null | grep -q .
}

# The port NAME recorded in a part's ports file (lines `name=port`); empty when there is none.
recorded_port() { # ports-file name
  [[ -f "$1" ]] && sed -n "s/^$2=\([0-9]*\)$/\1/p" "$1"
}

# Makes sure a part's ports file names, for each NAME, a port its process can bind: the recorded
# one while it is free, else a new one among 20000-29999. A port recorded in any other ports file
# of a local cluster ($KWOK_WORKDIR/clusters/*/*/ports: other parts, other clusters) is never
# chosen, so parts and clusters side by side keep apart. WHAT names the part in the log line.
choose_ports() { # ports-file what names...
  local file=$1 what=$2 name port taken=" " f changed=0 lines=()
  shift 2
  for f in "$KWOK_WORKDIR"/clusters/*/*/ports; do
    [[ -f "$f" && "$f" != "$file" ]] || continue
    taken+="$(sed -n 's/^[a-z]*=\([0-9]*\)$/\1/p' "$f" | tr '\n' ' ')"
  done
  for name in "$@"; do
    port=$(recorded_port "$file" "$name" || true)
    if [[ -z "$port" ]] || port_listening "$port" || [[ "$taken" == *" $port "* ]]; then
      [[ -z "$port" ]] || log "$what's recorded $name port $port is taken; choosing another"
      for _ in $(seq 1 200); do
        port=$((20000 + RANDOM % 10000))
        [[ "$taken" == *" $port "* ]] || port_listening "$port" || break
      done
      changed=1
    fi
    taken+="$port "
    lines+=("$name=$port")
  done
  if ((changed)) || [[ ! -f "$file" ]]; then printf '%s\n' "${lines[@]}" >"$file"; fi
}

# The resident memory of a process, e.g. "52 MiB" ("?" when it is gone).
process_rss() { awk '/^VmRSS/ {printf "%d MiB", $2/1024}' "/proc/$1/status" 2>/dev/null || echo "?"; }

# A process's line in a part's status: name, pid, RSS and DETAILS, or NOT RUNNING (then false).
process_status_line() { # name pid|"" details
  if [[ -z "$2" ]]; then printf '  %-24s NOT RUNNING\n' "$1"; return 1; fi
  printf '  %-24s pid %-8s rss %-9s %s\n' "$1" "$2" "$(process_rss "$2")" "$3"
}

# Waits up to 60 s until CHECK succeeds for a process just started with its pid in PID_FILE; dies
# with the end of its log when it exits or the time is up. (Just after the fork /proc/<pid>/exe may
# still be setsid: alive is what counts here.)
wait_started() { # what pid-file log check...
  local what=$1 pid_file=$2 log_file=$3 deadline=$((SECONDS + 60))
  shift 3
  until "$@"; do
    process_alive "$(<"$pid_file")" || die "$what exited at start; the end of $log_file: $(tail -n 5 "$log_file")"
    ((SECONDS < deadline)) || die "$what was not ready within 60s (log: $log_file)"
    sleep 0.3
  done
}

# True while a process exists and is not a zombie (a killed component waits to be reaped by init).
process_alive() { local st; st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [[ -n "$st" && "$st" != Z ]]; }

# Stops a process: SIGTERM, SIGKILL after `grace` seconds, then waits (at most 5 s) until it is gone.
terminate_process() { # pid grace-seconds
  kill -TERM "$1" 2>/dev/null || true
  for _ in $(seq 1 $(($2 * 10))); do process_alive "$1" || break; sleep 0.1; done
  if process_alive "$1"; then
    kill -KILL "$1" 2>/dev/null || true
    for _ in $(seq 1 50); do process_alive "$1" || break; sleep 0.1; done
  fi
}

# Stops a component (SIGTERM, SIGKILL after $2 seconds), drops its pid file and keeps its log as
# <component>.previous.log (kwokctl truncates the log when it starts the component again).
stop_component() { # "component:binary" grace-seconds
  local comp=${1%%:*} pid
  if pid=$(component_pid "$1"); then terminate_process "$pid" "$2"; fi
  rm -f "$CLUSTER_WORKDIR/pids/$comp.pid"
  cp -f "$CLUSTER_WORKDIR/logs/$comp.log" "$CLUSTER_WORKDIR/logs/$comp.previous.log" 2>/dev/null || true
}

# kwok-controller takes a fresh identity (hostname_<uuid>) every time it starts and only
# simulates nodes whose Lease (kube-node-lease) it holds. After a restart it would wait for the
# previous instance's leases to expire (200 s with kwokctl's defaults), and meanwhile pods on
# those nodes stay Pending. So: stop it, delete the node leases, start it again.
restart_kwok_with_fresh_leases() {
  local nodes
  stop_component kwok-controller:kwok 2
  nodes=$(kctl get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' 2>/dev/null || true)
  if [[ -n "$nodes" ]]; then
    # shellcheck disable=SC2086
    kctl delete lease -n kube-node-lease --ignore-not-found --wait=false $nodes >/dev/null
  fi
  kwokctl start cluster >&2
}

