/**
 * "Does the observed object already carry what we would apply?" — the test that lets a
 * reconcile of an unchanged object make no write at all (guarantee 8: write only on change).
 *
 * Guarantees: `isSubset(desired, observed)` is true exactly when every field the desired object
 * sets has the same value in the observed one; fields only the server sets (defaults, status,
 * metadata it manages) are ignored; lists compare element by element in order and must have
 * the same length (a list we own is replaced whole by server-side apply); an empty desired
 * map or list matches an absent observed one (the API server drops empty values). Numbers
 * and strings never match each other: desired objects must use the server's canonical form.
 * `firstDifference` names the first field that differs, for logs.
 * `childDifference(desired, observed)` is `firstDifference` for a child object, except that its
 * owner references may be in any order and among others: each desired owner reference must be
 * carried by one observed reference, but an owner someone else added is no difference.
 */

import type { KubeObject } from '../client/resource.ts';

export function isSubset(desired: unknown, observed: unknown): boolean {
  return firstDifference(desired, observed) === undefined;
}

/** The JSON path of the first field whose desired value the observed object lacks, or undefined. */
export function firstDifference(desired: unknown, observed: unknown, path = ''): string | undefined {
  if (desired === undefined) return undefined;
  if (Array.isArray(desired)) {
    if (observed === undefined && desired.length === 0) return undefined;
    if (!Array.isArray(observed) || observed.length !== desired.length) return path || '/';
    for (let i = 0; i < desired.length; i++) {
      const diff = firstDifference(desired[i], observed[i], `${path}[${i}]`);
      if (diff !== undefined) return diff;
    }
    return undefined;
  }
  if (typeof desired === 'object' && desired !== null) {
    if (observed === undefined && Object.keys(desired).length === 0) return undefined;
    if (typeof observed !== 'object' || observed === null || Array.isArray(observed)) return path || '/';
    for (const [key, value] of Object.entries(desired)) {
      const diff = firstDifference(value, (observed as Record<string, unknown>)[key], `${path}.${key}`);
      if (diff !== undefined) return diff;
    }
    return undefined;
  }
  return desired === observed ? undefined : path || '/';
}

/**
 * The JSON path of the first field of a desired child that the observed one lacks, or undefined;
 * owner references added by others are not a difference, a missing desired one is.
 */
export function childDifference(desired: KubeObject, observed: KubeObject): string | undefined {
  const { ownerReferences: wanted = [], ...metadata } = desired.metadata;
  const present = observed.metadata.ownerReferences ?? [];
  const missing = wanted.findIndex((want) => !present.some((have) => isSubset(want, have)));
  if (missing >= 0) return `.metadata.ownerReferences[${missing}]`;
  return firstDifference({ ...desired, metadata }, observed);
}
