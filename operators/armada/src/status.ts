/**
 * Status of the three Armada kinds: building it and writing it only when it changes.
 *
 * Guarantees:
 * - `nextStatus(type, object, state, reason, fields, conditions, stalled)` sets `actual_state`,
 *   `satisfied` (`actual_state == target_state`), `reason` (dropped when satisfied and none is
 *   given), `observedGeneration` and the kstatus conditions, each with the generation it was
 *   computed for: `Ready` (True exactly when satisfied), `Stalled` (True when `stalled` names
 *   why the object cannot progress until its spec changes) and `Reconciling` (True while it is
 *   neither satisfied nor stalled: progressing, waiting, or retrying a transient failure) — so
 *   `kubectl wait --for=condition=Ready` works. Every other field and condition of the current
 *   status is kept; condition transition times move only when a condition's status changes. A
 *   `status.conditions` of another shape (written under an older CRD) is an
 *   `UnexpectedShapeError` naming the field (`type` names the kind), so the runtime marks the
 *   object `Degraded` instead of a TypeError being retried forever.
 * - `writeStatus` patches the status subresource only when the new status differs from the
 *   cached one, conditionally on the object's resourceVersion (a status computed from a stale
 *   cache fails with a Conflict and is retried, never clobbering a newer one; an object deleted
 *   meanwhile is no error), and records an Event whenever `actual_state` or `reason` changes (Normal when
 *   the object is satisfied or progressing, Warning for `failed` and `error`).
 * - `isDeployed(obj)` is true when the object's status is `deployed` for its current generation.
 */

import { isNotFound, readConditions, setCondition, type Condition, type ConditionUpdate, type KubeObject, type ReconcileContext, type ResourceType } from '@iot-operator/runtime';
import type { ActualState, CommonStatus, TargetState } from './api/armada.ts';
import { canonicalJson } from './chart/plan.ts';

interface ArmadaObject extends KubeObject {
  spec: { target_state?: TargetState };
  status?: CommonStatus;
}

export function nextStatus<S extends CommonStatus>(
  type: ResourceType,
  obj: ArmadaObject & { status?: S },
  state: ActualState,
  reason: string | undefined,
  fields: Partial<S> = {},
  conditions: ConditionUpdate[] = [],
  /** The kstatus reason (e.g. `InvalidValues`) when the object cannot progress until its spec changes. */
  stalled?: string,
  now = new Date(),
): S {
  const target = obj.spec.target_state ?? 'deployed';
  const satisfied = state === target;
  const generation = obj.metadata.generation;
  let list: Condition[] = readConditions(type, obj);
  const message = reason ?? (satisfied ? `${state} as requested` : `${state}; target is ${target}`);
  const progressing = !satisfied && !stalled;
  const kstatus: ConditionUpdate[] = [
    { type: 'Ready', status: satisfied ? 'True' : 'False', reason: capitalised(state), message, observedGeneration: generation },
    stalled
      ? { type: 'Stalled', status: 'True', reason: stalled, message: `${message} (not retried until the spec changes)`, observedGeneration: generation }
      : { type: 'Stalled', status: 'False', reason: capitalised(state), message: satisfied ? 'nothing to do' : 'progressing or retrying', observedGeneration: generation },
    progressing
      ? { type: 'Reconciling', status: 'True', reason: capitalised(state), message, observedGeneration: generation }
      : { type: 'Reconciling', status: 'False', reason: stalled ? 'Stalled' : capitalised(state), message: stalled ? 'stalled: waiting for a spec change' : 'nothing to do', observedGeneration: generation },
  ];
  for (const update of [...kstatus, ...conditions]) list = setCondition(list, update, now);
  const next = { ...obj.status, ...fields, actual_state: state, satisfied, observedGeneration: generation, conditions: list } as S;
  if (reason) next.reason = reason;
  else delete next.reason;
  return next;
}

/**
 * Writes `next` when it differs from `obj.status`; returns the object as the API server now has
 * it (or `obj` when nothing was written). The write is conditional on `obj`'s resourceVersion: a
 * decision made on a stale cached object fails with a Conflict and the reconcile is retried.
 */
export async function writeStatus<T extends ArmadaObject>(ctx: ReconcileContext, type: ResourceType, obj: T, next: NonNullable<T['status']>): Promise<T> {
  const current = obj.status;
  if (canonicalJson(current ?? {}) === canonicalJson(next)) return obj;
  // A merge patch: fields removed from the status are sent as null.
  const removed = Object.fromEntries(Object.keys(current ?? {}).filter((k) => !(k in next)).map((k) => [k, null]));
  let written: T;
  try {
    written = await ctx.client.patchStatus<T>(type, obj.metadata.name ?? '', obj.metadata.namespace, { metadata: { resourceVersion: obj.metadata.resourceVersion }, status: { ...removed, ...next } }, 'merge');
  } catch (err) {
    if (isNotFound(err)) return obj; // deleted meanwhile: nothing left to report on
    throw err;
  }
  if (current?.actual_state !== next.actual_state || current?.reason !== next.reason) {
    const warning = next.actual_state === 'failed' || next.actual_state === 'error';
    const message = next.reason ? `${next.actual_state}: ${next.reason}` : `${next.actual_state}`;
    ctx.recorder.event(obj, warning ? 'Warning' : 'Normal', capitalised(next.actual_state ?? 'unknown'), message);
  }
  return written;
}

export function isDeployed(obj: ArmadaObject | undefined): boolean {
  return !!obj && obj.status?.actual_state === 'deployed' && obj.status.observedGeneration === obj.metadata.generation;
}

function capitalised(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
