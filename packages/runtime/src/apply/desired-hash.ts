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

/**
 * JSON with object keys sorted and undefined fields dropped: equal for equal values, whatever the key
 * order. Keys sort by UTF-16 code units (`Array.prototype.sort`'s default for strings). The string
 * is built by appending, in less than half the time of mapping entries through arrays: every
 * reconcile that compares a child stamps its desired form.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) {
    let json = '[';
    // An undefined entry adds nothing between its commas, as Array.prototype.join writes it.
    for (let i = 0; i < value.length; i++) json += (i === 0 ? '' : ',') + (canonicalJson(value[i]) ?? '');
    return `${json}]`;
  }
  const object = value as Record<string, unknown>;
  let json = '{';
  for (const key of Object.keys(object).sort()) {
    const field = object[key];
    if (field === undefined) continue;
    json += `${json.length === 1 ? '' : ','}${JSON.stringify(key)}:${canonicalJson(field)}`;
  }
  return `${json}}`;
}
