/**
 * What the reconcile does for an instance's backups (resources/backup.ts): keeps the certificate
 * of the database's and the repository host's pgBackRest servers, and reads the repository's state
 * for status.backup.
 *
 * Guarantees:
 * - BACKUP_CA is the backups' instance CA as instance-ca-keeper.ts keeps it: Secrets backup-ca and
 *   backup-tls, one certificate for client and server alike (BACKUP_CERTIFICATE_PROFILE) covering
 *   `backupCertificateNames`, Events BackupCAReplaced and BackupCertificateIssued.
 * - `readRepository` asks the repository host's /info (pgbackrest info as JSON, on the pod
 *   network, port 8433, which the NetworkPolicy `backup-status` opens to the operator alone) only
 *   while pod backup-0 is Ready, waiting at most FETCH_TIMEOUT_MS; `backupStatus` is a pure
 *   function of the answer: the stanza's latest backup by its end (time, type, label), the newest
 *   WAL segment of its archive for the current database and when it was archived (`iotMaxTime`,
 *   which the repository host adds to pgBackRest's answer: the segment file's modification time
 *   in the repository, image/pgbackrest.mjs; absent from an image without it, and then not
 *   reported), and how many backups it holds. A pod not
 *   ready, a failed fetch or an answer without the stanza is unknown (undefined), never a guess:
 *   status.backup then keeps what it had (status.ts).
 * - `readS3Credentials` reads the Secret spec.backup.target.s3.credentialsSecret names in the
 *   IoTService's namespace (one GET each reconcile: the reconcile of an instance with backups runs
 *   at least every minute, so a changed Secret reaches Secret backup-s3 within one); a Secret
 *   missing, or without a non-empty accessKeyId or secretAccessKey, is a
 *   BackupCredentialsNotFound failure naming what lacks, never an empty credential.
 */
import type { V1Pod, V1Secret } from '@kubernetes/client-node';
import { Kinds, ifFound, type KubeApi, type KubeObject } from '@iot-operator/runtime';
import { S3_ACCESS_KEY_ID, S3_CA_KEY, S3_SECRET_ACCESS_KEY, type BackupStatus } from './api/iotservice.ts';
import { backupCredentialsNotFoundFailure, type Failure } from './failure.ts';
import type { InstanceCaKind } from './instance-ca-keeper.ts';
import { readyPodIP } from './pod-view.ts';
import { BACKUP, BACKUP_CA_SECRET, BACKUP_CERTIFICATE_PROFILE, BACKUP_TLS_SECRET, PORTS, backupStanza, type Instance, type S3Credentials } from './resources/index.ts';

export const BACKUP_CA: InstanceCaKind = {
  caSecret: BACKUP_CA_SECRET,
  leafSecret: BACKUP_TLS_SECRET,
  profile: BACKUP_CERTIFICATE_PROFILE,
  events: { caReplaced: 'BackupCAReplaced', issued: 'BackupCertificateIssued' },
  leaf: "the certificate of the database's and the backup repository's pgBackRest servers",
  restored: 'It holds the CA the database and the backup repository trust each other by again.',
  replaced: 'The database and the backup repository present certificates of the new CA once the kubelet brings the Secret into their pods.',
};

export const FETCH_TIMEOUT_MS = 1_000;

/** What `pgbackrest info --output=json` says of a stanza, as far as status.backup reads it. */
interface StanzaInfo {
  name?: string;
  backup?: Array<{ label?: string; type?: string; timestamp?: { stop?: number } }>;
  /** `iotMaxTime`: Unix seconds `max` was written to the repository, added by the repository host. */
  archive?: Array<{ max?: string | null; iotMaxTime?: number }>;
}

/** status.backup from pgBackRest's info (its JSON) for `stanza`; undefined when it has no such stanza. */
export function backupStatus(info: unknown, stanza: string): BackupStatus | undefined {
  if (!Array.isArray(info)) return undefined;
  const found = (info as StanzaInfo[]).find((entry) => entry?.name === stanza);
  if (!found) return undefined;
  const backups = (found.backup ?? []).filter((b) => typeof b.timestamp?.stop === 'number' && b.label && b.type);
  const last = backups.reduce<(typeof backups)[number] | undefined>((latest, b) => (!latest || b.timestamp!.stop! >= latest.timestamp!.stop! ? b : latest), undefined);
  const archive = found.archive?.at(-1);
  const wal = archive?.max;
  const walTime = wal && typeof archive.iotMaxTime === 'number' && Number.isFinite(archive.iotMaxTime) && archive.iotMaxTime > 0 ? archive.iotMaxTime : undefined;
  return {
    ...(last ? { lastBackup: { time: new Date(last.timestamp!.stop! * 1000).toISOString(), type: last.type!, label: last.label! } } : {}),
    ...(wal ? { lastArchivedWal: wal } : {}),
    ...(walTime !== undefined ? { lastArchivedWalTime: new Date(Math.round(walTime * 1000)).toISOString() } : {}),
    backups: backups.length,
  };
}

/** The repository's state as the repository host (pod backup-0, among `pods`) reports it now; undefined when unknown. */
export async function readRepository(instance: Instance, pods: readonly V1Pod[], fetcher: typeof fetch = fetch): Promise<BackupStatus | undefined> {
  // The pods of the instance namespace: only StatefulSet backup makes one of this name.
  const pod = pods.find((p) => p.metadata?.name === `${BACKUP}-0`);
  const ip = pod && readyPodIP(pod as Parameters<typeof readyPodIP>[0]);
  if (!ip) return undefined;
  try {
    const response = await fetcher(`http://${ip.includes(':') ? `[${ip}]` : ip}:${PORTS.backupStatus}/info`, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
    if (!response.ok) return undefined;
    return backupStatus(await response.json(), backupStanza(instance));
  } catch {
    return undefined;
  }
}

/** The S3 target's credentials and the version of the Secret they were read from; undefined without an S3 target. */
export async function readS3Credentials(client: Pick<KubeApi, 'get'>, instance: Instance): Promise<{ ok: true; credentials: S3Credentials; version: string } | { ok: false; failure: Failure } | undefined> {
  const name = instance.spec.backup?.target.s3?.credentialsSecret;
  if (!name) return undefined;
  const secret = await ifFound(client.get<V1Secret & KubeObject>(Kinds.Secret, name, instance.landscape));
  if (!secret) return { ok: false, failure: backupCredentialsNotFoundFailure(name, instance.landscape, undefined) };
  const data = secret.data ?? {};
  const missing = [S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY].filter((key) => !data[key]);
  if (missing.length > 0) return { ok: false, failure: backupCredentialsNotFoundFailure(name, instance.landscape, missing) };
  const ca = data[S3_CA_KEY];
  return { ok: true, credentials: { accessKeyId: data[S3_ACCESS_KEY_ID]!, secretAccessKey: data[S3_SECRET_ACCESS_KEY]!, ...(ca ? { ca } : {}) }, version: `${secret.metadata.uid}/${secret.metadata.resourceVersion}` };
}
