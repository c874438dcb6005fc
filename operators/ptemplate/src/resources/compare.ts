/**
 * Comparing a desired child with the cached one, without a server round trip.
 *
 * Guarantees: `childMatches(desired, observed)` is true exactly when
 * - every field set in `desired` has the same value in `observed` (`isSubset`): objects compare
 *   key by key, so the API server's defaults and status in `observed` are ignored; arrays compare
 *   element by element and must have the same length; scalars compare with `===`;
 * - every controller-style owner reference of `desired` is among the observed ones (other
 *   owners added by someone else do not count as drift);
 * - at each of the given `exact` paths (dotted, numeric segments index arrays) the desired and
 *   observed values have the same keys (objects) or length (arrays), a missing value counting as
 *   empty: so a key removed from a map, or a field dropped from the desired child, is a change.
 * Desired objects are written in the canonical form the API server returns (e.g. `protocol: TCP`
 * on ports), so that a child that already matches is never written again.
 */

import type { KubeObject } from '@iot-operator/runtime';

export function isSubset(desired: unknown, observed: unknown): boolean {
  if (desired === undefined) return true;
  if (Array.isArray(desired)) {
    return Array.isArray(observed) && desired.length === observed.length && desired.every((item, i) => isSubset(item, observed[i]));
  }
  if (desired !== null && typeof desired === 'object') {
    if (observed === null || typeof observed !== 'object' || Array.isArray(observed)) return false;
    const seen = observed as Record<string, unknown>;
    return Object.entries(desired as Record<string, unknown>).every(([key, value]) => isSubset(value, seen[key]));
  }
  return desired === observed;
}

export function childMatches(desired: KubeObject, observed: KubeObject, exact: readonly string[] = []): boolean {
  const { ownerReferences: desiredOwners = [], ...desiredMeta } = desired.metadata;
  const observedOwners = observed.metadata.ownerReferences ?? [];
  const ownersPresent = desiredOwners.every((want) => observedOwners.some((have) => isSubset(want, have)));
  return ownersPresent && isSubset({ ...desired, metadata: desiredMeta }, observed) && exact.every((path) => sameShape(valueAt(desired, path), valueAt(observed, path)));
}

function valueAt(obj: unknown, path: string): unknown {
  let value = obj;
  for (const segment of path.split('.')) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[segment];
  }
  return value;
}

function sameShape(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) || Array.isArray(b)) return (Array.isArray(a) ? a.length : 0) === (Array.isArray(b) ? b.length : 0);
  const keys = (v: unknown) => (v !== null && typeof v === 'object' ? Object.keys(v).sort() : []);
  const ka = keys(a);
  const kb = keys(b);
  return ka.length === kb.length && ka.every((k, i) => k === kb[i]);
}
