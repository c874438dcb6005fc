/**
 * Reading objects whose shape this operator version did not write: a status stored under an
 * older CRD (e.g. `status.conditions: "x"`), or a field another client filled in.
 *
 * Guarantees:
 * - `readConditions(type, object)` returns `status.conditions` as a list of conditions (empty
 *   when absent) or throws an `UnexpectedShapeError` naming the first offending field
 *   (`status`, `status.conditions`, `status.conditions[2].type`, ...) — never a TypeError deep
 *   inside a reconcile.
 * - `checkShape(type, object, field, value, schema)` validates `value` against a TypeBox schema
 *   and returns it typed, or throws an `UnexpectedShapeError` naming the first offending field
 *   below `field`.
 * - An `UnexpectedShapeError` is a `TerminalError`: the controller does not retry it; it records
 *   a Warning Event `UnexpectedShape` on the object and sets its `Degraded` condition (status
 *   True, reason `UnexpectedShape`, message naming the field) through `reportUnexpectedShape`,
 *   replacing `status.conditions` only when that list itself is malformed. Other objects keep
 *   being reconciled; the object is reconciled again when it changes.
 * - `clearUnexpectedShape` (called by the controller after the next successful reconcile of
 *   such an object) sets `Degraded` back to False, reason `ShapeCorrected`, with a
 *   resourceVersion-guarded status write: on a conflict it writes nothing rather than overwrite
 *   a newer status.
 */
import type { TSchema, Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { KubeApi } from '../client/client.ts';
import type { KubeObject, ResourceType } from '../client/resource.ts';
import { TerminalError } from '../errors/terminal-error.ts';
import type { EventRecorder } from '../events/recorder.ts';
import { setCondition, type Condition } from './conditions.ts';

export class UnexpectedShapeError extends TerminalError {
  constructor(
    readonly type: ResourceType,
    readonly object: KubeObject,
    /** The offending field, e.g. `status.conditions`. */
    readonly field: string,
    readonly expected: string,
    readonly found: unknown,
  ) {
    super(`${type.kind} ${object.metadata.namespace ? `${object.metadata.namespace}/` : ''}${object.metadata.name}: field ${field} has an unexpected shape: expected ${expected}, found ${describeValue(found)}`);
  }
}

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  const text = JSON.stringify(value);
  return typeof value === 'object' ? 'an object' : `${typeof value} ${text && text.length > 60 ? `${text.slice(0, 60)}…` : text}`;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** `status.conditions` of `object`, checked entry by entry. */
export function readConditions(type: ResourceType, object: KubeObject & { status?: unknown }): Condition[] {
  const status = object.status;
  if (status === undefined || status === null) return [];
  if (!isObject(status)) throw new UnexpectedShapeError(type, object, 'status', 'an object', status);
  const conditions = status.conditions;
  if (conditions === undefined || conditions === null) return [];
  if (!Array.isArray(conditions)) throw new UnexpectedShapeError(type, object, 'status.conditions', 'a list of conditions', conditions);
  conditions.forEach((condition: unknown, i) => {
    if (!isObject(condition)) throw new UnexpectedShapeError(type, object, `status.conditions[${i}]`, 'a condition object', condition);
    for (const key of ['type', 'status'] as const) {
      if (typeof condition[key] !== 'string') throw new UnexpectedShapeError(type, object, `status.conditions[${i}].${key}`, 'a string', condition[key]);
    }
  });
  return conditions as Condition[];
}

/** `value` (found at `field` of `object`) checked against `schema`. */
export function checkShape<S extends TSchema>(type: ResourceType, object: KubeObject, field: string, value: unknown, schema: S): Static<S> {
  const first = Value.Errors(schema, value).First();
  if (!first) return value as Static<S>;
  const below = first.path
    .split('/')
    .filter(Boolean)
    .map((part) => (/^\d+$/.test(part) ? `[${part}]` : `.${part}`))
    .join('');
  throw new UnexpectedShapeError(type, object, `${field}${below}`, first.message.replace(/^Expected /, '').toLowerCase(), first.value);
}

/** Whether the object carries the `Degraded` condition of an unexpected shape (reported by any process). */
export function reportedUnexpectedShape(object: KubeObject): boolean {
  const conditions = (object as { status?: { conditions?: unknown } }).status?.conditions;
  return Array.isArray(conditions) && conditions.some((c: unknown) => isObject(c) && c['type'] === 'Degraded' && c['status'] === 'True' && c['reason'] === 'UnexpectedShape');
}

/** Sets `Degraded` back to False on an object whose shape was reported and has since been reconciled successfully. */
export async function clearUnexpectedShape(type: ResourceType, name: string, namespace: string | undefined, client: KubeApi): Promise<void> {
  const current = await client.get<KubeObject & { status?: Record<string, unknown> }>(type, name, namespace);
  const conditions = readConditions(type, current);
  const degraded = conditions.find((c) => c.type === 'Degraded');
  if (degraded?.status !== 'True' || degraded.reason !== 'UnexpectedShape') return;
  const next = setCondition(conditions, { type: 'Degraded', status: 'False', reason: 'ShapeCorrected', message: 'reconciled successfully since the unexpected shape was reported', observedGeneration: current.metadata.generation });
  await client.replaceStatus(type, { ...current, status: { ...current.status, conditions: next } });
}

/** The Warning Event and the `Degraded` condition for an object of an unexpected shape. */
export async function reportUnexpectedShape(err: UnexpectedShapeError, client: KubeApi, recorder: EventRecorder): Promise<void> {
  const { type, object } = err;
  recorder.event(object, 'Warning', 'UnexpectedShape', err.message);
  let existing: Condition[] = [];
  try {
    existing = readConditions(type, object);
  } catch {
    // The condition list itself is what is malformed: it is replaced.
  }
  const conditions = setCondition(existing, {
    type: 'Degraded',
    status: 'True',
    reason: 'UnexpectedShape',
    message: `${err.message}; not reconciled until the object changes`,
    observedGeneration: object.metadata.generation,
  });
  await client.patchStatus(type, object.metadata.name ?? '', object.metadata.namespace, { status: { conditions } }, 'merge');
}
