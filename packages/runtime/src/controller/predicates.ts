/**
 * Predicates: filters deciding which watch events reach the work queue.
 *
 * Guarantees: a predicate that leaves a hook undefined lets that kind of event through;
 * `generationChanged` passes updates only when `metadata.generation` changed (status-only writes
 * do not trigger a reconcile); `labelsChanged` passes updates only when labels differ;
 * `phaseOrDeletionChanged` passes updates only when `status.phase` or the deletion mark changed
 * (whether a pod is live: heartbeats and other status writes do not count);
 * `and`/`or` combine predicates as their names say.
 */
import type { KubeObject } from '../client/resource.ts';
import { matchesSelector, parseSelector } from '../cache/selector.ts';

export interface Predicate<T extends KubeObject = KubeObject> {
  create?(obj: T): boolean;
  update?(oldObj: T, newObj: T): boolean;
  delete?(obj: T): boolean;
}

export function generationChanged(): Predicate {
  return { update: (a, b) => a.metadata.generation !== b.metadata.generation };
}

export function labelsChanged(): Predicate {
  return { update: (a, b) => !sameStringMap(a.metadata.labels, b.metadata.labels) };
}

export function phaseOrDeletionChanged(): Predicate {
  const phase = (obj: KubeObject) => (obj as { status?: { phase?: unknown } }).status?.phase;
  return { update: (a, b) => phase(a) !== phase(b) || a.metadata.deletionTimestamp !== b.metadata.deletionTimestamp };
}

export function annotationsChanged(): Predicate {
  return { update: (a, b) => !sameStringMap(a.metadata.annotations, b.metadata.annotations) };
}

/** Passes events of objects whose labels match the selector. */
export function labelSelector(selector: string | Record<string, string>): Predicate {
  const parsed = parseSelector(selector);
  const matches = (obj: KubeObject) => matchesSelector(obj.metadata.labels, parsed);
  return { create: matches, update: (a, b) => matches(a) || matches(b), delete: matches };
}

export function or(...predicates: Predicate[]): Predicate {
  return {
    create: (o) => predicates.some((p) => p.create?.(o) ?? true),
    update: (a, b) => predicates.some((p) => p.update?.(a, b) ?? true),
    delete: (o) => predicates.some((p) => p.delete?.(o) ?? true),
  };
}

export function and(...predicates: Predicate[]): Predicate {
  return {
    create: (o) => predicates.every((p) => p.create?.(o) ?? true),
    update: (a, b) => predicates.every((p) => p.update?.(a, b) ?? true),
    delete: (o) => predicates.every((p) => p.delete?.(o) ?? true),
  };
}

function sameStringMap(a: Record<string, string> | undefined, b: Record<string, string> | undefined): boolean {
  const ak = Object.keys(a ?? {});
  const bk = Object.keys(b ?? {});
  return ak.length === bk.length && ak.every((k) => a?.[k] === b?.[k]);
}
