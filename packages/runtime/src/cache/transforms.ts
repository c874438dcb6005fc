/**
 * Cache transforms that keep cached objects lean: what a controller never reads is dropped once,
 * when the object arrives, instead of being held for every object of the type.
 *
 * Guarantees: `keepFields(...paths)` keeps apiVersion, kind and metadata (without managedFields,
 * as every cached object) and, of the rest, exactly the named dotted paths that are present
 * (`status.phase`, `spec.containers`); the received object is not mutated.
 */
import type { KubeObject } from '../client/resource.ts';
import { dropManagedFields, type Transform } from './informer.ts';

export function keepFields<T extends KubeObject>(...paths: string[]): Transform<T> {
  const parsed = paths.map((p) => p.split('.'));
  for (const [i, segments] of parsed.entries()) {
    if (segments.some((s) => s === '') || segments[0] === 'metadata') throw new Error(`keepFields: "${paths[i]}" is not a dotted path outside metadata`);
  }
  return (obj) => {
    const lean: Record<string, unknown> = { apiVersion: obj.apiVersion, kind: obj.kind, metadata: dropManagedFields(obj).metadata };
    for (const segments of parsed) copyPath(obj as unknown as Record<string, unknown>, lean, segments);
    return lean as unknown as T;
  };
}

function copyPath(from: Record<string, unknown>, to: Record<string, unknown>, segments: string[]): void {
  let source: unknown = from;
  for (const segment of segments) {
    if (source === null || typeof source !== 'object') return;
    source = (source as Record<string, unknown>)[segment];
  }
  if (source === undefined) return;
  let target = to;
  for (const segment of segments.slice(0, -1)) {
    if (target[segment] === undefined) target[segment] = {};
    target = target[segment] as Record<string, unknown>;
  }
  target[segments[segments.length - 1]!] = source;
}
