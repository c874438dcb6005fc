/**
 * Restores as rendered and judged (src/resources/restore.ts, src/restores.ts): spec.restore in
 * the API (both versions, fixed at creation), what a restoring instance runs (the init container,
 * Secret restore-tls with a client certificate of the SOURCE's backup CA), the NetworkPolicies on
 * both sides while the restore is not done, how the source is checked before anything is made,
 * and how status.restore is read from the init container.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { describe, it } from 'node:test';
import type { V1Container, V1ContainerStatus, V1Pod, V1Secret, V1StatefulSet } from '@kubernetes/client-node';
import { ApiError, type KubeObject } from '@iot-operator/runtime';
import { IoTServiceSpecSchema } from '../src/api/iotservice.ts';
import { iotServiceCrd } from '../src/api/crd.ts';
import { convertIoTService } from '../src/api/conversion.ts';
import { validateIoTServiceSpec } from '../src/api/validation.ts';
import { ChildBodies } from '../src/child-bodies.ts';
import { RestoreCertificates, checkSource, restoreProgress, restoreStatus, restorersOf, type FindSource } from '../src/restores.ts';
import { computeStatus } from '../src/status/status.ts';
import { resolveInstance } from '../src/resources/instance.ts';
import {
  caSecretData,
  desiredChildren,
  generateCredentials,
  pgbackrestTarget,
  type DesiredObject,
  type Instance,
  type NetworkPolicy,
  type RestoreCertificate,
} from '../src/resources/index.ts';
import { TEST_BACKUP, TEST_CONFIG, iotService, testBackupCertificates, testGatewayTls, testInstance } from './fixtures.ts';

const PULL_SECRET = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'image-pull-secret', namespace: 'devawsk8s' }, type: 'kubernetes.io/dockerconfigjson', data: {} };
const NS = 'devawsk8s-tenant-a';
const SOURCE_NS = 'devawsk8s-old';
const RESTORE = { from: 'old', targetTime: '2026-11-29T10:15:00.250+01:00' };

/** The source's backup CA (the backups' of the fixtures) and a restore certificate it signed. */
function restoreCertificate(): RestoreCertificate {
  const { ca } = testBackupCertificates();
  return { ca: { cert: ca.cert }, client: testBackupCertificates().server };
}

function children(instance: Instance, extra: Partial<Parameters<typeof desiredChildren>[1]> = {}): DesiredObject[] {
  return desiredChildren(instance, {
    imagePullSecret: PULL_SECRET,
    credentials: generateCredentials(),
    keptEmptyDirs: new Set(),
    gatewayTls: testGatewayTls(),
    ...(instance.spec.backup ? { backupCertificates: testBackupCertificates() } : {}),
    ...extra,
  }).children.map((c) => c.object);
}

const find = (objects: DesiredObject[], kind: string, name: string) => objects.find((o) => o.kind === kind && o.metadata.name === name);
const database = (objects: DesiredObject[]) => find(objects, 'StatefulSet', 'database') as V1StatefulSet;
const envOf = (container: V1Container | undefined) => Object.fromEntries((container?.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value]));

describe('spec.restore in the API', () => {
  it('takes an instance name and an RFC 3339 time with its zone; refuses others', () => {
    const valid = validateIoTServiceSpec({ version: '2.4.1', restore: RESTORE });
    assert.ok(valid.ok);
    assert.deepEqual(valid.spec.restore, RESTORE);
    assert.ok(validateIoTServiceSpec({ version: '2.4.1', restore: { from: 'old' } }).ok, 'no target: the end of the archive');
    const refused = (restore: unknown) => {
      const result = validateIoTServiceSpec({ version: '2.4.1', restore });
      return result.ok ? [] : result.errors;
    };
    assert.match(refused({ from: 'Old_One' }).join(), /spec\.restore\.from: must name an IoTService of this namespace/);
    for (const targetTime of ['2026-11-29 10:15:00Z', '2026-11-29T10:15:00', '2026-02-30T10:00:00Z', '2026-11-29T25:00:00Z', 'yesterday']) {
      assert.match(refused({ from: 'old', targetTime }).join(), /spec\.restore\.targetTime: must be an RFC 3339 time with its zone/, targetTime);
    }
    assert.match(refused({ targetTime: '2026-11-29T10:15:00Z' }).join(), /spec\.restore\.from: required field is missing/);
    assert.match(refused({ from: 'old', extra: 1 }).join(), /spec\.restore\.extra: unknown field/);
  });

  it('is set at creation only, in both versions of the CRD, whose schemas check the time as date-time', () => {
    const crd = iotServiceCrd() as { spec: { versions: Array<{ name: string; schema: { openAPIV3Schema: { properties: { spec: Record<string, unknown> & { properties: Record<string, { properties: Record<string, { format?: string; pattern?: string }> }> } } } } }> } };
    for (const version of crd.spec.versions) {
      const spec = version.schema.openAPIV3Schema.properties.spec;
      const rules = (spec['x-kubernetes-validations'] as Array<{ rule: string; message: string }>).map((r) => r.rule);
      assert.ok(rules.includes('has(self.restore) == has(oldSelf.restore) && (!has(self.restore) || self.restore == oldSelf.restore)'), version.name);
      assert.equal(spec.properties['restore']?.properties['targetTime']?.format, 'date-time', version.name);
      assert.equal(spec.properties['restore']?.properties['from']?.pattern, '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', version.name);
    }
    assert.ok('restore' in IoTServiceSpecSchema.properties);
  });

  it('passes through conversion between v1alpha1 and v1beta1 unchanged', () => {
    const alpha = { apiVersion: 'cp.iotservices.io/v1alpha1', kind: 'IoTService', metadata: { name: 'new', namespace: 'devawsk8s' }, spec: { version: '2.4.1', restore: RESTORE, database: { replicas: 1, nodeSelector: { a: 'b' } } } } as KubeObject;
    const beta = convertIoTService(alpha, 'cp.iotservices.io/v1beta1') as KubeObject & { spec: { restore: unknown } };
    assert.deepEqual(beta.spec.restore, RESTORE);
    assert.deepEqual(convertIoTService(beta, 'cp.iotservices.io/v1alpha1'), alpha);
  });

  it("gives pgBackRest the target in UTC as its time selection reads it", () => {
    assert.equal(pgbackrestTarget('2026-11-29T10:15:00.250+01:00'), '2026-11-29 09:15:00.250+00');
    assert.equal(pgbackrestTarget('2026-11-29T09:15:00Z'), '2026-11-29 09:15:00.000+00');
  });
});

describe('a restoring instance as rendered', () => {
  it('without spec.restore: no init container, no Secret restore-tls', () => {
    const objects = children(testInstance());
    assert.equal(database(objects).spec?.template.spec?.initContainers, undefined);
    assert.equal(find(objects, 'Secret', 'restore-tls'), undefined);
  });

  it("the database pods restore in an init container from the source's repository host over TLS, to the target, into a staging directory", () => {
    const instance = testInstance({ restore: RESTORE, backup: TEST_BACKUP });
    const set = database(children(instance, { pendingRestore: { certificate: restoreCertificate() } }));
    const [init, ...more] = set.spec?.template.spec?.initContainers ?? [];
    assert.equal(more.length, 0);
    assert.equal(init?.name, 'restore');
    assert.deepEqual(init?.command, ['/usr/local/bin/iot-database-restore']);
    assert.equal(init?.image, set.spec?.template.spec?.containers[0]?.image, "the database's image");
    const env = envOf(init);
    assert.equal(env['PGBACKREST_STANZA'], SOURCE_NS, "the source's stanza: its namespace");
    assert.equal(env['PGBACKREST_REPO1_HOST'], `backup-0.backup.${SOURCE_NS}.svc`);
    assert.equal(env['PGBACKREST_REPO1_HOST_TYPE'], 'tls');
    assert.equal(env['PGBACKREST_REPO1_HOST_CERT_FILE'], '/etc/iot/restore-tls/tls.crt');
    assert.equal(env['PGBACKREST_PG1_PATH'], '/var/lib/iot/pgdata.restoring');
    assert.equal(env['IOT_RESTORE_TARGET'], '2026-11-29 09:15:00.250+00');
    assert.equal(env['IOT_RESTORE_FROM'], 'old');
    assert.deepEqual(init?.volumeMounts?.map((m) => m.mountPath), ['/etc/sap/config.yml', '/tmp', '/var/lib/iot', '/etc/iot/restore-tls'], 'the data volume and its own Secret; not backup-tls');
    assert.deepEqual(set.spec?.template.spec?.volumes?.find((v) => v.name === 'restore-tls')?.secret, { secretName: 'restore-tls', defaultMode: 0o440, optional: true });
    assert.equal(init?.securityContext?.readOnlyRootFilesystem, true);
    const main = envOf(set.spec?.template.spec?.containers[0]);
    assert.equal(main['PGBACKREST_STANZA'], NS, 'the restored database archives to its own stanza');
    assert.equal(main['PGBACKREST_REPO1_HOST'], `backup-0.backup.${NS}.svc`, 'in its own repository');
    assert.ok(!set.spec?.template.spec?.containers.some((c) => c.volumeMounts?.some((m) => m.name === 'restore-tls')), 'no running container holds the certificate');
  });

  it('without a target: to the end of the archive', () => {
    const env = envOf(database(children(testInstance({ restore: { from: 'old' } }), { pendingRestore: { certificate: restoreCertificate() } })).spec?.template.spec?.initContainers?.[0]);
    assert.equal(env['IOT_RESTORE_TARGET'], undefined);
  });

  it("Secret restore-tls: a client certificate of the source's backup CA while restoring; only the mark of a completed restore afterwards", () => {
    const instance = testInstance({ restore: RESTORE });
    const secret = find(children(instance, { pendingRestore: { certificate: restoreCertificate() } }), 'Secret', 'restore-tls') as V1Secret;
    assert.equal(secret.type, 'Opaque');
    const text = (key: string) => Buffer.from(secret.data![key]!, 'base64').toString('utf8');
    const ca = new X509Certificate(text('ca.crt'));
    const leaf = new X509Certificate(text('tls.crt'));
    assert.ok(leaf.checkIssued(ca) && leaf.verify(ca.publicKey), "signed by the source's backup CA");
    assert.match(leaf.subject, /CN=iot-pgbackrest/, 'the common name the source admits to its stanza');
    assert.ok(leaf.keyUsage?.includes('1.3.6.1.5.5.7.3.2'), 'a client certificate');
    const done = find(children(instance), 'Secret', 'restore-tls') as V1Secret;
    assert.deepEqual(done.data, { restored: Buffer.from('true').toString('base64') });
  });
});

describe('the NetworkPolicies of a restore', () => {
  const pgbackrest = [{ protocol: 'TCP', port: 8432 }];
  const policy = (objects: DesiredObject[], name: string) => find(objects, 'NetworkPolicy', name) as unknown as NetworkPolicy;

  it("while restoring, the database pods may reach the source's repository host on 8432, nothing more", () => {
    const instance = testInstance({ restore: RESTORE });
    const restoring = policy(children(instance, { pendingRestore: { certificate: restoreCertificate() }, restorePeers: { source: { namespace: SOURCE_NS, id: 'old' } } }), 'database-peers');
    const peers = policy(children(instance), 'database-peers');
    assert.deepEqual(restoring.spec.egress?.slice(peers.spec.egress?.length ?? 0), [
      {
        to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': SOURCE_NS } }, podSelector: { matchLabels: { 'cp.iotservices.io/instance': 'old', 'app.kubernetes.io/component': 'backup' } } }],
        ports: pgbackrest,
      },
    ]);
    assert.deepEqual(restoring.spec.ingress, peers.spec.ingress, 'nothing more comes in');
  });

  it("the source's repository host admits the database pods of each instance restoring from it, on 8432", () => {
    const source = testInstance({ backup: TEST_BACKUP });
    const restorers = [{ namespace: 'devawsk8s-new', id: 'new' }];
    const admitting = policy(children(source, { restorePeers: { restorers } }), 'backup-peers');
    const alone = policy(children(source), 'backup-peers');
    assert.deepEqual(admitting.spec.ingress?.slice(alone.spec.ingress?.length ?? 0), [
      { from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'devawsk8s-new' } }, podSelector: { matchLabels: { 'cp.iotservices.io/instance': 'new', 'app.kubernetes.io/component': 'database' } } }], ports: pgbackrest },
    ]);
    assert.deepEqual(admitting.spec.egress, alone.spec.egress);
  });
});

/** The source IoTService as the cache has it. */
function sourceIoT(spec: Record<string, unknown>, status?: Record<string, unknown>) {
  return { ...iotService('old', { version: '2.4.1', ...spec }), ...(status ? { status } : {}) } as Awaited<ReturnType<FindSource>>;
}

/** A look-up that finds `found` (or nothing), recording what it was asked for. */
function finder(found?: Awaited<ReturnType<FindSource>>): FindSource & { asked: string[] } {
  const asked: string[] = [];
  return Object.assign(async (name: string) => (asked.push(name), found), { asked });
}

describe('the source, checked before anything of the new instance is made', () => {
  const instance = testInstance({ restore: RESTORE });
  const backedUp = { backup: TEST_BACKUP };
  const backups = { backup: { lastBackup: { time: '2026-11-29T08:00:00Z', type: 'full', label: '20261129-080000F' } } };

  it('none, itself, without backups: Failed, saying what to do', async () => {
    const none = await checkSource(instance, finder(), TEST_CONFIG);
    assert.equal(none.kind === 'failed' && none.failure.reason, 'RestoreSourceNotFound');
    assert.match(none.kind === 'failed' ? none.failure.message : '', /spec\.restore\.from \(old\) names no IoTService of namespace devawsk8s.*spec\.restore\.fromBucket: true/);
    const itself = await checkSource(testInstance({ restore: { from: 'tenant-a' } }), finder(sourceIoT(backedUp, backups)), TEST_CONFIG);
    assert.equal(itself.kind === 'failed' && itself.failure.reason, 'RestoreSourceInvalid');
    const unbacked = await checkSource(instance, finder(sourceIoT({})), TEST_CONFIG);
    assert.equal(unbacked.kind === 'failed' && unbacked.failure.reason, 'RestoreSourceNotBackedUp');
  });

  it('backed up, no backup completed yet: waiting; with one: the source', async () => {
    const waiting = await checkSource(instance, finder(sourceIoT(backedUp)), TEST_CONFIG);
    assert.equal(waiting.kind === 'waiting' && waiting.waiting.reason, 'RestoreSourceHasNoBackup');
    const ok = await checkSource(instance, finder(sourceIoT(backedUp, backups)), TEST_CONFIG);
    assert.equal(ok.kind === 'ok' && ok.source.namespace, SOURCE_NS);
  });

  it('the instances restoring from a source, until restored', () => {
    const restoring = (name: string, from: string, state?: string, deleting = false) => ({
      ...iotService(name, { version: '2.4.1', restore: { from } }),
      ...(state ? { status: { restore: { from, state } } } : {}),
      ...(deleting ? { metadata: { ...iotService(name, {}).metadata, deletionTimestamp: '2026-11-29T09:00:00Z' } } : {}),
    }) as Parameters<typeof restorersOf>[2][number];
    const items = [restoring('b', 'old', 'Restoring'), restoring('a', 'old'), restoring('c', 'old', 'Restored'), restoring('d', 'other'), restoring('e', 'old', undefined, true), iotService('old', { version: '2.4.1' })];
    assert.deepEqual(restorersOf('old', 'devawsk8s', items), [{ namespace: 'devawsk8s-a', id: 'a' }, { namespace: 'devawsk8s-b', id: 'b' }]);
  });
});

const b64 = (text: string) => Buffer.from(text).toString('base64');
const S3 = { endpoint: 's3.objects.svc:8333', bucket: 'iot-backups', credentialsSecret: 'tenant-a-s3' };
const S3_CREDENTIALS = { accessKeyId: b64('AKID'), secretAccessKey: b64('s3cr3t'), ca: b64('-----BEGIN CERTIFICATE-----') };
const TO_S3 = { target: { s3: S3 } };

describe('restoring from the bucket (spec.restore.fromBucket)', () => {
  /** tenant-a backing up to S3, restoring stanza devawsk8s-<from> from that bucket. */
  const fromBucket = (from = 'old', s3: Record<string, unknown> = S3) => testInstance({ backup: { target: { s3 } }, restore: { from, fromBucket: true } });
  const restoring = (instance: Instance, credentials: typeof S3_CREDENTIALS | Omit<typeof S3_CREDENTIALS, 'ca'> = S3_CREDENTIALS) =>
    children(instance, { backupS3Credentials: credentials, pendingRestore: { bucket: credentials }, restorePeers: { bucket: true } });
  const done = (instance: Instance) => children(instance, { backupS3Credentials: S3_CREDENTIALS });
  const repo1 = (env: Record<string, string | undefined>) => Object.fromEntries(Object.entries(env).filter(([name]) => name.startsWith('PGBACKREST_REPO1_')));

  it('is a boolean of both API versions; without spec.backup.target.s3 the operator refuses it (Failed, InvalidSpec)', () => {
    assert.ok(validateIoTServiceSpec({ version: '2.4.1', backup: TO_S3, restore: { from: 'tenant-a', fromBucket: true } }).ok, 'its own name');
    assert.ok(validateIoTServiceSpec({ version: '2.4.1', backup: TEST_BACKUP, restore: { from: 'old', fromBucket: false } }).ok);
    for (const spec of [{ backup: TEST_BACKUP }, {}]) {
      const refused = validateIoTServiceSpec({ version: '2.4.1', ...spec, restore: { from: 'old', fromBucket: true } });
      assert.deepEqual(refused.ok ? [] : refused.errors, ['spec.restore.fromBucket: needs spec.backup.target.s3: the bucket restored from is the one the instance backs up to']);
    }
    const resolved = resolveInstance(iotService('tenant-a', { version: '2.4.1', backup: TEST_BACKUP, restore: { from: 'tenant-a', fromBucket: true } }), TEST_CONFIG);
    assert.equal(resolved.ok ? '' : resolved.failure.reason, 'InvalidSpec');
    const crd = iotServiceCrd() as { spec: { versions: Array<{ name: string; schema: { openAPIV3Schema: { properties: { spec: { properties: { restore: { properties: Record<string, { type: string }> } } } } } } }> } };
    for (const version of crd.spec.versions) assert.equal(version.schema.openAPIV3Schema.properties.spec.properties.restore.properties['fromBucket']?.type, 'boolean', version.name);
    const alpha = { apiVersion: 'cp.iotservices.io/v1alpha1', kind: 'IoTService', metadata: { name: 'tenant-a', namespace: 'devawsk8s' }, spec: { version: '2.4.1', backup: TO_S3, restore: { from: 'tenant-a', fromBucket: true } } } as KubeObject;
    assert.deepEqual((convertIoTService(alpha, 'cp.iotservices.io/v1beta1') as KubeObject & { spec: { restore: unknown } }).spec.restore, { from: 'tenant-a', fromBucket: true });
  });

  it("the init container reads stanza <landscape>-<from> from the bucket with the repository host's S3 options and keys, through no repository host", () => {
    const instance = fromBucket();
    const objects = restoring(instance);
    const init = database(objects).spec?.template.spec?.initContainers?.[0];
    const env = envOf(init);
    assert.equal(env['PGBACKREST_STANZA'], SOURCE_NS);
    assert.equal(env['IOT_RESTORE_FROM'], 'old');
    assert.equal(env['PGBACKREST_PG1_PATH'], '/var/lib/iot/pgdata.restoring');
    const repository = envOf((find(objects, 'StatefulSet', 'backup') as V1StatefulSet).spec?.template.spec?.containers[0]);
    const { PGBACKREST_REPO1_PATH: ownPath, PGBACKREST_REPO1_STORAGE_CA_FILE: ownCa, PGBACKREST_REPO1_RETENTION_FULL: _, ...shared } = repo1(repository);
    assert.equal(ownPath, `/${NS}`);
    assert.equal(ownCa, '/etc/iot/backup-s3/ca.crt');
    assert.deepEqual(repo1(env), { ...shared, PGBACKREST_REPO1_PATH: `/${SOURCE_NS}` }, "the repository host's endpoint, bucket, region and URI style; the source's path; no repository host, the CA file the script's (restore-tls)");
    assert.equal(shared['PGBACKREST_REPO1_S3_BUCKET'], 'iot-backups');
    const keys = Object.fromEntries((init?.env ?? []).filter((e) => e.valueFrom?.secretKeyRef).map((e) => [e.name, e.valueFrom!.secretKeyRef]));
    assert.deepEqual(keys, { PGBACKREST_REPO1_S3_KEY: { name: 'backup-s3', key: 'accessKeyId' }, PGBACKREST_REPO1_S3_KEY_SECRET: { name: 'backup-s3', key: 'secretAccessKey' } });
    const insecure = envOf(database(restoring(fromBucket('old', { ...S3, insecureSkipVerify: true }))).spec?.template.spec?.initContainers?.[0]);
    assert.equal(insecure['PGBACKREST_REPO1_STORAGE_VERIFY_TLS'], 'n', 'insecureSkipVerify as for the repository host');
    assert.equal(envOf(database(objects).spec?.template.spec?.containers[0])['PGBACKREST_REPO1_HOST'], `backup-0.backup.${NS}.svc`, 'the database archives through its own repository host');
  });

  it('Secret restore-tls: the mark of a restore from the bucket and the endpoint\'s CA while restoring; only the mark of a completed restore afterwards', () => {
    const instance = fromBucket();
    assert.deepEqual((find(restoring(instance), 'Secret', 'restore-tls') as V1Secret).data, { bucket: b64('true'), 'ca.crt': S3_CREDENTIALS.ca });
    const withoutCa = { accessKeyId: S3_CREDENTIALS.accessKeyId, secretAccessKey: S3_CREDENTIALS.secretAccessKey };
    assert.deepEqual((find(restoring(instance, withoutCa), 'Secret', 'restore-tls') as V1Secret).data, { bucket: b64('true') });
    assert.deepEqual((find(done(instance), 'Secret', 'restore-tls') as V1Secret).data, { restored: b64('true') });
  });

  it("while restoring, the database pods may go out to the endpoint's port, and to nothing of another instance; once restored, no more", () => {
    const instance = fromBucket();
    const policy = (objects: DesiredObject[]) => find(objects, 'NetworkPolicy', 'database-peers') as unknown as NetworkPolicy;
    const after = policy(done(instance));
    const during = policy(restoring(instance));
    assert.deepEqual(during.spec.egress?.slice(after.spec.egress?.length ?? 0), [{ ports: [{ protocol: 'TCP', port: 8333 }] }]);
    assert.deepEqual(during.spec.ingress, after.spec.ingress);
    assert.ok(!JSON.stringify(after.spec.egress).includes('8333'), 'restored: the database pods reach no endpoint');
    assert.ok(!JSON.stringify(during).includes(SOURCE_NS), 'no namespace of another instance');
  });

  it('needs no source IoTService: none is looked up, from may name this instance; it never makes another instance admit it', async () => {
    for (const from of ['old', 'tenant-a']) {
      const find = finder();
      assert.deepEqual(await checkSource(fromBucket(from), find, TEST_CONFIG), { kind: 'bucket' }, from);
      assert.deepEqual(find.asked, [], 'nothing looked up');
    }
    const live = [{ ...iotService('new', { version: '2.4.1', backup: TO_S3, restore: { from: 'old', fromBucket: true } }) }, iotService('old', { version: '2.4.1', backup: TO_S3 })];
    assert.deepEqual(restorersOf('old', 'devawsk8s', live), [], "the live instance's repository host admits nobody");
  });

  it('restoring its own stanza, its repository host is told when the IoTService was made (backups that ended before are not its own)', () => {
    const created = (restore: Record<string, unknown>) => {
      const iot = iotService('tenant-a', { version: '2.4.1', backup: TO_S3, restore });
      const resolved = resolveInstance({ ...iot, metadata: { ...iot.metadata, creationTimestamp: new Date('2026-11-29T10:00:00Z') } }, TEST_CONFIG);
      if (!resolved.ok) throw new Error(resolved.failure.message);
      return envOf((find(restoring(resolved.instance), 'StatefulSet', 'backup') as V1StatefulSet).spec?.template.spec?.containers[0]);
    };
    assert.equal(created({ from: 'tenant-a', fromBucket: true })['IOT_BACKUP_OWN_SINCE'], '2026-11-29T10:00:00.000Z');
    assert.equal(created({ from: 'old', fromBucket: true })['IOT_BACKUP_OWN_SINCE'], undefined, 'a stanza of its own: nothing before it');
  });
});

const initStatus = (status: Partial<V1ContainerStatus>): V1ContainerStatus => ({ name: 'restore', image: 'x', imageID: '', ready: false, restartCount: 0, ...status });
const pod = (name: string, ...statuses: V1ContainerStatus[]): V1Pod => ({ metadata: { name, namespace: NS }, status: { phase: 'Pending', initContainerStatuses: statuses } });

describe('status.restore, from the init container of database-0', () => {
  const finishedAt = new Date('2026-11-29T09:20:00Z');
  const restored = initStatus({ state: { terminated: { exitCode: 0, finishedAt, message: '{"restored":true,"backup":"20261129-080000F","recoveredTo":"2026-11-29T09:14:59.120Z"}' } } });

  it('restored: the backup, the point reached and when; a data directory found holding a database: restored before', () => {
    assert.deepEqual(restoreProgress([pod('database-0', restored)]), { kind: 'restored', backup: '20261129-080000F', recoveredTo: '2026-11-29T09:14:59.120Z', completedAt: '2026-11-29T09:20:00.000Z' });
    const existed = initStatus({ state: { terminated: { exitCode: 0, finishedAt, message: '{"restored":false,"reason":"DataDirectoryExists"}' } } });
    assert.deepEqual(restoreProgress([pod('database-0', existed)]), { kind: 'restored', completedAt: '2026-11-29T09:20:00.000Z' });
    const standby = initStatus({ state: { terminated: { exitCode: 0, finishedAt, message: '{"restored":false,"reason":"Standby"}' } } });
    assert.equal(restoreProgress([pod('database-1', standby)]), undefined, 'only database-0 restores');
  });

  it('a failed run: its message, also while the kubelet runs it again; running or not started: not known', () => {
    const failed = { terminated: { exitCode: 1, message: 'pgbackrest restore from the repository of IoTService old (stanza devawsk8s-old) failed: ERROR: [039]: HTTP connection refused' } };
    assert.deepEqual(restoreProgress([pod('database-0', initStatus({ state: failed }))]), { kind: 'failed', message: failed.terminated.message });
    assert.equal(restoreProgress([pod('database-0', initStatus({ state: { running: { startedAt: finishedAt } }, lastState: failed, restartCount: 1 }))])?.kind, 'failed');
    assert.equal(restoreProgress([pod('database-0', initStatus({ state: { running: { startedAt: finishedAt } } }))]), undefined);
    assert.equal(restoreProgress([]), undefined);
  });

  it('Restoring until restored, then Restored for good; the failure makes the instance Failed', () => {
    const instance = testInstance({ restore: RESTORE });
    const restoring = restoreStatus(instance, undefined, undefined);
    assert.deepEqual(restoring, { from: 'old', targetTime: RESTORE.targetTime, state: 'Restoring' });
    const done = restoreStatus(instance, restoring, restoreProgress([pod('database-0', restored)]));
    assert.deepEqual(done, { from: 'old', targetTime: RESTORE.targetTime, state: 'Restored', backup: '20261129-080000F', recoveredTo: '2026-11-29T09:14:59.120Z', completedAt: '2026-11-29T09:20:00.000Z' });
    assert.equal(restoreStatus(instance, done, undefined), done, 'a later pod says nothing of it');
    assert.equal(restoreStatus(testInstance(), done, undefined), undefined);

    const base = { previous: undefined, outcome: { kind: 'applied', childrenMatched: true } as const, observed: { deployments: [], statefulSets: [], pods: [] }, now: new Date() };
    const spec = { generation: 1, namespace: NS, spec: instance.spec };
    const failing = computeStatus({ ...base, instance: spec, restore: restoring, restoreFailure: { reason: 'RestoreFailed', message: 'The restore failed: x' } });
    assert.equal(failing.phase, 'Failed');
    assert.equal(failing.reason, 'The restore failed: x');
    assert.deepEqual(failing.restore, restoring);
    const kept = computeStatus({ ...base, previous: { ...failing, restore: done }, instance: spec });
    assert.deepEqual(kept.restore, done, 'kept while the reconcile makes none');
  });
});

describe("the restore's client certificate", () => {
  const instance = testInstance({ restore: RESTORE });
  const ca = testBackupCertificates().ca;
  const caSecret = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'backup-ca', namespace: SOURCE_NS, resourceVersion: '7' }, data: caSecretData(ca) } as KubeObject;

  function context(objects: KubeObject[]) {
    const gets: string[] = [];
    const events: string[] = [];
    const byKey = new Map(objects.map((o) => [`${o.metadata.namespace}/${o.metadata.name}`, o]));
    const client = {
      list: async () => ({ items: [], metadata: {} }),
      get: async (_type: unknown, name: string, namespace: string) => {
        gets.push(`${namespace}/${name}`);
        const found = byKey.get(`${namespace}/${name}`);
        if (!found) throw new ApiError(404, 'NotFound', `${namespace}/${name} not found`);
        return found;
      },
    };
    const cache = { get: (_type: unknown, name: string, namespace?: string) => (byKey.get(`${namespace}/${name}`) ? { metadata: byKey.get(`${namespace}/${name}`)!.metadata } : undefined) };
    return { ctx: { client, cache, event: (_t: string, reason: string) => events.push(reason) } as never, gets, events };
  }

  it("is issued with the source's backup CA, kept afterwards without reading it again, and waited for while the source has no CA", async () => {
    const keeper = new RestoreCertificates(new ChildBodies({ labelSelector: '' }, () => true));
    const { ctx, gets, events } = context([caSecret]);
    const first = await keeper.certificate(ctx, 'k', instance, new Date());
    assert.equal(first.kind, 'ok');
    const certificate = first.kind === 'ok' ? first.certificate : undefined;
    assert.ok(new X509Certificate(certificate!.client.cert).checkIssued(new X509Certificate(ca.cert)));
    assert.deepEqual(events, ['RestoreCertificateIssued']);
    const reads = gets.length;
    const second = await keeper.certificate(ctx, 'k', instance, new Date());
    assert.equal(second.kind === 'ok' && second.certificate.client.cert, certificate!.client.cert, 'kept');
    assert.equal(gets.length, reads, 'the CA read once while its resourceVersion stays');
    assert.equal(events.length, 1);

    const none = await new RestoreCertificates(new ChildBodies({ labelSelector: '' }, () => true)).certificate(context([]).ctx, 'k', instance, new Date());
    assert.equal(none.kind === 'waiting' && none.waiting.reason, 'RestoreSourceNotReady');
  });

  it('is read back from Secret restore-tls after a restart', async () => {
    const { ctx } = context([caSecret]);
    const issued = await new RestoreCertificates(new ChildBodies({ labelSelector: '' }, () => true)).certificate(ctx, 'k', instance, new Date());
    const secret = children(instance, issued.kind === 'ok' ? { pendingRestore: { certificate: issued.certificate } } : {}).find((o) => o.metadata.name === 'restore-tls') as unknown as KubeObject;
    const restarted = context([caSecret, { ...secret, metadata: { ...secret.metadata, resourceVersion: '3' } }]);
    const again = await new RestoreCertificates(new ChildBodies({ labelSelector: '' }, () => true)).certificate(restarted.ctx, 'k', instance, new Date());
    assert.equal(again.kind === 'ok' && again.certificate.client.cert, issued.kind === 'ok' ? issued.certificate.client.cert : '');
    assert.deepEqual(restarted.events, [], 'nothing issued anew');
  });
});

