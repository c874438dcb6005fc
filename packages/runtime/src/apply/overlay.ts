/**
 * Overlaying a desired object onto an observed one, for a full replace (PUT) when server-side
 * apply cannot converge — e.g. a list entry that another field manager added by hand keeps
 * existing under apply's merge semantics.
 *
 * Guarantees: the result has every field of `observed` that `desired` does not set (server
 * defaults, status, resourceVersion for the optimistic-concurrency guard) and exactly the
 * desired value wherever `desired` sets one; lists are taken whole from `desired`, so
 * `isSubset(desired, overlay(observed, desired))` always holds. Inputs are not modified.
 */

export function overlay<T>(observed: T, desired: unknown): T {
  return overlayValue(observed, desired) as T;
}

function overlayValue(observed: unknown, desired: unknown): unknown {
  if (desired === undefined) return observed;
  if (typeof desired !== 'object' || desired === null || Array.isArray(desired)) return structuredClone(desired);
  const base = typeof observed === 'object' && observed !== null && !Array.isArray(observed) ? (observed as Record<string, unknown>) : {};
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(desired)) out[key] = overlayValue(base[key], value);
  return out;
}
