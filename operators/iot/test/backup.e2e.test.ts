/**
 * Backups on the real node with the reference images: one instance (one database replica, no
 * gateway, core or processing) with `spec.backup` on a 1Gi volume claim.
 *   - the repository host takes a full backup by itself once the repository is ready, and
 *     status.backup reports it (time, type, label) as pgBackRest's own `info` in the repository
 *     pod does;
 *   - WAL is archived continuously: rows written after that backup are in a WAL segment that
 *     reaches the repository (status.backup.lastArchivedWal, and `pgbackrest info` in the
 *     repository pod) within archive_timeout and a status round, without anyone switching WAL
 *     segments by hand (how long it took is printed);
 *   - the operator's /metrics carries the schedule in seconds, the backup's end and the time the
 *     newest segment was archived — status.backup's times, that segment's after the rows were
 *     written (this machine is the real node: one clock) and not in the future.
 * Reported as not run where the cluster has no real node.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Manager } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { localTestEnv, realNode } from '@iot-operator/local-cluster';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import { execInPod, iotService, realNodeSpec, startReferenceLandscape, stopServedLandscape, waitForPhase } from './e2e-support.ts';

const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const VERSION = '2.4.1';
const NAME = 'backups';

let landscape = '';
let namespace = '';
let mgr: Manager | undefined;

interface BackupStatus {
  lastBackup?: { time: string; type: string; label: string };
  lastArchivedWal?: string;
  lastArchivedWalTime?: string;
  backups?: number;
}

/** The operator's /metrics sample of `metric` for this instance; undefined when it has none. */
async function metric(name: string): Promise<number | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${mgr!.httpPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{namespace="${landscape}",name="${NAME}"} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

async function backupStatus(): Promise<BackupStatus | undefined> {
  const iot = (await env.client.get(IoTServiceV1alpha1Type, NAME, landscape)) as { status?: { backup?: BackupStatus } };
  return iot.status?.backup;
}

/** SQL as the superuser over the database pod's local socket. */
async function sql(query: string): Promise<string> {
  return (await execInPod(env, namespace, 'database-0', ['psql', '-h', '/tmp', '-U', 'iot', '-d', 'postgres', '-tAc', query])).trim();
}

/** pgBackRest's own view of the stanza, asked in the repository pod. */
async function repositoryInfo(): Promise<{ backup: Array<{ label: string; type: string }>; archive: Array<{ max: string | null }> }> {
  const [stanza] = JSON.parse(await execInPod(env, namespace, 'backup-0', ['pgbackrest', 'info', '--output=json'], 60_000)) as Array<{ name: string; backup: Array<{ label: string; type: string }>; archive: Array<{ max: string | null }> }>;
  assert.equal(stanza?.name, namespace, 'the stanza is the instance namespace');
  return stanza;
}

describe('backups: a full backup and continuous WAL archiving', { skip }, () => {
  before(async () => {
    ({ landscape, mgr } = await startReferenceLandscape(env, VERSION));
    namespace = `${landscape}-${NAME}`;
    const spec = realNodeSpec({ gateway: { replicas: 0 }, core: { replicas: 0 }, processing: { replicas: 0 } });
    await env.client.create(IoTServiceV1alpha1Type, iotService(NAME, landscape, { ...spec, backup: { schedule: '1d', retention: 2, target: { volumeClaim: { size: '1Gi' } } } }));
    await waitForPhase(env, landscape, NAME, 'Available', 420_000);
  });

  after(() => stopServedLandscape({ env, landscape, mgr }));

  it('takes a full backup once the repository is ready and reports it in status.backup', async () => {
    const started = Date.now();
    const status = await waitFor('status.backup to report a full backup', async () => {
      const backup = await backupStatus();
      return { done: backup?.lastBackup?.type === 'full', value: backup!, seen: backup };
    }, { timeoutMs: 300_000, intervalMs: 2000 });
    console.log(`backup: the first full backup reported ${((Date.now() - started) / 1000).toFixed(0)} s after the instance was Available: ${JSON.stringify(status)}`);
    const info = await repositoryInfo();
    assert.deepEqual(info.backup.map((b) => [b.label, b.type]), [[status.lastBackup!.label, 'full']], "status.backup names the repository's backup");
    assert.equal(status.backups, 1);
    assert.equal(await metric('iotservice_backup_schedule_seconds'), 86_400, '1d');
    const end = await waitFor("the backup's end on /metrics", async () => {
      const reported = await metric('iotservice_backup_last_success_timestamp_seconds');
      return { done: reported === Date.parse(status.lastBackup!.time) / 1000, value: reported!, seen: reported };
    }, { timeoutMs: 30_000, intervalMs: 1000 });
    assert.ok(end > started / 1000 - 600 && end <= Date.now() / 1000, `the backup's end ${end} is of this run`);
  });

  it('archives rows written after the backup within archive_timeout and a status round, by itself', async () => {
    await sql('CREATE TABLE IF NOT EXISTS backup_probe (id serial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())');
    const writing = Date.now();
    await sql('INSERT INTO backup_probe DEFAULT VALUES');
    const written = Date.now();
    const segment = await sql('SELECT pg_walfile_name(pg_current_wal_insert_lsn())');
    assert.match(segment, /^[0-9A-F]{24}$/);
    // Segment names of one timeline sort as the WAL does.
    const status = await waitFor(`status.backup.lastArchivedWal to reach ${segment}`, async () => {
      const backup = await backupStatus();
      return { done: (backup?.lastArchivedWal ?? '') >= segment, value: backup!, seen: backup?.lastArchivedWal };
    }, { timeoutMs: 180_000, intervalMs: 2000 });
    console.log(`backup: the segment of rows written after the backup (${segment}) archived and reported within ${((Date.now() - written) / 1000).toFixed(0)} s; last archived ${status.lastArchivedWal}`);
    const info = await repositoryInfo();
    assert.ok((info.archive.at(-1)?.max ?? '') >= segment, `the repository's archive holds ${segment}: its max is ${info.archive.at(-1)?.max}`);
    // The newest segment as the status read it: archived after the rows were written, not in the future.
    const archived = await waitFor('the archive time on /metrics', async () => {
      const [now, reported] = [await backupStatus(), await metric('iotservice_backup_last_archived_wal_timestamp_seconds')];
      return { done: reported !== undefined && reported === Date.parse(now?.lastArchivedWalTime ?? '') / 1000, value: reported!, seen: { status: now, reported } };
    }, { timeoutMs: 30_000, intervalMs: 1000 });
    console.log(`backup: newest segment archived ${(archived - writing / 1000).toFixed(1)} s after the rows were written`);
    assert.ok(archived >= writing / 1000 && archived <= Date.now() / 1000, `archived at ${archived}, rows written from ${writing / 1000}, now ${Date.now() / 1000}`);
  });
});
