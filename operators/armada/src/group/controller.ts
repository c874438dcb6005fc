/**
 * The ArmadaChartGroup controller: enables a group's charts, all at once or in sequence.
 *
 * Guarantees:
 * - Watches: ArmadaChartGroups (spec and metadata changes) and ArmadaCharts (any change,
 *   status included) mapped to the groups controlling or naming them — so a group reacts to its
 *   charts' progress and to a missing chart appearing.
 * - Every chart named in `chart_group` is taken under the group's controller ownerReference
 *   (deleting the group deletes its charts, whose finalizers uninstall the releases); a chart
 *   controlled by another object is an `error` naming it and is left alone.
 * - `target_state: deployed` (the default) sets the charts' `target_state` to `deployed`: every
 *   chart at once, or, when `sequenced`, one at a time in the listed order, the next only once
 *   the previous is deployed; a failed chart stops a sequenced group there until it is fixed,
 *   unless it is `protected` with `continue_processing` (then it is passed over and does not
 *   fail the group).
 *   `uninitialized` enables nothing.
 * - A missing chart makes the group `error` with the chart's name in `reason`; the group
 *   recovers when the chart appears. Status: `deployed` once every chart is deployed (under the
 *   release prefix of the manifest above the group, if any), `failed`
 *   naming a failed chart, `running` while charts progress.
 * - The work is the shared reconciler of ordered children (ordered-children.ts), the same as a
 *   manifest's over its groups.
 */

import { controller, type Controller, type Manager, type ReconcileContext, type ReconcileResult, type Request } from '@iot-operator/runtime';
import { ArmadaChart, ArmadaChartGroup, GroupSpecSchema, isValidGroupSpec, type ArmadaChartGroupObject, type ArmadaChartObject } from '../api/armada.ts';
import { specOrMetadataChanged } from '../chart/controller.ts';
import { parentsOf, reconcileOrderedParent } from '../ordered-children.ts';
import { groupReleasePrefix } from '../ownership.ts';

export async function reconcileGroup(req: Request, ctx: ReconcileContext): Promise<ReconcileResult> {
  await reconcileOrderedParent<ArmadaChartGroupObject, ArmadaChartObject>(req, ctx, {
    parentType: ArmadaChartGroup,
    childType: ArmadaChart,
    specSchema: GroupSpecSchema,
    isValidSpec: isValidGroupSpec,
    children: (group, cache) => ({ names: group.spec.chart_group, field: 'chart_group', sequenced: !!group.spec.sequenced, skippable, releasePrefix: groupReleasePrefix(cache, group) }),
  });
}

/** A failed protected chart with `continue_processing` does not hold its group back (Armada's meaning). */
function skippable(chart: ArmadaChartObject): boolean {
  const state = chart.status?.actual_state;
  return !!chart.spec.protected?.continue_processing && chart.spec.target_state === 'deployed' && (state === 'failed' || state === 'error');
}

/** Registers the ArmadaChartGroup controller with the manager. */
export function registerGroupController(mgr: Manager): Controller {
  return controller(mgr)
    .named('armadachartgroup')
    .for(ArmadaChartGroup, specOrMetadataChanged)
    .watches(ArmadaChart, parentsOf(mgr, ArmadaChartGroup, (g) => (g as ArmadaChartGroupObject).spec?.chart_group))
    .reconcile(reconcileGroup);
}
