/**
 * Backups as rendered (src/resources/backup.ts, src/backups.ts): what an instance with spec.backup
 * runs — the repository host, pgBackRest beside each database pod, WAL archiving, the certificate
 * both ends present — and how status.backup is read from the repository host's /info.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { describe, it } from 'node:test';
import type { V1Container, V1Pod, V1Secret, V1StatefulSet } from '@kubernetes/client-node';
import { ApiError } from '@iot-operator/runtime';
import { backupStatus, readRepository, readS3Credentials } from '../src/backups.ts';
import { computeStatus } from '../src/status/status.ts';
import {
  BACKUP_CERTIFICATE_PROFILE,
  GATEWAY_CERTIFICATE_PROFILE,
  backupCertificateNames,
  desiredChildren,
  generateCredentials,
  keepOrIssue,
  type DesiredObject,
  type Instance,
  type NetworkPolicy,
  type S3Credentials,
} from '../src/resources/index.ts';
import { TEST_BACKUP, testBackupCertificates, testGatewayTls, testInstance } from './fixtures.ts';

const PULL_SECRET = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'image-pull-secret', namespace: 'devawsk8s' }, type: 'kubernetes.io/dockerconfigjson', data: {} };

function children(instance: Instance, backupS3Credentials?: S3Credentials): DesiredObject[] {
  return desiredChildren(instance, {
    imagePullSecret: PULL_SECRET,
    credentials: generateCredentials(),
    keptEmptyDirs: new Set(),
    gatewayTls: testGatewayTls(),
    backupCertificates: testBackupCertificates(),
    backupS3Credentials,
  }).children.map((c) => c.object);
}

const find = (objects: DesiredObject[], kind: string, name: string) => objects.find((o) => o.kind === kind && o.metadata.name === name);
const statefulSet = (objects: DesiredObject[], name: string) => find(objects, 'StatefulSet', name) as V1StatefulSet | undefined;
const containers = (set: V1StatefulSet | undefined): V1Container[] => set?.spec?.template.spec?.containers ?? [];
/** A container's literal environment as a map. */
const envOf = (container: V1Container | undefined) => Object.fromEntries((container?.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value]));

const NS = 'devawsk8s-tenant-a';

describe('backups as rendered', () => {
  it('without spec.backup: no repository host, no backup Secrets or policies, the database pod runs PostgreSQL alone without archiving', () => {
    const objects = children(testInstance());
    assert.deepEqual(
      objects.filter((o) => o.metadata.name.startsWith('backup')).map((o) => `${o.kind}/${o.metadata.name}`),
      [],
    );
    const database = containers(statefulSet(objects, 'database'));
    assert.deepEqual(database.map((c) => c.name), ['database']);
    assert.deepEqual(Object.keys(envOf(database[0])).filter((name) => name.startsWith('PGBACKREST_') || name === 'IOT_DATABASE_ARCHIVE_TIMEOUT'), []);
  });

  it('the repository host: StatefulSet backup with the repository on a claim of the target, a full backup per schedule, the retention, every database pod as a pg host', () => {
    const instance = testInstance({
      database: { replicas: 3, placement: { nodeSelector: { 'topology.kubernetes.io/zone': 'db' } } },
      backup: { schedule: '6h', retention: 3, target: { volumeClaim: { size: '20Gi', storageClassName: 'fast' } } },
    });
    const set = statefulSet(children(instance), 'backup');
    assert.ok(set, 'StatefulSet backup');
    assert.equal(set.spec?.replicas, 1);
    assert.equal(set.spec?.serviceName, 'backup');
    assert.deepEqual(set.spec?.volumeClaimTemplates?.map((c) => [c.metadata?.name, c.spec?.resources?.requests?.['storage'], c.spec?.storageClassName]), [['data', '20Gi', 'fast']]);
    const [repository, ...others] = containers(set);
    assert.equal(others.length, 0);
    assert.equal(repository?.image, 'registry.example.com/iot/iot-database:2.4.1', "the database's image");
    assert.deepEqual(repository?.command, ['/usr/local/bin/iot-pgbackrest', 'repository']);
    assert.deepEqual(repository?.volumeMounts?.find((m) => m.name === 'data')?.mountPath, '/var/lib/iot');
    assert.deepEqual(repository?.volumeMounts?.find((m) => m.name === 'backup-tls')?.mountPath, '/etc/iot/backup-tls');
    assert.deepEqual(set.spec?.template.spec?.nodeSelector, { 'topology.kubernetes.io/zone': 'db' }, 'where the database may run');
    const env = envOf(repository);
    assert.equal(env['IOT_BACKUP_INTERVAL_SECONDS'], String(6 * 3600));
    assert.equal(env['PGBACKREST_REPO1_RETENTION_FULL'], '3');
    assert.equal(env['PGBACKREST_REPO1_PATH'], '/var/lib/iot/repository');
    assert.equal(env['PGBACKREST_STANZA'], NS, 'the stanza is the instance namespace');
    assert.deepEqual(
      [1, 2, 3].map((i) => [env[`PGBACKREST_PG${i}_HOST`], env[`PGBACKREST_PG${i}_HOST_TYPE`], env[`PGBACKREST_PG${i}_PATH`]]),
      [0, 1, 2].map((i) => [`database-${i}.database.${NS}.svc`, 'tls', '/var/lib/iot/pgdata']),
    );
    assert.equal(env['PGBACKREST_TLS_SERVER_AUTH'], `iot-pgbackrest=${NS}`, 'its server admits the instance certificate to the stanza alone');
  });

  it('each database pod archives WAL to the repository host at least every minute and serves pgBackRest beside PostgreSQL', () => {
    const set = statefulSet(children(testInstance({ backup: TEST_BACKUP })), 'database');
    const [database, pgbackrest] = containers(set);
    const env = envOf(database);
    assert.equal(env['IOT_DATABASE_ARCHIVE_TIMEOUT'], '60');
    assert.equal(env['PGBACKREST_REPO1_HOST'], `backup-0.backup.${NS}.svc`);
    assert.equal(env['PGBACKREST_REPO1_HOST_TYPE'], 'tls');
    assert.equal(env['PGBACKREST_STANZA'], NS);
    assert.equal(pgbackrest?.name, 'pgbackrest');
    assert.deepEqual(pgbackrest?.command, ['/usr/local/bin/iot-pgbackrest', 'server']);
    assert.deepEqual(pgbackrest?.ports?.map((p) => p.containerPort), [8432]);
    assert.equal(pgbackrest?.image, database?.image);
    assert.equal(envOf(pgbackrest)['PGBACKREST_TLS_SERVER_ADDRESS'], '$(POD_IP)');
    for (const container of [database, pgbackrest]) {
      assert.deepEqual(
        container?.volumeMounts?.filter((m) => m.name === 'data' || m.name === 'backup-tls' || m.name === 'tmp').map((m) => m.mountPath),
        ['/tmp', '/var/lib/iot', '/etc/iot/backup-tls'],
        `${container?.name} sees the data directory, the socket and the certificate`,
      );
      assert.equal(container?.securityContext?.readOnlyRootFilesystem, true);
    }
  });

  it('Secret backup-tls: one certificate of the backup CA for both ends, covering the repository host and every database pod', () => {
    const objects = children(testInstance({ backup: TEST_BACKUP }));
    const data = (name: string) => (find(objects, 'Secret', name) as V1Secret).data!;
    const text = (value: string | undefined) => Buffer.from(value!, 'base64').toString('utf8');
    const ca = new X509Certificate(text(data('backup-ca')['ca.crt']));
    const leaf = new X509Certificate(text(data('backup-tls')['tls.crt']));
    assert.ok(new X509Certificate(text(data('backup-tls')['ca.crt'])).raw.equals(ca.raw), 'backup-tls carries the CA its peers are checked against');
    assert.ok(leaf.checkIssued(ca) && leaf.verify(ca.publicKey), 'signed by the backup CA');
    assert.match(leaf.subject, /CN=iot-pgbackrest/);
    assert.deepEqual(leaf.subjectAltName?.split(', '), [`DNS:backup-0.backup.${NS}.svc`, `DNS:database-0.database.${NS}.svc`]);
    assert.deepEqual(leaf.keyUsage?.sort(), ['1.3.6.1.5.5.7.3.1', '1.3.6.1.5.5.7.3.2'], 'server and client authentication');
  });

  it('a certificate that is not for client authentication is issued anew for the backups', () => {
    const names = backupCertificateNames(testInstance({ backup: TEST_BACKUP }));
    const serverOnly = keepOrIssue({}, names, new Date(), GATEWAY_CERTIFICATE_PROFILE).certificates;
    const decision = keepOrIssue(serverOnly, names, new Date(), BACKUP_CERTIFICATE_PROFILE);
    assert.equal(decision.serverIssued, 'it is not for client authentication');
    assert.equal(decision.certificates.ca, serverOnly.ca, 'by the same CA');
    assert.equal(keepOrIssue(decision.certificates, names, new Date(), BACKUP_CERTIFICATE_PROFILE).serverIssued, undefined, 'and then kept');
  });
});

const b64 = (text: string) => Buffer.from(text).toString('base64');
const S3 = { endpoint: 's3.objects.svc:8333', bucket: 'iot-backups', credentialsSecret: 'tenant-a-s3' };
const CREDENTIALS: S3Credentials = { accessKeyId: b64('AKID'), secretAccessKey: b64('s3cr3t'), ca: b64('-----BEGIN CERTIFICATE-----') };

describe('backups to an S3 bucket', () => {
  const instance = testInstance({ backup: { retention: 2, target: { s3: S3 } } });

  it('the repository host keeps the repository in the bucket at /<namespace>, path-style over HTTPS, its keys from Secret backup-s3, the endpoint checked against its ca.crt; no volume', () => {
    const set = statefulSet(children(instance, CREDENTIALS), 'backup');
    assert.ok(set, 'StatefulSet backup');
    assert.equal(set.spec?.volumeClaimTemplates, undefined, 'no volume: the repository is in the bucket');
    const [repository] = containers(set);
    const env = envOf(repository);
    assert.deepEqual(
      Object.fromEntries(Object.entries(env).filter(([name]) => name.startsWith('PGBACKREST_REPO1_'))),
      {
        PGBACKREST_REPO1_TYPE: 's3',
        PGBACKREST_REPO1_PATH: `/${NS}`,
        PGBACKREST_REPO1_S3_ENDPOINT: 's3.objects.svc',
        PGBACKREST_REPO1_STORAGE_PORT: '8333',
        PGBACKREST_REPO1_S3_BUCKET: 'iot-backups',
        PGBACKREST_REPO1_S3_REGION: 'us-east-1',
        PGBACKREST_REPO1_S3_URI_STYLE: 'path',
        PGBACKREST_REPO1_STORAGE_CA_FILE: '/etc/iot/backup-s3/ca.crt',
        PGBACKREST_REPO1_RETENTION_FULL: '2',
      },
    );
    const fromSecret = Object.fromEntries((repository?.env ?? []).filter((e) => e.valueFrom?.secretKeyRef).map((e) => [e.name, e.valueFrom!.secretKeyRef]));
    assert.deepEqual(fromSecret, {
      PGBACKREST_REPO1_S3_KEY: { name: 'backup-s3', key: 'accessKeyId' },
      PGBACKREST_REPO1_S3_KEY_SECRET: { name: 'backup-s3', key: 'secretAccessKey' },
    });
    assert.deepEqual(repository?.volumeMounts?.map((m) => m.mountPath), ['/etc/sap/config.yml', '/tmp', '/etc/iot/backup-tls', '/etc/iot/backup-s3']);
    const secret = find(children(instance, CREDENTIALS), 'Secret', 'backup-s3') as V1Secret;
    assert.deepEqual(secret.data, { accessKeyId: CREDENTIALS.accessKeyId, secretAccessKey: CREDENTIALS.secretAccessKey, 'ca.crt': CREDENTIALS.ca });
  });

  it('without a ca.crt the image trusts its own CAs; insecureSkipVerify turns the check off; changed credentials restart the repository host', () => {
    const plain = { accessKeyId: b64('AKID'), secretAccessKey: b64('s3cr3t') };
    const set = statefulSet(children(instance, plain), 'backup');
    const [repository] = containers(set);
    assert.equal(envOf(repository)['PGBACKREST_REPO1_STORAGE_CA_FILE'], undefined);
    assert.equal(repository?.volumeMounts?.some((m) => m.name === 'backup-s3'), false);
    assert.equal(envOf(repository)['PGBACKREST_REPO1_STORAGE_VERIFY_TLS'], undefined, 'checked unless asked');
    const insecure = testInstance({ backup: { target: { s3: { ...S3, endpoint: 's3.example.com', uriStyle: 'host', insecureSkipVerify: true } } } });
    const insecureEnv = envOf(containers(statefulSet(children(insecure, plain), 'backup'))[0]);
    assert.equal(insecureEnv['PGBACKREST_REPO1_STORAGE_VERIFY_TLS'], 'n');
    assert.equal(insecureEnv['PGBACKREST_REPO1_STORAGE_PORT'], '443', 'HTTPS by default');
    assert.equal(insecureEnv['PGBACKREST_REPO1_S3_URI_STYLE'], 'host');
    const checksum = (credentials: S3Credentials) => statefulSet(children(instance, credentials), 'backup')?.spec?.template.metadata?.annotations?.['cp.iotservices.io/secret-checksum'];
    assert.match(checksum(plain) ?? '', /^[0-9a-f]{16}$/);
    assert.equal(checksum({ ...plain }), checksum(plain), 'the same credentials: the same template');
    assert.notEqual(checksum({ ...plain, secretAccessKey: b64('rotated') }), checksum(plain), 'rotated: the pod is replaced and reads them anew');
    assert.throws(() => children(instance), /backups go to S3 but no credentials were given/);
  });

  it('the database pods archive through the repository host as with a volume; only the repository host may leave for the endpoint, on its port', () => {
    const objects = children(instance, CREDENTIALS);
    const database = envOf(containers(statefulSet(objects, 'database'))[0]);
    assert.equal(database['PGBACKREST_REPO1_HOST'], `backup-0.backup.${NS}.svc`);
    assert.equal(database['PGBACKREST_REPO1_TYPE'], undefined);
    const egress = (name: string) => (find(objects, 'NetworkPolicy', name) as NetworkPolicy).spec.egress ?? [];
    assert.deepEqual(egress('backup-peers').filter((rule) => !rule.to), [{ ports: [{ protocol: 'TCP', port: 8333 }] }]);
    assert.deepEqual(egress('database-peers').filter((rule) => !rule.to), [], 'the database pods reach no endpoint');
    const onVolume = children(testInstance({ backup: TEST_BACKUP }));
    assert.deepEqual((find(onVolume, 'NetworkPolicy', 'backup-peers') as NetworkPolicy).spec.egress?.filter((rule) => !rule.to), [], 'with a volume the repository host leaves for nothing');
  });

  it('reads the credentials Secret of the IoTService namespace; a missing Secret or key is a failure naming it', async () => {
    const secrets: Record<string, V1Secret> = {
      full: { metadata: { name: 'full', uid: 'u1', resourceVersion: '7' }, data: { accessKeyId: CREDENTIALS.accessKeyId, secretAccessKey: CREDENTIALS.secretAccessKey } },
      partial: { metadata: { name: 'partial' }, data: { accessKeyId: CREDENTIALS.accessKeyId } },
    };
    const asked: string[] = [];
    const client = {
      get: async (_type: unknown, name: string, namespace?: string) => {
        asked.push(`${namespace}/${name}`);
        if (secrets[name]) return secrets[name];
        throw new ApiError(404, 'NotFound', `secrets "${name}" not found`);
      },
    } as unknown as Parameters<typeof readS3Credentials>[0];
    const withSecret = (credentialsSecret: string) => testInstance({ backup: { target: { s3: { ...S3, credentialsSecret } } } });
    assert.equal(await readS3Credentials(client, testInstance({ backup: TEST_BACKUP })), undefined, 'a volume target reads nothing');
    const read = await readS3Credentials(client, withSecret('full'));
    assert.deepEqual(read, { ok: true, credentials: { accessKeyId: CREDENTIALS.accessKeyId, secretAccessKey: CREDENTIALS.secretAccessKey }, version: 'u1/7' });
    assert.equal(asked[0], 'devawsk8s/full', "in the IoTService's namespace");
    const partial = await readS3Credentials(client, withSecret('partial'));
    assert.ok(partial && !partial.ok);
    assert.equal(partial.failure.reason, 'BackupCredentialsNotFound');
    assert.match(partial.failure.message, /^Secret partial in namespace devawsk8s \(spec\.backup\.target\.s3\.credentialsSecret\) has no secretAccessKey; create it/);
    const missing = await readS3Credentials(client, withSecret('gone'));
    assert.ok(missing && !missing.ok);
    assert.match(missing.failure.message, /^Secret gone in namespace devawsk8s \(spec\.backup\.target\.s3\.credentialsSecret\) is missing;/);
  });
});

/**
 * pgbackrest info --output=json (2.45) of a stanza with two full backups and archived WAL, trimmed
 * to what status reads and a little more, as the repository host answers it: with `iotMaxTime`,
 * when the newest segment's file was written to the repository.
 */
const INFO = [
  {
    name: NS,
    status: { code: 0, message: 'ok' },
    archive: [{ database: { id: 1, 'repo-key': 1 }, id: '15-1', min: '000000010000000000000001', max: '000000010000000000000009', iotMaxTime: 1767351912.25 }],
    backup: [
      { label: '20260101-100000F', type: 'full', timestamp: { start: 1767261600, stop: 1767261612 }, error: false },
      { label: '20260102-100000F', type: 'full', timestamp: { start: 1767348000, stop: 1767348015 }, error: false },
    ],
  },
];

describe('status.backup', () => {
  it("reads the latest backup, the archive's newest WAL segment, when it was archived, and the count from pgbackrest info", () => {
    assert.deepEqual(backupStatus(INFO, NS), {
      lastBackup: { time: '2026-01-02T10:00:15.000Z', type: 'full', label: '20260102-100000F' },
      lastArchivedWal: '000000010000000000000009',
      lastArchivedWalTime: '2026-01-02T11:05:12.250Z',
      backups: 2,
    });
    const plain = structuredClone(INFO);
    delete (plain[0]!.archive[0] as { iotMaxTime?: number }).iotMaxTime;
    assert.equal(backupStatus(plain, NS)?.lastArchivedWalTime, undefined, "pgBackRest's own answer (a repository host without the time): no time, never a guess");
    assert.equal(backupStatus(plain, NS)?.lastArchivedWal, '000000010000000000000009');
    assert.deepEqual(backupStatus([{ name: NS, backup: [], archive: [] }], NS), { backups: 0 }, 'a stanza made, nothing in it yet');
    assert.equal(backupStatus(INFO, 'devawsk8s-tenant-b'), undefined, "another stanza's info says nothing of this one");
    assert.equal(backupStatus({ error: 'x' }, NS), undefined);
  });

  const pod = (ready: boolean): V1Pod => ({
    metadata: { name: 'backup-0', namespace: NS },
    status: { phase: 'Running', podIP: '10.0.0.7', conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
  });

  it("asks the repository host's /info while its pod is Ready, and knows nothing otherwise", async () => {
    const instance = testInstance({ backup: TEST_BACKUP });
    const asked: string[] = [];
    const answering = (async (url: string) => {
      asked.push(url);
      return new Response(JSON.stringify(INFO), { status: 200 });
    }) as typeof fetch;
    assert.equal((await readRepository(instance, [pod(true)], answering))?.lastArchivedWal, '000000010000000000000009');
    assert.deepEqual(asked, ['http://10.0.0.7:8433/info']);
    assert.equal(await readRepository(instance, [pod(false)], answering), undefined);
    assert.equal(asked.length, 1, 'a pod not ready is not asked');
    const failing = (async () => new Response('ERROR: [055]: unable to load info file', { status: 503 })) as typeof fetch;
    assert.equal(await readRepository(instance, [pod(true)], failing), undefined);
    const unreachable = (async () => {
      throw new TypeError('fetch failed');
    }) as typeof fetch;
    assert.equal(await readRepository(instance, [pod(true)], unreachable), undefined);
  });

  it('keeps what it had while the repository cannot be read, and drops it when the spec has no backup', () => {
    const backed = testInstance({ backup: TEST_BACKUP });
    const reading = backupStatus(INFO, NS)!;
    const base = { previous: undefined, outcome: { kind: 'applied', childrenMatched: true } as const, observed: { deployments: [], statefulSets: [], pods: [] }, now: new Date() };
    const made = computeStatus({ ...base, instance: { generation: 1, namespace: NS, spec: backed.spec }, backup: reading });
    assert.deepEqual(made.backup, reading);
    assert.deepEqual(computeStatus({ ...base, previous: made, instance: { generation: 1, namespace: NS, spec: backed.spec } }).backup, reading, 'unknown: the previous one stays');
    assert.equal(computeStatus({ ...base, previous: made, instance: { generation: 2, namespace: NS, spec: testInstance().spec } }).backup, undefined);
  });
});
