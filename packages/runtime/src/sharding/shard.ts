/**
 * The shard side of the Kubernetes controller sharding protocol
 * (timebertt/kubernetes-controller-sharding, docs/implement-sharding.md), for any operator: a
 * `sharder` assigns each object of a ControllerRing's resources to one shard through a label, and
 * moves objects between shards through a drain label. This module holds the protocol's names and
 * rules; the manager keeps the shard Lease and narrows the caches (manager.ts), the controller
 * builder applies the rules below to sharded primaries (builder.ts).
 *
 * Guarantees:
 * - The label keys are the protocol's: `alpha.sharding.timebertt.dev/controllerring` on the shard
 *   Lease, `shard.alpha.sharding.timebertt.dev/<ring>` (value: the shard's name, which is also its
 *   Lease's name and holder identity) and `drain.alpha.sharding.timebertt.dev/<ring>` on objects.
 * - `shardSelector` selects exactly the objects assigned to this shard; combined with a type's own
 *   selector by `withShardSelector`, every watch of a sharded type receives only those.
 * - `responsibility` says what a shard does with a primary object: reconcile it only when it is
 *   assigned to this shard and not being drained; acknowledge a drain by removing the drain and
 *   shard labels in one patch, guarded by the object's resourceVersion (`acknowledgeDrain`), and
 *   never reconcile it after; ignore anything assigned elsewhere.
 * - `isDraining` tells the builder to let every event of an object being drained through,
 *   whatever the controller's predicates say, so no drain waits for an unrelated change.
 */
import type { KubeApi } from '../client/client.ts';
import { typeId, type KubeObject, type ResourceType } from '../client/resource.ts';

const SHARDING_GROUP = 'sharding.timebertt.dev';
/** Labels a shard Lease with the ControllerRing it belongs to. */
export const CONTROLLER_RING_LABEL = `alpha.${SHARDING_GROUP}/controllerring`;
/** The longest ControllerRing name: the name is a label key's second part. */
const MAX_RING_NAME = 63;

export function shardLabel(ring: string): string {
  return `shard.alpha.${SHARDING_GROUP}/${ring}`;
}

export function drainLabel(ring: string): string {
  return `drain.alpha.${SHARDING_GROUP}/${ring}`;
}

/** One shard of a ControllerRing: who this process is in the ring, and which types the ring shards. */
export interface ShardIdentity {
  /** The ControllerRing's name. */
  ring: string;
  /** This shard's name: its Lease's name and holder identity, the value of the shard label on its objects. */
  name: string;
  /** Types whose objects carry the shard label: their caches select this shard's objects only. */
  types: readonly ResourceType[];
}

/** Checks a ring and shard name against the protocol's limits; throws an error naming the problem. */
export function validateShardIdentity(shard: ShardIdentity): void {
  const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
  if (!dnsLabel.test(shard.ring) || shard.ring.length > MAX_RING_NAME) {
    throw new Error(`ControllerRing name "${shard.ring}" must be a DNS label of at most ${MAX_RING_NAME} characters (it is part of the shard label's key)`);
  }
  // A label value and a Lease name at once: at most 63 characters of a DNS subdomain's alphabet.
  if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(shard.name) || shard.name.length > 63) {
    throw new Error(`shard name "${shard.name}" must be a lower-case DNS name of at most 63 characters (it is a Lease name and a label value)`);
  }
}

export function shardSelector(shard: Pick<ShardIdentity, 'ring' | 'name'>): string {
  return `${shardLabel(shard.ring)}=${shard.name}`;
}

/** `selector` narrowed to this shard's objects when `type` is one the ring shards; unchanged otherwise. */
export function withShardSelector(shard: ShardIdentity | undefined, type: ResourceType, selector: string | undefined): string | undefined {
  if (!shard || !isSharded(shard, type)) return selector;
  return selector ? `${selector},${shardSelector(shard)}` : shardSelector(shard);
}

export function isSharded(shard: ShardIdentity, type: ResourceType): boolean {
  return shard.types.some((t) => typeId(t) === typeId(type));
}

export type Responsibility = 'reconcile' | 'drain' | 'elsewhere';

/** What this shard does with `obj` (see the module's guarantees). */
export function responsibility(obj: KubeObject, shard: Pick<ShardIdentity, 'ring' | 'name'>): Responsibility {
  const labels = obj.metadata.labels ?? {};
  if (labels[shardLabel(shard.ring)] !== shard.name) return 'elsewhere';
  return drainLabel(shard.ring) in labels ? 'drain' : 'reconcile';
}

/**
 * Hands `obj` back to the sharder: removes the drain and shard labels in one merge patch that
 * fails with 409 Conflict if the object changed since it was read (it is then looked at again).
 */
export async function acknowledgeDrain(client: KubeApi, type: ResourceType, obj: KubeObject, ring: string): Promise<void> {
  const patch = { metadata: { resourceVersion: obj.metadata.resourceVersion, labels: { [shardLabel(ring)]: null, [drainLabel(ring)]: null } } };
  await client.patch(type, obj.metadata.name!, obj.metadata.namespace, patch, 'merge');
}

/** True when `obj` carries the ring's drain label. */
export function isDraining(obj: KubeObject, ring: string): boolean {
  return drainLabel(ring) in (obj.metadata.labels ?? {});
}
