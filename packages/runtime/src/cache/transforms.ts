/**
 * Cache transforms that keep cached objects lean: what a controller never reads is dropped once,
 * when the object arrives, instead of being held for every object of the type.
 *
 * Guarantees: `keepFields(...paths)` keeps apiVersion, kind and metadata (without managedFields,
 * as every cached object) and, of the rest, exactly the named dotted paths that are present
 * (`status.phase`, `spec.containers`). A segment ending in `[]` names a list and keeps, of each
 * of its entries, what the rest of the path names (`status.containerStatuses[].name`): entries
 * stay in their order and count. A path that keeps a field whole wins over deeper paths into it;
 * an object of which nothing named is present is left out. The received object is not mutated.
 */
import type { KubeObject } from '../client/resource.ts';
import { dropManagedFields, type Transform } from './informer.ts';

/** What to keep of a value: all of it, or the named fields (of each entry, when it is a list). */
interface Shape {
  whole: boolean;
  list: boolean;
  fields: Map<string, Shape>;
}

const newShape = (): Shape => ({ whole: false, list: false, fields: new Map() });

export function keepFields<T extends KubeObject>(...paths: string[]): Transform<T> {
  const root = newShape();
  for (const p of paths) addPath(root, p);
  return (obj) => {
    const kept = (projectFields(obj as unknown as Record<string, unknown>, root.fields) ?? {}) as Record<string, unknown>;
    return { apiVersion: obj.apiVersion, kind: obj.kind, metadata: dropManagedFields(obj).metadata, ...kept } as unknown as T;
  };
}

function addPath(root: Shape, p: string): void {
  const segments = p.split('.');
  if (segments.some((s) => s === '' || s === '[]') || segments[0] === 'metadata' || segments[0] === 'metadata[]') {
    throw new Error(`keepFields: "${p}" is not a dotted path outside metadata`);
  }
  let shape = root;
  for (const segment of segments) {
    const list = segment.endsWith('[]');
    const name = list ? segment.slice(0, -2) : segment;
    let next = shape.fields.get(name);
    if (!next) shape.fields.set(name, (next = newShape()));
    if (list) next.list = true;
    shape = next;
  }
  shape.whole = true;
}

function project(value: unknown, shape: Shape): unknown {
  if (shape.whole) return value;
  if (shape.list) return Array.isArray(value) ? value.map((entry) => projectFields(entry, shape.fields) ?? {}) : undefined;
  return projectFields(value, shape.fields);
}

/** The named fields of an object, or undefined when it is not one or none of them is present. */
function projectFields(value: unknown, fields: Map<string, Shape>): Record<string, unknown> | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const out: Record<string, unknown> = {};
  for (const [name, shape] of fields) {
    const field = (value as Record<string, unknown>)[name];
    if (field === undefined) continue;
    const kept = project(field, shape);
    if (kept !== undefined) out[name] = kept;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}
