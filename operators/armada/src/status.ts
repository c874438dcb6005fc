/**
 * Status of the three Armada kinds: building it and writing it only when it changes.
 *
 * Guarantees:
 * - `nextStatus(object, state, reason, conditions)` sets `actual_state`, `satisfied`
 *   (`actual_state == target_state`), `reason` (dropped when satisfied and none is given),
 *   `observedGeneration` and the `Ready` condition (True exactly when satisfied), keeping
 *   every other field and condition of the current status; condition transition times move only
 *   when a condition's status changes.
 * - `writeStatus` patches the status subresource only when the new status differs from the
 *   cached one, and records an Event whenever `actual_state` or `reason` changes (Normal when
 *   the object is satisfied or progressing, Warning for `failed` and `error`).
 * - `isDeployed(obj)` is true when the object's status is `deployed` for its current generation.
 */

import { setCondition, type Condition, type ConditionUpdate, type KubeObject, type ReconcileContext, type ResourceType } from '@iot-operator/runtime';
import type { ActualState, CommonStatus, TargetState } from './api/armada.ts';
import { canonicalJson } from './chart/plan.ts';

interface ArmadaObject extends KubeObject {
  spec: { target_state?: TargetState };
  status?: CommonStatus;
}

export function nextStatus<S extends CommonStatus>(obj: ArmadaObject & { status?: S }, state: ActualState, reason: string | undefined, fields: Partial<S> = {}, conditions: ConditionUpdate[] = [], now = new Date()): S {
  const target = obj.spec.target_state ?? 'deployed';
  const satisfied = state === target;
  const generation = obj.metadata.generation;
  let list: Condition[] | undefined = obj.status?.conditions;
  const ready: ConditionUpdate = satisfied
    ? { type: 'Ready', status: 'True', reason: capitalised(state), message: reason ?? `${state} as requested`, observedGeneration: generation }
    : { type: 'Ready', status: 'False', reason: capitalised(state), message: reason ?? `${state}; target is ${target}`, observedGeneration: generation };
  for (const update of [ready, ...conditions]) list = setCondition(list, update, now);
  const next = { ...obj.status, ...fields, actual_state: state, satisfied, observedGeneration: generation, conditions: list } as S;
  if (reason) next.reason = reason;
  else delete next.reason;
  return next;
}

export async function writeStatus<S extends CommonStatus>(ctx: ReconcileContext, type: ResourceType, obj: ArmadaObject & { status?: S }, next: S): Promise<void> {
  const current = obj.status;
  if (canonicalJson(current ?? {}) === canonicalJson(next)) return;
  // A merge patch: fields removed from the status are sent as null.
  const removed = Object.fromEntries(Object.keys(current ?? {}).filter((k) => !(k in next)).map((k) => [k, null]));
  await ctx.client.patchStatus(type, obj.metadata.name ?? '', obj.metadata.namespace, { status: { ...removed, ...next } }, 'merge');
  if (current?.actual_state !== next.actual_state || current?.reason !== next.reason) {
    const warning = next.actual_state === 'failed' || next.actual_state === 'error';
    const message = next.reason ? `${next.actual_state}: ${next.reason}` : `${next.actual_state}`;
    ctx.recorder.event(obj, warning ? 'Warning' : 'Normal', capitalised(next.actual_state ?? 'unknown'), message);
  }
}

export function isDeployed(obj: ArmadaObject | undefined): boolean {
  return !!obj && obj.status?.actual_state === 'deployed' && obj.status.observedGeneration === obj.metadata.generation;
}

function capitalised(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
