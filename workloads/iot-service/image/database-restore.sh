#!/bin/sh
# The database pods' init container with spec.restore (the IoT operator's resources/restore.ts):
# the data directory /var/lib/iot/pgdata restored from a pgBackRest repository before PostgreSQL
# first starts in it. Every option comes from the environment the operator sets: PGBACKREST_* (the
# stanza restored; the source's repository host over TLS, with the client certificate of Secret
# restore-tls in IOT_RESTORE_TLS_DIR, or the S3 bucket with its keys; pg1-path the staging
# directory), IOT_RESTORE_FROM (the instance restored, for messages), IOT_RESTORE_TARGET
# (pgBackRest's time target, absent: to the end of the archive), POD_NAME and IOT_DATABASE_REPLICAS.
#
# - A data directory holding a database (PG_VERSION) is never restored over: nothing is done.
# - With three replicas only database-0 restores; the others copy the restored primary (Patroni).
# - Secret restore-tls says what to do: a client certificate (tls.key): restore through the
#   repository host; `bucket`: restore from the bucket, the endpoint's certificate checked against
#   its ca.crt when it has one (else the image's CAs); `restored` alone (the operator's mark of a
#   completed restore): nothing is done (a volume lost afterwards starts as any instance's does);
#   none of them: the container fails, so no empty database starts where a restore was asked for.
# - Otherwise: `pgbackrest restore` into the staging directory /var/lib/iot/pgdata.restoring (made
#   afresh: what an interrupted restore left there is removed), tried up to 3 times 10 s apart; then
#   PostgreSQL recovers there from the same archive (restore_command `pgbackrest archive-get`),
#   listening on no address, archiving off, so nothing reaches the stanza restored from meanwhile, no synchronous
#   standby waited for, until it is promoted (at the target, or at the end of the archive) onto a
#   timeline no history file of that archive names; its
#   recovery settings are reset (ALTER SYSTEM RESET ALL), a postgresql.conf written by Patroni gives
#   way to the one it had renamed (postgresql.base.conf), PostgreSQL stops, the new timeline's
#   history file is marked ready for archiving (archiving was off when it was written: the database
#   archives it first at its start with spec.backup, so a later restore of that stanza follows the
#   new timeline and never picks its number again), and only then is the
#   staging directory renamed to the data directory. A restore cut short leaves no PG_VERSION in
#   the data directory: the next start restores afresh.
# The termination message (/dev/termination-log, what the operator reads into status.restore) is
# one line of JSON: {"restored":true,"backup":...,"recoveredTo":...} or {"restored":false,"reason":...};
# on failure the reason, with pgBackRest's or PostgreSQL's last words.
set -eu
bin=$(echo /usr/lib/postgresql/*/bin)
data=/var/lib/iot/pgdata
staging=${PGBACKREST_PG1_PATH:-/var/lib/iot/pgdata.restoring}
tls=${IOT_RESTORE_TLS_DIR:-/etc/iot/restore-tls}
from=${IOT_RESTORE_FROM:-?}
umask 077

log() { printf '{"level":"%s","component":"database","container":"restore","msg":%s}\n' "$1" "$(printf '%s' "$2" | node -e 'process.stdout.write(JSON.stringify(require("fs").readFileSync(0, "utf8")))')"; }
said() { printf '%s' "$1" >/dev/termination-log 2>/dev/null || true; }
fail() {
  log error "$1"
  said "$(printf '%s' "$1" | head -c 3000)"
  exit 1
}
skip() {
  log info "$2"
  said "{\"restored\":false,\"reason\":\"$1\"}"
  exit 0
}

[ -s "$data/PG_VERSION" ] && skip DataDirectoryExists "the data directory holds a database: nothing is restored over it"
if [ "${IOT_DATABASE_REPLICAS:-1}" -gt 1 ]; then
  case "${POD_NAME:-}" in *-0) ;; *) skip Standby "a standby copies the restored primary: nothing to restore here" ;; esac
fi
if [ -s "$tls/tls.key" ]; then
  source="the repository of IoTService $from (stanza $PGBACKREST_STANZA, ${PGBACKREST_REPO1_HOST:-})"
elif [ -e "$tls/bucket" ]; then
  source="the bucket ${PGBACKREST_REPO1_S3_BUCKET:-} (stanza $PGBACKREST_STANZA at ${PGBACKREST_REPO1_PATH:-})"
  if [ -s "$tls/ca.crt" ]; then export PGBACKREST_REPO1_STORAGE_CA_FILE="$tls/ca.crt"; fi
else
  [ -e "$tls/restored" ] && skip RestoreCompleted "the restore was completed before (Secret restore-tls holds its mark): nothing to restore"
  fail "Secret restore-tls holds neither a client certificate for the repository of IoTService $from nor the mark of a restore from the bucket: the operator writes it before the database starts; an empty database is not started in place of the restore"
fi

target=${IOT_RESTORE_TARGET:-}
if [ -n "$target" ]; then point="to $target"; else point='to the end of its archive'; fi
log info "restoring from $source, $point"
tries=0
while :; do
  rm -rf "$staging"
  mkdir -m 0700 "$staging"
  status=0
  if [ -n "$target" ]; then
    output=$(pgbackrest restore --type=time "--target=$target" --target-action=promote 2>&1) || status=$?
  else
    output=$(pgbackrest restore --type=default 2>&1) || status=$?
  fi
  printf '%s\n' "$output"
  [ "$status" -eq 0 ] && break
  tries=$((tries + 1))
  if [ "$tries" -ge 3 ]; then
    rm -rf "$staging"
    fail "pgbackrest restore from $source failed: $(printf '%s' "$output" | grep -E 'ERROR|WARN' | tail -n 3 | tr '\n' ' ')"
  fi
  log warn "pgbackrest restore failed (exit $status); trying again in 10 s"
  sleep 10
done
backup=$(printf '%s' "$output" | sed -n 's/.*restore backup set \([^ ,]*\).*/\1/p' | head -n 1)

# Recovery from the same archive, reachable over the local socket alone.
printf 'local all all trust\n' >/tmp/restore-hba.conf
: >/tmp/restore-ident.conf
postgres_log=/tmp/restore-postgres.log
"$bin/postgres" -D "$staging" -c listen_addresses='' -c unix_socket_directories=/tmp -c log_destination=stderr -c logging_collector=off \
  -c hba_file=/tmp/restore-hba.conf -c ident_file=/tmp/restore-ident.conf -c archive_mode=off -c synchronous_standby_names='' \
  -c primary_conninfo='' -c hot_standby=on -c "restore_command=pgbackrest archive-get %f \"%p\"" >"$postgres_log" 2>&1 &
pid=$!
psql() { "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h /tmp -U iot -d postgres "$@"; }
until [ "$(psql -tAc 'SELECT pg_is_in_recovery()' 2>/dev/null || true)" = f ]; do
  if ! kill -0 "$pid" 2>/dev/null; then
    cat "$postgres_log"
    rm -rf "$staging"
    fail "PostgreSQL stopped while recovering from the archive of $source: $(grep -E 'FATAL|PANIC' "$postgres_log" | grep -v 'accepting connections' | tail -n 2 | tr '\n' ' ')"
  fi
  sleep 1
done
recovered=$(psql -tAc "SELECT coalesce(to_char(pg_last_xact_replay_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), '')")
psql -c 'ALTER SYSTEM RESET ALL'
kill -INT "$pid"
wait "$pid" || true
cat "$postgres_log"
# A source of three replicas: its postgresql.conf is Patroni's (synchronous standbys, its files'
# paths); the one initdb wrote is what Patroni renamed to postgresql.base.conf.
if [ -f "$staging/postgresql.base.conf" ] && grep -q 'Patroni' "$staging/postgresql.conf" 2>/dev/null; then
  mv "$staging/postgresql.base.conf" "$staging/postgresql.conf"
fi
rm -f "$staging/standby.signal" "$staging/recovery.signal"
for history in "$staging"/pg_wal/*.history; do
  [ -e "$history" ] || continue
  name=${history##*/}
  [ -e "$staging/pg_wal/archive_status/$name.done" ] || : >"$staging/pg_wal/archive_status/$name.ready"
done
rm -rf "$data"
mv "$staging" "$data"
log info "restored from $source: backup ${backup:-?}, recovered to ${recovered:-the backup's end}"
said "{\"restored\":true,\"backup\":\"$backup\",\"recoveredTo\":\"$recovered\"}"
