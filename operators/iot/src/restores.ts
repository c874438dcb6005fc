/**
 * What the reconcile does for `spec.restore` (resources/restore.ts): checks the source before
 * anything of the new instance is made, keeps the client certificate of the source's backup CA,
 * reads how the restore went from the first database pod, and tells a source which instances
 * restore from it.
 *
 * Guarantees:
 * - `checkSource`: a restore from the bucket (`fromBucket`) needs no IoTService: none is looked
 *   up, `from` may name any instance, this one included (its stanza is read from the bucket of
 *   spec.backup.target.s3, which validation requires). Otherwise it judges the source IoTService
 *   as `find` finds it: none, this instance
 *   itself, one whose spec is invalid or has no spec.backup → a Failure naming what to do;
 *   one with backups but none completed yet (status.backup.lastBackup absent) → Waiting; else
 *   its resolved instance. The reconcile writes no child of a restoring instance while its source
 *   does not pass (so no database is made that could start empty), unless the restore is done.
 * - `restoreProgress` reads the init container `restore` of pod database-0 (as the API server has
 *   it: the pod cache keeps no termination message): its termination
 *   message (JSON, image/database-restore.sh) once it ended with 0 — restored (the backup, the
 *   time recovered to), or a data directory found holding a database (restored before, its
 *   message lost with an earlier pod) — or, while its latest run failed, the failure with what
 *   it said. Anything else (not started, running, no such pod) is undefined: not known yet.
 * - `RestoreCertificates` issues the client certificate with the source's backup CA (Secret
 *   backup-ca of the source namespace: read when its resourceVersion in the cache changed, or
 *   got from the API server when it is not cached) under BACKUP_CERTIFICATE_PROFILE, so its
 *   common name is the one the source's repository host admits; it keeps one it issued (read
 *   back from Secret restore-tls after a restart) while the same CA signed it and it is not due
 *   for renewal. A source CA that cannot sign (missing, unusable) is Waiting, never a new CA.
 * - `restorersOf` names the instances of the landscape restoring through `source`'s repository
 *   host whose restore is not done (status.restore.state not Restored) and that are not being
 *   deleted; one restoring from the bucket is never among them (nothing of the source opens to it).
 */
import type { V1Pod, V1Secret } from '@kubernetes/client-node';
import { Kinds, ifFound, type CertificateAuthority, type KubeObject } from '@iot-operator/runtime';
import type { IoTService, RestoreStatus } from './api/iotservice.ts';
import type { ChildBodies } from './child-bodies.ts';
import type { Failure } from './failure.ts';
import type { CaKeeperContext } from './instance-ca-keeper.ts';
import {
  BACKUP_CA_SECRET,
  BACKUP_CERTIFICATE_PROFILE,
  RESTORE_CONTAINER,
  RESTORE_TLS_SECRET,
  backsUp,
  caOfSecret,
  caProblem,
  certificateExpiry,
  instanceNamespaceName,
  keepOrIssue,
  resolveInstance,
  restoreCertificateNames,
  restoreSourceNamespace,
  restoresFromBucket,
  serverOfSecret,
  type Instance,
  type OperatorConfig,
  type RestoreCertificate,
} from './resources/index.ts';
import type { Waiting } from './status/status.ts';

/** The source as `checkSource` judged it: the IoTService restored through, or the bucket (no IoTService). */
export type SourceCheck = { kind: 'ok'; source: Instance } | { kind: 'bucket' } | { kind: 'failed'; failure: Failure } | { kind: 'waiting'; waiting: Waiting };

/** An IoTService as the restore's source is looked up: by its name in the landscape. */
export type FindSource = (name: string) => Promise<Pick<IoTService, 'metadata' | 'spec' | 'status'> | undefined>;

/** Whether the restore named by `instance.spec.restore` can be made now (the source IoTService looked up with `find` only when one is needed). */
export async function checkSource(instance: Instance, find: FindSource, config: OperatorConfig): Promise<SourceCheck> {
  if (restoresFromBucket(instance)) return { kind: 'bucket' };
  const from = instance.spec.restore!.from;
  const field = `spec.restore.from (${from})`;
  if (from === instance.id) {
    return { kind: 'failed', failure: { reason: 'RestoreSourceInvalid', message: `${field} names this IoTService itself; a restore through a repository host starts a new instance from another instance's backups: create an IoTService naming that instance, or restore this instance's own stanza from its bucket (spec.restore.fromBucket: true).` } };
  }
  const found = await find(from);
  if (!found) {
    return {
      kind: 'failed',
      failure: { reason: 'RestoreSourceNotFound', message: `${field} names no IoTService of namespace ${instance.landscape}: name an instance with spec.backup there, or create it (a deleted instance's volume repository went with it; an S3 bucket keeps its stanza: restore from it with spec.restore.fromBucket: true); looked for again every 30 s.` },
    };
  }
  const resolved = resolveInstance(found, config);
  if (!resolved.ok) {
    return { kind: 'failed', failure: { reason: 'RestoreSourceInvalid', message: `${field} names an IoTService the operator cannot run (${resolved.failure.reason}: ${resolved.failure.message})` } };
  }
  if (!backsUp(resolved.instance)) {
    return { kind: 'failed', failure: { reason: 'RestoreSourceNotBackedUp', message: `${field} names an IoTService without spec.backup, which has no backups to restore from: give it spec.backup, wait for its first backup (status.backup.lastBackup), then create this IoTService again.` } };
  }
  if (!found.status?.backup?.lastBackup) {
    return {
      kind: 'waiting',
      waiting: { reason: 'RestoreSourceHasNoBackup', message: `Waiting for the first backup of IoTService ${from} (its status.backup.lastBackup) to restore from; nothing of this instance is made until then.` },
    };
  }
  return { kind: 'ok', source: resolved.instance };
}

/** What the restore init container of database-0 says: done, failed, or not known yet (undefined). */
export type RestoreProgress = { kind: 'restored'; backup?: string; recoveredTo?: string; completedAt?: string } | { kind: 'failed'; message: string };

interface TerminationMessage {
  restored?: boolean;
  reason?: string;
  backup?: string;
  recoveredTo?: string;
}

/** How the restore of the first database pod went, from its init container's state; undefined while not known. */
export function restoreProgress(pods: readonly V1Pod[]): RestoreProgress | undefined {
  const pod = pods.find((p) => p.metadata?.name === 'database-0' && !p.metadata.deletionTimestamp);
  const status = pod?.status?.initContainerStatuses?.find((c) => c.name === RESTORE_CONTAINER);
  if (!status) return undefined;
  const terminated = status.state?.terminated;
  if (terminated?.exitCode === 0) {
    let message: TerminationMessage = {};
    try {
      message = JSON.parse(terminated.message ?? '') as TerminationMessage;
    } catch {
      return undefined;
    }
    if (message.restored === true || message.reason === 'DataDirectoryExists') {
      return {
        kind: 'restored',
        ...(message.backup ? { backup: message.backup } : {}),
        ...(message.recoveredTo ? { recoveredTo: message.recoveredTo } : {}),
        ...(terminated.finishedAt ? { completedAt: new Date(terminated.finishedAt).toISOString() } : {}),
      };
    }
    return undefined;
  }
  const failed = terminated && terminated.exitCode !== 0 ? terminated : status.lastState?.terminated;
  if (failed && failed.exitCode !== 0) {
    const said = (failed.message ?? '').trim() || `exit code ${failed.exitCode}${failed.reason ? ` (${failed.reason})` : ''}`;
    return { kind: 'failed', message: said };
  }
  return undefined;
}

/**
 * status.restore: the previous one once Restored (for good); otherwise Restoring, or Restored as
 * `progress` says now. undefined without spec.restore.
 */
export function restoreStatus(instance: Instance, previous: RestoreStatus | undefined, progress: RestoreProgress | undefined): RestoreStatus | undefined {
  const restore = instance.spec.restore;
  if (!restore) return undefined;
  if (previous?.state === 'Restored') return previous;
  const base = { from: restore.from, ...(restore.targetTime ? { targetTime: restore.targetTime } : {}) };
  if (progress?.kind !== 'restored') return { ...base, state: 'Restoring' };
  const { kind: _, ...done } = progress;
  return { ...base, state: 'Restored', ...done };
}

/** The IoTServices of `items` restoring from `sourceId` whose restore is not done, as their namespaces and ids. */
export function restorersOf(sourceId: string, landscape: string, items: ReadonlyArray<Pick<IoTService, 'metadata' | 'spec' | 'status'>>): Array<{ namespace: string; id: string }> {
  return items
    .filter((iot) => iot.spec?.restore?.from === sourceId && iot.spec.restore.fromBucket !== true && iot.status?.restore?.state !== 'Restored' && !iot.metadata.deletionTimestamp && iot.metadata.name !== sourceId)
    .flatMap((iot) => {
      const namespace = instanceNamespaceName(landscape, iot.metadata.name ?? '');
      return namespace.ok ? [{ namespace: namespace.name, id: iot.metadata.name! }] : [];
    })
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

interface RememberedCertificate {
  /** The resourceVersion of the source's backup-ca it was judged with. */
  caVersion: string;
  ca: CertificateAuthority;
  certificate: RestoreCertificate;
}

/** The restore's client certificates, per restoring instance (see the module comment). */
export class RestoreCertificates {
  private readonly byInstance = new Map<string, RememberedCertificate>();

  constructor(private readonly bodies: ChildBodies) {}

  forget(key: string): void {
    this.byInstance.delete(key);
  }

  /** The certificate for `instance` (the IoTService `key`), or why there is none yet. */
  async certificate(ctx: CaKeeperContext, key: string, instance: Instance, now: Date): Promise<{ kind: 'ok'; certificate: RestoreCertificate } | { kind: 'waiting'; waiting: Waiting }> {
    const sourceNamespace = restoreSourceNamespace(instance);
    const cachedCa = ctx.cache.get<V1Secret & KubeObject>(Kinds.Secret, BACKUP_CA_SECRET, sourceNamespace);
    const remembered = this.byInstance.get(key);
    let ca: Partial<CertificateAuthority> | undefined;
    const caVersion = cachedCa?.metadata.resourceVersion ?? '';
    if (remembered && cachedCa && remembered.caVersion === caVersion) {
      ca = remembered.ca;
    } else {
      const secret = cachedCa ? await this.bodies.read(ctx.client, Kinds.Secret, cachedCa) : await ifFound(ctx.client.get<V1Secret & KubeObject>(Kinds.Secret, BACKUP_CA_SECRET, sourceNamespace));
      ca = caOfSecret(secret as V1Secret | undefined);
    }
    const problem = ca ? caProblem(ca, now) : 'there is none';
    if (!ca || problem) {
      return { kind: 'waiting', waiting: { reason: 'RestoreSourceNotReady', message: `Waiting for the backup CA of IoTService ${instance.spec.restore!.from} (Secret ${BACKUP_CA_SECRET} of namespace ${sourceNamespace}: ${problem}) to issue the restore's certificate.` } };
    }
    const authority = ca as CertificateAuthority;
    let client = remembered && remembered.ca.cert === authority.cert ? remembered.certificate.client : undefined;
    if (!client) {
      const cached = ctx.cache.get<V1Secret & KubeObject>(Kinds.Secret, RESTORE_TLS_SECRET, instance.namespace);
      const secret = cached ? await this.bodies.read(ctx.client, Kinds.Secret, cached) : undefined;
      const read = serverOfSecret(secret as V1Secret | undefined);
      if (read?.cert && read.key) client = { cert: read.cert, key: read.key };
    }
    const names = restoreCertificateNames(instance);
    const decision = keepOrIssue({ ca: authority, ...(client ? { server: client } : {}) }, names, now, BACKUP_CERTIFICATE_PROFILE);
    if (decision.serverIssued) {
      const expiry = certificateExpiry(decision.certificates.server.cert).toISOString();
      ctx.event('Normal', 'RestoreCertificateIssued', `Issued the restore's client certificate with the backup CA of IoTService ${instance.spec.restore!.from}, valid until ${expiry}: ${decision.serverIssued}.`);
    }
    const certificate: RestoreCertificate = { ca: { cert: authority.cert }, client: decision.certificates.server };
    this.byInstance.set(key, { caVersion, ca: authority, certificate });
    return { kind: 'ok', certificate };
  }
}
