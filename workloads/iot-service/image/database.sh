#!/bin/sh
# The database image's entry point: PostgreSQL with database `iot`, data in /var/lib/iot/pgdata
# (the database's volume, mode 0700 at every start). At the first start it runs initdb into the
# volume, with superuser `iot`. At every start, before any network client can connect:
# - pg_hba.conf is written afresh: the superuser only over the local socket (in this container:
#   `kubectl exec` and this script; trust, as initdb made it), and over the network only the
#   components' roles, each to database `iot` alone, with its password (scram-sha-256) — the
#   superuser and any other role are refused over the network;
# - with the server listening on the local socket only, the schema (/usr/local/share/iot/schema.sql,
#   the one definition of the tables: IF NOT EXISTS, so a database made by an earlier version,
#   whose components created the tables themselves, keeps them and its rows) is applied, and the
#   roles are made or brought to their rights and passwords (from iot-credentials):
#     iot             superuser: IOT_DATABASE_PASSWORD (usable over the local socket alone)
#     iot_core        IOT_DATABASE_CORE_PASSWORD: the device registry (devices: read, add, change,
#                     delete) and reading telemetry
#     iot_processing  IOT_DATABASE_PROCESSING_PASSWORD: adding telemetry and dead letters, and
#                     reading and deleting them for retention
#   neither of which may create anything (no DDL: no CREATE on the database or schema public,
#   no temporary tables) or log in as anything but itself; their rights on the tables are set
#   exactly (revoked, then granted), so a right given by hand does not outlive a restart;
# so the Secret is what counts, and a rotated password takes effect at the next start. Then the
# server starts anew listening on 5432 for every address (the instance's NetworkPolicies decide
# who reaches it). Socket and lock live in /tmp: nothing outside /tmp and the volume is written.
# SIGTERM (a pod deleted or rolled) is passed on to postgres as SIGINT, a fast shutdown: open
# transactions are rolled back, clients disconnected and a checkpoint written, in about a second.
# postgres takes SIGTERM itself for a smart shutdown, which waits for every client to disconnect —
# the components' connection pools never do, so the kubelet's SIGKILL would end it after the grace
# period, and the next start would recover from the WAL.
set -eu
for variable in IOT_DATABASE_PASSWORD IOT_DATABASE_CORE_PASSWORD IOT_DATABASE_PROCESSING_PASSWORD; do
  eval "value=\${$variable:-}"
  if [ -z "$value" ]; then echo "$variable (from Secret iot-credentials) is not set" >&2; exit 1; fi
done
bin=$(echo /usr/lib/postgresql/*/bin)
export PGDATA=/var/lib/iot/pgdata
schema=/usr/local/share/iot/schema.sql
umask 077
echo "{\"level\":\"info\",\"component\":\"database\",\"msg\":\"starting\",\"version\":\"${IOT_SERVICE_VERSION:-}\"}"
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
psql() { PGOPTIONS='-c client_min_messages=warning' "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h /tmp -U iot -d iot "$@"; }
psql -f "$schema"
psql <<'SQL'
\getenv superuser_password IOT_DATABASE_PASSWORD
\getenv core_password IOT_DATABASE_CORE_PASSWORD
\getenv processing_password IOT_DATABASE_PROCESSING_PASSWORD
ALTER ROLE iot PASSWORD :'superuser_password';
SELECT NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'iot_core') AS make_core,
       NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'iot_processing') AS make_processing \gset
\if :make_core
CREATE ROLE iot_core;
\endif
\if :make_processing
CREATE ROLE iot_processing;
\endif
ALTER ROLE iot_core WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOINHERIT PASSWORD :'core_password';
ALTER ROLE iot_processing WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOINHERIT PASSWORD :'processing_password';
REVOKE ALL ON DATABASE iot FROM PUBLIC;
GRANT CONNECT ON DATABASE iot TO iot_core, iot_processing;
REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO iot_core, iot_processing;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM PUBLIC, iot_core, iot_processing;
GRANT SELECT, INSERT, UPDATE, DELETE ON devices TO iot_core;
GRANT SELECT ON telemetry TO iot_core;
GRANT SELECT, INSERT, DELETE ON telemetry, dead_letters TO iot_processing;
SQL
kill -INT "$pid"
wait "$pid" || true
echo '{"level":"info","component":"database","msg":"schema and roles in place"}'

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
