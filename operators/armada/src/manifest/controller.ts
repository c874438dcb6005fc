/**
 * The ArmadaManifest controller: processes a manifest's chart groups in order.
 *
 * Guarantees:
 * - Watches: ArmadaManifests (spec and metadata changes) and ArmadaChartGroups (any change)
 *   mapped to the manifests controlling or naming them.
 * - Every group named in `chart_groups` is taken under the manifest's controller
 *   ownerReference (deleting the manifest deletes its groups, hence their charts and releases);
 *   a group controlled by another object is an `error` naming it.
 * - `target_state: deployed` (the default) enables the groups in order, the next only after
 *   the previous one is deployed; a missing group is an `error` naming it, recovered when it
 *   appears. `release_prefix` reaches every release of the manifest's charts as the release
 *   label `armada.airshipit.org/release-prefix` (the chart controller reads it through the
 *   ownership chain).
 */

import {
  controller,
  controllerReference,
  type Controller,
  type Manager,
  type MapFunc,
  type ReconcileContext,
  type ReconcileResult,
  type Request,
} from '@iot-operator/runtime';
import { ArmadaChartGroup, ArmadaManifest, isValidManifestSpec, ManifestSpecSchema, specError, type ArmadaChartGroupObject, type ArmadaManifestObject, type CommonStatus } from '../api/armada.ts';
import { specOrMetadataChanged } from '../chart/controller.ts';
import { adopt, enable, foreignController } from '../ownership.ts';
import { isDeployed, nextStatus, writeStatus } from '../status.ts';

export async function reconcileManifest(req: Request, ctx: ReconcileContext): Promise<ReconcileResult> {
  const manifest = ctx.cache.get<ArmadaManifestObject>(ArmadaManifest, req.name, req.namespace);
  if (!manifest || manifest.metadata.deletionTimestamp) return;
  const report = async (state: CommonStatus['actual_state'] & string, reason?: string): Promise<void> => {
    await writeStatus(ctx, ArmadaManifest, manifest, nextStatus<CommonStatus>(manifest, state, reason));
  };
  if (!isValidManifestSpec(manifest.spec)) return report('error', `the spec is invalid: ${specError(ManifestSpecSchema, manifest.spec)}`);

  const names = manifest.spec.chart_groups;
  const groups = names.map((name) => ctx.cache.get<ArmadaChartGroupObject>(ArmadaChartGroup, name, req.namespace));
  const missing = names.filter((_, i) => !groups[i]);
  if (missing.length > 0) return report('error', `ArmadaChartGroup ${missing.join(', ')} not found in namespace ${req.namespace}: create it or remove it from chart_groups`);
  const present = groups as ArmadaChartGroupObject[];
  for (const group of present) {
    const owner = foreignController(group, manifest);
    if (owner) return report('error', `ArmadaChartGroup ${group.metadata.name} is controlled by ${owner.kind} ${owner.name}: a group belongs to one manifest`);
  }
  for (const group of present) await adopt(ctx, ArmadaChartGroup, group, controllerReference(ArmadaManifest, manifest));

  if ((manifest.spec.target_state ?? 'deployed') === 'uninitialized') return report('uninitialized');

  for (const group of present) {
    if ((group.spec.target_state ?? 'deployed') !== 'deployed') await enable(ctx, ArmadaChartGroup, group);
    if (!isDeployed(group)) {
      const state = group.status?.actual_state;
      if (state === 'failed' || state === 'error') return report('failed', `ArmadaChartGroup ${group.metadata.name} is ${state}: ${group.status?.reason ?? 'see its status'}`);
      return report('running', `waiting for ArmadaChartGroup ${group.metadata.name} to be deployed before the next group`);
    }
  }
  return report('deployed');
}

/** Registers the ArmadaManifest controller with the manager. */
export function registerManifestController(mgr: Manager): Controller {
  const groupToManifests: MapFunc = (group) => {
    const owner = group.metadata.ownerReferences?.find((r) => r.controller && r.kind === ArmadaManifest.kind);
    const naming = mgr.cache
      .list<ArmadaManifestObject>(ArmadaManifest, { namespace: group.metadata.namespace })
      .filter((m) => m.spec?.chart_groups?.includes(group.metadata.name!))
      .map((m) => m.metadata.name!);
    return [...new Set([...(owner ? [owner.name] : []), ...naming])].map((name) => ({ namespace: group.metadata.namespace, name }));
  };
  return controller(mgr)
    .named('armadamanifest')
    .for(ArmadaManifest, specOrMetadataChanged)
    .watches(ArmadaChartGroup, groupToManifests)
    .reconcile(reconcileManifest);
}
