/**
 * A controller's primary, sharded: the two rules of the sharding protocol (sharding/shard.ts)
 * that sit between the watch and the reconciler.
 *
 * Guarantees:
 * - `shardReconciler` runs the reconciler only for a primary assigned to this shard and not being
 *   drained; a primary being drained is handed back (drain and shard labels removed in one patch
 *   guarded by its resourceVersion) and not reconciled. On a Conflict the object as stored
 *   decides: still being drained from this shard, it is handed back at that version; no longer
 *   this shard's (the cache had not yet seen this shard's own hand-back, or the object was
 *   deleted), nothing is done or logged; any other failure is an error retried with backoff.
 *   A primary assigned to another shard is left alone; a primary no longer cached (deleted, or
 *   moved away) reaches the reconciler as gone, so it forgets what it remembered.
 * - `passingDrains` combines predicates, except that any create or update of a primary being
 *   drained passes.
 */
import type { KubeApi } from '../client/client.ts';
import { ifFound, isConflict } from '../client/errors.ts';
import type { KubeObject, ResourceType } from '../client/resource.ts';
import { acknowledgeDrain, isDraining, responsibility, type ShardIdentity } from '../sharding/shard.ts';
import type { Predicate } from './predicates.ts';
import { requestKey, type Reconciler } from './reconcile.ts';

/** The reconciler of a sharded primary: reconciles what is this shard's, hands drained objects back. */
export function shardReconciler(reconciler: Reconciler, shard: ShardIdentity, type: ResourceType, cached: (key: string) => KubeObject | undefined): Reconciler {
  return async (request, ctx) => {
    const obj = cached(requestKey(request));
    if (!obj) return reconciler(request, ctx);
    const decision = responsibility(obj, shard);
    if (decision === 'elsewhere') return;
    if (decision === 'reconcile') return reconciler(request, ctx);
    if (await handBack(ctx.client, type, obj, shard)) ctx.log.info({ ring: shard.ring, shard: shard.name }, 'drained: handed back to the sharder');
  };
}

/** Acknowledges `obj`'s drain (see the module's guarantees); true when this call handed it back. */
async function handBack(client: KubeApi, type: ResourceType, obj: KubeObject, shard: ShardIdentity): Promise<boolean> {
  try {
    await acknowledgeDrain(client, type, obj, shard.ring);
    return true;
  } catch (err) {
    if (!isConflict(err)) throw err;
  }
  const stored = await ifFound(client.get(type, obj.metadata.name!, obj.metadata.namespace));
  if (!stored || responsibility(stored, shard) !== 'drain') return false;
  await acknowledgeDrain(client, type, stored, shard.ring);
  return true;
}

/** All of `predicates` combined, except that an object being drained always passes. */
export function passingDrains(predicates: Predicate[], ring: string): Predicate {
  return {
    create: (obj) => isDraining(obj, ring) || predicates.every((p) => p.create?.(obj) ?? true),
    update: (oldObj, newObj) => isDraining(newObj, ring) || predicates.every((p) => p.update?.(oldObj, newObj) ?? true),
    delete: (obj) => predicates.every((p) => p.delete?.(obj) ?? true),
  };
}
