/**
 * JSON patches (RFC 6902) computed from an old and a new JSON value, as a mutating admission
 * webhook answers the API server.
 *
 * Guarantees: applying `jsonPatch(old, next)` to `old` in order yields a value deep-equal to
 * `next` (as JSON: object members whose value is `undefined` count as absent). Object members are
 * compared one by one, so a patch touches only what changed; keys are escaped as JSON pointers
 * (`~` as `~0`, `/` as `~1`). Arrays are compared index by index over their common length,
 * extra old entries are removed from the last one backwards and extra new entries are added at
 * the end, so every index a step names is valid when it is applied. Nothing is produced when
 * nothing changed.
 */

export type JsonPatchOperation =
  | { op: 'add'; path: string; value: unknown }
  | { op: 'replace'; path: string; value: unknown }
  | { op: 'remove'; path: string };

/** The operations turning `old` into `next`, in the order they must be applied. */
export function jsonPatch(old: unknown, next: unknown): JsonPatchOperation[] {
  const ops: JsonPatchOperation[] = [];
  diff(normalize(old), normalize(next), '', ops);
  return ops;
}

/** One reference token of a JSON pointer (RFC 6901). */
export function escapePointerToken(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

function diff(old: unknown, next: unknown, path: string, ops: JsonPatchOperation[]): void {
  if (isObject(old) && isObject(next)) {
    for (const key of Object.keys(old)) {
      if (!(key in next)) ops.push({ op: 'remove', path: `${path}/${escapePointerToken(key)}` });
    }
    for (const [key, value] of Object.entries(next)) {
      const child = `${path}/${escapePointerToken(key)}`;
      if (key in old) diff(old[key], value, child, ops);
      else ops.push({ op: 'add', path: child, value });
    }
    return;
  }
  if (Array.isArray(old) && Array.isArray(next)) {
    const common = Math.min(old.length, next.length);
    for (let i = 0; i < common; i++) diff(old[i], next[i], `${path}/${i}`, ops);
    for (let i = old.length - 1; i >= common; i--) ops.push({ op: 'remove', path: `${path}/${i}` });
    for (let i = common; i < next.length; i++) ops.push({ op: 'add', path: `${path}/${i}`, value: next[i] });
    return;
  }
  if (!sameScalar(old, next)) ops.push({ op: 'replace', path, value: next });
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function sameScalar(a: unknown, b: unknown): boolean {
  // Containers of different kinds (object vs array) or a container vs a scalar are replaced whole.
  if (typeof a === 'object' && a !== null) return false;
  if (typeof b === 'object' && b !== null) return false;
  return a === b;
}

/** The value as JSON sees it: `undefined` members dropped, dates and the like as their JSON. */
function normalize(value: unknown): unknown {
  return value === undefined ? null : JSON.parse(JSON.stringify(value));
}
