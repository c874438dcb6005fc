/**
 * Clean-up of orphaned instance namespaces: namespaces this operator created for an IoTService
 * that no longer exists (it was deleted while someone removed its cleanup finalizer by hand, or
 * while no operator ran).
 *
 * Guarantees:
 * - A namespace is deleted only when all of these hold: it carries this landscape's instance
 *   labels, its name is `<landscape>-<instance label>`, it carries an owner UID annotation, it is
 *   not already terminating, and the API server (asked directly, not the cache) has no IoTService
 *   of that name in the landscape with that UID. Anything else — a namespace merely labelled, one
 *   of another landscape, one whose IoTService still exists — is never touched.
 * - The delete is conditional on the namespace's UID, so a namespace recreated meanwhile is kept.
 * - Every deletion is recorded as a Warning Event on the namespace (`kubectl describe namespace`).
 * - Runs on startup (every cached instance namespace is looked at once) and whenever an instance
 *   namespace or an IoTService of the landscape changes.
 */
import type { V1Namespace } from '@kubernetes/client-node';
import { Kinds, controller, isNotFound, type KubeObject, type Manager, type ReconcileContext, type Request } from '@iot-operator/runtime';
import { IoTServiceType, type IoTControllerConfig } from './iotservice-types.ts';
import { OWNER_UID_ANNOTATION, instanceIdOf, instanceNamespaceName } from './resources/index.ts';

export const ORPHAN_DELETED_REASON = 'OrphanedNamespaceDeleted';

export function registerOrphanedNamespaceCleanup(mgr: Manager, config: IoTControllerConfig) {
  const landscape = config.operatorName;
  const namespaceOf = (iot: KubeObject): Request[] => {
    const name = instanceNamespaceName(landscape, iot.metadata.name ?? '');
    return name.ok ? [{ name: name.name }] : [];
  };
  return controller(mgr)
    .named('orphaned-namespaces')
    .for(Kinds.Namespace)
    .watches(IoTServiceType, namespaceOf)
    .reconcile((request, ctx) => deleteIfOrphaned(request.name, landscape, ctx));
}

/** The owner an instance namespace names (instance id and IoTService UID), if it is one of this landscape's. */
function claimedOwner(namespace: V1Namespace & KubeObject, landscape: string): { id: string; uid: string } | undefined {
  const id = instanceIdOf(namespace.metadata.labels, landscape);
  const uid = namespace.metadata.annotations?.[OWNER_UID_ANNOTATION];
  if (!id || !uid || namespace.metadata.name !== `${landscape}-${id}`) return undefined;
  return { id, uid };
}

async function deleteIfOrphaned(name: string, landscape: string, ctx: ReconcileContext): Promise<void> {
  const namespace = ctx.cache.get<V1Namespace & KubeObject>(Kinds.Namespace, name);
  if (!namespace || namespace.metadata.deletionTimestamp) return;
  const owner = claimedOwner(namespace, landscape);
  if (!owner) return;
  if (ctx.cache.get(IoTServiceType, owner.id, landscape)?.metadata.uid === owner.uid) return;
  // The cache may lag behind an IoTService created a moment ago: only the API server's word counts.
  try {
    const live = await ctx.client.get(IoTServiceType, owner.id, landscape);
    if (live.metadata.uid === owner.uid) return;
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  try {
    await ctx.client.delete(Kinds.Namespace, name, undefined, { propagationPolicy: 'Background', preconditions: { uid: namespace.metadata.uid } });
  } catch (err) {
    if (isNotFound(err)) return;
    throw err;
  }
  ctx.log.info({ namespace: name, ownerUid: owner.uid }, 'deleted orphaned instance namespace');
  ctx.recorder.event(
    namespace,
    'Warning',
    ORPHAN_DELETED_REASON,
    `Deleted namespace ${name}: IoTService ${landscape}/${owner.id} with UID ${owner.uid}, which it was created for, no longer exists.`,
  );
}
