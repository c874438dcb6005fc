/**
 * A new instance's database restored from pgBackRest backups (`spec.restore`): from another
 * instance's repository host, or (`fromBucket`) straight from the S3 bucket the instance backs up
 * to; what the new instance runs for it, and what a source instance lets in meanwhile.
 *
 * Guarantees: without `spec.restore` nothing here exists and the database pods are as before.
 * With it:
 * - Every database pod has an init container `restore` (the database's image,
 *   image/database-restore.sh) that restores only into a data directory without a database
 *   (no PG_VERSION), only on the first pod (database-0: with three replicas the others copy the
 *   restored primary, as after any bootstrap), and only while Secret `restore-tls` says a restore
 *   is to be made: `pgbackrest restore` of stanza `<landscape>-<from>` — from the source's
 *   repository host (`backup-0.backup.<landscape>-<from>.svc`, over mutual TLS), or with
 *   `fromBucket` from the bucket of `spec.backup.target.s3` at `/<landscape>-<from>` (the same
 *   endpoint and options as the repository host's, `s3RepositoryOptions`; keys from Secret
 *   backup-s3), needing no IoTService `from` — into a staging directory beside
 *   the data directory, to `targetTime` (pgBackRest's `--type=time`, the backup chosen by it) or
 *   to the end of the archive; PostgreSQL then recovers there from that archive with
 *   archiving off (nothing of the new instance reaches the stanza restored from during the
 *   restore) and is promoted, its
 *   recovery settings are reset, and only then is the staging directory renamed into the data
 *   directory. A restore cut short (the pod deleted) leaves no database in the data directory:
 *   the next start restores afresh. What it did is its termination message (JSON): the backup
 *   restored and the time of the last transaction recovered, which the operator reads into
 *   status.restore (restores.ts).
 * - Secret `restore-tls` (Opaque), mounted into the init container alone, says a restore is to
 *   be made: from a repository host it holds a client certificate of the SOURCE's backup CA
 *   (ca.crt, tls.crt, tls.key) with the common name that host admits to its stanza
 *   (BACKUP_CLIENT); from the bucket it holds RESTORE_BUCKET_KEY and, when the credentials
 *   Secret has one, the endpoint's CA (ca.crt). Once the restore is recorded as
 *   done (status.restore.state Restored) the Secret holds only RESTORE_DONE_KEY: the other
 *   keys are gone, the init container never restores again, and a database pod started anew
 *   afterwards (a lost volume) starts as any instance does. A Secret holding none of them (not written
 *   yet) makes the init container fail rather than let an empty database start.
 * - While the restore is not done, `database-peers` lets the database pods reach the source's
 *   repository host on 8432 (network-policies.ts), and the source's `backup-peers` admits them
 *   (the source's own rendering: `restorers`); from the bucket, it lets them out to the S3
 *   endpoint's port instead, and nothing of any other instance is opened.
 * - The restored database keeps the source's rows, and its roles take the new instance's
 *   passwords at its first start (image/database-roles.sh runs at every start); with spec.backup the
 *   new instance archives to its own repository under its own stanza (backup.ts): never another
 *   instance's, and the stanza restored from only when `from` names the instance itself.
 */

import type { V1EnvVar, V1Secret } from '@kubernetes/client-node';
import type { Instance } from './instance.ts';
import { BACKUP, BACKUP_CLIENT, PGDATA_PATH, s3RepositoryOptions, type S3Credentials } from './backup.ts';
import { S3_CA_KEY } from '../api/iotservice.ts';
import type { CertificateAuthority } from '@iot-operator/runtime';
import { leafSecretData, type ServerCertificate } from './instance-ca.ts';
import { instanceLabels } from './labels.ts';
import { PORTS } from './ports.ts';

export const RESTORE_CONTAINER = 'restore';
export const RESTORE_TLS_SECRET = 'restore-tls';
/** Where the init container finds Secret restore-tls. */
export const RESTORE_TLS_DIR = '/etc/iot/restore-tls';
/** The image's restore script (scripts/dockerfiles.ts RESTORE_SCRIPT). */
export const RESTORE_SCRIPT = '/usr/local/bin/iot-database-restore';
/** Where the restore is made before it becomes the data directory: the same volume, so the rename is atomic. */
export const RESTORE_STAGING_PATH = `${PGDATA_PATH}.restoring`;

/** Whether the instance starts from a backup. */
export function restores(instance: Instance): boolean {
  return instance.spec.restore !== undefined;
}

/** Whether the instance restores from the bucket of its own spec.backup.target.s3 (`fromBucket`), not through a repository host. */
export function restoresFromBucket(instance: Instance): boolean {
  return instance.spec.restore?.fromBucket === true;
}

/** The source instance's namespace (`<landscape>-<from>`): the stanza restored. */
export function restoreSourceNamespace(instance: Instance): string {
  return `${instance.landscape}-${instance.spec.restore!.from}`;
}

/** The source's repository host, as its certificate names it. */
export function restoreRepositoryHost(instance: Instance): string {
  return `${BACKUP}-0.${BACKUP}.${restoreSourceNamespace(instance)}.svc`;
}

/**
 * `targetTime` (RFC 3339) as pgBackRest's `--target` takes it for choosing the backup by time:
 * `YYYY-MM-DD HH:MM:SS.mmm+00`, in UTC (PostgreSQL reads the same text as recovery_target_time).
 */
export function pgbackrestTarget(targetTime: string): string {
  const time = new Date(targetTime);
  if (Number.isNaN(time.getTime())) throw new Error(`not a time: ${JSON.stringify(targetTime)}`);
  return `${time.toISOString().replace('T', ' ').replace('Z', '')}+00`;
}

const env = (name: string, value: string): V1EnvVar => ({ name, value });

/**
 * The environment of the init container: the stanza restored, the staging directory, the target,
 * and the source's repository host over TLS, or with `fromBucket` the bucket (its CA file, when
 * Secret restore-tls has one, is the script's to name).
 */
export function restoreEnvironment(instance: Instance): V1EnvVar[] {
  const restore = instance.spec.restore!;
  const tls = (name: string) => `${RESTORE_TLS_DIR}/${name}`;
  const s3 = instance.spec.backup?.target.s3;
  if (restore.fromBucket && !s3) throw new Error(`${instance.namespace}: spec.restore.fromBucket without spec.backup.target.s3`);
  const repository = s3 && restore.fromBucket
    ? s3RepositoryOptions(s3, `/${restoreSourceNamespace(instance)}`, undefined)
    : [
        env('PGBACKREST_REPO1_HOST', restoreRepositoryHost(instance)),
        env('PGBACKREST_REPO1_HOST_TYPE', 'tls'),
        env('PGBACKREST_REPO1_HOST_PORT', String(PORTS.pgbackrest)),
        env('PGBACKREST_REPO1_HOST_CA_FILE', tls('ca.crt')),
        env('PGBACKREST_REPO1_HOST_CERT_FILE', tls('tls.crt')),
        env('PGBACKREST_REPO1_HOST_KEY_FILE', tls('tls.key')),
      ];
  return [
    { name: 'POD_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
    env('IOT_DATABASE_REPLICAS', String(instance.spec.database.replicas)),
    env('IOT_RESTORE_FROM', restore.from),
    ...(restore.targetTime ? [env('IOT_RESTORE_TARGET', pgbackrestTarget(restore.targetTime))] : []),
    env('IOT_RESTORE_TLS_DIR', RESTORE_TLS_DIR),
    env('PGBACKREST_STANZA', restoreSourceNamespace(instance)),
    env('PGBACKREST_LOG_LEVEL_FILE', 'off'),
    env('PGBACKREST_LOG_LEVEL_CONSOLE', 'info'),
    env('PGBACKREST_LOCK_PATH', '/tmp/pgbackrest'),
    // restore clears the archive-get queue of the spool path: Debian's /var/spool/pgbackrest is not ours.
    env('PGBACKREST_SPOOL_PATH', '/tmp/pgbackrest-spool'),
    env('PGBACKREST_PG1_PATH', RESTORE_STAGING_PATH),
    ...repository,
  ];
}

/** The client certificate of the source's backup CA that its repository host admits to its stanza, with that CA. */
export interface RestoreCertificate {
  ca: Pick<CertificateAuthority, 'cert'>;
  client: ServerCertificate;
}

/** The names the restore's client certificate is issued for: the new instance's database pods (its peer checks the common name alone). */
export function restoreCertificateNames(instance: Instance): string[] {
  return Array.from({ length: instance.spec.database.replicas }, (_, i) => `DNS:database-${i}.database.${instance.namespace}.svc`);
}

/** The profile of the restore's client certificate: the common name the source's repository host admits. */
export const RESTORE_CLIENT_NAME = BACKUP_CLIENT;

/** The key of Secret restore-tls once the restore is done, in place of the certificate: the init container then never restores. */
export const RESTORE_DONE_KEY = 'restored';
/** The key of Secret restore-tls while a restore from the bucket is to be made (image/database-restore.sh). */
export const RESTORE_BUCKET_KEY = 'bucket';

/** What Secret restore-tls is rendered from: a restore still to be made, and how it reads the backups; undefined once done. */
export type PendingRestore = { certificate: RestoreCertificate } | { bucket: S3Credentials };

/**
 * Secret restore-tls: while the restore is to be made, the client certificate, or from the
 * bucket RESTORE_BUCKET_KEY and the endpoint's CA (when the credentials have one); once it is
 * done (`pending` undefined) only RESTORE_DONE_KEY, the other keys removed. None without
 * spec.restore.
 */
export function desiredRestoreTlsSecret(instance: Instance, pending: PendingRestore | undefined): V1Secret | undefined {
  if (!restores(instance)) return undefined;
  const mark = Buffer.from('true').toString('base64');
  const data = !pending
    ? { [RESTORE_DONE_KEY]: mark }
    : 'certificate' in pending
      ? leafSecretData(pending.certificate.ca.cert, pending.certificate.client)
      : { [RESTORE_BUCKET_KEY]: mark, ...(pending.bucket.ca ? { [S3_CA_KEY]: pending.bucket.ca } : {}) };
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: RESTORE_TLS_SECRET, namespace: instance.namespace, labels: instanceLabels(instance) },
    type: 'Opaque',
    data,
  };
}

/** The restoring side of an instance's NetworkPolicies: the source namespace its database pods may reach while the restore is not done. */
export interface RestorePeers {
  /** The source's namespace and id, while this instance's restore through its repository host is not done. */
  source?: { namespace: string; id: string };
  /** While this instance's restore from its bucket (`fromBucket`) is not done: its database pods go out to the S3 endpoint's port. */
  bucket?: boolean;
  /** Instances restoring from this one now (their namespace and id): the repository host admits their database pods. */
  restorers?: ReadonlyArray<{ namespace: string; id: string }>;
}
