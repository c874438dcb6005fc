/**
 * Backups and restores on the real node with the reference images: one instance (one replica of
 * each component, devices over HTTP) with `spec.backup` on a 1Gi volume claim.
 *   - the repository host takes a full backup by itself once the repository is ready, and
 *     status.backup reports it (time, type, label) as pgBackRest's own `info` in the repository
 *     pod does;
 *   - WAL is archived continuously: rows written after that backup are in a WAL segment that
 *     reaches the repository (status.backup.lastArchivedWal, and `pgbackrest info` in the
 *     repository pod) within archive_timeout and a status round, without anyone switching WAL
 *     segments by hand (how long it took is printed);
 *   - restore (spec.restore): a device registered and its telemetry stored through the instance's
 *     gateway and core, a time noted, the telemetry table emptied by hand (psql in the database
 *     pod) and the WAL holding that archived; then two new IoTServices restore from it at once:
 *     one to the noted time, whose core shows the device and every message again and which takes
 *     the device's new telemetry with its old password, and one to the end of the archive, with
 *     backups of its own in an S3 bucket, whose core shows the device and the emptied table, whose
 *     own repository takes its first full backup under its own stanza while the source's
 *     repository still holds the source's stanza alone. status.restore names the backup restored
 *     and the point reached.
 *   - backups to S3 (spec.backup.target.s3): a real S3 server (SeaweedFS, built from Go modules,
 *     cluster/src/s3.ts) in the landscape namespace on the real node, over HTTPS with a private CA
 *     given in the credentials Secret's ca.crt; the instance backing up there (restored-end) has
 *     no repository volume, status.backup reports its full backup and when its newest WAL segment
 *     reached the bucket. Both targets at once, or a changed target, are refused; a credentials
 *     Secret that does not exist makes the instance Failed with a reason naming it, and so does
 *     spec.restore.fromBucket without an S3 target (InvalidSpec).
 *   - disaster recovery from the bucket (spec.restore.fromBucket): a stanza the bucket does not
 *     hold is Failed (RestoreFailed) with pgBackRest's error; restored-end deleted (its
 *     namespace gone, the bucket keeps its stanza), then made again under the same name with the
 *     same target and `restore: {from: restored-end, fromBucket: true}`: it restores its old stanza
 *     straight from the bucket, with exactly the rows it had — a message stored after its backup
 *     included (it came through the WAL archived to the bucket) —, archives its new timeline's
 *     history file there, and takes a full backup of its own into that same stanza at once, which
 *     then holds the earlier instance's backup and the new one.
 *   - the operator's /metrics carries the schedule in seconds, the backup's end and the time the
 *     newest segment was archived — status.backup's times, that segment's after the rows were
 *     written (this machine is the real node: one clock) and not in the future.
 * Reported as not run where the cluster has no real node. The file's duration is printed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Kinds, type Manager } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { deployS3Server, localTestEnv, realNode, type S3Server } from '@iot-operator/local-cluster';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';
import { HttpStatusError, postHttp, readAllTelemetry, registerDevice, type DeviceCredentials, type ServiceAddresses } from '@iot-operator/iot-service/simulator';
import { deviceAddresses, execInPod, getIoT, getOrUndefined, installIoTCrd, iotService, realNodeSpec, startReferenceLandscape, stopServedLandscape, waitForPhase } from './e2e-support.ts';

const env: TestEnv = await localTestEnv();
const node = await realNode(env);
const skip = node.available ? false : node.reason;
const VERSION = '2.4.1';
const NAME = 'backups';
const BACKUP = { schedule: '1d', retention: 2, target: { volumeClaim: { size: '1Gi' } } };
/** Every component once, devices over HTTP alone, the images built for this file. */
const SPEC = { version: VERSION, ...realNodeSpec({ gateway: { protocols: ['http'] } }) };
const fileStarted = Date.now();

let landscape = '';
let namespace = '';
let mgr: Manager | undefined;
let s3: S3Server | undefined;
const S3_CREDENTIALS = 's3-credentials';

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

async function backupStatus(name = NAME): Promise<BackupStatus | undefined> {
  const iot = (await env.client.get(IoTServiceV1alpha1Type, name, landscape)) as { status?: { backup?: BackupStatus } };
  return iot.status?.backup;
}

/** SQL as the superuser over the database pod's local socket (of the instance namespace `ns`). */
async function sql(query: string, database = 'postgres', ns = namespace): Promise<string> {
  return (await execInPod(env, ns, 'database-0', ['psql', '-h', '/tmp', '-U', 'iot', '-d', database, '-v', 'ON_ERROR_STOP=1', '-tAc', query])).trim();
}

/** What the restore test leaves for the S3 one: the device registered in the source, restored-end's own backup. */
let restoredEnd: { device: DeviceCredentials; lastBackup: string } | undefined;

type StanzaInfo = { name: string; backup: Array<{ label: string; type: string }>; archive: Array<{ id: string; max: string | null }> };

/** pgBackRest's own view of the repository of `ns`: every stanza it holds. */
async function repositoryStanzas(ns = namespace): Promise<StanzaInfo[]> {
  return JSON.parse(await execInPod(env, ns, 'backup-0', ['pgbackrest', 'info', '--output=json'], 60_000)) as StanzaInfo[];
}

/** pgBackRest's own view of the stanza, asked in the repository pod. */
async function repositoryInfo(): Promise<StanzaInfo> {
  const [stanza] = await repositoryStanzas();
  assert.equal(stanza?.name, namespace, 'the stanza is the instance namespace');
  return stanza;
}

describe('backups: a full backup and continuous WAL archiving', { skip }, () => {
  before(async () => {
    ({ landscape, mgr } = await startReferenceLandscape(env, VERSION));
    namespace = `${landscape}-${NAME}`;
    await env.client.create(IoTServiceV1alpha1Type, iotService(NAME, landscape, { ...SPEC, backup: BACKUP }));
    // The S3 server starts while the instance does.
    const started = Date.now();
    s3 = await deployS3Server(env, landscape, 'iot-backups');
    console.log(`backup: the S3 server ready ${((Date.now() - started) / 1000).toFixed(0)} s after the instance was created: ${s3.endpoint}`);
    await env.client.create(Kinds.Secret, {
      metadata: { name: S3_CREDENTIALS, namespace: landscape },
      stringData: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey, 'ca.crt': s3.caPem },
    });
    await waitForPhase(env, landscape, NAME, 'Available', 420_000);
  });

  after(async () => {
    await stopServedLandscape({ env, landscape, mgr });
    console.log(`backup: backup.e2e took ${((Date.now() - fileStarted) / 1000).toFixed(0)} s`);
  });

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

  it('restores into new IoTServices: to a time before a table was emptied by hand, with every row, and to the end of the archive, without them', async () => {
    const source = await deviceAddresses(env, namespace);
    const device = await registerDevice(source, `restored-${Date.now()}`);
    const sent = 5;
    for (let i = 0; i < sent; i++) await postUntilAccepted(source, device, { reading: i }, `m-${i}`);
    await waitFor(`${sent} messages of ${device.id} stored`, async () => {
      const stored = (await readAllTelemetry(source, device.id)).length;
      return { done: stored === sent, value: undefined, seen: stored };
    }, { timeoutMs: 120_000, intervalMs: 1000 });
    // Commit times are the database's own: the target is taken from its clock, between the rows and the emptying.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const targetTime = new Date(await sql("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')")).toISOString();
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.equal(await sql('WITH gone AS (DELETE FROM telemetry RETURNING 1) SELECT count(*) FROM gone', 'iot'), String(sent), 'the telemetry table emptied by hand');
    assert.deepEqual(await readAllTelemetry(source, device.id), [], "the source's core shows the table empty");
    // The segment holding the emptying, closed at once and archived (archive_timeout would close it within a minute).
    const segment = await sql('SELECT pg_walfile_name(pg_current_wal_insert_lsn())');
    await sql('SELECT pg_switch_wal()');
    await waitFor(`WAL segment ${segment} archived`, async () => {
      const max = (await repositoryInfo()).archive.at(-1)?.max ?? '';
      return { done: max >= segment, value: undefined, seen: max };
    }, { timeoutMs: 180_000, intervalMs: 2000 });
    const { lastBackup } = (await backupStatus())!;

    // The CRD is the cluster's: a test process of another tree sharing the cluster may have applied one without spec.restore meanwhile.
    await installIoTCrd(env);
    const started = Date.now();
    await env.client.create(IoTServiceV1alpha1Type, iotService('restored-pit', landscape, { ...SPEC, restore: { from: NAME, targetTime } } as never));
    const toS3 = { schedule: '1d', retention: 2, target: { s3: { endpoint: s3!.endpoint, bucket: s3!.bucket, credentialsSecret: S3_CREDENTIALS } } };
    await env.client.create(IoTServiceV1alpha1Type, iotService('restored-end', landscape, { ...SPEC, backup: toS3, restore: { from: NAME } } as never));
    for (const name of ['restored-pit', 'restored-end']) {
      assert.equal((await getIoT(env, landscape, name))?.spec.restore?.from, NAME, `${name} was stored with spec.restore (a CRD without it prunes it)`);
    }
    await Promise.all(['restored-pit', 'restored-end'].map((name) => waitForPhase(env, landscape, name, 'Available', 480_000)));
    console.log(`backup: two instances restored from ${NAME} and Available ${((Date.now() - started) / 1000).toFixed(0)} s after their creation`);

    type Restored = { state: string; from: string; targetTime?: string; backup?: string; recoveredTo?: string; completedAt?: string };
    const restoreOf = async (name: string) => ((await getIoT(env, landscape, name))!.status as { restore?: Restored }).restore!;
    const pit = await waitFor('restored-pit to say it is restored', async () => {
      const restore = await restoreOf('restored-pit');
      return { done: restore?.state === 'Restored', value: restore, seen: restore };
    }, { timeoutMs: 60_000, intervalMs: 1000 });
    console.log(`backup: restored-pit ${JSON.stringify(pit)}`);
    assert.equal(pit.from, NAME);
    assert.equal(pit.targetTime, targetTime);
    assert.equal(pit.backup, lastBackup?.label, 'the backup restored is the source\'s');
    assert.ok(pit.recoveredTo && pit.recoveredTo <= targetTime, `recovered to ${pit.recoveredTo}, at most the target ${targetTime}`);
    // Fixed at creation: neither changed on a restored instance nor added to another (the CRD's rule, API version v1alpha1 too).
    const refused = (e: unknown) => /restore is set at creation only/.test(String(e));
    await assert.rejects(env.client.patch(IoTServiceV1alpha1Type, 'restored-pit', landscape, { spec: { restore: { targetTime: null } } }, 'merge'), refused);
    await assert.rejects(env.client.patch(IoTServiceV1alpha1Type, NAME, landscape, { spec: { restore: { from: 'restored-pit' } } }, 'merge'), refused);
    const end = await restoreOf('restored-end');
    console.log(`backup: restored-end ${JSON.stringify(end)}`);
    assert.equal(end.state, 'Restored');
    assert.equal(end.targetTime, undefined);

    const [atPit, atEnd] = [await deviceAddresses(env, `${landscape}-restored-pit`), await deviceAddresses(env, `${landscape}-restored-end`)];
    assert.notEqual(atPit.apiToken, source.apiToken, 'a restored instance has credentials of its own');
    const messages = async (at: ServiceAddresses) => (await readAllTelemetry(at, device.id)).map((r) => r.messageId).sort();
    assert.deepEqual(await messages(atPit), Array.from({ length: sent }, (_, i) => `m-${i}`), 'to the time before the emptying: every message is back');
    assert.deepEqual(await messages(atEnd), [], 'to the end of the archive: the table is empty, as the source left it');
    for (const at of [atPit, atEnd]) {
      await assert.rejects(registerDevice(at, device.id), (e: unknown) => e instanceof HttpStatusError && e.status === 409, 'the device is in the restored registry');
    }
    // The restored instance works as its own: the device's password still admits it, its telemetry is stored.
    await postUntilAccepted(atPit, device, { reading: 'after restore' }, 'm-after');
    await waitFor('the message sent after the restore stored', async () => {
      const stored = await messages(atPit);
      return { done: stored.includes('m-after'), value: undefined, seen: stored };
    }, { timeoutMs: 120_000, intervalMs: 1000 });

    // Backups of its own: its own repository and stanza; the source's repository holds the source's stanza alone.
    const own = await waitFor('restored-end to report its first full backup', async () => {
      const backup = await backupStatus('restored-end');
      return { done: backup?.lastBackup?.type === 'full', value: backup!, seen: backup };
    }, { timeoutMs: 300_000, intervalMs: 2000 });
    assert.deepEqual((await repositoryStanzas(`${landscape}-restored-end`)).map((s) => s.name), [`${landscape}-restored-end`]);
    assert.deepEqual((await repositoryStanzas()).map((s) => s.name), [namespace], "nothing of the restored instances reached the source's repository");
    assert.notEqual(own.lastBackup?.label, undefined);
    // Once restored, nothing of the source is left to the new instances: restore-tls holds no key.
    const secret = (await env.client.get(Kinds.Secret, 'restore-tls', `${landscape}-restored-pit`)) as { data?: Record<string, string> };
    assert.deepEqual(Object.keys(secret.data ?? {}), ['restored']);
    restoredEnd = { device, lastBackup: own.lastBackup!.label };
  });

  it('backs up to an S3 bucket without a repository volume, rows written after the backup reaching it as WAL; refuses what it cannot run', async () => {
    assert.ok(restoredEnd, 'restored-end backed up to S3 (the test before)');
    const ns = `${landscape}-restored-end`;
    // The target is one of the two, and stays where it was made (the CRD's rules, v1alpha1 too).
    const toS3 = { endpoint: s3!.endpoint, bucket: s3!.bucket, credentialsSecret: S3_CREDENTIALS };
    await assert.rejects(
      env.client.create(IoTServiceV1alpha1Type, iotService('both-targets', landscape, { ...SPEC, backup: { target: { volumeClaim: { size: '1Gi' }, s3: toS3 } } } as never)),
      (e: unknown) => /must set exactly one of volumeClaim and s3/.test(String(e)),
    );
    await assert.rejects(
      env.client.patch(IoTServiceV1alpha1Type, 'restored-end', landscape, { spec: { backup: { target: { s3: { ...toS3, bucket: 'elsewhere' } } } } }, 'merge'),
      (e: unknown) => /target cannot be changed after creation/.test(String(e)),
    );
    // A credentials Secret that is not there, or a restore from a bucket without an S3 target: Failed, saying why, before anything of the instance runs.
    await installIoTCrd(env);
    await env.client.create(IoTServiceV1alpha1Type, iotService('no-credentials', landscape, { ...SPEC, backup: { target: { s3: { ...toS3, credentialsSecret: 'missing' } } } } as never));
    await env.client.create(IoTServiceV1alpha1Type, iotService('no-bucket', landscape, { ...SPEC, backup: BACKUP, restore: { from: 'restored-end', fromBucket: true } } as never));
    const [failed, noBucket] = await Promise.all(['no-credentials', 'no-bucket'].map((name) => waitForPhase(env, landscape, name, 'Failed', 60_000)));
    assert.match(failed!.status?.reason ?? '', /^Secret missing in namespace \S+ \(spec\.backup\.target\.s3\.credentialsSecret\) is missing; create it with the keys accessKeyId and secretAccessKey/);
    assert.match(noBucket!.status?.reason ?? '', /spec\.restore\.fromBucket: needs spec\.backup\.target\.s3/);
    assert.equal(await getOrUndefined(env, Kinds.Namespace, `${landscape}-no-bucket`), undefined, 'nothing of it made');
    await Promise.all(['no-credentials', 'no-bucket'].map((name) => env.client.delete(IoTServiceV1alpha1Type, name, landscape)));
    const repository = (await env.client.get(Kinds.StatefulSet, 'backup', ns)) as { spec?: { volumeClaimTemplates?: unknown[] } };
    assert.equal(repository.spec?.volumeClaimTemplates, undefined, 'no repository volume: the repository is in the bucket');
    // A message stored after restored-end's full backup: a restore from the bucket (the next test) has it only through the WAL archived there.
    const at = await deviceAddresses(env, ns);
    await postUntilAccepted(at, restoredEnd.device, { reading: 'in s3' }, 'm-s3');
    await waitFor('the message sent to restored-end stored', async () => {
      const stored = (await readAllTelemetry(at, restoredEnd!.device.id)).map((r) => r.messageId);
      return { done: stored.includes('m-s3'), value: undefined, seen: stored };
    }, { timeoutMs: 120_000, intervalMs: 1000 });
    const segment = await sql('SELECT pg_walfile_name(pg_current_wal_insert_lsn())', 'postgres', ns);
    await sql('SELECT pg_switch_wal()', 'postgres', ns);
    const status = await waitFor(`restored-end's segment ${segment} in the bucket and status.backup`, async () => {
      const backup = await backupStatus('restored-end');
      return { done: (backup?.lastArchivedWal ?? '') >= segment && backup?.lastArchivedWalTime !== undefined, value: backup!, seen: backup };
    }, { timeoutMs: 180_000, intervalMs: 2000 });
    console.log(`backup: restored-end's repository in S3: ${JSON.stringify(status)}`);
  });

  it('recreates a deleted instance from its bucket under its own name (fromBucket), which then backs up into the same stanza', async () => {
    assert.ok(restoredEnd, 'restored-end backed up to S3 with a message stored after its backup (the tests before)');
    const ns = `${landscape}-restored-end`;
    const toS3 = { schedule: '1d', retention: 2, target: { s3: { endpoint: s3!.endpoint, bucket: s3!.bucket, credentialsSecret: S3_CREDENTIALS } } };
    // The disaster: the IoTService and its namespace gone; the bucket keeps its stanza.
    const deleting = Date.now();
    await env.client.delete(IoTServiceV1alpha1Type, 'restored-end', landscape);
    // Meanwhile, a stanza the bucket does not hold: the restore fails with pgBackRest's words.
    await installIoTCrd(env);
    await env.client.create(IoTServiceV1alpha1Type, iotService('no-stanza', landscape, { ...SPEC, backup: toS3, restore: { from: 'no-stanza', fromBucket: true } } as never));
    await waitFor(`IoTService restored-end and namespace ${ns} gone`, async () => {
      const [iot, namespaceLeft] = [await getIoT(env, landscape, 'restored-end'), await getOrUndefined(env, Kinds.Namespace, ns)];
      return { done: !iot && !namespaceLeft, value: undefined, seen: { iot: iot?.metadata.name, namespace: namespaceLeft?.metadata.name } };
    }, { timeoutMs: 240_000, intervalMs: 2000 });
    console.log(`backup: restored-end and its namespace gone ${((Date.now() - deleting) / 1000).toFixed(0)} s after its deletion`);
    const noStanza = await waitForPhase(env, landscape, 'no-stanza', 'Failed', 300_000);
    console.log(`backup: no-stanza ${noStanza.status?.reason}`);
    assert.match(noStanza.status?.reason ?? '', /^The restore of the database from stanza \S+-no-stanza of the bucket failed \(init container restore of pod database-0, tried again by the kubelet\): pgbackrest restore from the bucket \S+ \(stanza \S+-no-stanza at \/\S+-no-stanza\) failed: .*ERROR: \[\d+\]/);
    assert.equal((noStanza.status as { restore?: { state: string } }).restore?.state, 'Restoring');
    await env.client.delete(IoTServiceV1alpha1Type, 'no-stanza', landscape);

    const started = Date.now();
    await env.client.create(IoTServiceV1alpha1Type, iotService('restored-end', landscape, { ...SPEC, backup: toS3, restore: { from: 'restored-end', fromBucket: true } } as never));
    assert.equal((await getIoT(env, landscape, 'restored-end'))?.spec.restore?.fromBucket, true, 'stored with fromBucket (a CRD without it prunes it)');
    await waitForPhase(env, landscape, 'restored-end', 'Available', 480_000);
    console.log(`backup: restored-end recreated from the bucket and Available ${((Date.now() - started) / 1000).toFixed(0)} s after its creation`);
    const restore = ((await getIoT(env, landscape, 'restored-end'))!.status as { restore?: { state: string; from: string; backup?: string } }).restore;
    assert.equal(restore?.state, 'Restored');
    assert.equal(restore?.from, 'restored-end');
    assert.equal(restore?.backup, restoredEnd.lastBackup, "the backup restored is the deleted instance's, from the bucket");
    const at = await deviceAddresses(env, ns);
    const stored = (await readAllTelemetry(at, restoredEnd.device.id)).map((r) => r.messageId);
    assert.deepEqual(stored, ['m-s3'], 'exactly the rows it had: the message written after the backup is back, the table emptied before it stays empty');
    await assert.rejects(registerDevice(at, restoredEnd.device.id), (e: unknown) => e instanceof HttpStatusError && e.status === 409, 'the device is in the restored registry');
    const secret = (await env.client.get(Kinds.Secret, 'restore-tls', ns)) as { data?: Record<string, string> };
    assert.deepEqual(Object.keys(secret.data ?? {}), ['restored'], 'restored: nothing left to restore with');

    // Its new timeline's history file reaches the stanza; its own first full backup follows at once, into the same stanza.
    const timeline = Number(await sql('SELECT timeline_id FROM pg_control_checkpoint()', 'postgres', ns));
    const history = `${timeline.toString(16).toUpperCase().padStart(8, '0')}.history`;
    await waitFor(`${history} archived to the bucket`, async () => {
      const archiveId = (await repositoryStanzas(ns))[0]?.archive.at(-1)?.id ?? '';
      const listed = await execInPod(env, ns, 'backup-0', ['pgbackrest', 'repo-ls', `archive/${ns}/${archiveId}`], 60_000);
      return { done: listed.split('\n').some((name) => name.startsWith(history)), value: undefined, seen: listed };
    }, { timeoutMs: 180_000, intervalMs: 3000 });
    const own = await waitFor('restored-end to report a full backup of its own', async () => {
      const backup = await backupStatus('restored-end');
      const label = backup?.lastBackup?.label;
      return { done: backup?.lastBackup?.type === 'full' && label !== undefined && label !== restoredEnd!.lastBackup, value: backup!, seen: backup };
    }, { timeoutMs: 300_000, intervalMs: 2000 });
    console.log(`backup: restored-end's own first full backup reported ${((Date.now() - started) / 1000).toFixed(0)} s after its creation: ${JSON.stringify(own)}`);
    assert.ok(Date.parse(own.lastBackup!.time) > started, `its backup ended at ${own.lastBackup!.time}, after the instance was made again`);
    const [stanza, ...others] = await repositoryStanzas(ns);
    assert.deepEqual(others, [], 'one stanza');
    assert.equal(stanza?.name, ns, "the same stanza as the deleted instance's");
    assert.deepEqual(stanza!.backup.map((b) => b.label), [restoredEnd.lastBackup, own.lastBackup!.label], "the deleted instance's backup and the new one");
  });
});

/** Posts until the gateway acknowledges: 503 is the gateway's "send it again" (core or the database not reached yet). */
async function postUntilAccepted(at: ServiceAddresses, device: DeviceCredentials, payload: unknown, messageId: string): Promise<void> {
  await waitFor(`message ${messageId} acknowledged`, async () => {
    try {
      await postHttp(at.gatewayHttpUrl, device, payload, messageId);
      return { done: true, value: undefined };
    } catch (error) {
      if (error instanceof HttpStatusError && error.status === 503) return { done: false, value: undefined, seen: String(error) };
      throw error;
    }
  }, { timeoutMs: 60_000, intervalMs: 1000 });
}
