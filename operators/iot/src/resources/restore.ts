/**
 * A new instance's database restored from another instance's pgBackRest backups (`spec.restore`):
 * what the new instance runs for it, and what the source instance lets in meanwhile.
 *
 * Guarantees: without `spec.restore` nothing here exists and the database pods are as before.
 * With it:
 * - Every database pod has an init container `restore` (the database's image,
 *   image/database-restore.sh) that restores only into a data directory without a database
 *   (no PG_VERSION), only on the first pod (database-0: with three replicas the others copy the
 *   restored primary, as after any bootstrap), and only while Secret `restore-tls` holds a key:
 *   `pgbackrest restore` from the source's repository host (its stanza, the source namespace;
 *   `backup-0.backup.<source namespace>.svc`, over mutual TLS) into a staging directory beside
 *   the data directory, to `targetTime` (pgBackRest's `--type=time`, the backup chosen by it) or
 *   to the end of the archive; PostgreSQL then recovers there from the source's archive with
 *   archiving off (nothing of the new instance reaches the source's stanza) and is promoted, its
 *   recovery settings are reset, and only then is the staging directory renamed into the data
 *   directory. A restore cut short (the pod deleted) leaves no database in the data directory:
 *   the next start restores afresh. What it did is its termination message (JSON): the backup
 *   restored and the time of the last transaction recovered, which the operator reads into
 *   status.restore (restores.ts).
 * - Secret `restore-tls` (Opaque: ca.crt, tls.crt, tls.key) holds a client certificate of the
 *   SOURCE's backup CA with the common name its repository host admits to its stanza
 *   (BACKUP_CLIENT); it is mounted into the init container alone. Once the restore is recorded as
 *   done (status.restore.state Restored) the Secret holds only RESTORE_DONE_KEY: the certificate's
 *   keys are gone, the init container never restores again, and a database pod started anew
 *   afterwards (a lost volume) starts as any instance does. A Secret holding neither (not written
 *   yet) makes the init container fail rather than let an empty database start.
 * - While the restore is not done, `database-peers` lets the database pods reach the source's
 *   repository host on 8432 (network-policies.ts), and the source's `backup-peers` admits them
 *   (the source's own rendering: `restorers`); nothing else of either instance is opened.
 * - The restored database keeps the source's rows, and its roles take the new instance's
 *   passwords at its first start (image/database-roles.sh runs at every start); with spec.backup the
 *   new instance archives to its own repository under its own stanza (backup.ts), never the source's.
 */

import type { V1EnvVar, V1Secret } from '@kubernetes/client-node';
import type { Instance } from './instance.ts';
import { BACKUP, BACKUP_CLIENT, PGDATA_PATH } from './backup.ts';
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

/** The source instance's namespace (`<landscape>-<from>`): its repository's stanza. */
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

/** The environment of the init container: the source's stanza and repository host over TLS, the staging directory, the target. */
export function restoreEnvironment(instance: Instance): V1EnvVar[] {
  const restore = instance.spec.restore!;
  const tls = (name: string) => `${RESTORE_TLS_DIR}/${name}`;
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
    env('PGBACKREST_REPO1_HOST', restoreRepositoryHost(instance)),
    env('PGBACKREST_REPO1_HOST_TYPE', 'tls'),
    env('PGBACKREST_REPO1_HOST_PORT', String(PORTS.pgbackrest)),
    env('PGBACKREST_REPO1_HOST_CA_FILE', tls('ca.crt')),
    env('PGBACKREST_REPO1_HOST_CERT_FILE', tls('tls.crt')),
    env('PGBACKREST_REPO1_HOST_KEY_FILE', tls('tls.key')),
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

/**
 * Secret restore-tls: the client certificate while the restore is to be made; once it is done
 * (`certificate` undefined) only RESTORE_DONE_KEY, the certificate's keys removed. None without
 * spec.restore.
 */
export function desiredRestoreTlsSecret(instance: Instance, certificate: RestoreCertificate | undefined): V1Secret | undefined {
  if (!restores(instance)) return undefined;
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: RESTORE_TLS_SECRET, namespace: instance.namespace, labels: instanceLabels(instance) },
    type: 'Opaque',
    data: certificate ? leafSecretData(certificate.ca.cert, certificate.client) : { [RESTORE_DONE_KEY]: Buffer.from('true').toString('base64') },
  };
}

/** The restoring side of an instance's NetworkPolicies: the source namespace its database pods may reach while the restore is not done. */
export interface RestorePeers {
  /** The source's namespace and id, while this instance's restore is not done. */
  source?: { namespace: string; id: string };
  /** Instances restoring from this one now (their namespace and id): the repository host admits their database pods. */
  restorers?: ReadonlyArray<{ namespace: string; id: string }>;
}
