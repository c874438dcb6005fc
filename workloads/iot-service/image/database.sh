#!/bin/sh
# The database image's entry point: PostgreSQL with database `iot`, data in /var/lib/iot/pgdata
# (the database's volume, mode 0700), superuser `iot`; one replica alone, or three under Patroni
# (IOT_DATABASE_REPLICAS).
#
# One replica: at the first start initdb into the volume. At every start, before any network
# client can connect:
# - pg_hba.conf is written afresh: the superuser only over the local socket (in this container:
#   `kubectl exec` and this script; trust, as initdb made it), and over the network only the
#   components' roles, each to database `iot` alone, with its password (scram-sha-256) — the
#   superuser and any other role are refused over the network;
# - with the server listening on the local socket only, the schema and the roles are applied
#   (image/database-roles.sh), so the Secret is what counts and a rotated password takes effect
#   at the next start.
# Then the server starts anew listening on 5432 for every address (the instance's NetworkPolicies
# decide who reaches it). SIGTERM (a pod deleted or rolled) is passed on to postgres as SIGINT, a
# fast shutdown: open transactions are rolled back, clients disconnected and a checkpoint written,
# in about a second. postgres takes SIGTERM itself for a smart shutdown, which waits for every
# client to disconnect — the components' connection pools never do, so the kubelet's SIGKILL
# would end it after the grace period, and the next start would recover from the WAL.
#
# Three replicas (the pods of StatefulSet `database`): Patroni runs PostgreSQL, configured from
# the environment into /tmp/patroni/patroni.yml, with Kubernetes as its store: the leader lock
# and the cluster's state in ConfigMaps database-leader, -config and -sync of POD_NAMESPACE
# (written with the pod's ServiceAccount), its members the pods of IOT_DATABASE_MEMBER_LABELS
# (JSON) whose app.kubernetes.io/component is `database` (the scope), each labelled
# `role: master` (the primary, whatever the Patroni version) or `replica`.
# The first member to take the lock runs initdb and, once bootstrapped, database-roles.sh; the
# others copy it (pg_basebackup, asking the primary for an immediate checkpoint: a spread one
# kept a new standby waiting a minute or more) and stream from it as user `iot_replication`
# (IOT_DATABASE_REPLICATION_PASSWORD). Replication is synchronous (synchronous_mode): a commit is
# acknowledged once a standby has it too, and only that standby may be promoted, so a failover
# loses no acknowledged write. A primary that stops renewing the lock for 20 s (ttl, the least
# Patroni takes) is replaced;
# a former primary comes back as a standby, rewound (pg_rewind) or copied afresh when it had
# diverged. database-roles.sh runs again on every member that starts or is promoted as primary.
# pg_hba as above, and `iot_replication` over the network for replication and pg_rewind only;
# Patroni's REST API on 8008 (the members ask each other there; the probes). SIGTERM reaches
# Patroni (exec), which stops PostgreSQL (fast) and gives up the lock, so a standby takes over
# at once.
#
# With IOT_DATABASE_ARCHIVE_TIMEOUT (seconds; the operator sets it with spec.backup) PostgreSQL
# archives WAL with pgBackRest (archive_mode on, archive_command `pgbackrest archive-push`, its
# options from the PGBACKREST_* environment: the stanza and the repository host over TLS), and
# switches to a new segment after at most that many seconds with writes, so a segment not yet
# archived holds at most that long's writes. Under Patroni the same parameters: archive_mode `on`
# archives on the primary only (a standby's segments reach the archive through the primary).
# Without it archive_mode is off.
#
# Socket and lock live in /tmp: nothing outside /tmp and the volume is written.
set -eu
for variable in IOT_DATABASE_PASSWORD IOT_DATABASE_CORE_PASSWORD IOT_DATABASE_PROCESSING_PASSWORD; do
  eval "value=\${$variable:-}"
  if [ -z "$value" ]; then echo "$variable (from Secret iot-credentials) is not set" >&2; exit 1; fi
done
bin=$(echo /usr/lib/postgresql/*/bin)
export PGDATA=/var/lib/iot/pgdata
umask 077
archive_timeout=${IOT_DATABASE_ARCHIVE_TIMEOUT:-}
case "$archive_timeout" in
  '') archive_mode=off ;;
  *[!0-9]*) echo "IOT_DATABASE_ARCHIVE_TIMEOUT must be a number of seconds, not $archive_timeout" >&2; exit 1 ;;
  *) archive_mode=on ;;
esac
echo "{\"level\":\"info\",\"component\":\"database\",\"msg\":\"starting\",\"version\":\"${IOT_SERVICE_VERSION:-}\"}"
if [ "${IOT_DATABASE_REPLICAS:-1}" -gt 1 ]; then
  for variable in IOT_DATABASE_REPLICATION_PASSWORD IOT_DATABASE_MEMBER_LABELS POD_NAME POD_NAMESPACE POD_IP; do
    eval "value=\${$variable:-}"
    if [ -z "$value" ]; then echo "$variable is not set (three replicas run under Patroni)" >&2; exit 1; fi
  done
  mkdir -p /tmp/patroni
  cat >/tmp/patroni/patroni.yml <<YAML
scope: database
name: "$POD_NAME"
restapi:
  listen: "0.0.0.0:8008"
  connect_address: "$POD_IP:8008"
kubernetes:
  namespace: "$POD_NAMESPACE"
  labels: $IOT_DATABASE_MEMBER_LABELS
  # Patroni adds its scope to the labels its members are selected by: the pods' component label.
  scope_label: app.kubernetes.io/component
  pod_ip: "$POD_IP"
  role_label: role
  leader_label_value: master
  follower_label_value: replica
  standby_leader_label_value: master
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 5
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_log_hints: "on"
        wal_keep_size: 128MB
  initdb: [{encoding: UTF8}, {locale: C.UTF-8}, {auth-local: trust}, {auth-host: scram-sha-256}]
  post_bootstrap: /usr/local/bin/iot-database-roles
postgresql:
  listen: "0.0.0.0:5432"
  connect_address: "$POD_IP:5432"
  data_dir: "$PGDATA"
  bin_dir: "$bin"
  pgpass: /tmp/patroni/pgpass
  use_unix_socket: true
  basebackup: [{checkpoint: fast}]
  authentication:
    superuser: {username: iot, password: "$IOT_DATABASE_PASSWORD"}
    replication: {username: iot_replication, password: "$IOT_DATABASE_REPLICATION_PASSWORD"}
    rewind: {username: iot_replication, password: "$IOT_DATABASE_REPLICATION_PASSWORD"}
  parameters:
    unix_socket_directories: /tmp
    password_encryption: scram-sha-256
    archive_mode: "$archive_mode"
    archive_command: "pgbackrest archive-push %p"
    archive_timeout: "${archive_timeout:-0}"
  pg_hba:
    - local all all trust
    - host replication iot_replication all scram-sha-256
    - host postgres iot_replication all scram-sha-256
    - host iot iot_core all scram-sha-256
    - host iot iot_processing all scram-sha-256
  callbacks:
    on_start: /usr/local/bin/iot-database-roles
    on_role_change: /usr/local/bin/iot-database-roles
  remove_data_directory_on_rewind_failure: true
  remove_data_directory_on_diverged_timelines: true
YAML
  exec patroni /tmp/patroni/patroni.yml
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  rm -rf "$PGDATA"
  printf '%s\n' "$IOT_DATABASE_PASSWORD" >/tmp/pwfile
  "$bin/initdb" --pgdata="$PGDATA" --username=iot --pwfile=/tmp/pwfile --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --locale=C.UTF-8 >&2
  rm -f /tmp/pwfile
  echo 'CREATE DATABASE iot' | "$bin/postgres" --single -D "$PGDATA" -c unix_socket_directories=/tmp postgres >/dev/null
fi
# PostgreSQL refuses a data directory others may read; a volume's fsGroup may have opened it.
chmod 0700 "$PGDATA"
cat >"$PGDATA/pg_hba.conf" <<'HBA'
# Written by the database image's entry point at every start (image/database.sh).
local all            all            trust
host  iot            iot_core       all  scram-sha-256
host  iot            iot_processing all  scram-sha-256
HBA

# The schema and the roles, with the server on the local socket only.
"$bin/postgres" -D "$PGDATA" -c listen_addresses='' -c unix_socket_directories=/tmp -c log_destination=stderr &
pid=$!
tries=0
until "$bin/pg_isready" -q -h /tmp -U iot -d iot; do
  if ! kill -0 "$pid" 2>/dev/null || [ "$tries" -ge 600 ]; then echo 'PostgreSQL did not start on the local socket' >&2; exit 1; fi
  tries=$((tries + 1))
  sleep 0.1
done
/usr/local/bin/iot-database-roles
kill -INT "$pid"
wait "$pid" || true

"$bin/postgres" -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/tmp -c log_destination=stderr \
  -c archive_mode="$archive_mode" -c archive_command='pgbackrest archive-push %p' -c archive_timeout="${archive_timeout:-0}" &
pid=$!
trap 'kill -INT "$pid" 2>/dev/null' TERM INT
# wait returns early when a signal arrives; wait again until postgres itself has exited.
while :; do
  status=0
  wait "$pid" || status=$?
  kill -0 "$pid" 2>/dev/null || break
done
exit "$status"
