/**
 * A fingerprint of what was last applied, kept on the object itself.
 *
 * "Desired is a subset of observed" cannot see a field that was *removed* from the desired
 * object (a nodeSelector key, a port): the observed object still has it, so it still "matches".
 * Stamping each desired object with a hash of its own content fixes that: any change of the
 * desired object, removals included, changes the hash, the stamped annotation then differs from
 * the observed one, and the object is applied again — and server-side apply removes the fields
 * this field manager no longer sets.
 *
 * Guarantees: `withDesiredHash` returns a copy carrying the annotation; the hash depends only on
 * the object's content (key order does not matter) and not on a previous stamp.
 */
import { createHash } from 'node:crypto';
import type { KubeObject } from '../client/resource.ts';

export const DESIRED_HASH_ANNOTATION = 'operator-runtime.iot-operator.dev/desired-hash';

export function withDesiredHash<T extends KubeObject>(obj: T): T {
  const { [DESIRED_HASH_ANNOTATION]: _previous, ...annotations } = obj.metadata.annotations ?? {};
  const unstamped = { ...obj, metadata: { ...obj.metadata, annotations } };
  const hash = createHash('sha256').update(canonicalJson(unstamped)).digest('hex').slice(0, 32);
  return { ...obj, metadata: { ...obj.metadata, annotations: { ...annotations, [DESIRED_HASH_ANNOTATION]: hash } } };
}

/** JSON with object keys sorted and undefined fields dropped: equal for equal values, whatever the key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
