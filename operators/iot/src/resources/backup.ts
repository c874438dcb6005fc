/**
 * Backups of an instance's database with pgBackRest (`spec.backup`): a dedicated repository host
 * in the instance namespace, reached by the database pods and reaching them over mutual TLS.
 *
 * Guarantees: without `spec.backup` nothing here exists and the database pods are as before. With
 * it:
 * - StatefulSet `backup` (one replica, governed by the headless Service `backup`) runs the
 *   database's image as the repository host (image/pgbackrest.mjs `repository`): the repository
 *   at REPOSITORY_PATH on a ReadWriteOnce claim of `target.volumeClaim`'s size and class, a full
 *   backup every `schedule` (IOT_BACKUP_INTERVAL_SECONDS), `retention` full backups kept
 *   (repo1-retention-full), pgBackRest's server on 8432 and its state on 8433 (/info); ready
 *   while pgBackRest's server accepts connections. Its pods run where the database's may run
 *   (spec.database.placement). With `target.s3` instead the repository is in that bucket at
 *   `/<namespace>` (repo1-type=s3, `s3RepositoryOptions`, over HTTPS, the endpoint's certificate checked against the
 *   credentials Secret's ca.crt when it has one, else the image's CAs, unless insecureSkipVerify),
 *   the pod has no volume, and its keys come from Secret `backup-s3` (a copy of the user's, made
 *   by the reconcile) as environment variables, a checksum of them on its template. The repository
 *   host stays with S3 (the database pods still archive through it): it takes the scheduled
 *   backups, serves /info and is what restores read from, so the S3 target changes nothing else,
 *   and only it needs the credentials and a way out of the instance.
 * - Every database pod has a second container `pgbackrest` (image/pgbackrest.mjs `server`) serving
 *   its data directory to the repository host on 8432, and PostgreSQL archives every WAL segment
 *   to the repository (archive-push), switching segments at least every ARCHIVE_TIMEOUT_SECONDS
 *   while there are writes: a restore loses at most that long's writes.
 * - The repository's stanza is the instance namespace (`<landscape>-<id>`, unique in the
 *   cluster), and every option of it is in the environment, not a file: another instance's
 *   repository host can be named as the source of a restore by its stanza and address. An
 *   instance restoring its own stanza from the bucket (`restoresOwnStanza`) tells its repository
 *   host when it was made (BACKUP_OWN_SINCE_ENV): the backups of the instance of that name before
 *   it do not put off its own first full backup.
 * - One CA of the instance's (Secret `backup-ca`, mounted nowhere) signs one certificate (Secret
 *   `backup-tls`: ca.crt, tls.crt, tls.key) for both ends, server and client, covering the
 *   repository host's name and each database pod's (`backupCertificateNames`); each pgBackRest
 *   server checks its peers' certificates against the CA and admits common name BACKUP_CLIENT to
 *   the instance's stanza alone (tls-server-auth). The pgBackRest servers reload a renewed
 *   certificate without a restart (pgbackrest.mjs).
 * The NetworkPolicies let only the database and the repository host reach each other's 8432,
 * and the operator the repository host's 8433 (network-policies.ts).
 */

import { createHash } from 'node:crypto';
import type { V1EnvVar, V1Secret, V1Service, V1StatefulSet } from '@kubernetes/client-node';
import { S3_ACCESS_KEY_ID, S3_CA_KEY, S3_SECRET_ACCESS_KEY, backupScheduleSeconds, type DefaultedIoTServiceSpec } from '../api/iotservice.ts';
import { caSecretData, leafSecretData, type CaCertificates, type CertificateProfile } from './instance-ca.ts';
import type { Instance } from './instance.ts';
import { componentLabels, componentSelector, instanceLabels } from './labels.ts';
import { desiredPodTemplate, tcpProbe, type ContainerRuntime, type Sidecar, DATA_VOLUME, type SecretDirectory } from './pod.ts';
import { BACKUP_STATUS_PORT, PGBACKREST_PORT, PORTS } from './ports.ts';
import { canonicalQuantity } from './quantity.ts';
import { service } from './services.ts';

export const BACKUP = 'backup' as const;
export const BACKUP_CA_SECRET = 'backup-ca';
export const BACKUP_TLS_SECRET = 'backup-tls';
/** Where the database pods and the repository host find Secret backup-tls. */
export const BACKUP_TLS_DIR = '/etc/iot/backup-tls';
/** The database's data directory (image/database.sh) and the repository on the repository host's volume. */
export const PGDATA_PATH = '/var/lib/iot/pgdata';
export const REPOSITORY_PATH = '/var/lib/iot/repository';
/** The most seconds of writes a WAL segment not yet archived holds (PostgreSQL's archive_timeout). */
export const ARCHIVE_TIMEOUT_SECONDS = 60;
/** The common name of the certificate both ends present, which each pgBackRest server admits. */
export const BACKUP_CLIENT = 'iot-pgbackrest';
/** The image's pgBackRest entry point (scripts/dockerfiles.ts PGBACKREST_SCRIPT). */
export const PGBACKREST_SCRIPT = '/usr/local/bin/iot-pgbackrest';
/** The database container's variable that turns WAL archiving on (image/database.sh). */
export const DATABASE_ARCHIVE_TIMEOUT_ENV = 'IOT_DATABASE_ARCHIVE_TIMEOUT';

/** The copy of the S3 credentials Secret in the instance namespace, and where the repository host mounts it (its ca.crt). */
export const BACKUP_S3_SECRET = 'backup-s3';
export const BACKUP_S3_DIR = '/etc/iot/backup-s3';

export const BACKUP_CERTIFICATE_PROFILE: CertificateProfile = { caName: 'IoT backup CA', leafName: BACKUP_CLIENT, clientAuth: true };

/** Whether the instance is backed up. */
export function backsUp(instance: Instance): boolean {
  return instance.spec.backup !== undefined;
}

/** The stanza of the instance's repository: its namespace. */
export function backupStanza(instance: Instance): string {
  return instance.namespace;
}

/**
 * Whether the instance restores the stanza it backs up into (`spec.restore.fromBucket` naming
 * itself): the stanza then holds the backups of the instance of that name before it.
 */
export function restoresOwnStanza(instance: Instance): boolean {
  return instance.spec.restore?.fromBucket === true && instance.spec.restore.from === instance.id;
}

/**
 * The repository host's variable naming when the instance was made (image/pgbackrest.mjs): a
 * backup that ended before it is another instance's and does not put off the first full backup.
 */
export const BACKUP_OWN_SINCE_ENV = 'IOT_BACKUP_OWN_SINCE';

/** The repository host's name: its pod's through the headless Service `backup`. */
export function repositoryHost(instance: Instance): string {
  return `${BACKUP}-0.${BACKUP}.${instance.namespace}.svc`;
}

/** Each database pod's name through the headless Service `database`, in the order of its ordinals. */
export function databaseHosts(instance: Instance): string[] {
  return Array.from({ length: instance.spec.database.replicas }, (_, i) => `database-${i}.database.${instance.namespace}.svc`);
}

/** What the certificate of both ends covers: the repository host and every database pod. */
export function backupCertificateNames(instance: Instance): string[] {
  return [repositoryHost(instance), ...databaseHosts(instance)].map((name) => `DNS:${name}`);
}

const env = (name: string, value: string): V1EnvVar => ({ name, value });
const POD_IP: V1EnvVar = { name: 'POD_IP', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } } };

/** Options every pgBackRest process of the instance has: the stanza, no log files, locks in /tmp. */
function commonOptions(instance: Instance, consoleLevel: 'info' | 'warn'): V1EnvVar[] {
  return [
    env('PGBACKREST_STANZA', backupStanza(instance)),
    env('PGBACKREST_LOG_LEVEL_FILE', 'off'),
    env('PGBACKREST_LOG_LEVEL_CONSOLE', consoleLevel),
    env('PGBACKREST_LOCK_PATH', '/tmp/pgbackrest'),
  ];
}

/** pgBackRest's TLS server on the pod's address, admitting BACKUP_CLIENT to the stanza alone. */
function serverOptions(instance: Instance): V1EnvVar[] {
  return [
    POD_IP,
    env('PGBACKREST_TLS_SERVER_ADDRESS', '$(POD_IP)'),
    env('PGBACKREST_TLS_SERVER_PORT', String(PORTS.pgbackrest)),
    env('PGBACKREST_TLS_SERVER_CERT_FILE', `${BACKUP_TLS_DIR}/tls.crt`),
    env('PGBACKREST_TLS_SERVER_KEY_FILE', `${BACKUP_TLS_DIR}/tls.key`),
    env('PGBACKREST_TLS_SERVER_CA_FILE', `${BACKUP_TLS_DIR}/ca.crt`),
    env('PGBACKREST_TLS_SERVER_AUTH', `${BACKUP_CLIENT}=${backupStanza(instance)}`),
  ];
}

/** The database as pgBackRest finds it on a database pod: data directory, local socket, superuser. */
function databaseOptions(index: number): V1EnvVar[] {
  return [env(`PGBACKREST_PG${index}_PATH`, PGDATA_PATH), env(`PGBACKREST_PG${index}_SOCKET_PATH`, '/tmp'), env(`PGBACKREST_PG${index}_USER`, 'iot')];
}

/** A remote pgBackRest reached over TLS with the instance's certificate: `prefix` REPO1 or PG<n>. */
function remoteOptions(prefix: string, host: string): V1EnvVar[] {
  return [
    env(`PGBACKREST_${prefix}_HOST`, host),
    env(`PGBACKREST_${prefix}_HOST_TYPE`, 'tls'),
    env(`PGBACKREST_${prefix}_HOST_PORT`, String(PORTS.pgbackrest)),
    env(`PGBACKREST_${prefix}_HOST_CA_FILE`, `${BACKUP_TLS_DIR}/ca.crt`),
    env(`PGBACKREST_${prefix}_HOST_CERT_FILE`, `${BACKUP_TLS_DIR}/tls.crt`),
    env(`PGBACKREST_${prefix}_HOST_KEY_FILE`, `${BACKUP_TLS_DIR}/tls.key`),
  ];
}

/**
 * What the database container is given with backups: archiving on (database.sh), and
 * archive-push's options: the stanza, its data directory, the repository host over TLS.
 */
export function databaseArchiveEnvironment(instance: Instance): V1EnvVar[] {
  if (!backsUp(instance)) return [];
  return [
    env(DATABASE_ARCHIVE_TIMEOUT_ENV, String(ARCHIVE_TIMEOUT_SECONDS)),
    ...commonOptions(instance, 'warn'),
    ...databaseOptions(1),
    ...remoteOptions('REPO1', repositoryHost(instance)),
  ];
}

/** The database pod's second container with backups: pgBackRest's server, serving the data directory to the repository host. */
export function databaseBackupSidecar(instance: Instance): Sidecar | undefined {
  if (!backsUp(instance)) return undefined;
  return {
    name: 'pgbackrest',
    command: [PGBACKREST_SCRIPT, 'server'],
    ports: [PGBACKREST_PORT],
    readinessProbe: tcpProbe(PORTS.pgbackrest, 'readiness'),
    livenessProbe: tcpProbe(PORTS.pgbackrest, 'liveness'),
    environment: [...commonOptions(instance, 'info'), ...serverOptions(instance), ...databaseOptions(1)],
  };
}

/** The S3 target's credentials as read from its Secret (the values of its keys, base64 as in a Secret's data). */
export interface S3Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  /** ca.crt: the CA the endpoint's certificate is checked against; absent: the image's trusted CAs. */
  ca?: string;
}

type S3Target = NonNullable<NonNullable<DefaultedIoTServiceSpec['backup']>['target']['s3']>;

/** The endpoint's host and port (443 unless it names one). */
export function s3HostPort(s3: S3Target): { host: string; port: number } {
  const [host, port] = s3.endpoint.split(':');
  return { host: host!, port: port ? Number(port) : 443 };
}

/**
 * A repository in the S3 bucket at `path` (`/<stanza>`), with path- or host-style URIs over
 * HTTPS, the endpoint's certificate checked against `caFile` when given (else the image's CAs)
 * unless insecureSkipVerify; keys from Secret backup-s3. The repository host's, and a restore's
 * from the bucket (restore.ts).
 */
export function s3RepositoryOptions(s3: S3Target, path: string, caFile: string | undefined): V1EnvVar[] {
  const { host, port } = s3HostPort(s3);
  const key = (name: string, key: string): V1EnvVar => ({ name, valueFrom: { secretKeyRef: { name: BACKUP_S3_SECRET, key } } });
  return [
    env('PGBACKREST_REPO1_TYPE', 's3'),
    env('PGBACKREST_REPO1_PATH', path),
    env('PGBACKREST_REPO1_S3_ENDPOINT', host),
    env('PGBACKREST_REPO1_STORAGE_PORT', String(port)),
    env('PGBACKREST_REPO1_S3_BUCKET', s3.bucket),
    env('PGBACKREST_REPO1_S3_REGION', s3.region),
    env('PGBACKREST_REPO1_S3_URI_STYLE', s3.uriStyle),
    key('PGBACKREST_REPO1_S3_KEY', S3_ACCESS_KEY_ID),
    key('PGBACKREST_REPO1_S3_KEY_SECRET', S3_SECRET_ACCESS_KEY),
    ...(caFile ? [env('PGBACKREST_REPO1_STORAGE_CA_FILE', caFile)] : []),
    ...(s3.insecureSkipVerify ? [env('PGBACKREST_REPO1_STORAGE_VERIFY_TLS', 'n')] : []),
  ];
}

/**
 * The repository host's container: the repository (on its volume, or in the S3 bucket with
 * `s3`, the target's credentials), its schedule and retention, every database pod as a pg host,
 * its own server.
 */
export function repositoryRuntime(instance: Instance, s3Credentials?: S3Credentials): ContainerRuntime {
  const backup = instance.spec.backup!;
  const s3 = backup.target.s3;
  if (s3 && !s3Credentials) throw new Error(`${instance.namespace}: backups go to S3 but no credentials were given`);
  const secretDirectories: SecretDirectory[] = [{ secret: BACKUP_TLS_SECRET, mountPath: BACKUP_TLS_DIR }];
  if (s3Credentials?.ca) secretDirectories.push({ secret: BACKUP_S3_SECRET, mountPath: BACKUP_S3_DIR });
  return {
    command: [PGBACKREST_SCRIPT, 'repository'],
    ports: [PGBACKREST_PORT, BACKUP_STATUS_PORT],
    readinessProbe: tcpProbe(PORTS.pgbackrest, 'readiness'),
    livenessProbe: tcpProbe(PORTS.pgbackrest, 'liveness'),
    credentials: [],
    environment: [
      env('IOT_BACKUP_INTERVAL_SECONDS', String(backupScheduleSeconds(backup.schedule))),
      env('IOT_BACKUP_STATUS_PORT', String(PORTS.backupStatus)),
      ...commonOptions(instance, 'info'),
      ...serverOptions(instance),
      ...(restoresOwnStanza(instance) && instance.createdAt ? [env(BACKUP_OWN_SINCE_ENV, instance.createdAt)] : []),
      ...(s3 ? s3RepositoryOptions(s3, `/${instance.namespace}`, s3Credentials!.ca ? `${BACKUP_S3_DIR}/${S3_CA_KEY}` : undefined) : [env('PGBACKREST_REPO1_PATH', REPOSITORY_PATH)]),
      env('PGBACKREST_REPO1_RETENTION_FULL', String(backup.retention)),
      env('PGBACKREST_START_FAST', 'y'),
      ...databaseHosts(instance).flatMap((host, i) => [...remoteOptions(`PG${i + 1}`, host), ...databaseOptions(i + 1)]),
    ],
    ...(s3 ? {} : { dataPath: '/var/lib/iot' }),
    secretDirectories,
  };
}

/** Secret backup-s3's data: the S3 credentials (and CA) under the keys of the user's Secret. */
function s3SecretData(credentials: S3Credentials): Record<string, string> {
  return {
    [S3_ACCESS_KEY_ID]: credentials.accessKeyId,
    [S3_SECRET_ACCESS_KEY]: credentials.secretAccessKey,
    ...(credentials.ca ? { [S3_CA_KEY]: credentials.ca } : {}),
  };
}

/**
 * StatefulSet `backup`: the repository host, its repository on the volume claim of
 * `spec.backup.target`, or in its S3 bucket (no volume; the template carries a checksum of the
 * credentials, read into the environment: changed ones restart the pod).
 */
export function desiredBackupStatefulSet(instance: Instance, s3Credentials?: S3Credentials): V1StatefulSet | undefined {
  if (!backsUp(instance)) return undefined;
  const claim = instance.spec.backup!.target.volumeClaim;
  const rolls = s3Credentials ? { secretChecksum: createHash('sha256').update(JSON.stringify(s3SecretData(s3Credentials))).digest('hex').slice(0, 16) } : {};
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: BACKUP, namespace: instance.namespace, labels: componentLabels(instance, BACKUP) },
    spec: {
      replicas: 1,
      serviceName: BACKUP,
      selector: { matchLabels: componentSelector(instance, BACKUP) },
      template: desiredPodTemplate(instance, BACKUP, repositoryRuntime(instance, s3Credentials), rolls),
      ...(claim
        ? {
            volumeClaimTemplates: [
              {
                metadata: { name: DATA_VOLUME, labels: instanceLabels(instance) },
                spec: {
                  accessModes: ['ReadWriteOnce'],
                  resources: { requests: { storage: canonicalQuantity(claim.size) } },
                  ...(claim.storageClassName ? { storageClassName: claim.storageClassName } : {}),
                },
              },
            ],
          }
        : {}),
    },
  };
}

/** The headless Service `backup` that names the repository host's pod (backup-0.backup.<namespace>.svc). */
export function desiredBackupService(instance: Instance): V1Service | undefined {
  if (!backsUp(instance)) return undefined;
  return service(instance, BACKUP, [PGBACKREST_PORT, BACKUP_STATUS_PORT], { headless: true, publishNotReadyAddresses: false });
}

/**
 * Secrets backup-ca (the CA, mounted nowhere) and backup-tls (the certificate of both ends), and
 * with an S3 target backup-s3 (its credentials); none without backups.
 */
export function desiredBackupSecrets(instance: Instance, certificates: CaCertificates | undefined, s3Credentials?: S3Credentials): V1Secret[] {
  if (!backsUp(instance)) return [];
  if (!certificates) throw new Error(`${instance.namespace}: backups are on but no certificates were given`);
  const secret = (name: string, data: Record<string, string>, type: string): V1Secret => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: instance.namespace, labels: instanceLabels(instance) },
    type,
    data,
  });
  return [
    secret(BACKUP_CA_SECRET, caSecretData(certificates.ca), 'Opaque'),
    secret(BACKUP_TLS_SECRET, leafSecretData(certificates.ca.cert, certificates.server), 'kubernetes.io/tls'),
    ...(s3Credentials ? [secret(BACKUP_S3_SECRET, s3SecretData(s3Credentials), 'Opaque')] : []),
  ];
}
