/**
 * One copy of each repeated string value among cached objects.
 *
 * Every watch event and list response is parsed afresh, so each cached object holds its own copy
 * of values that thousands of objects share: label values, image names, condition reasons,
 * namespace names, timestamps of the same second. `share` replaces, in place, each string value
 * of a freshly received object with the copy already held for that value, so the cache keeps one.
 *
 * Guarantees:
 * - Values are unchanged: only which copy of an equal string an object refers to changes, which
 *   JavaScript cannot observe. Arrays keep their order and length; keys are left alone (the JSON
 *   parser already keeps one copy of each key). A frozen object is not touched.
 * - Bounded: at most 2 × `capacity` strings are remembered (the current generation and the one
 *   before; a value seen again is carried into the current one), each at most
 *   `MAX_SHARED_LENGTH` characters long, so values seen once (pod IPs, generated names) pass
 *   through without accumulating. `uid` and `resourceVersion` values, unique by definition, are
 *   not looked up, nor values of at most `PARSER_SHARED_LENGTH` characters, which V8's JSON
 *   parser already keeps one copy of (`True`, `Running`, `apps/v1`: about half of the values).
 */

/** Longer values are rarely repeated (messages, serialised configuration) and are left alone. */
export const MAX_SHARED_LENGTH = 256;

/**
 * V8's JSON parser internalizes string values up to this length (its string table keeps one
 * copy of each), so looking them up here would only cost time. The unit test checks this of the
 * running V8.
 */
export const PARSER_SHARED_LENGTH = 10;

/** Fields whose values the API server makes unique per object or per version. */
const UNIQUE_FIELDS: ReadonlySet<string> = new Set(['uid', 'resourceVersion']);

export class SharedStrings {
  private current = new Map<string, string>();
  private previous = new Map<string, string>();

  constructor(private readonly capacity = 8192) {}

  /** Replaces every string value inside `value` (objects and arrays, nested) by its shared copy; returns `value`. */
  share<T>(value: T): T {
    if (value !== null && typeof value === 'object') this.shareIn(value as Record<string, unknown>);
    return value;
  }

  /** The shared copy of `s` (`s` itself the first time it is seen); `s` is of a length worth sharing. */
  private copyOf(s: string): string {
    const held = this.current.get(s);
    if (held !== undefined) return held;
    const shared = this.previous.get(s) ?? s;
    if (this.current.size >= this.capacity) {
      this.previous = this.current;
      this.current = new Map();
    }
    this.current.set(shared, shared);
    return shared;
  }

  /** One loop for objects and arrays alike (for...in gives an array's indexes; JSON has no inherited keys). */
  private shareIn(node: Record<string, unknown> | unknown[]): void {
    if (Object.isFrozen(node)) return;
    const fields = node as Record<string, unknown>;
    for (const key in fields) {
      const value = fields[key];
      if (typeof value === 'string') {
        if (value.length > PARSER_SHARED_LENGTH && value.length <= MAX_SHARED_LENGTH && !UNIQUE_FIELDS.has(key)) fields[key] = this.copyOf(value);
      } else if (value !== null && typeof value === 'object') {
        this.shareIn(value as Record<string, unknown>);
      }
    }
  }
}
