// SharedStrings: cached objects hold one copy of each repeated string value, and the pool stays bounded.
// Which copy an object refers to is invisible to JavaScript, so the copies are counted in a heap snapshot.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { getHeapSnapshot } from 'node:v8';
import { MAX_SHARED_LENGTH, PARSER_SHARED_LENGTH, SharedStrings } from '../src/cache/shared-strings.ts';

/** How many strings equal to each of `values` the heap holds after a full collection (the caller's own copy is one). */
async function copiesInHeap(...values: string[]): Promise<number[]> {
  let text = '';
  for await (const chunk of getHeapSnapshot()) text += chunk;
  const snapshot = JSON.parse(text) as { snapshot: { meta: { node_fields: string[]; node_types: [string[]] } }; nodes: number[]; strings: string[] };
  const { node_fields: fields, node_types: [types] } = snapshot.snapshot.meta;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const copies = new Map(values.map((value) => [value, 0]));
  for (let i = 0; i < snapshot.nodes.length; i += fields.length) {
    if (types[snapshot.nodes[i + typeAt]!] !== 'string') continue;
    const name = snapshot.strings[snapshot.nodes[i + nameAt]!]!;
    const count = copies.get(name);
    if (count !== undefined) copies.set(name, count + 1);
  }
  return values.map((value) => copies.get(value)!);
}

/**
 * A value made at run time (no literal of it in the source; one flat string), and `count`
 * objects parsed from JSON that carry it.
 */
function parsedCarrying(count: number, build: (value: string) => unknown, minLength = 0): { value: string; objects: unknown[] } {
  const value = JSON.parse(JSON.stringify(`value-${randomUUID()}`.padEnd(minLength, '-'))) as string;
  const json = JSON.stringify(build(value));
  return { value, objects: Array.from({ length: count }, () => JSON.parse(json) as unknown) };
}

/** Shares every object (in a function of its own: a suspended async test would keep the last one in its frame). */
function shareAll(strings: SharedStrings, objects: unknown[]): void {
  for (const obj of objects) strings.share(obj);
}

describe('SharedStrings', () => {
  it('leaves the objects holding one copy of a value repeated in label values, lists and nested fields', async () => {
    const { value, objects } = parsedCarrying(50, (v) => ({ metadata: { labels: { instance: v } }, spec: { containers: [{ image: v, args: [v, v] }] } }));
    assert.ok((await copiesInHeap(value))[0]! >= 1 + 50 * 4, 'freshly parsed objects hold a copy each');
    const strings = new SharedStrings();
    shareAll(strings, objects);
    assert.deepEqual(await copiesInHeap(value), [2], "the test's own value and the one shared copy");
    // Read after the snapshot, so the 50 objects were alive in it: their copies would have been counted.
    assert.ok(objects.every((obj) => JSON.stringify(obj).split(value).length === 5), 'each object still carries the value four times');
  });

  it('leaves values of up to PARSER_SHARED_LENGTH characters to the JSON parser, which already holds one copy of each, and shares longer ones', async () => {
    const atLimit = parsedCarrying(50, (v) => ({ reason: v.slice(-PARSER_SHARED_LENGTH) }));
    const shortValue = (atLimit.objects[0] as { reason: string }).reason;
    const overLimit = parsedCarrying(50, (v) => ({ reason: v.slice(-PARSER_SHARED_LENGTH - 1) }));
    const longerValue = (overLimit.objects[0] as { reason: string }).reason;
    assert.deepEqual(await copiesInHeap(shortValue), [1], 'this V8 parses one copy of a short value for all objects; if not, lower PARSER_SHARED_LENGTH');
    shareAll(new SharedStrings(), overLimit.objects);
    assert.deepEqual(await copiesInHeap(longerValue), [1], 'one character longer, the pool leaves one copy');
    // Read after the snapshots, so the objects were alive in them.
    assert.ok(atLimit.objects.every((obj) => (obj as { reason: string }).reason === shortValue));
    assert.ok(overLimit.objects.every((obj) => (obj as { reason: string }).reason === longerValue));
  });

  it('changes no value: keys, order, lengths, numbers, booleans and null stay as received; a frozen object is left alone', () => {
    const received = { kind: 'Pod', metadata: { name: 'p', labels: { a: 'x', b: 'x' } }, spec: { list: ['x', 1, true, null, { y: 'x' }, ['x']] }, status: {} };
    const before = structuredClone(received);
    const frozen = Object.freeze({ name: 'x', nested: { name: 'x' } });
    const strings = new SharedStrings();
    assert.equal(strings.share(received), received, 'shared in place');
    assert.deepEqual(received, before);
    assert.deepEqual(Object.keys(received.metadata.labels), ['a', 'b']);
    assert.doesNotThrow(() => strings.share({ holder: frozen }));
    assert.deepEqual(frozen, { name: 'x', nested: { name: 'x' } });
    assert.equal(strings.share('plain' as unknown), 'plain');
  });

  it('does not keep values unique by definition (uid, resourceVersion) or longer than the limit once their objects are gone', async () => {
    const strings = new SharedStrings();
    const uid = parsedCarrying(3, (v) => ({ metadata: { uid: v, ownerReferences: [{ uid: v }] } }));
    const version = parsedCarrying(3, (v) => ({ metadata: { resourceVersion: v } }));
    const long = parsedCarrying(3, (v) => ({ data: v }), MAX_SHARED_LENGTH + 1);
    for (const { objects } of [uid, version, long]) shareAll(strings, objects);
    uid.objects.length = version.objects.length = long.objects.length = 0;
    // Only the test's own copy of each is left.
    assert.deepEqual(await copiesInHeap(uid.value, version.value, long.value), [1, 1, 1]);
  });

  it('remembers at most two generations of values, and keeps sharing a value that keeps coming', async () => {
    const capacity = 10;
    const strings = new SharedStrings(capacity);
    const frequent = parsedCarrying(1, (v) => ({ image: v }));
    const first = frequent.objects[0] as { image: string };
    strings.share(first);
    const seenOnce: string[] = [];
    for (let i = 0; i < capacity * 5; i++) {
      const { value, objects } = parsedCarrying(1, (v) => ({ podIP: v }));
      strings.share(objects[0]);
      seenOnce.push(value);
      // The frequent value arrives again every few objects, in an object parsed afresh.
      if (i % 4 === 0) strings.share(JSON.parse(JSON.stringify({ image: frequent.value })));
    }
    const remembered = (await copiesInHeap(...seenOnce)).reduce((sum, copies) => sum + copies - 1, 0);
    assert.ok(remembered <= 2 * capacity, `${remembered} values seen once are still held; at most ${2 * capacity}`);
    const again = JSON.parse(JSON.stringify({ image: frequent.value })) as { image: string };
    strings.share(again);
    assert.deepEqual(await copiesInHeap(frequent.value), [2], 'the first object and the one parsed now share a copy');
    // Read after the snapshot, so the first object was alive in it: a copy of its own would have been counted.
    assert.equal(first.image, again.image);
  });
});
