#!/bin/sh
# The database image's schema and roles, applied to the server of this pod over its local socket
# (/tmp) as the superuser `iot` (trusted there alone): by the entry script at every start of a
# single database (image/database.sh, before any network client is admitted), and under Patroni
# on the primary only, once it is bootstrapped and at every start or promotion of a primary.
# - database `iot`, made when missing (Patroni's bootstrap makes only the cluster's own);
# - schema.sql (/usr/local/share/iot/schema.sql, the one definition of the tables: IF NOT EXISTS,
#   so a database made by an earlier version, whose components created the tables themselves,
#   keeps them and its rows);
# - the roles, made or brought to their rights and passwords (from iot-credentials):
#     iot             superuser: IOT_DATABASE_PASSWORD (usable over the local socket alone)
#     iot_core        IOT_DATABASE_CORE_PASSWORD: the device registry (devices: read, add, change,
#                     delete), reading telemetry and connection states, and applications' credentials
#                     (read, add, delete)
#     iot_processing  IOT_DATABASE_PROCESSING_PASSWORD: adding telemetry and dead letters, and
#                     reading and deleting them for retention; keeping devices' connection states
#     iot_replication IOT_DATABASE_REPLICATION_PASSWORD, only when it is set (three replicas under
#                     Patroni): the standbys' streaming replication and pg_rewind, nothing else
#   none of which but `iot` may create anything (no DDL: no CREATE on the database or schema
#   public, no temporary tables) or log in as anything but itself; the components' rights on the
#   tables are set exactly (revoked, then granted), so a right given by hand does not outlive a
#   restart, and the Secret is what counts: a rotated password takes effect at the next start.
# Patroni calls it with arguments (a connection string after bootstrap; action, role and scope as
# a callback): as a callback it does its work only when the role is a primary's.
set -eu
case "${2:-primary}" in master | primary) ;; *) exit 0 ;; esac
for variable in IOT_DATABASE_PASSWORD IOT_DATABASE_CORE_PASSWORD IOT_DATABASE_PROCESSING_PASSWORD; do
  eval "value=\${$variable:-}"
  if [ -z "$value" ]; then echo "$variable (from Secret iot-credentials) is not set" >&2; exit 1; fi
done
bin=$(echo /usr/lib/postgresql/*/bin)
psql() { PGOPTIONS='-c client_min_messages=warning' "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h /tmp -U iot "$@"; }
# Patroni's bootstrap makes only the cluster's own databases.
if [ -z "$(psql -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'iot'")" ]; then psql -d postgres -c 'CREATE DATABASE iot'; fi
psql -d iot -f /usr/local/share/iot/schema.sql
psql -d iot -v replication="${IOT_DATABASE_REPLICATION_PASSWORD:+yes}" <<'SQL'
\getenv superuser_password IOT_DATABASE_PASSWORD
\getenv core_password IOT_DATABASE_CORE_PASSWORD
\getenv processing_password IOT_DATABASE_PROCESSING_PASSWORD
ALTER ROLE iot PASSWORD :'superuser_password';
SELECT NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'iot_core') AS make_core,
       NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'iot_processing') AS make_processing,
       :'replication' = 'yes' AS replicated,
       NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'iot_replication') AS make_replication \gset
\if :make_core
CREATE ROLE iot_core;
\endif
\if :make_processing
CREATE ROLE iot_processing;
\endif
ALTER ROLE iot_core WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOINHERIT PASSWORD :'core_password';
ALTER ROLE iot_processing WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOINHERIT PASSWORD :'processing_password';
\if :replicated
\getenv replication_password IOT_DATABASE_REPLICATION_PASSWORD
\if :make_replication
CREATE ROLE iot_replication;
\endif
ALTER ROLE iot_replication WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE REPLICATION NOBYPASSRLS NOINHERIT PASSWORD :'replication_password';
-- What pg_rewind reads of the primary it rewinds a former primary to.
GRANT EXECUTE ON FUNCTION pg_catalog.pg_ls_dir(text, boolean, boolean), pg_catalog.pg_stat_file(text, boolean),
  pg_catalog.pg_read_binary_file(text), pg_catalog.pg_read_binary_file(text, bigint, bigint, boolean) TO iot_replication;
\endif
REVOKE ALL ON DATABASE iot FROM PUBLIC;
GRANT CONNECT ON DATABASE iot TO iot_core, iot_processing;
REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO iot_core, iot_processing;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM PUBLIC, iot_core, iot_processing;
GRANT SELECT, INSERT, UPDATE, DELETE ON devices TO iot_core;
GRANT SELECT ON telemetry TO iot_core;
GRANT SELECT, INSERT, DELETE ON applications TO iot_core;
GRANT SELECT ON device_connections TO iot_core;
GRANT SELECT, INSERT, UPDATE ON device_connections TO iot_processing;
GRANT SELECT, INSERT, DELETE ON telemetry, dead_letters TO iot_processing;
SQL
echo '{"level":"info","component":"database","msg":"schema and roles in place"}'
