/**
 * Ownership and enablement of Armada objects by their parents (group → charts, manifest →
 * groups).
 *
 * Guarantees: `adopt` adds the parent's controller ownerReference with a JSON patch guarded by
 * the child's resourceVersion (a concurrent change makes it fail and the reconcile retry; other
 * owners are kept); it writes nothing when the reference is already there. `enable` sets
 * `spec.target_state: deployed` with a merge patch touching nothing else. `foreignController`
 * names a controller owner other than `parent`, if any.
 */

import type { KubeObject, OwnerReference, ReconcileContext, ResourceType } from '@iot-operator/runtime';

export function foreignController(child: KubeObject, parent: KubeObject): OwnerReference | undefined {
  return child.metadata.ownerReferences?.find((r) => r.controller && r.uid !== parent.metadata.uid);
}

export async function adopt(ctx: ReconcileContext, type: ResourceType, child: KubeObject, reference: OwnerReference): Promise<void> {
  const refs = child.metadata.ownerReferences;
  if (refs?.some((r) => r.uid === reference.uid)) return;
  const patch = refs === undefined
    ? [{ op: 'test', path: '/metadata/resourceVersion', value: child.metadata.resourceVersion }, { op: 'add', path: '/metadata/ownerReferences', value: [reference] }]
    : [{ op: 'test', path: '/metadata/resourceVersion', value: child.metadata.resourceVersion }, { op: 'add', path: '/metadata/ownerReferences/-', value: reference }];
  await ctx.client.patch(type, child.metadata.name!, child.metadata.namespace, patch, 'json');
}

export async function enable(ctx: ReconcileContext, type: ResourceType, child: KubeObject): Promise<void> {
  await ctx.client.patch(type, child.metadata.name!, child.metadata.namespace, { spec: { target_state: 'deployed' } }, 'merge');
}
