#!/usr/bin/env node
// The database image's entry point for the backup repository host (StatefulSet `backup`, one
// replica, the repository on its volume at /var/lib/iot). Every pgBackRest option comes from the
// environment the operator sets (PGBACKREST_*: stanza, repository path and retention, the
// database pods as pg1..pg3 hosts over TLS, this pod's TLS server and certificates).
//
// - `pgbackrest server` serves the repository to the database pods (their archive-push, over
//   mutual TLS); when it exits this process exits with it, and the kubelet restarts the pod.
// - The stanza is created (`stanza-create`, which does nothing when it exists and matches) once
//   the database answers, retried every RETRY_MS until then.
// - A full backup is taken when none is in the repository, or once IOT_BACKUP_INTERVAL_SECONDS
//   have passed since the last one ended (read back from the repository, so a restarted pod
//   neither repeats nor skips one); after each backup pgBackRest expires what the retention no
//   longer keeps. A failed backup is logged and tried again after RETRY_MS.
// - GET /info on IOT_BACKUP_STATUS_PORT answers `pgbackrest info --output=json` for the stanza
//   (200), or 503 with pgBackRest's error: what the operator reads status.backup from.
// Logs are JSON lines on stdout; SIGTERM stops the server and ends the process (a backup running
// then is abandoned, and pgBackRest's next backup starts afresh).
import { execFile, spawn } from 'node:child_process';
import { createServer } from 'node:http';

const RETRY_MS = 60_000;
const CHECK_MS = 60_000;
const intervalMs = Number(process.env.IOT_BACKUP_INTERVAL_SECONDS) * 1000;
const statusPort = Number(process.env.IOT_BACKUP_STATUS_PORT);
if (!(intervalMs > 0) || !(statusPort > 0)) {
  console.error('IOT_BACKUP_INTERVAL_SECONDS and IOT_BACKUP_STATUS_PORT must be set (the operator sets them)');
  process.exit(1);
}

const log = (level, msg, fields = {}) => console.log(JSON.stringify({ level, component: 'backup', msg, ...fields }));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs pgbackrest with `args`; resolves with its exit code and output. */
const pgbackrest = (args) =>
  new Promise((resolve) => {
    execFile('pgbackrest', args, { maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ ok: !error, code: error ? (error.code ?? 1) : 0, stdout, stderr: stderr || (error && !error.code ? String(error) : '') });
    });
  });

const server = spawn('pgbackrest', ['server'], { stdio: 'inherit' });
server.on('exit', (code, signal) => {
  log('error', 'pgbackrest server exited', { code, signal });
  process.exit(code || 1);
});
process.on('SIGTERM', () => {
  server.removeAllListeners('exit');
  server.kill('SIGTERM');
  process.exit(0);
});

createServer(async (request, response) => {
  if (request.method !== 'GET' || request.url !== '/info') {
    response.writeHead(404).end();
    return;
  }
  const info = await pgbackrest(['info', '--output=json']);
  response.writeHead(info.ok ? 200 : 503, { 'content-type': info.ok ? 'application/json' : 'text/plain' }).end(info.ok ? info.stdout : info.stderr);
}).listen(statusPort);

/** When (ms since the epoch) the stanza's last backup ended; undefined when it has none. */
async function lastBackupEnd() {
  const info = await pgbackrest(['info', '--output=json']);
  if (!info.ok) throw new Error(`pgbackrest info failed: ${info.stderr.trim()}`);
  const stops = JSON.parse(info.stdout).flatMap((stanza) => stanza.backup ?? []).map((backup) => backup.timestamp.stop * 1000);
  return stops.length > 0 ? Math.max(...stops) : undefined;
}

log('info', 'starting', { version: process.env.IOT_SERVICE_VERSION ?? '', stanza: process.env.PGBACKREST_STANZA });
for (;;) {
  const created = await pgbackrest(['stanza-create']);
  if (created.ok) break;
  log('warn', 'stanza-create failed; trying again', { code: created.code, error: created.stderr.trim() });
  await sleep(RETRY_MS);
}
log('info', 'stanza ready');
for (;;) {
  let due;
  try {
    const end = await lastBackupEnd();
    due = end === undefined ? 0 : end + intervalMs - Date.now();
  } catch (error) {
    log('warn', String(error.message));
    await sleep(RETRY_MS);
    continue;
  }
  if (due > 0) {
    await sleep(Math.min(due, CHECK_MS));
    continue;
  }
  log('info', 'full backup starting');
  const backup = await pgbackrest(['backup', '--type=full']);
  if (backup.ok) {
    log('info', 'full backup done');
  } else {
    log('error', 'full backup failed; trying again', { code: backup.code, error: backup.stderr.trim() });
    await sleep(RETRY_MS);
  }
}
