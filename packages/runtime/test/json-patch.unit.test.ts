// JSON patches from old → new as a mutating webhook answers them: exactly the expected
// operations for members, arrays and keys that need escaping (`/`, `~`), and for every case the
// patch applied to the old value gives the new one.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jsonPatch, type JsonPatchOperation } from '../src/webhook/json-patch.ts';

/** RFC 6902 add/remove/replace applied in order, as the API server applies a webhook's patch. */
function apply(document: unknown, ops: JsonPatchOperation[]): unknown {
  let doc = structuredClone(document);
  for (const op of ops) {
    if (op.path === '') {
      doc = op.op === 'remove' ? null : structuredClone(op.value);
      continue;
    }
    const tokens = op.path.slice(1).split('/').map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = tokens.pop()!;
    let parent = doc as Record<string, unknown> | unknown[];
    for (const token of tokens) parent = (Array.isArray(parent) ? parent[Number(token)] : parent[token]) as typeof parent;
    if (Array.isArray(parent)) {
      const index = last === '-' ? parent.length : Number(last);
      assert.ok(index >= 0 && index <= parent.length - (op.op === 'add' ? 0 : 1), `index ${op.path} valid when applied`);
      if (op.op === 'add') parent.splice(index, 0, structuredClone(op.value));
      else if (op.op === 'remove') parent.splice(index, 1);
      else parent[index] = structuredClone(op.value);
    } else {
      if (op.op !== 'add') assert.ok(last in parent, `${op.path} exists for ${op.op}`);
      if (op.op === 'remove') delete parent[last];
      else parent[last] = structuredClone(op.value);
    }
  }
  return doc;
}

function roundTrip(old: unknown, next: unknown): JsonPatchOperation[] {
  const ops = jsonPatch(old, next);
  assert.deepEqual(apply(old, ops), JSON.parse(JSON.stringify(next)));
  return ops;
}

describe('JSON patch from old → new', () => {
  it('nothing changed: no operation', () => {
    const obj = { metadata: { name: 'a', labels: { x: '1' } }, spec: { list: [1, { a: 2 }], flag: false, none: null } };
    assert.deepEqual(jsonPatch(obj, structuredClone(obj)), []);
  });

  it('members added, removed and replaced, touching only what changed', () => {
    const old = { metadata: { name: 'a', labels: { keep: '1', drop: '2' } }, spec: { size: 1, mode: 'x' } };
    const next = { metadata: { name: 'a', labels: { keep: '1' } }, spec: { size: 3, mode: 'x', extra: { deep: true } } };
    assert.deepEqual(roundTrip(old, next), [
      { op: 'remove', path: '/metadata/labels/drop' },
      { op: 'replace', path: '/spec/size', value: 3 },
      { op: 'add', path: '/spec/extra', value: { deep: true } },
    ]);
  });

  it('keys with "/" and "~" are escaped as JSON pointers', () => {
    const old = { metadata: { annotations: { 'example.com/old': 'x' } } };
    const next = { metadata: { annotations: { 'example.com/new': 'y', 'a~b': 'z', '~1': 'w' } } };
    assert.deepEqual(roundTrip(old, next), [
      { op: 'remove', path: '/metadata/annotations/example.com~1old' },
      { op: 'add', path: '/metadata/annotations/example.com~1new', value: 'y' },
      { op: 'add', path: '/metadata/annotations/a~0b', value: 'z' },
      { op: 'add', path: '/metadata/annotations/~01', value: 'w' },
    ]);
  });

  it('arrays: entries changed in place, extra ones removed from the end, new ones added at the end', () => {
    assert.deepEqual(roundTrip({ l: [1, 2, 3, 4] }, { l: [1, 9] }), [
      { op: 'replace', path: '/l/1', value: 9 },
      { op: 'remove', path: '/l/3' },
      { op: 'remove', path: '/l/2' },
    ]);
    assert.deepEqual(roundTrip({ l: [{ name: 'a', port: 80 }] }, { l: [{ name: 'a', port: 8080 }, { name: 'b' }] }), [
      { op: 'replace', path: '/l/0/port', value: 8080 },
      { op: 'add', path: '/l/1', value: { name: 'b' } },
    ]);
    assert.deepEqual(roundTrip({ l: [] }, { l: ['x', 'y'] }), [
      { op: 'add', path: '/l/0', value: 'x' },
      { op: 'add', path: '/l/1', value: 'y' },
    ]);
  });

  it('a value changing kind (scalar, array, object, null) is replaced whole', () => {
    assert.deepEqual(roundTrip({ a: [1], b: { c: 1 }, d: null, e: 1 }, { a: { 0: 1 }, b: [1], d: { x: 1 }, e: '1' }), [
      { op: 'replace', path: '/a', value: { 0: 1 } },
      { op: 'replace', path: '/b', value: [1] },
      { op: 'replace', path: '/d', value: { x: 1 } },
      { op: 'replace', path: '/e', value: '1' },
    ]);
  });

  it('members set to undefined count as absent, as in JSON', () => {
    assert.deepEqual(roundTrip({ a: 1, b: 2 }, { a: 1, b: undefined, c: undefined }), [{ op: 'remove', path: '/b' }]);
  });

  it('any change of a realistic object applies back to the new object', () => {
    const old = {
      apiVersion: 'example.com/v1',
      kind: 'Widget',
      metadata: { name: 'w', namespace: 'n', labels: { 'app.kubernetes.io/name': 'w' }, finalizers: ['a/b', 'c'] },
      spec: { containers: [{ name: 'c', env: [{ name: 'A', value: '1' }, { name: 'B', value: '2' }] }], tolerations: [] },
    };
    const next = structuredClone(old) as typeof old & { spec: { replicas?: number } };
    next.metadata.labels['app.kubernetes.io/name'] = 'x';
    next.metadata.finalizers = ['c'];
    next.spec.containers[0]!.env.splice(0, 1);
    next.spec.containers.push({ name: 'd', env: [] });
    next.spec.replicas = 2;
    assert.ok(roundTrip(old, next).length > 0);
  });
});
