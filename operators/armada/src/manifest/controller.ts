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
 *   ownership chain); a group counts as deployed only once its status says so under this prefix,
 *   so the manifest is never `deployed` before its charts' releases carry it.
 * - The work is the shared reconciler of ordered children (ordered-children.ts), the same as a
 *   group's over its charts.
 */

import { controller, type Controller, type Manager, type ReconcileContext, type ReconcileResult, type Request } from '@iot-operator/runtime';
import { ArmadaChartGroup, ArmadaManifest, isValidManifestSpec, ManifestSpecSchema, type ArmadaChartGroupObject, type ArmadaManifestObject } from '../api/armada.ts';
import { specOrMetadataChanged } from '../chart/controller.ts';
import { parentsOf, reconcileOrderedParent } from '../ordered-children.ts';

export async function reconcileManifest(req: Request, ctx: ReconcileContext): Promise<ReconcileResult> {
  await reconcileOrderedParent<ArmadaManifestObject, ArmadaChartGroupObject>(req, ctx, {
    parentType: ArmadaManifest,
    childType: ArmadaChartGroup,
    specSchema: ManifestSpecSchema,
    isValidSpec: isValidManifestSpec,
    children: (manifest) => ({ names: manifest.spec.chart_groups, field: 'chart_groups', sequenced: true, releasePrefix: manifest.spec.release_prefix }),
  });
}

/** Registers the ArmadaManifest controller with the manager. */
export function registerManifestController(mgr: Manager): Controller {
  return controller(mgr)
    .named('armadamanifest')
    .for(ArmadaManifest, specOrMetadataChanged)
    .watches(ArmadaChartGroup, parentsOf(mgr, ArmadaManifest, (m) => (m as ArmadaManifestObject).spec?.chart_groups))
    .reconcile(reconcileManifest);
}
