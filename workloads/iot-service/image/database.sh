#!/bin/sh
# The database image's entry point: PostgreSQL with role and database `iot`, the role's password
# IOT_DATABASE_PASSWORD (from iot-credentials), data in /var/lib/iot/pgdata (the database's
# volume, mode 0700 at every start). At the first start it runs initdb into the volume; at every start it sets the role's
# password from the Secret (single-user mode, before any client can connect), so the Secret is
# what counts. It listens on 5432 with scram-sha-256 for every address (the instance's
# NetworkPolicies decide who reaches it) and keeps its socket and lock in /tmp: nothing outside
# /tmp and the volume is written. SIGTERM (a pod deleted or rolled) is passed on to postgres as
# SIGINT, a fast shutdown: open transactions are rolled back, clients disconnected and a checkpoint
# written, in about a second. postgres takes SIGTERM itself for a smart shutdown, which waits for
# every client to disconnect — the components' connection pools never do, so the kubelet's SIGKILL
# would end it after the grace period, and the next start would recover from the WAL.
set -eu
: "${IOT_DATABASE_PASSWORD:?IOT_DATABASE_PASSWORD (from Secret iot-credentials) is not set}"
case "$IOT_DATABASE_PASSWORD" in *"'"* | *"\\"*) echo 'IOT_DATABASE_PASSWORD must not contain quotes or backslashes' >&2; exit 1 ;; esac
bin=$(echo /usr/lib/postgresql/*/bin)
export PGDATA=/var/lib/iot/pgdata
umask 077
echo "{\"level\":\"info\",\"component\":\"database\",\"msg\":\"starting\",\"version\":\"${IOT_SERVICE_VERSION:-}\"}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  rm -rf "$PGDATA"
  printf '%s\n' "$IOT_DATABASE_PASSWORD" >/tmp/pwfile
  "$bin/initdb" --pgdata="$PGDATA" --username=iot --pwfile=/tmp/pwfile --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --locale=C.UTF-8 >&2
  rm -f /tmp/pwfile
  echo 'host all all 0.0.0.0/0 scram-sha-256' >>"$PGDATA/pg_hba.conf"
  echo 'host all all ::/0 scram-sha-256' >>"$PGDATA/pg_hba.conf"
  echo 'CREATE DATABASE iot' | "$bin/postgres" --single -D "$PGDATA" -c unix_socket_directories=/tmp postgres >/dev/null
fi
# PostgreSQL refuses a data directory others may read; a volume's fsGroup may have opened it.
chmod 0700 "$PGDATA"
echo "ALTER ROLE iot PASSWORD '$IOT_DATABASE_PASSWORD'" | "$bin/postgres" --single -D "$PGDATA" -c unix_socket_directories=/tmp postgres >/dev/null
"$bin/postgres" -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/tmp -c log_destination=stderr &
pid=$!
trap 'kill -INT "$pid" 2>/dev/null' TERM INT
# wait returns early when a signal arrives; wait again until postgres itself has exited.
while :; do
  status=0
  wait "$pid" || status=$?
  kill -0 "$pid" 2>/dev/null || break
done
exit "$status"
