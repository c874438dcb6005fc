/**
 * Unit tests of the cache's list: a label selector whose `label=value` term names an indexed label
 * is answered from that index (one instance's objects, not the namespace's) with exactly the
 * objects a full scan selects — namespace, the selector's other terms and unindexed labels
 * included.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Cache } from '../src/cache/cache.ts';
import { Kinds, type KubeObject } from '../src/client/resource.ts';
import { listOnlyClient } from './list-only-client.ts';

const pod = (namespace: string, name: string, labels: Record<string, string>): KubeObject => ({ apiVersion: 'v1', kind: 'Pod', metadata: { namespace, name, labels, resourceVersion: '1' } });

async function syncedCache(items: KubeObject[], indexLabels: string[]): Promise<{ cache: Cache; stop: () => void }> {
  const cache = new Cache(listOnlyClient(() => items), { byType: [{ type: Kinds.Pod, indexLabels }] });
  const abort = new AbortController();
  cache.informer(Kinds.Pod);
  cache.start(abort.signal);
  assert.equal(await cache.waitForSync(5_000), 'synced');
  return { cache, stop: () => abort.abort() };
}

const names = (objects: KubeObject[]) => objects.map((o) => `${o.metadata.namespace}/${o.metadata.name}`).sort();

describe('cache list with a label selector', () => {
  const items = [
    pod('a', 'm1-0', { app: 'memcached', memcached_cr: 'm1' }),
    pod('a', 'm1-1', { app: 'memcached', memcached_cr: 'm1', tier: 'x' }),
    pod('a', 'm2-0', { app: 'memcached', memcached_cr: 'm2' }),
    pod('b', 'm1-0', { app: 'memcached', memcached_cr: 'm1' }),
    pod('a', 'other', { app: 'other', memcached_cr: 'm1' }),
  ];

  it('selects through the index exactly what a scan selects', async () => {
    const indexed = await syncedCache(items, ['memcached_cr']);
    const scanned = await syncedCache(items, []);
    try {
      const queries = [
        { namespace: 'a', labelSelector: { app: 'memcached', memcached_cr: 'm1' } },
        { namespace: 'a', labelSelector: 'memcached_cr=m1,tier' },
        { labelSelector: 'memcached_cr=m1' },
        { namespace: 'b', labelSelector: 'memcached_cr==m1,app!=other' },
        { namespace: 'a', labelSelector: 'memcached_cr in (m1,m2),app=memcached' },
        { namespace: 'a', labelSelector: 'memcached_cr=none' },
      ];
      for (const query of queries) {
        assert.deepEqual(names(indexed.cache.list(Kinds.Pod, query)), names(scanned.cache.list(Kinds.Pod, query)), JSON.stringify(query));
      }
      assert.deepEqual(names(indexed.cache.list(Kinds.Pod, queries[0]!)), ['a/m1-0', 'a/m1-1']);
      assert.deepEqual(names(indexed.cache.list(Kinds.Pod, queries[2]!)), ['a/m1-0', 'a/m1-1', 'a/other', 'b/m1-0']);
    } finally {
      indexed.stop();
      scanned.stop();
    }
  });

  it('reads the index, not the namespace, for an indexed label', async () => {
    const { cache, stop } = await syncedCache(items, ['memcached_cr']);
    try {
      const store = cache.informer(Kinds.Pod).store;
      const used: string[] = [];
      const byIndex = store.byIndex.bind(store);
      store.byIndex = (name, value) => {
        used.push(`${name}=${value}`);
        return byIndex(name, value);
      };
      cache.list(Kinds.Pod, { namespace: 'a', labelSelector: { app: 'memcached', memcached_cr: 'm2' } });
      cache.list(Kinds.Pod, { namespace: 'a', labelSelector: 'app=memcached' });
      assert.deepEqual(used, ['label:memcached_cr=m2', 'namespace=a']);
    } finally {
      stop();
    }
  });
});
