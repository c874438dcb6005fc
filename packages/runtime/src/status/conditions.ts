/**
 * metav1.Condition helpers.
 *
 * Guarantees: `setCondition` returns a new list (the input is never mutated); a condition's
 * `lastTransitionTime` moves only when its `status` changes; conditions of other types keep
 * their order and content; `conditionsEqual` ignores nothing, so a status writer can compare
 * lists to decide whether a write is needed.
 */
import { kubeTimestamp } from '../client/timestamp.ts';

export type ConditionStatus = 'True' | 'False' | 'Unknown';

export interface Condition {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

/** What a caller states about a condition; the transition time is managed here. */
export type ConditionUpdate = Omit<Condition, 'lastTransitionTime'>;

export function setCondition(
  existing: readonly Condition[] | undefined,
  update: ConditionUpdate,
  now: Date = new Date(),
): Condition[] {
  const list = existing ?? [];
  const previous = list.find((c) => c.type === update.type);
  const lastTransitionTime =
    previous && previous.status === update.status ? previous.lastTransitionTime : kubeTimestamp(now);
  const next: Condition = { ...update, lastTransitionTime };
  if (!previous) return [...list, next];
  return list.map((c) => (c.type === update.type ? next : c));
}

export function findCondition(conditions: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

export function isConditionTrue(conditions: readonly Condition[] | undefined, type: string): boolean {
  return findCondition(conditions, type)?.status === 'True';
}
