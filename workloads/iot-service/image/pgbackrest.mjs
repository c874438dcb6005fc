#!/usr/bin/env node
// The database image's pgBackRest entry point, in one of two modes:
//   iot-pgbackrest server      the database pod's second container: pgBackRest's TLS server, which
//                              the repository host reaches the data directory through;
//   iot-pgbackrest repository  the backup repository host (StatefulSet `backup`, the repository
//                              on its volume or in an S3 bucket): the same server, for the database pods' archive-push,
//                              and the backup schedule and /info below.
// Every pgBackRest option comes from the environment the operator sets (PGBACKREST_*: stanza,
// repository path and retention, the database pods as pg hosts, the TLS server and certificates).
//
// Both modes:
// - `pgbackrest server` runs as a child; when it exits this process exits with it, and the kubelet
//   restarts the container.
// - The server's certificate file (PGBACKREST_TLS_SERVER_CERT_FILE, from a Secret the kubelet
//   keeps up to date) is read every CHECK_MS; when it changed the server is sent SIGHUP, on which
//   pgBackRest reloads its configuration and certificates: a renewed certificate is served
//   without a restart.
// - SIGTERM stops the server and ends the process (a backup running then is abandoned; the next
//   one starts afresh).
// Repository mode besides:
// - The stanza is created (`stanza-create`, which changes nothing when it exists and matches) once
//   the database answers, tried again every RETRY_MS until then.
// - A full backup is taken when the stanza has none, or once IOT_BACKUP_INTERVAL_SECONDS have
//   passed since the last one ended (read back from the repository, so a restarted pod neither
//   repeats nor skips one); pgBackRest then expires what the retention no longer keeps. A failed
//   backup is logged and tried again after RETRY_MS. With IOT_BACKUP_OWN_SINCE (an RFC 3339 time:
//   when an instance that restored its own stanza from the bucket was made) backups that ended
//   before it are the earlier instance's and count as none: the first full backup of the restored
//   database is taken as soon as the stanza is ready.
// - GET /info on IOT_BACKUP_STATUS_PORT answers `pgbackrest info --output=json` for the stanza
//   (200), or 503 with pgBackRest's error: what the operator reads status.backup from. pgBackRest
//   names the archive's newest WAL segment (`max`) but not when it came: each archive entry with a
//   `max` whose file is in the repository (on the volume, or in the S3 bucket) gains `iotMaxTime`,
//   the Unix time (seconds) that file was written — when the segment was archived, by the
//   repository's own record (it survives restarts
//   of this pod and of the operator; a segment pushed again with the same content is not
//   rewritten). Without the file (expired meanwhile, unreadable) the entry is left as it is.
// Logs are JSON lines on stdout (pgBackRest's own lines as it writes them).
import { execFile, spawn } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import path from 'node:path';

const RETRY_MS = 60_000;
const CHECK_MS = 60_000;
const mode = process.argv[2];
if (mode !== 'server' && mode !== 'repository') {
  console.error('usage: iot-pgbackrest server|repository');
  process.exit(2);
}

const log = (level, msg, fields = {}) => console.log(JSON.stringify({ level, component: 'pgbackrest', mode, msg, ...fields }));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs pgbackrest with `args`; resolves with whether it succeeded and what it wrote. */
const pgbackrest = (args) =>
  new Promise((resolve) => {
    execFile('pgbackrest', args, { maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ ok: !error, code: error ? (error.code ?? 1) : 0, stdout, error: `${stderr}${stdout}`.trim() || String(error ?? '') });
    });
  });

log('info', 'starting', { version: process.env.IOT_SERVICE_VERSION ?? '', stanza: process.env.PGBACKREST_STANZA });
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

const certificateFile = process.env.PGBACKREST_TLS_SERVER_CERT_FILE;
const certificate = () => {
  try {
    return readFileSync(certificateFile, 'utf8');
  } catch {
    return undefined;
  }
};
let served = certificate();
setInterval(() => {
  const now = certificate();
  if (now === undefined || now === served) return;
  served = now;
  log('info', 'certificate changed; reloading the server');
  server.kill('SIGHUP');
}, CHECK_MS).unref();

if (mode === 'repository') {
  const intervalMs = Number(process.env.IOT_BACKUP_INTERVAL_SECONDS) * 1000;
  const statusPort = Number(process.env.IOT_BACKUP_STATUS_PORT);
  if (!(intervalMs > 0) || !(statusPort > 0)) {
    log('error', 'IOT_BACKUP_INTERVAL_SECONDS and IOT_BACKUP_STATUS_PORT must be set (the operator sets them)');
    process.exit(1);
  }

  /**
   * Unix seconds the file of WAL `segment` of archive `archiveId` was written to the repository
   * (`<repo>/archive/<stanza>/<archive id>/<first 16 hex digits>/<segment>-<checksum>[.<compression>]`):
   * its modification time on the volume, or in an S3 bucket (PGBACKREST_REPO1_TYPE=s3) the
   * object's as `pgbackrest repo-ls` lists it (whole seconds); undefined when it is not there.
   */
  const archivedAt = async (stanza, archiveId, segment) => {
    const relative = path.join('archive', stanza, archiveId, segment.slice(0, 16));
    if (process.env.PGBACKREST_REPO1_TYPE === 's3') {
      const listed = await pgbackrest(['repo-ls', '--output=json', relative]);
      if (!listed.ok) return undefined;
      try {
        const entry = Object.entries(JSON.parse(listed.stdout)).find(([name]) => name.startsWith(`${segment}-`));
        return typeof entry?.[1]?.time === 'number' ? entry[1].time : undefined;
      } catch {
        return undefined;
      }
    }
    const dir = path.join(process.env.PGBACKREST_REPO1_PATH ?? '', relative);
    try {
      const file = readdirSync(dir).find((name) => name.startsWith(`${segment}-`));
      return file === undefined ? undefined : statSync(path.join(dir, file)).mtimeMs / 1000;
    } catch {
      return undefined;
    }
  };

  /** pgBackRest's info JSON with `iotMaxTime` on each archive entry whose newest segment is found. */
  const withArchiveTimes = async (json) => {
    let stanzas;
    try {
      stanzas = JSON.parse(json);
    } catch {
      return json;
    }
    if (!Array.isArray(stanzas)) return json;
    for (const stanza of stanzas) {
      for (const archive of stanza?.archive ?? []) {
        if (typeof stanza.name !== 'string' || typeof archive?.id !== 'string' || !/^[0-9A-F]{24}$/.test(archive.max ?? '')) continue;
        const time = await archivedAt(stanza.name, archive.id, archive.max);
        if (time !== undefined) archive.iotMaxTime = time;
      }
    }
    return JSON.stringify(stanzas);
  };

  createServer(async (request, response) => {
    if (request.method !== 'GET' || request.url !== '/info') {
      response.writeHead(404).end();
      return;
    }
    const info = await pgbackrest(['info', '--output=json']);
    response.writeHead(info.ok ? 200 : 503, { 'content-type': info.ok ? 'application/json' : 'text/plain' }).end(info.ok ? await withArchiveTimes(info.stdout) : info.error);
  }).listen(statusPort);

  const ownSince = Date.parse(process.env.IOT_BACKUP_OWN_SINCE ?? '') || 0;
  /** When (ms since the epoch) the stanza's last backup of this instance ended; undefined when it has none. */
  const lastBackupEnd = async () => {
    const info = await pgbackrest(['info', '--output=json']);
    if (!info.ok) throw new Error(`pgbackrest info failed: ${info.error}`);
    const stops = JSON.parse(info.stdout).flatMap((stanza) => stanza.backup ?? []).map((backup) => backup.timestamp.stop * 1000).filter((stop) => stop >= ownSince);
    return stops.length > 0 ? Math.max(...stops) : undefined;
  };

  for (;;) {
    const created = await pgbackrest(['stanza-create']);
    if (created.ok) break;
    log('warn', 'stanza-create failed; trying again', { code: created.code, error: created.error });
    await sleep(RETRY_MS);
  }
  log('info', 'stanza ready');
  for (;;) {
    let due;
    try {
      const end = await lastBackupEnd();
      due = end === undefined ? 0 : end + intervalMs - Date.now();
    } catch (error) {
      log('warn', error.message);
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
      log('error', 'full backup failed; trying again', { code: backup.code, error: backup.error });
      await sleep(RETRY_MS);
    }
  }
}
