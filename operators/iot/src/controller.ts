/**
 * The IoTService controller: watches and the reconcile step.
 *
 * Guarantees (the reconcile contract of the IoTService design):
 * - Only IoTServices in the landscape namespace (OPERATOR_NAME) are processed; secondary caches
 *   hold only objects carrying this landscape's label (plus the landscape's image-pull-secret),
 *   whole only inside this landscape's instance namespaces, and never a ConfigMap's or Secret's
 *   data (see iotservice-types.ts `iotCacheOptions`): labelled objects planted elsewhere cannot fill its memory.
 * - Child events reach their IoTService through the instance label, and so do events of the
 *   gateway's cert-manager Certificates in the landscape; a change of the source image-pull-secret
 *   reaches every instance of the landscape.
 * - Children are written stage by stage (resources/index.ts `writeStages`), the children of one
 *   stage at once: workloads only after the namespace, its policies, secrets, config and services.
 *   A Deployment whose pods would roll waits while a StatefulSet is not rolled out
 *   (rollout-order.ts): an upgrade brings database and broker up on the new version first.
 * - A child is written only when the cached object lacks a field of its desired form or carries
 *   the hash of an older desired form (server-side apply, one field manager); the credentials
 *   Secret is created once, and afterwards written only to add the keys it lacks (never changing
 *   one it has) or, when the IoTService's `cp.iotservices.io/rotate-credentials` differs from the
 *   rotation the Secret records, to make every key afresh and record it (a Normal Event
 *   `CredentialsRotated`), the new rotation then on every pod template, so every workload rolls —
 *   the StatefulSets first, as for any rollout; a reconcile of an instance whose children match
 *   makes no write at all.
 * - A namespace this operator did not create for the instance (labels and the IoTService's UID
 *   in its owner annotation) is never adopted, changed or deleted; the instance goes Failed and
 *   says so. Deletion is conditional on the namespace's UID, so a namespace recreated meanwhile
 *   by someone else is never deleted.
 * - `paused`: no child is created, changed or deleted; status is still reported.
 * - Pods that cannot come up by themselves although their cause was fixed are deleted, so their
 *   workloads recreate them (pod-restarts.ts): when the copy of the landscape's image-pull-secret
 *   is written anew, the pods waiting to pull an image (else they would wait out the kubelet's
 *   back-off, up to 5 minutes); and pods of a StatefulSet stuck on an earlier revision (else its
 *   rollout would never proceed). A database of three replicas (Patroni) is rolled by the operator
 *   (database-roll.ts): one step per reconcile — an outdated standby deleted, or a switchover asked
 *   of Patroni — only while every member is ready and both standbys stream; the instance is Processing ("Rolling the
 *   database: …") and looked at again every few seconds meanwhile. No other pod is ever deleted.
 * - Deletion: the finalizer holds the IoTService until the instance namespace is gone; it is then
 *   removed without touching any other party's finalizer. An IoTService found gone on that
 *   removal (a stale cache) is finalized: nothing is retried or logged as an error.
 * - Status is recomputed from what is observed (and the instance's latest ingestion reading,
 *   ingestion.ts; with spec.backup the repository host's state, read at each reconcile, and the
 *   instance looked at again every BACKUP_RECHECK_MS for it: backups.ts) and written only when it
 *   changes; progress within
 *   a rollout is written at most every few seconds (status-writes.ts); each meaningful
 *   transition is recorded as an Event on the IoTService. Refusals that retrying cannot fix
 *   (403, 422) become `Failed`; transient errors are retried with backoff and never set `Failed`.
 * - As one shard of a ControllerRing (`config.shard`, docs/scale.md): the caches hold only this
 *   shard's IoTServices and the children carrying its label; every child is written with the
 *   instance's shard label (never a pod template: moves restart no pod); a child of an existing
 *   instance namespace missing from the cache is moved over with one label patch, and the status
 *   is left as it is until moved children are cached (a move never shows as Processing); pods
 *   are listed from the API server when the status is computed, not cached.
 * - A 403 on the IoTService's finalizer or on the instance namespace (get, delete) is reported
 *   as `Failed` with a `Degraded` condition and a Warning Event naming the missing permission
 *   (verb, resource, namespace) and, while the IoTService is being deleted, that its deletion
 *   waits for it; it is looked at again periodically, so granting the permission is enough.
 * - With spec.backup, the backups' CA and certificate (backups.ts BACKUP_CA) are kept or made
 *   before the children are rendered, like the gateway's, and the instance looked at again when
 *   the certificate is due for renewal; its repository host admits the database pods of the
 *   instances restoring from it (their changes reach it through a watch of IoTServices).
 * - With spec.restore (restores.ts), until status.restore says Restored: the source is checked
 *   before any child is written (a failure or a wait ends the reconcile there, so no empty
 *   database is made in place of the restore), the restore's client certificate is issued with
 *   the source's backup CA (from the bucket, `fromBucket`: no source IoTService, certificate or
 *   peer; the bucket's credentials instead), and status.restore and a failed restore are read from pod
 *   database-0; once Restored, the children are rendered without the certificate and without
 *   the way to the source or the bucket.
 * - The gateway's CA and server certificate (gateway-certificates.ts), for an instance serving TLS,
 *   are kept from the instance's Secrets or made before the children are rendered, and become
 *   children like the others; the instance is looked at again when its server certificate is due
 *   for renewal. With spec.gateway.tls.issuerRef the certificate is cert-manager's: its
 *   Certificate (in the landscape, watched) is written first; until cert-manager has issued it
 *   nothing else is written (the instance is Processing, its conditions saying what cert-manager
 *   says), and while a reissue is under way the instance is rendered with what was issued before
 *   and stays Processing; a copy of a new issue into Secret gateway-tls is a Normal Event
 *   `GatewayCertificateIssued`. Without issuerRef, or while deleting, a Certificate the instance
 *   had is removed with its Secret.
 */
import { isDeepStrictEqual } from 'node:util';
import type { V1Deployment, V1Namespace, V1Pod, V1Secret, V1StatefulSet } from '@kubernetes/client-node';
import {
  Kinds,
  addFinalizer,
  controller,
  firstDifference,
  ifFound,
  hasFinalizer,
  isAlreadyExists,
  isApiError,
  isNotFound,
  overlay,
  readConditions,
  removeFinalizer,
  shardLabel,
  shardSelector,
  type ApiError,
  type KubeObject,
  type Manager,
  type Predicate,
  type ReconcileContext,
  type ReconcileResult,
  type Reconciler,
  type Request,
  type ResourceType,
  type Selection,
  withDesiredHash,
} from '@iot-operator/runtime';
import { API_GROUP, IOTSERVICE_PLURAL, type IoTService, type IoTServiceStatus, type RestoreStatus } from './api/iotservice.ts';
import { apiRefusedFailure, imagePullSecretMissingFailure, namespaceNotOwnedFailure, permissionMissingFailure, type Failure, type RefusedRequest } from './failure.ts';
import {
  CREDENTIALS_ROTATION_ANNOTATION,
  CREDENTIALS_SECRET_NAME,
  GATEWAY_TLS_SECRET,
  IMAGE_PULL_SECRET_NAME,
  INSTANCE_LABEL,
  ROTATE_CREDENTIALS_ANNOTATION,
  certificateRef,
  credentialsPatch,
  credentialsRotation,
  desiredChildren,
  generateCredentials,
  instanceIdOf,
  instanceNamespaceName,
  landscapeSelector,
  namespaceOwnership,
  resolveInstance,
  servesTls,
  backsUp,
  backupCertificateNames,
  restores,
  restoresFromBucket,
  restoreSourceNamespace,
  type PendingRestore,
  type RestorePeers,
  type S3Credentials,
  renewalTime,
  type CaCertificates,
  type DesiredChild,
  type Instance,
} from './resources/index.ts';
import { ChildBodies } from './child-bodies.ts';
import { BACKUP_CA, readRepository, readS3Credentials } from './backups.ts';
import { RestoreCertificates, checkSource, restoreProgress, restoreStatus, restorersOf } from './restores.ts';
import { GatewayCertificateKeeper, type GatewayTls, type TlsContext } from './gateway-certificates.ts';
import { InstanceCaKeeper, materialFingerprint } from './instance-ca-keeper.ts';
import type { IngestionMonitor } from './ingestion.ts';
import {
  CHILD_TYPES,
  CertificateType,
  FIELD_MANAGER,
  FINALIZER,
  IoTServiceType,
  METADATA_ONLY_TYPES,
  StorageClassType,
  inInstanceNamespace,
  keyOf,
  watchedTypes,
  type IoTControllerConfig,
} from './iotservice-types.ts';
import { DATABASE_ROLL_RECHECK_MS, onDeleteChangeover, rollDatabase } from './database-roll.ts';
import { leanPod } from './pod-view.ts';
import { podsBlockingStatefulSetRollouts, podsWaitingForImages } from './pod-restarts.ts';
import { RenderedChildren, type PreparedChild, type Rendering } from './rendered-children.ts';
import { madeOrderedReady } from './resources/broker-rollout.ts';
import { hasEmptyDirData, STATEFULSET_COMPONENTS, type KeptEmptyDirs, type StatefulSetComponent } from './resources/data-volume.ts';
import { heldBackDeployments } from './rollout-order.ts';
import { ResolvedInstances } from './resolved-instances.ts';
import { movingToUpdateRevision, msUntilStuckPodFailure, unboundClaims } from './status/pod-health.ts';
import { StatusWrites } from './status/status-writes.ts';
import { computeStatus, statusTransitionEvent, STORAGE_COMPONENTS, type ReconcileOutcome, type Waiting } from './status/status.ts';

/** How often an instance that is not yet Available is looked at again without any event. */
const PROCESSING_RECHECK_MS = 30_000;
/** When an instance whose children a shard just moved over is looked at again, at the latest. */
const MOVED_CHILDREN_RECHECK_MS = 2_000;
/** The longest wait for a server certificate's renewal time, at which the instance is looked at again. */
const RENEWAL_RECHECK_MAX_MS = 24 * 3600_000;
/** How often an instance with backups is looked at for its repository's state (status.backup). */
const BACKUP_RECHECK_MS = 60_000;
/** How often deletion checks whether the instance namespace is gone. */
const DELETION_RECHECK_MS = 2_000;

/** Where the bodies of metadata-only children are read from: this landscape's (and shard's) children in instance namespaces. */
function childBodies(config: IoTControllerConfig): ChildBodies {
  const labelSelector = config.shard ? `${landscapeSelector(config.operatorName)},${shardSelector(config.shard)}` : landscapeSelector(config.operatorName);
  return new ChildBodies({ namespace: config.watchNamespace || undefined, labelSelector }, (obj) => inInstanceNamespace(config.operatorName, obj));
}

/** The landscape's image-pull-secret, watched on its own informer (it carries none of our labels). */
function sourceSecretSelection(config: IoTControllerConfig): Selection {
  return { namespace: config.operatorName, fieldSelector: `metadata.name=${IMAGE_PULL_SECRET_NAME}` };
}

/** The IoTService controller; its status reads the ingestion of each instance from `ingestion`. */
export function registerIoTController(mgr: Manager, config: IoTControllerConfig, syncPeriodMs?: number, ingestion?: IngestionMonitor) {
  const toInstance = (obj: KubeObject): Request[] => {
    const id = instanceIdOf(obj.metadata.labels, config.operatorName);
    return id ? [{ namespace: config.operatorName, name: id }] : [];
  };
  const everyInstance = (): Request[] =>
    mgr.cache.list(IoTServiceType, { namespace: config.operatorName }).map((o) => ({ namespace: config.operatorName, name: o.metadata.name! }));

  let builder = controller(mgr).named('iotservice').for(IoTServiceType).maxConcurrentReconciles(config.maxConcurrentReconciles);
  if (syncPeriodMs !== undefined) builder = builder.resyncPeriod(syncPeriodMs);
  for (const type of watchedTypes(config)) {
    // The quota's status moves with every pod of the instance; only its spec is ours.
    builder = type === CHILD_TYPES['ResourceQuota'] ? builder.watches(type, toInstance, specOrMetadataChanged()) : builder.watches(type, toInstance);
  }
  builder = builder.watchesSelected(Kinds.Secret, sourceSecretSelection(config), everyInstance);
  // The gateway's Certificates (spec.gateway.tls.issuerRef): cert-manager's progress reaches their instance.
  builder = builder.watches(CertificateType, toInstance);
  // An instance restoring through another's repository host: its changes (made, restored, deleted) reach the source, whose repository host admits it until restored.
  builder = builder.watches(IoTServiceType, (obj) => {
    const restore = (obj as IoTService & KubeObject).spec?.restore;
    return restore && !restore.fromBucket && obj.metadata.namespace === config.operatorName ? [{ namespace: config.operatorName, name: restore.from }] : [];
  });
  return builder.reconcile(iotReconciler(config, ingestion));
}

/** The reconcile step, with the memory its shortcuts keep between runs of one controller. */
export function iotReconciler(config: IoTControllerConfig, ingestion?: IngestionMonitor): Reconciler {
  const bodies = childBodies(config);
  const memory: ReconcileMemory = { statusWrites: new StatusWrites(), rendered: new RenderedChildren(), resolved: new ResolvedInstances(config), bodies, tls: new GatewayCertificateKeeper(bodies), backupCa: new InstanceCaKeeper(bodies, BACKUP_CA), restoreCertificates: new RestoreCertificates(bodies), ingestion };
  return (request, ctx) => new IoTReconcile(config, ctx, memory).run(request);
}

/** What reconciles of an instance remember between runs (shortcuts only; see each module). */
interface ReconcileMemory {
  statusWrites: StatusWrites;
  rendered: RenderedChildren;
  resolved: ResolvedInstances;
  bodies: ChildBodies;
  tls: GatewayCertificateKeeper;
  /** The backups' CA and certificate (backups.ts). */
  backupCa: InstanceCaKeeper;
  /** The restores' client certificates of their sources' backup CAs (restores.ts). */
  restoreCertificates: RestoreCertificates;
  /** The brokers' latest readings (none in tests that run the reconcile alone). */
  ingestion: IngestionMonitor | undefined;
}

/** One reconcile of one IoTService. */
class IoTReconcile {
  /** Children this reconcile moved over from the instance's former shard (only their label written). */
  private moved = 0;
  /** The gateway's TLS material as this reconcile rendered it (none when it rendered nothing). */
  private tls: GatewayTls | undefined;
  /** The backups' certificates as this reconcile rendered them (none without spec.backup). */
  private backupCertificates: CaCertificates | undefined;
  /** status.restore as this reconcile found it (none without spec.restore, or before it was looked at). */
  private restore: RestoreStatus | undefined;
  /** The restore's init container failed: why. */
  private restoreFailure: Failure | undefined;
  /** Whether this reconcile found the three-replica database rolling (database-roll.ts): looked at again soon. */
  private rollingDatabase = false;
  /** Records an Event on the IoTService being reconciled (set once it is known). */
  private event: ((type: 'Normal' | 'Warning', reason: string, message: string) => void) | undefined;

  constructor(
    private readonly config: IoTControllerConfig,
    private readonly ctx: ReconcileContext,
    private readonly memory: ReconcileMemory,
  ) {}

  async run(request: Request): Promise<ReconcileResult> {
    const cached = this.ctx.cache.get<IoTService & KubeObject>(IoTServiceType, request.name, request.namespace);
    if (!cached) {
      this.forget(request);
      return;
    }
    try {
      if (cached.metadata.deletionTimestamp) return await this.finalize(cached);
      // A status of another shape (written under an older CRD) stops here, named, before any write:
      // the runtime marks the instance Degraded instead of a TypeError being retried forever.
      readConditions(IoTServiceType, cached);
      const iot = await this.permitted(this.iotServicePatch(cached, 'add its cleanup finalizer to the IoTService'), () => addFinalizer(this.ctx.client, IoTServiceType, cached, FINALIZER));

      const resolved = this.memory.resolved.resolve(keyOf(request), iot);
      if (!resolved.ok) return await this.report(iot, undefined, { kind: 'failed', failure: resolved.failure }, resolved.namespace);
      const instance = resolved.instance;
      const outcome = await this.realise(iot, instance);
      // Children just moved over are not in this shard's cache yet: a status computed now would
      // miss their workloads. Their arrival brings the instance back; the former status stands.
      if (this.moved > 0) return { requeueAfterMs: MOVED_CHILDREN_RECHECK_MS };
      return await this.report(iot, instance, outcome, instance.namespace);
    } catch (err) {
      // A 403 is reported (Degraded, Warning Event) and looked at again later, never retried silently.
      if (!(err instanceof PermissionMissing)) throw err;
      const namespace = instanceNamespaceName(this.config.operatorName, cached.metadata.name ?? '');
      const failure = permissionMissingFailure(err.request, err.serverMessage, !!cached.metadata.deletionTimestamp);
      return this.report(cached, undefined, failed(failure), namespace.ok ? namespace.name : undefined);
    }
  }

  /** Runs `call`; a 403 becomes a `PermissionMissing` naming `request`. */
  private async permitted<T>(request: RefusedRequest, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      if (isApiError(err, 'Forbidden')) throw new PermissionMissing(request, err.message);
      throw err;
    }
  }

  private iotServicePatch(iot: KubeObject, purpose: string): RefusedRequest {
    return { verb: 'patch', resource: `${IOTSERVICE_PLURAL}.${API_GROUP}`, namespace: iot.metadata.namespace, purpose };
  }

  /**
   * The instance's StatefulSet of `component` as it exists: cached, or — for a shard that has just
   * taken the instance over, whose cache has none of its children until they carry its label —
   * from the API server. What it was made with (an emptyDir, OrderedReady) is kept, and a desired
   * form rendered without it would be refused as a change of an immutable field.
   */
  private async observedStatefulSet(instance: Instance, component: StatefulSetComponent): Promise<(V1StatefulSet & KubeObject) | undefined> {
    const cached = this.ctx.cache.get<V1StatefulSet & KubeObject>(Kinds.StatefulSet, component, instance.namespace);
    if (cached || !this.config.shard) return cached;
    return ifFound(this.ctx.client.get<V1StatefulSet & KubeObject>(Kinds.StatefulSet, component, instance.namespace));
  }

  /** What the instance's StatefulSets were made with and keep: those with an emptyDir for their data, and a broker made with OrderedReady. */
  private async keptStatefulSetShapes(instance: Instance): Promise<{ keptEmptyDirs: KeptEmptyDirs; keptOrderedReadyBroker: boolean }> {
    const observed = new Map(await Promise.all(STATEFULSET_COMPONENTS.map(async (component) => [component, await this.observedStatefulSet(instance, component)] as const)));
    const broker = observed.get('broker');
    return {
      keptEmptyDirs: new Set(STATEFULSET_COMPONENTS.filter((component) => {
        const statefulSet = observed.get(component);
        return statefulSet !== undefined && hasEmptyDirData(statefulSet);
      })),
      keptOrderedReadyBroker: broker !== undefined && madeOrderedReady(broker),
    };
  }

  /** Brings the children to their desired state (unless paused); says what happened. */
  private async realise(iot: IoTService & KubeObject, instance: Instance): Promise<ReconcileOutcome> {
    if (this.config.watchNamespace && this.config.watchNamespace !== instance.namespace) {
      return failed({
        reason: 'NamespaceNotOwned',
        message: `WATCH_NAMESPACE=${this.config.watchNamespace} limits the operator to that namespace, but this instance lives in ${instance.namespace}; run the operator with WATCH_NAMESPACE="" to serve every instance.`,
      });
    }
    const namespace = await this.observedNamespace(instance);
    const ownership = namespaceOwnership(namespace, instance);
    if (ownership === 'foreign') return failed(namespaceNotOwnedFailure(instance.namespace));
    if (instance.spec.paused) return { kind: 'paused' };
    // Deleted by hand: nothing can be created in it until it is gone; its deletion event brings
    // the instance back here to recreate it.
    if (namespace?.metadata?.deletionTimestamp) return { kind: 'applied', childrenMatched: false };

    const source = this.ctx.cache.get<V1Secret & KubeObject>(Kinds.Secret, IMAGE_PULL_SECRET_NAME, this.config.operatorName, sourceSecretSelection(this.config));
    if (!source) return failed(imagePullSecretMissingFailure(IMAGE_PULL_SECRET_NAME, this.config.operatorName));

    const key = keyOf({ namespace: iot.metadata.namespace, name: iot.metadata.name! });
    const tlsContext = this.tlsContext(iot);
    this.event = tlsContext.event;
    let waiting: Waiting | undefined;
    if (servesTls(instance)) {
      const tls = await this.memory.tls.material(tlsContext, key, instance, new Date());
      if (tls.kind === 'failed') return failed(tls.failure);
      if (tls.kind === 'waiting') return { kind: 'waiting', waiting: tls.waiting };
      this.tls = tls.tls;
      waiting = tls.waiting;
    } else {
      await this.memory.tls.release(tlsContext, key, instance);
    }
    const gatewayTls = this.tls?.material;
    if (backsUp(instance)) {
      this.backupCertificates = await this.memory.backupCa.certificates(tlsContext, key, instance, backupCertificateNames(instance), new Date());
    } else {
      this.memory.backupCa.forget(key);
    }
    const backupCertificates = this.backupCertificates;
    const s3 = await readS3Credentials(this.ctx.client, instance);
    if (s3 && !s3.ok) return failed(s3.failure);
    const restore = await this.restoreSources(iot, instance, tlsContext, key, s3?.credentials);
    if (restore.kind !== 'ok') return restore.outcome;
    const { pendingRestore, restorePeers } = restore;
    const restoreCertificate = pendingRestore && 'certificate' in pendingRestore ? pendingRestore.certificate : undefined;

    const { keptEmptyDirs, keptOrderedReadyBroker } = await this.keptStatefulSetShapes(instance);
    const recorded = this.ctx.cache.get<V1Secret & KubeObject>(Kinds.Secret, CREDENTIALS_SECRET_NAME, instance.namespace)?.metadata.annotations?.[CREDENTIALS_ROTATION_ANNOTATION];
    const rotation = credentialsRotation(iot.metadata.annotations?.[ROTATE_CREDENTIALS_ANNOTATION], recorded);
    const renderingKey = `${iot.metadata.uid}/${instance.generation}/${source.metadata.uid}/${source.metadata.resourceVersion}/${[...keptEmptyDirs].join(',')}/${keptOrderedReadyBroker}/${this.tls?.fingerprint ?? ''}/${backupCertificates ? materialFingerprint(backupCertificates) : ''}/${restoreCertificate ? materialFingerprint(restoreCertificate) : ''}/${JSON.stringify(restorePeers)}/${rotation ?? ''}/${s3?.version ?? ''}`;
    const rendering = this.memory.rendered.get(key, renderingKey, () =>
      // Fresh credentials are used only for what the credentials Secret lacks, or all of them on a rotation.
      desiredChildren(instance, { imagePullSecret: source, credentials: generateCredentials(), credentialsRotation: rotation, keptEmptyDirs, keptOrderedReadyBroker, gatewayTls, backupCertificates, backupS3Credentials: s3?.credentials, pendingRestore, restorePeers }).children.map((child) =>
        prepareChild(child, this.config.shard),
      ),
    );
    let writes = 0;
    let relabelled = 0;
    let pullSecretWritten = false;
    let tlsSecretWritten = false;
    const held = this.heldBackDeployments(rendering);
    for (const all of rendering.stages) {
      const stage = all.filter((index) => !held.has(index));
      const results = await Promise.allSettled(stage.map((index) => this.ensureChild(index, rendering, ownership)));
      writes += results.filter((r) => r.status === 'fulfilled' && r.value === 'written').length;
      const written = (name: string) =>
        results.some((r, i) => {
          const id = rendering.ids[stage[i]!]!;
          return r.status === 'fulfilled' && r.value === 'written' && id.kind === 'Secret' && id.name === name;
        });
      pullSecretWritten ||= written(IMAGE_PULL_SECRET_NAME);
      tlsSecretWritten ||= written(GATEWAY_TLS_SECRET);
      relabelled += results.filter((r) => r.status === 'fulfilled' && r.value === 'relabelled').length;
      const errors = results.flatMap((r, i) => (r.status === 'rejected' ? [{ err: r.reason as unknown, child: rendering.ids[stage[i]!]! }] : []));
      // A refusal retrying cannot fix is reported; any other error is retried with backoff.
      for (const { err, child } of errors) {
        if (isRefusal(err)) return failed(apiRefusedFailure(err.reason, { kind: child.kind, name: child.name, namespace: child.namespace }, err.message));
      }
      if (errors[0]) throw errors[0].err;
    }
    rendering.releaseIfAllMatched();
    if (writes > 0) this.ctx.log.info({ writes }, 'children written');
    if (tlsSecretWritten && gatewayTls && !gatewayTls.instanceCa) {
      const until = this.tls!.notAfter.toISOString();
      this.ctx.recorder.event(iot, 'Normal', 'GatewayCertificateIssued', `Secret ${GATEWAY_TLS_SECRET} holds the server certificate cert-manager issued for Certificate ${certificateRef(instance)}, valid until ${until}.`);
    }
    await this.restartStuckPods(iot, instance, pullSecretWritten);
    const databaseRoll = await this.rollDatabase(iot, instance);
    this.rollingDatabase = databaseRoll !== undefined;
    waiting ??= databaseRoll;
    // Children that only took this shard's label over match: the instance itself did not change.
    if (relabelled > 0) this.ctx.log.info({ relabelled, shard: this.config.shard?.name }, 'children moved to this shard');
    this.moved = relabelled;
    return { kind: 'applied', childrenMatched: writes === 0 && held.size === 0, ...(waiting ? { waiting } : {}) };
  }

  /**
   * What the rendering takes for restores (restores.ts): with spec.restore not yet done, the source
   * checked (a failure or a wait ends the reconcile before any child is written) and the client
   * certificate of its backup CA, or from the bucket its credentials (`s3Credentials`); with
   * spec.backup, the instances restoring from this one.
   */
  private async restoreSources(iot: IoTService & KubeObject, instance: Instance, tlsContext: TlsContext, key: string, s3Credentials: S3Credentials | undefined): Promise<{ kind: 'ok'; pendingRestore?: PendingRestore; restorePeers: RestorePeers } | { kind: 'stop'; outcome: ReconcileOutcome }> {
    const restorePeers: RestorePeers = {};
    let pendingRestore: PendingRestore | undefined;
    if (restores(instance)) {
      // The cache keeps too little of a pod (pod-view.ts) for the restore's termination message: asked while not Restored.
      const progress = iot.status?.restore?.state === 'Restored' ? undefined : restoreProgress(await this.restoringPod(instance.namespace));
      this.restore = restoreStatus(instance, iot.status?.restore, progress);
      this.restoreFailure =
        progress?.kind === 'failed'
          ? { reason: 'RestoreFailed', message: `The restore of the database from ${restoresFromBucket(instance) ? `stanza ${restoreSourceNamespace(instance)} of the bucket` : `IoTService ${instance.spec.restore!.from}`} failed (init container restore of pod database-0, tried again by the kubelet): ${progress.message.replace(/\s+$/, '')}` }
          : undefined;
      if (this.restore?.state !== 'Restored') {
        const check = await checkSource(instance, (name) => this.sourceIoTService(name), this.config);
        if (check.kind === 'failed') return { kind: 'stop', outcome: failed(check.failure) };
        if (check.kind === 'waiting') return { kind: 'stop', outcome: { kind: 'waiting', waiting: check.waiting } };
        if (check.kind === 'bucket') {
          // Validation requires the S3 target, and readS3Credentials has read its credentials or failed.
          pendingRestore = { bucket: s3Credentials! };
          restorePeers.bucket = true;
        } else {
          const issued = await this.memory.restoreCertificates.certificate(tlsContext, key, instance, new Date());
          if (issued.kind === 'waiting') return { kind: 'stop', outcome: { kind: 'waiting', waiting: issued.waiting } };
          pendingRestore = { certificate: issued.certificate };
          restorePeers.source = { namespace: check.source.namespace, id: check.source.id };
        }
      } else {
        this.memory.restoreCertificates.forget(key);
      }
    }
    if (backsUp(instance)) {
      const restorers = restorersOf(instance.id, this.config.operatorName, await this.landscapeIoTServices());
      if (restorers.length > 0) restorePeers.restorers = restorers;
    }
    return { kind: 'ok', ...(pendingRestore ? { pendingRestore } : {}), restorePeers };
  }

  /** The source a restore names: cached, or (a shard caches only its own) asked of the API server. */
  private async sourceIoTService(name: string): Promise<(IoTService & KubeObject) | undefined> {
    const cached = this.ctx.cache.get<IoTService & KubeObject>(IoTServiceType, name, this.config.operatorName);
    if (cached || !this.config.shard) return cached;
    return ifFound(this.ctx.client.get<IoTService & KubeObject>(IoTServiceType, name, this.config.operatorName));
  }

  /** The landscape's IoTServices: cached, or (a shard caches only its own) listed from the API server. */
  private async landscapeIoTServices(): Promise<Array<IoTService & KubeObject>> {
    if (!this.config.shard) return this.ctx.cache.list<IoTService & KubeObject>(IoTServiceType, { namespace: this.config.operatorName });
    return (await this.ctx.client.list<IoTService & KubeObject>(IoTServiceType, { namespace: this.config.operatorName })).items;
  }

  /** Pod database-0, whose init container restores, as the API server has it (none: an empty list). */
  private async restoringPod(namespace: string): Promise<V1Pod[]> {
    const pod = await this.permitted({ verb: 'get', resource: 'pods', namespace, purpose: 'read how the restore of the database went (pod database-0)' }, () =>
      ifFound(this.ctx.client.get<V1Pod & KubeObject>(Kinds.Pod, 'database-0', namespace)),
    );
    return pod ? [pod] : [];
  }

  /** What the gateway's TLS needs of this reconcile: its client and cache, Events on `iot`, 403s reported, the Certificate stamped as children are. */
  private tlsContext(iot: IoTService & KubeObject): TlsContext {
    return {
      client: this.ctx.client,
      cache: this.ctx.cache,
      event: (type, reason, message) => this.ctx.recorder.event(iot, type, reason, message),
      permitted: (request, call) => this.permitted(request, call),
      stamp: (certificate) => prepareChild({ object: certificate as unknown as DesiredChild['object'], generated: false }, this.config.shard).desired,
    };
  }

  /**
   * The Deployments whose pods must not roll yet because a StatefulSet is not rolled out
   * (rollout-order.ts), by child index. At rest (every Deployment matches) nothing is rendered.
   */
  private heldBackDeployments(rendering: Rendering): Set<number> {
    const observed = (index: number) => {
      const id = rendering.ids[index]!;
      return this.ctx.cache.get(CHILD_TYPES[id.kind]!, id.name, id.namespace);
    };
    const indexes = (kind: string) => rendering.ids.flatMap((id, index) => (id.kind === kind ? [index] : []));
    const differing = indexes('Deployment').filter((index) => {
      const current = observed(index);
      return current !== undefined && !rendering.matches(index, current);
    });
    if (differing.length === 0) return new Set();
    const workload = (index: number) => ({ index, name: rendering.ids[index]!.name, desired: rendering.child(index).desired as never, observed: observed(index) as never });
    const deployments = differing.map(workload);
    const { held, waitingFor } = heldBackDeployments(indexes('StatefulSet').map(workload), deployments);
    if (held.length > 0) this.ctx.log.info({ deployments: held, waitingFor }, 'deployments wait until the StatefulSets are rolled out');
    return new Set(deployments.filter((d) => held.includes(d.name)).map((d) => d.index));
  }

  /**
   * Writes child `index` of the rendering if it is missing or differs: 'written'. A child of an
   * existing instance namespace that is not in a shard's cache gets this shard's label (one merge
   * patch, which also reads it back); if it then matches, it was only moved over: 'relabelled'.
   */
  private async ensureChild(index: number, rendering: Rendering, ownership: 'absent' | 'owned'): Promise<ChildWrite> {
    const id = rendering.ids[index]!;
    const type = CHILD_TYPES[id.kind]!;
    const observed = this.ctx.cache.get(type, id.name, id.namespace);
    if (observed && rendering.matches(index, observed)) return 'unchanged';
    const { desired } = rendering.child(index);
    if (type === Kinds.Namespace && ownership === 'absent' && !observed) {
      await this.createNamespace(desired);
      return 'written';
    }
    if (id.generated) return this.ensureCredentials(index, rendering, type, observed);
    let current: KubeObject | undefined = observed;
    if (observed) {
      // The cache holds only the metadata of these kinds: compare with the object as it is.
      if (METADATA_ONLY_TYPES.includes(type)) current = await this.memory.bodies.read(this.ctx.client, type, observed);
    } else if (this.config.shard && ownership === 'owned') {
      // Not in a shard's cache, in an existing instance namespace: still labelled for the shard
      // that had the instance before (or labelled a moment ago, not cached yet), or missing.
      current = await this.relabel(type, desired).catch((err: unknown) => (isNotFound(err) ? undefined : Promise.reject(err)));
      if (current && firstDifference(desired, current) === undefined) {
        rendering.recordMatch(index, current);
        return 'relabelled';
      }
    }
    if (current) {
      const difference = firstDifference(desired, current);
      if (difference === undefined) {
        rendering.recordMatch(index, current);
        return 'unchanged';
      }
      this.ctx.log.info({ kind: type.kind, name: desired.metadata.name, field: difference }, 'child differs');
      const changeover = type === Kinds.StatefulSet ? onDeleteChangeover(desired as V1StatefulSet, current as V1StatefulSet) : undefined;
      if (changeover) await this.ctx.client.patch(type, desired.metadata.name!, desired.metadata.namespace, changeover, 'merge');
    }
    let applied: KubeObject | undefined;
    try {
      applied = await this.ctx.client.apply(type, desired, { fieldManager: FIELD_MANAGER, force: true });
      if (firstDifference(desired, applied) === undefined) {
        rendering.recordMatch(index, applied);
        return 'written';
      }
    } catch (err) {
      // Apply merges list entries by key: an entry someone else added by hand can make the
      // merged object invalid (say, two ports named "http"). A full replace can still fix it.
      if (!current || !isApiError(err, 'Invalid')) throw err;
    }
    // Fields owned by another manager keep apply from converging: replace the object outright.
    await this.ctx.client.replace(type, overlay(applied ?? current!, desired));
    return 'written';
  }

  /**
   * The generated credentials: created with every key when missing; otherwise read as they are
   * and, when they lack keys or a new rotation is asked for, completed or rotated (secrets.ts
   * `credentialsPatch`, one merge patch under the resourceVersion read, so a concurrent write
   * fails it instead of being overwritten). Outside a rotation a key the Secret has is never
   * written.
   */
  private async ensureCredentials(index: number, rendering: Rendering, type: ResourceType, observed: KubeObject | undefined): Promise<ChildWrite> {
    const { desired } = rendering.child(index);
    const current = observed && (await this.memory.bodies.read(this.ctx.client, type, observed));
    if (!current) {
      try {
        rendering.recordMatch(index, await this.ctx.client.create(type, desired));
      } catch (err) {
        if (!isAlreadyExists(err)) throw err;
        // A shard caches only children carrying its label: this one carries a former shard's.
        if (!this.config.shard) return 'unchanged';
        await this.relabel(type, desired);
        return 'relabelled';
      }
      return 'written';
    }
    const write = credentialsPatch(current as V1Secret, desired as V1Secret);
    if (!write) {
      rendering.recordMatch(index, current);
      return 'unchanged';
    }
    rendering.recordMatch(index, await this.ctx.client.patch(type, desired.metadata.name!, desired.metadata.namespace, write.patch, 'merge'));
    if (write.rotates) {
      const rotation = write.patch.metadata.annotations?.[CREDENTIALS_ROTATION_ANNOTATION];
      this.ctx.log.info({ secret: desired.metadata.name, rotation }, 'credentials rotated');
      this.event?.('Normal', 'CredentialsRotated', `Made every credential of Secret ${CREDENTIALS_SECRET_NAME} afresh for rotation ${JSON.stringify(rotation)}; every workload rolls to read them.`);
    } else {
      this.ctx.log.info({ secret: desired.metadata.name, added: Object.keys(write.patch.data) }, 'credentials completed with the keys they lacked');
    }
    return 'written';
  }

  /**
   * Deletes the instance's pods that cannot come up by themselves although what kept them down was
   * fixed (pod-restarts.ts): after its copy of the image-pull-secret was written anew, the pods
   * waiting for their image; always, the pods of a StatefulSet stuck on an earlier revision. Their
   * workloads recreate them at once from the current spec. Each deletion is recorded as an Event.
   */
  private async restartStuckPods(iot: IoTService & KubeObject, instance: Instance, pullSecretWritten: boolean): Promise<void> {
    const id = iot.metadata.name!;
    const inNamespace = { namespace: instance.namespace, label: { name: INSTANCE_LABEL, value: id } };
    const statefulSets = this.ctx.cache.list<V1StatefulSet & KubeObject>(Kinds.StatefulSet, inNamespace);
    const rollingOut = statefulSets.some(movingToUpdateRevision);
    if (!pullSecretWritten && !rollingOut) return;
    const pods = this.config.shard ? await this.listPods(instance.namespace, id) : this.ctx.cache.list<V1Pod & KubeObject>(Kinds.Pod, inNamespace);
    const groups: Array<{ pods: V1Pod[]; why: string }> = [
      { pods: pullSecretWritten ? podsWaitingForImages(pods) : [], why: 'waited to pull an image, now with the changed image-pull-secret' },
      { pods: podsBlockingStatefulSetRollouts(statefulSets, pods), why: "were stuck on an earlier revision of their StatefulSet, which replaces a pod only once it is ready; recreated from the current spec" },
    ];
    const done = new Set<string>();
    for (const group of groups) {
      const chosen = group.pods.filter((pod) => !done.has(pod.metadata!.name!));
      if (chosen.length === 0) continue;
      await Promise.all(chosen.map((pod) => this.deletePod(instance.namespace, { name: pod.metadata!.name!, uid: pod.metadata!.uid }, `restart pod ${pod.metadata!.name}, which cannot come up by itself`)));
      const names = chosen.map((pod) => pod.metadata!.name!);
      for (const name of names) done.add(name);
      this.ctx.log.info({ pods: names }, `pods restarted: they ${group.why}`);
      this.ctx.recorder.event(iot, 'Normal', 'PodsRestarted', `Restarted ${names.length === 1 ? 'pod' : 'pods'} ${names.join(', ')}: ${names.length === 1 ? 'it' : 'they'} ${group.why}.`);
    }
  }

  /** The next step of a three-replica database's roll (database-roll.ts); what the status says while it rolls. */
  private rollDatabase(iot: IoTService & KubeObject, instance: Instance): Promise<Waiting | undefined> {
    const statefulSet = this.ctx.cache.get<V1StatefulSet & KubeObject>(Kinds.StatefulSet, 'database', instance.namespace);
    const context = {
      client: this.ctx.client,
      log: this.ctx.log,
      deletePod: (pod: { name: string; uid: string }, purpose: string) => this.deletePod(instance.namespace, pod, purpose),
      event: (reason: string, message: string) => this.ctx.recorder.event(iot, 'Normal', reason, message),
    };
    return rollDatabase(context, instance, statefulSet);
  }

  /** Deletes one pod of the instance, only the one observed (its UID); one already gone is fine. */
  private deletePod(namespace: string, pod: { name: string; uid: string | undefined }, purpose: string): Promise<void> {
    return this.permitted({ verb: 'delete', resource: 'pods', namespace, purpose }, () =>
      this.ctx.client
        .delete(Kinds.Pod, pod.name, namespace, { preconditions: { uid: pod.uid } })
        .catch((err: unknown) => (isNotFound(err) || isApiError(err, 'Conflict') ? undefined : Promise.reject(err))),
    );
  }

  /** Puts this shard's label on a child (a merge patch of that label alone). */
  private relabel(type: ResourceType, desired: KubeObject): Promise<KubeObject> {
    const shard = this.config.shard!;
    return this.ctx.client.patch(type, desired.metadata.name!, desired.metadata.namespace, { metadata: { labels: { [shardLabel(shard.ring)]: shard.name } } }, 'merge');
  }

  /** Creates (never applies) the instance namespace, so an existing foreign one is never adopted. */
  private async createNamespace(desired: KubeObject): Promise<void> {
    try {
      await this.ctx.client.create(Kinds.Namespace, desired);
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      // Appeared meanwhile; the next reconcile judges whose it is.
      throw new Error(`namespace ${desired.metadata.name} appeared while being created; checking its owner again`);
    }
  }

  /**
   * The instance namespace as it is. The cache holds only namespaces labelled for this landscape,
   * so an uncached one is asked for directly: it may exist without our labels (foreign).
   */
  private async observedNamespace(instance: Instance): Promise<(V1Namespace & KubeObject) | undefined> {
    const cached = this.ctx.cache.get<V1Namespace & KubeObject>(Kinds.Namespace, instance.namespace);
    if (cached) return cached;
    try {
      return await this.permitted({ verb: 'get', resource: 'namespaces', purpose: `check who owns namespace ${instance.namespace}` }, () =>
        this.ctx.client.get<V1Namespace & KubeObject>(Kinds.Namespace, instance.namespace),
      );
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Computes the status from what is observed and writes it when it changed. */
  private async report(iot: IoTService & KubeObject, instance: Instance | undefined, outcome: ReconcileOutcome, namespace: string | undefined): Promise<ReconcileResult> {
    // The cache holds only this landscape's objects, so a foreign namespace contributes nothing.
    const inNamespace = <T>(type: ResourceType): T[] =>
      namespace ? (this.ctx.cache.list<T & KubeObject>(type, { namespace, label: { name: INSTANCE_LABEL, value: iot.metadata.name! } }) as T[]) : [];
    const now = new Date();
    const pods = this.config.shard ? await this.listPods(namespace, iot.metadata.name!) : inNamespace<V1Pod>(Kinds.Pod);
    const missingStorageClasses = await this.missingStorageClasses(instance, pods);
    const key = keyOf({ namespace: iot.metadata.namespace, name: iot.metadata.name! });
    const next = computeStatus({
      instance: { generation: iot.metadata.generation ?? 0, namespace, spec: instance?.spec, landscape: iot.metadata.namespace },
      previous: iot.status,
      outcome,
      observed: { deployments: inNamespace<V1Deployment>(Kinds.Deployment), statefulSets: inNamespace<V1StatefulSet>(Kinds.StatefulSet), pods, missingStorageClasses },
      ingestion: this.memory.ingestion?.verdict(key),
      gatewayTls: this.tls && { caCertificate: this.tls.material.caCert, notAfter: this.tls.notAfter.toISOString() },
      backup: instance && backsUp(instance) ? await readRepository(instance, pods) : undefined,
      restore: this.restore,
      restoreFailure: this.restoreFailure,
      now,
      stuckPodTimeoutMs: this.config.stuckPodTimeoutMs,
    });
    const decision = this.memory.statusWrites.decide(key, iot, next);
    if (decision.write) {
      await this.writeStatus(iot, decision.current, next);
      this.memory.statusWrites.written(key, iot.metadata.resourceVersion, next);
      const event = statusTransitionEvent(decision.current, next);
      if (event) this.ctx.recorder.event(iot, event.type, event.reason, event.message);
    }
    // Time passing is no event: look again when a stuck pod would cross the stuck window, when
    // held-back progress is due, and periodically while the instance is not Available.
    const stuckAt = msUntilStuckPodFailure(pods, now, this.config.stuckPodTimeoutMs);
    // The server certificate's renewal time is no event either (looked at daily before it: a
    // timer cannot wait the 60 days).
    const renewAt = Math.min(this.tls?.renewAt?.getTime() ?? Infinity, this.backupCertificates ? renewalTime(this.backupCertificates.server.cert).getTime() : Infinity);
    const renewIn = renewAt === Infinity ? Infinity : Math.min(Math.max(1000, renewAt - now.getTime()), RENEWAL_RECHECK_MAX_MS);
    const backupIn = instance && backsUp(instance) ? BACKUP_RECHECK_MS : Infinity;
    const recheck = Math.min(
      next.phase === 'Available' ? Infinity : PROCESSING_RECHECK_MS,
      this.rollingDatabase ? DATABASE_ROLL_RECHECK_MS : Infinity,
      stuckAt ?? Infinity,
      decision.write ? Infinity : (decision.retryAfterMs ?? Infinity),
      renewIn,
      backupIn,
    );
    return recheck === Infinity ? undefined : { requeueAfterMs: recheck };
  }

  /**
   * The StorageClasses the spec names (spec.<component>.storageClassName, spec.backup.target.volumeClaim.storageClassName) that do not exist, looked
   * up (one GET each) only while a pod of the instance cannot be scheduled because of unbound
   * claims. A lookup that fails otherwise (a 403 where the RBAC lacks it) reports nothing: the
   * five-minute rule of status.ts applies then.
   */
  private async missingStorageClasses(instance: Instance | undefined, pods: readonly V1Pod[]): Promise<string[]> {
    const spec = instance?.spec;
    if (!spec || !pods.some((pod) => unboundClaims(pod))) return [];
    const classes = [...STORAGE_COMPONENTS.map((c) => spec[c].storageClassName), spec.backup?.target.volumeClaim?.storageClassName];
    const named = new Set(classes.filter((name): name is string => !!name));
    const missing: string[] = [];
    for (const name of named) {
      await this.ctx.client.get(StorageClassType, name).catch((err: unknown) => {
        if (isNotFound(err)) missing.push(name);
      });
    }
    return missing;
  }

  /** A shard does not cache pods (see SHARDED_TYPES): the instance's pods as the API server has them. */
  private async listPods(namespace: string | undefined, instanceId: string): Promise<V1Pod[]> {
    if (!namespace) return [];
    const selector = `${landscapeSelector(this.config.operatorName)},${INSTANCE_LABEL}=${instanceId}`;
    const { items } = await this.ctx.client.list(Kinds.Pod, { namespace, labelSelector: selector });
    return items.map((pod) => leanPod(pod) as V1Pod & KubeObject);
  }

  private async writeStatus(iot: IoTService & KubeObject, current: IoTServiceStatus | undefined, status: IoTServiceStatus): Promise<void> {
    // A merge patch: fields absent from the new status are removed explicitly.
    const removed = Object.fromEntries(Object.keys(current ?? {}).filter((k) => !(k in status)).map((k) => [k, null]));
    await this.ctx.client.patchStatus(IoTServiceType, iot.metadata.name!, iot.metadata.namespace, { status: { ...removed, ...status } }, 'merge');
  }

  /** Deletion: remove the instance namespace if it is ours, then our finalizer. */
  private async finalize(iot: IoTService & KubeObject): Promise<ReconcileResult> {
    if (!hasFinalizer(iot, FINALIZER)) return;
    const key = keyOf({ namespace: iot.metadata.namespace, name: iot.metadata.name! });
    await this.memory.tls.release(this.tlsContext(iot), key, { landscape: this.config.operatorName, id: iot.metadata.name! });
    const resolved = resolveInstance(iot, this.config);
    const namespace = resolved.ok ? resolved.instance.namespace : resolved.namespace;
    if (namespace) {
      const owner = { landscape: this.config.operatorName, id: iot.metadata.name!, ownerUid: iot.metadata.uid ?? '' };
      let live: (V1Namespace & KubeObject) | undefined;
      try {
        live = await this.permitted({ verb: 'get', resource: 'namespaces', purpose: `check whether the instance namespace ${namespace} is gone` }, () =>
          this.ctx.client.get<V1Namespace & KubeObject>(Kinds.Namespace, namespace),
        );
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
      if (live && namespaceOwnership(live, owner) === 'owned') {
        if (!live.metadata.deletionTimestamp) {
          await this.permitted({ verb: 'delete', resource: 'namespaces', purpose: `delete the instance namespace ${namespace}` }, () =>
            this.ctx.client.delete(Kinds.Namespace, namespace, undefined, { propagationPolicy: 'Background', preconditions: { uid: live.metadata.uid } }),
          );
          this.ctx.recorder.event(iot, 'Normal', 'Deleting', `Deleting namespace ${namespace}.`);
        }
        return { requeueAfterMs: DELETION_RECHECK_MS };
      }
    }
    try {
      await this.permitted(this.iotServicePatch(iot, 'remove its cleanup finalizer from the IoTService'), () => removeFinalizer(this.ctx.client, IoTServiceType, iot, FINALIZER));
    } catch (err) {
      // Gone already: an earlier reconcile removed the finalizer and the IoTService went before
      // the cache saw it (another event had queued this one). Finalized; nothing to retry.
      if (!isNotFound(err)) throw err;
    }
    this.forget({ namespace: iot.metadata.namespace, name: iot.metadata.name! });
    return;
  }

  private forget(request: Request): void {
    this.memory.statusWrites.forget(keyOf(request));
    this.memory.rendered.forget(keyOf(request));
    this.memory.resolved.forget(keyOf(request));
    this.memory.tls.forget(keyOf(request));
    this.memory.backupCa.forget(keyOf(request));
    this.memory.restoreCertificates.forget(keyOf(request));
  }
}

/** Passes updates that change an object's spec, labels, annotations or deletion mark (not its status). */
function specOrMetadataChanged(): Predicate {
  const relevant = (o: KubeObject) => [(o as { spec?: unknown }).spec, o.metadata.labels, o.metadata.annotations, o.metadata.deletionTimestamp];
  return { update: (a, b) => !isDeepStrictEqual(relevant(a), relevant(b)) };
}

/** A request refused with 403, on its way from the call that was refused to the status report. */
class PermissionMissing extends Error {
  constructor(
    readonly request: RefusedRequest,
    readonly serverMessage: string,
  ) {
    super(`forbidden: ${request.verb} ${request.resource}`);
  }
}

/** What ensureChild did to a child: nothing, a write of its desired form, or moved it over to this shard. */
type ChildWrite = 'unchanged' | 'written' | 'relabelled';

/**
 * The hash stamp makes fields removed from a desired object (a nodeSelector key, say) a
 * difference too, so they are applied — and server-side apply then drops them. A shard's label
 * is added after the stamp: moving an instance between shards changes no hash.
 */
function prepareChild(child: DesiredChild, shard: IoTControllerConfig['shard']): PreparedChild {
  const object = child.object as unknown as KubeObject;
  const stamped = child.generated ? object : withDesiredHash(object);
  if (!shard) return { child, desired: stamped };
  return { child, desired: { ...stamped, metadata: { ...stamped.metadata, labels: { ...stamped.metadata.labels, [shardLabel(shard.ring)]: shard.name } } } };
}

/** 403 and 422: the API server refuses the child as it is; retrying cannot help. */
function isRefusal(err: unknown): err is ApiError & { reason: 'Forbidden' | 'Invalid' } {
  return isApiError(err, 'Forbidden') || isApiError(err, 'Invalid');
}

function failed(failure: Failure): ReconcileOutcome {
  return { kind: 'failed', failure };
}
