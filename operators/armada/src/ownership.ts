/**
 * Ownership and enablement of Armada objects by their parents (group → charts, manifest →
 * groups).
 *
 * Guarantees: `adopt` adds the parent's controller ownerReference with a JSON patch guarded by
 * the child's resourceVersion (a concurrent change makes it fail and the reconcile retry; other
 * owners are kept); it writes nothing when the reference is already there. `enable` sets
 * `spec.target_state: deployed` with a merge patch touching nothing else. `foreignController`
 * names a controller owner other than `parent`, if any. `groupReleasePrefix` and
 * `chartReleasePrefix` read from the cache the `release_prefix` of the manifest above a group
 * (its controller) or a chart (through the group controlling it).
 */

import type { KubeObject, OwnerReference, ReconcileContext, ResourceType } from '@iot-operator/runtime';
import { ArmadaChartGroup, ArmadaManifest, type ArmadaManifestObject } from './api/armada.ts';

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

/** The `release_prefix` of the manifest controlling `group`, if any. */
export function groupReleasePrefix(cache: ReconcileContext['cache'], group: KubeObject): string | undefined {
  const manifest = controllerNamed(group, ArmadaManifest.kind);
  return manifest ? cache.get<ArmadaManifestObject>(ArmadaManifest, manifest, group.metadata.namespace)?.spec.release_prefix : undefined;
}

/** The `release_prefix` of the manifest above `chart` (through the group controlling it), if any. */
export function chartReleasePrefix(cache: ReconcileContext['cache'], chart: KubeObject): string | undefined {
  const groupName = controllerNamed(chart, ArmadaChartGroup.kind);
  const group = groupName ? cache.get(ArmadaChartGroup, groupName, chart.metadata.namespace) : undefined;
  return group ? groupReleasePrefix(cache, group) : undefined;
}

function controllerNamed(object: KubeObject, kind: string): string | undefined {
  return object.metadata.ownerReferences?.find((r) => r.controller && r.kind === kind)?.name;
}
