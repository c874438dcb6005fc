/**
 * Unit tests of a cache type configured `optional` (a CRD that may not be installed): while the API
 * server answers its list with 404, the cache syncs, holds nothing of it and says it is not served;
 * another type's informer is unaffected.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Cache } from '../src/cache/cache.ts';
import type { KubeClient } from '../src/client/client.ts';
import { ApiError } from '../src/client/errors.ts';
import { Kinds, customResource, type KubeObject, type ResourceType } from '../src/client/resource.ts';
import { listOnlyClient } from './list-only-client.ts';

const Certificate = customResource('cert-manager.io', 'v1', 'Certificate', 'certificates');

/** A client serving `served` types (a list of one object each, then a silent watch) and answering 404 for any other. */
function client(served: ResourceType[]): KubeClient {
  return listOnlyClient((type) => {
    if (!served.includes(type)) throw new ApiError(404, 'NotFound', 'the server could not find the requested resource');
    return [{ apiVersion: 'v1', kind: type.kind, metadata: { name: 'x', namespace: 'ns', resourceVersion: '1' } } as KubeObject];
  });
}

describe('an optional cache type', () => {
  it('not served: the cache syncs, holds none of it and says so; other types are cached as ever', async () => {
    const cache = new Cache(client([Kinds.ConfigMap]), { byType: [{ type: Certificate, optional: true }, { type: Kinds.ConfigMap }] });
    const abort = new AbortController();
    cache.informer(Certificate);
    cache.informer(Kinds.ConfigMap);
    cache.start(abort.signal);
    try {
      assert.equal(await cache.waitForSync(5_000), 'synced');
      assert.equal(cache.served(Certificate), false);
      assert.equal(cache.get(Certificate, 'x', 'ns'), undefined);
      assert.equal(cache.served(Kinds.ConfigMap), true);
      assert.ok(cache.get(Kinds.ConfigMap, 'x', 'ns'));
    } finally {
      abort.abort();
    }
  });

  it('served: cached like any other type', async () => {
    const cache = new Cache(client([Certificate]), { byType: [{ type: Certificate, optional: true }] });
    const abort = new AbortController();
    cache.informer(Certificate);
    cache.start(abort.signal);
    try {
      assert.equal(await cache.waitForSync(5_000), 'synced');
      assert.equal(cache.served(Certificate), true);
      assert.ok(cache.get(Certificate, 'x', 'ns'));
    } finally {
      abort.abort();
    }
  });

  it('a type not configured optional that is not served never syncs', async () => {
    const cache = new Cache(client([]), { byType: [{ type: Certificate }], onError: () => undefined });
    const abort = new AbortController();
    cache.informer(Certificate);
    cache.start(abort.signal);
    try {
      await assert.rejects(cache.waitForSync(300), /did not sync/);
    } finally {
      abort.abort();
    }
  });
});
