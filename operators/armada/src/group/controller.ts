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
 *   recovers when the chart appears. Status: `deployed` once every chart is deployed, `failed`
 *   naming a failed chart, `running` while charts progress.
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
import { ArmadaChart, ArmadaChartGroup, GroupSpecSchema, isValidGroupSpec, specError, type ArmadaChartGroupObject, type ArmadaChartObject, type CommonStatus } from '../api/armada.ts';
import { specOrMetadataChanged } from '../chart/controller.ts';
import { adopt, enable, foreignController } from '../ownership.ts';
import { isDeployed, nextStatus, writeStatus } from '../status.ts';

export async function reconcileGroup(req: Request, ctx: ReconcileContext): Promise<ReconcileResult> {
  const group = ctx.cache.get<ArmadaChartGroupObject>(ArmadaChartGroup, req.name, req.namespace);
  if (!group || group.metadata.deletionTimestamp) return;
  const report = async (state: CommonStatus['actual_state'] & string, reason?: string): Promise<void> => {
    await writeStatus(ctx, ArmadaChartGroup, group, nextStatus<CommonStatus>(group, state, reason));
  };
  if (!isValidGroupSpec(group.spec)) return report('error', `the spec is invalid: ${specError(GroupSpecSchema, group.spec)}`);

  const names = group.spec.chart_group;
  const charts = names.map((name) => ctx.cache.get<ArmadaChartObject>(ArmadaChart, name, req.namespace));
  const missing = names.filter((_, i) => !charts[i]);
  if (missing.length > 0) return report('error', `ArmadaChart ${missing.join(', ')} not found in namespace ${req.namespace}: create it or remove it from chart_group`);
  const present = charts as ArmadaChartObject[];
  const taken = present.map((chart) => [chart, foreignController(chart, group)] as const).filter(([, owner]) => owner);
  if (taken.length > 0) {
    const [chart, owner] = taken[0]!;
    return report('error', `ArmadaChart ${chart.metadata.name} is controlled by ${owner!.kind} ${owner!.name}: a chart belongs to one group`);
  }
  for (const chart of present) await adopt(ctx, ArmadaChart, chart, controllerReference(ArmadaChartGroup, group));

  if ((group.spec.target_state ?? 'deployed') === 'uninitialized') return report('uninitialized');

  for (const chart of present) {
    if (chart.spec.target_state !== 'deployed') await enable(ctx, ArmadaChart, chart);
    const state = chart.spec.target_state === 'deployed' ? chart.status?.actual_state : 'uninitialized';
    if (group.spec.sequenced && !isDeployed(chart)) {
      if (skippable(chart)) continue;
      if (state === 'failed' || state === 'error') return report('failed', `ArmadaChart ${chart.metadata.name} is ${state}: ${chart.status?.reason ?? 'see its status'}`);
      return report('running', `waiting for ArmadaChart ${chart.metadata.name} to be deployed before the next chart of the sequence`);
    }
  }
  const failed = present.find((c) => (c.status?.actual_state === 'failed' || c.status?.actual_state === 'error') && !skippable(c));
  if (failed) return report('failed', `ArmadaChart ${failed.metadata.name} is ${failed.status!.actual_state}: ${failed.status?.reason ?? 'see its status'}`);
  const waiting = present.filter((c) => !isDeployed(c) && !skippable(c)).map((c) => c.metadata.name);
  if (waiting.length > 0) return report('running', `waiting for ArmadaChart ${waiting.join(', ')} to be deployed`);
  return report('deployed');
}

/** A failed protected chart with `continue_processing` does not hold its group back (Armada's meaning). */
function skippable(chart: ArmadaChartObject): boolean {
  const state = chart.status?.actual_state;
  return !!chart.spec.protected?.continue_processing && chart.spec.target_state === 'deployed' && (state === 'failed' || state === 'error');
}

/** Registers the ArmadaChartGroup controller with the manager. */
export function registerGroupController(mgr: Manager): Controller {
  const chartToGroups: MapFunc = (chart) => {
    const owner = chart.metadata.ownerReferences?.find((r) => r.controller && r.kind === ArmadaChartGroup.kind);
    const naming = mgr.cache
      .list<ArmadaChartGroupObject>(ArmadaChartGroup, { namespace: chart.metadata.namespace })
      .filter((g) => g.spec?.chart_group?.includes(chart.metadata.name!))
      .map((g) => g.metadata.name!);
    return [...new Set([...(owner ? [owner.name] : []), ...naming])].map((name) => ({ namespace: chart.metadata.namespace, name }));
  };
  return controller(mgr)
    .named('armadachartgroup')
    .for(ArmadaChartGroup, specOrMetadataChanged)
    .watches(ArmadaChart, chartToGroups)
    .reconcile(reconcileGroup);
}
