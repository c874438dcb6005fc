import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../src/client/resource.ts';
import { Store, byLabel, byNamespace, byOwnerUid, labelIndex, namespaceIndex, ownerUidIndex, type IndexFunc } from '../src/cache/store.ts';
import { matchesSelector, parseSelector } from '../src/cache/selector.ts';

const obj = (namespace: string, name: string, labels: Record<string, string> = {}, owner?: string): KubeObject => ({
  metadata: { namespace, name, labels, ownerReferences: owner ? [{ apiVersion: 'v1', kind: 'X', name: 'o', uid: owner }] : undefined },
});

const indexers = new Map<string, IndexFunc<KubeObject>>([
  [namespaceIndex, byNamespace],
  [ownerUidIndex, byOwnerUid],
  [labelIndex('app'), byLabel('app')],
]);

describe('cache store', () => {
  it('indexes by namespace, owner UID and label, and keeps indexes right across updates and deletes', () => {
    const store = new Store(indexers);
    store.upsert(obj('a', 'x', { app: 'web' }, 'u1'));
    store.upsert(obj('a', 'y', { app: 'db' }));
    store.upsert(obj('b', 'z', { app: 'web' }, 'u1'));
    assert.deepEqual(store.byIndex(namespaceIndex, 'a').map((o) => o.metadata.name).sort(), ['x', 'y']);
    assert.deepEqual(store.byIndex(ownerUidIndex, 'u1').map((o) => o.metadata.name).sort(), ['x', 'z']);
    store.upsert(obj('a', 'x', { app: 'db' }));
    assert.deepEqual(store.byIndex(labelIndex('app'), 'web').map((o) => o.metadata.name), ['z']);
    assert.deepEqual(store.byIndex(ownerUidIndex, 'u1').map((o) => o.metadata.name), ['z']);
    store.remove('b/z');
    assert.deepEqual(store.byIndex(labelIndex('app'), 'web'), []);
    assert.throws(() => store.byIndex('nope', 'x'), /no index named nope/);
  });

  it('replaceAll swaps content and indexes in one step: a reader sees the old or the new snapshot, never a mix', () => {
    const store = new Store(indexers);
    for (let i = 0; i < 100; i++) store.upsert(obj('old', `o${i}`, { app: 'old' }));
    const fresh = new Map<string, KubeObject>();
    for (let i = 0; i < 50; i++) fresh.set(`new/n${i}`, obj('new', `n${i}`, { app: 'new' }));
    const before = store.list();
    store.replaceAll(fresh);
    assert.equal(before.length, 100, 'a list taken before the swap is a complete old snapshot');
    assert.equal(store.size, 50);
    assert.deepEqual(store.byIndex(labelIndex('app'), 'old'), []);
    assert.equal(store.byIndex(namespaceIndex, 'new').length, 50);
    assert.ok(store.list().every((o) => o.metadata.namespace === 'new'));
  });
});

describe('label selectors', () => {
  it('match as the API server does', () => {
    const labels = { app: 'web', tier: 'front' };
    const cases: Array<[string, boolean]> = [
      ['app=web', true],
      ['app==web,tier=front', true],
      ['app=db', false],
      ['app!=db', true],
      ['app', true],
      ['!app', false],
      ['missing!=x', true],
      ['app in (db, web)', true],
      ['app notin (db,web)', false],
      ['app=web,tier=back', false],
    ];
    for (const [text, expected] of cases) assert.equal(matchesSelector(labels, parseSelector(text)), expected, text);
  });

  it('reject a term they cannot parse instead of matching everything', () => {
    assert.throws(() => parseSelector('app=(web'), /invalid label selector term/);
  });
});
