/**
 * Comparing a desired child with the cached one, without a server round trip.
 *
 * Guarantees: `isSubset(desired, observed)` is true exactly when every field set in `desired`
 * has the same value in `observed` — objects compare key by key (extra observed keys, such as
 * the API server's defaults and status, are ignored), arrays compare element by element and
 * must have the same length, scalars compare with `===`. Desired objects are therefore written
 * in the canonical form the API server returns (e.g. `protocol: TCP` on ports), so that a child
 * that already matches is never written again.
 */

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
