import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { localTestEnv } from '@iot-operator/local-cluster';
import { Informer, KubeClient, Kinds, clientSource, type KubeObject, type WatcherConfig } from '../../src/index.ts';
import { faults, waitFor, type FaultProxy, type TestEnv } from '../../src/testing/index.ts';
import { reportFault } from './fault-report.ts';
import { startProxiedEnv, stopProxiedEnv } from './proxied-env.ts';

let env: TestEnv;
let proxy: FaultProxy;
const clients: KubeClient[] = [];
const stops: AbortController[] = [];

before(async () => ({ env, proxy } = await startProxiedEnv()));
after(async () => {
  for (const stop of stops) stop.abort();
  for (const client of clients) client.close();
  await stopProxiedEnv({ env, proxy });
});

/** A ConfigMap informer of `namespace` that talks to the API server through the proxy as `name`. */
async function informer(name: string, namespace: string, config: Partial<WatcherConfig> = {}) {
  const client = await KubeClient.fromKubeconfig({ kubeconfigPath: await proxy.kubeconfigFor(name) });
  clients.push(client);
  const errors: Error[] = [];
  const informer = new Informer<KubeObject>(clientSource(client, Kinds.ConfigMap, { namespace }), { watcherConfig: config, onError: (err) => errors.push(err as Error) });
  const stop = new AbortController();
  stops.push(stop);
  const running = informer.run(stop.signal);
  return { informer, errors, stop: async () => (stop.abort(), running) };
}

async function createConfigMaps(namespace: string, names: string[]): Promise<void> {
  for (const name of names) await env.client.create(Kinds.ConfigMap, { metadata: { name, namespace }, data: { name } } as KubeObject);
}

function waitForCached(cache: Informer<KubeObject>, namespace: string, names: string[], timeoutMs = 30_000) {
  return waitFor(`the informer to hold ${names.join(', ')}`, async () => {
    const missing = names.filter((name) => !cache.store.get(`${namespace}/${name}`));
    return { done: missing.length === 0, value: undefined, seen: { missing } };
  }, { timeoutMs, intervalMs: 100 });
}

describe('watcher under API faults', () => {
  it('watches that end at once without events are retried with backoff, not in a tight loop', async () => {
    const ns = await env.namespace('fault-shortwatch');
    await createConfigMaps(ns, ['before']);
    const injected = proxy.inject({ client: 'short', verb: 'watch' }, faults.endWatch(0));
    const faultAt = Date.now();
    const { informer: cache, errors, stop } = await informer('short', ns);
    await cache.synced;
    const windowMs = 8_000;
    await new Promise((r) => setTimeout(r, windowMs));
    const watchCalls = proxy.requestsMatching({ client: 'short', verb: 'watch' }).length;
    // Backoff 0.8, 1.6, 3.2, 6.4 s (each with up to ×2 jitter): at most 4 watches start in 8 s.
    assert.ok(watchCalls <= 4, `${watchCalls} watch calls in ${windowMs} ms; backoff allows at most 4`);
    assert.ok(errors.length >= 1 && errors.every((e) => e.name === 'ShortWatchError'), `errors: ${errors.map((e) => e.name).join(', ')}`);
    injected.remove();
    await createConfigMaps(ns, ['after']);
    await waitForCached(cache, ns, ['before', 'after'], 60_000);
    const recoveryMs = Date.now() - faultAt - windowMs;
    await stop();
    await reportFault({
      fault: 'Watch closed at once, without events, every time',
      injection: 'proxy `endWatch(0)` on every watch of the informer',
      behaviour: `ShortWatchError with backoff: ${watchCalls} watch calls in ${windowMs / 1000} s (before: 253 watch calls in 8 s through the proxy, a tight loop limited only by round trips); events flow once watches stay open`,
      recoveryMs,
      objectsLost: 0,
      test: 'packages/runtime/test/faults/watcher.e2e.test.ts',
    });
  });

  it('a list whose continue token expires (410) completes with one full list', async () => {
    const ns = await env.namespace('fault-continue');
    const names = ['c1', 'c2', 'c3', 'c4', 'c5'];
    await createConfigMaps(ns, names);
    proxy.inject({ client: 'paging', verb: 'list', query: { continue: true } }, faults.status(410, { reason: 'Expired', message: 'The provided continue parameter is too old to display a consistent list result.' }));
    const faultAt = Date.now();
    const { informer: cache, stop } = await informer('paging', ns, { pageSize: 2 });
    await waitFor('the informer to sync', async () => ({ done: cache.isSynced, value: undefined }), { timeoutMs: 30_000, intervalMs: 100 });
    const syncedMs = Date.now() - faultAt;
    await waitForCached(cache, ns, names);
    const lists = proxy.requestsMatching({ client: 'paging', verb: 'list' });
    assert.deepEqual(lists.map((r) => [new URLSearchParams(r.query).get('limit'), new URLSearchParams(r.query).has('continue'), r.status]), [
      ['2', false, 200],
      ['2', true, 410],
      [null, false, 200],
    ]);
    await stop();
    await reportFault({
      fault: 'Continue token of a paginated list expires (410 Expired)',
      injection: 'proxy `status(410, Expired)` on every list request carrying `continue`',
      behaviour: 'one full, unpaginated list (client-go pager behaviour); cache synced with every object (before: relisted page 1 forever, never synced)',
      recoveryMs: syncedMs,
      objectsLost: names.length - names.filter((n) => cache.store.get(`${ns}/${n}`)).length,
      test: 'packages/runtime/test/faults/watcher.e2e.test.ts',
    });
  });

  it('a watch stream that goes silent while the connection stays open is restarted after the idle timeout', async () => {
    const ns = await env.namespace('fault-stall');
    await createConfigMaps(ns, ['before']);
    const idleTimeoutMs = 3_000;
    proxy.inject({ client: 'stalled', verb: 'watch' }, faults.stallWatch(0), { times: 1 });
    const { informer: cache, errors, stop } = await informer('stalled', ns, { watchIdleTimeoutMs: idleTimeoutMs });
    await cache.synced;
    const faultAt = Date.now();
    await createConfigMaps(ns, ['during']);
    await waitForCached(cache, ns, ['before', 'during']);
    const recoveryMs = Date.now() - faultAt;
    assert.ok(errors.some((e) => e.name === 'WatchStalledError'), `errors: ${errors.map((e) => e.name).join(', ')}`);
    const watches = proxy.requestsMatching({ client: 'stalled', verb: 'watch' });
    assert.equal(watches[0]!.fault, 'stallWatch');
    assert.ok(watches.length >= 2, 'a new watch replaced the stalled one');
    await stop();
    await reportFault({
      fault: 'Watch stream stops delivering (TCP open, no events, no bookmarks)',
      injection: 'proxy `stallWatch(0)` on the first watch; idle timeout set to 3 s (default 120 s = 2 × bookmark interval)',
      behaviour: 'WatchStalledError after the idle timeout, watch reopened from the last resourceVersion; the object created meanwhile arrived (before: never)',
      recoveryMs,
      objectsLost: 0,
      test: 'packages/runtime/test/faults/watcher.e2e.test.ts',
    });
  });
});
