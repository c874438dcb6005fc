import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { localTestEnv } from '@iot-operator/local-cluster';
import { ApiError, KubeClient, Kinds, type KubeObject } from '../../src/index.ts';
import { faults, type FaultProxy, type TestEnv } from '../../src/testing/index.ts';
import { startProxiedEnv, stopProxiedEnv } from './proxied-env.ts';

let env: TestEnv;
let proxy: FaultProxy;
let client: KubeClient;
let ns: string;

before(async () => {
  ({ env, proxy } = await startProxiedEnv());
  client = await KubeClient.fromKubeconfig({ kubeconfigPath: await proxy.kubeconfigFor('tester') });
  ns = await env.namespace('fault-proxy');
});
after(async () => {
  client?.close();
  await stopProxiedEnv({ env, proxy });
});

const configMap = (name: string, data: Record<string, string> = {}): KubeObject => ({ metadata: { name, namespace: ns }, data });

async function failure(promise: Promise<unknown>): Promise<ApiError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  assert.fail('the request succeeded; expected it to fail');
}

/** Reads watch lines until the stream ends or `max` lines arrived; never longer than `quietMs` between lines. */
async function readWatch(lines: AsyncIterable<string>, max: number, quietMs: number): Promise<{ events: string[]; ended: boolean }> {
  const events: string[] = [];
  const iterator = lines[Symbol.asyncIterator]();
  for (;;) {
    if (events.length >= max) return { events, ended: false };
    let timer: NodeJS.Timeout | undefined;
    const quiet = new Promise<'quiet'>((resolve) => (timer = setTimeout(() => resolve('quiet'), quietMs)));
    const next = await Promise.race([iterator.next(), quiet]);
    clearTimeout(timer);
    if (next === 'quiet') return { events, ended: false };
    if (next.done) return { events, ended: true };
    events.push(next.value);
  }
}

describe('fault proxy on the real API server', () => {
  it('forwards requests unchanged with the cluster credentials and records them', async () => {
    await client.create(Kinds.ConfigMap, configMap('plain', { a: '1' }));
    const read = await client.get<KubeObject & { data?: Record<string, string> }>(Kinds.ConfigMap, 'plain', ns);
    assert.deepEqual(read.data, { a: '1' });
    const recorded = proxy.requestsMatching({ client: 'tester', resource: 'configmaps', namespace: ns });
    assert.deepEqual(recorded.map((r) => [r.verb, r.name, r.status]), [['create', '', 201], ['get', 'plain', 200]]);
  });

  it('answers injected statuses: 500 and 410 fail with their reasons, 429 with Retry-After is retried by the client', async () => {
    const match = { resource: 'configmaps', name: 'plain', verb: 'get' as const };
    const internal = proxy.inject(match, faults.status(500), { times: 1 });
    assert.equal((await failure(client.get(Kinds.ConfigMap, 'plain', ns))).reason, 'InternalError');
    assert.equal(internal.hits, 1);
    proxy.inject(match, faults.status(410, { reason: 'Expired' }), { times: 1 });
    assert.equal((await failure(client.get(Kinds.ConfigMap, 'plain', ns))).reason, 'Expired');
    proxy.inject(match, faults.status(429, { retryAfterSeconds: 1 }), { times: 2 });
    const before = proxy.requests.length;
    await client.get(Kinds.ConfigMap, 'plain', ns);
    const statuses = proxy.requests.slice(before).map((r) => r.status);
    assert.deepEqual(statuses, [429, 429, 200]);
  });

  it('delays, resets and hangs requests', async () => {
    proxy.inject({ name: 'plain', verb: 'get' }, faults.delay(1500), { times: 1 });
    await client.get(Kinds.ConfigMap, 'plain', ns);
    const delayed = proxy.requests.at(-1)!;
    assert.equal(delayed.fault, 'delay');
    assert.ok(delayed.answeredAt! - delayed.at >= 1500, `answered ${delayed.answeredAt! - delayed.at} ms after arrival; the delay was 1500 ms`);

    proxy.inject({ name: 'plain', verb: 'get' }, faults.reset(), { times: 1 });
    const reset = await failure(client.get(Kinds.ConfigMap, 'plain', ns));
    assert.equal(reset.code, 0, 'a reset connection is a transport failure');

    proxy.inject({ name: 'plain', verb: 'get' }, faults.hang(), { times: 1 });
    const hung = await failure(client.raw({ method: 'GET', path: `/api/v1/namespaces/${ns}/configmaps/plain`, timeoutMs: 2000 }));
    assert.match(hung.message, /timed out/);
    assert.equal(proxy.requests.at(-1)!.status, undefined, 'a hung request is never answered');
    await client.get(Kinds.ConfigMap, 'plain', ns);
  });

  it('faults one client only', async () => {
    const other = await KubeClient.fromKubeconfig({ kubeconfigPath: await proxy.kubeconfigFor('bystander') });
    try {
      const injected = proxy.inject({ client: 'tester', name: 'plain' }, faults.status(503));
      assert.equal((await failure(client.get(Kinds.ConfigMap, 'plain', ns))).code, 503);
      await other.get(Kinds.ConfigMap, 'plain', ns);
      injected.remove();
      await client.get(Kinds.ConfigMap, 'plain', ns);
    } finally {
      other.close();
    }
  });

  it('ends a watch after N events, and stalls one while keeping the connection open', async () => {
    const list = await client.list(Kinds.ConfigMap, { namespace: ns });
    const from = list.metadata.resourceVersion!;
    for (const name of ['w1', 'w2', 'w3']) await client.create(Kinds.ConfigMap, configMap(name));

    proxy.inject({ verb: 'watch', resource: 'configmaps' }, faults.endWatch(2), { times: 1 });
    const ended = await client.watch(Kinds.ConfigMap, { namespace: ns, resourceVersion: from });
    const endedRead = await readWatch(ended.lines, 10, 10_000);
    assert.equal(endedRead.events.length, 2);
    assert.ok(endedRead.ended, 'the stream ends after two events');

    proxy.inject({ verb: 'watch', resource: 'configmaps' }, faults.stallWatch(1), { times: 1 });
    const stalled = await client.watch(Kinds.ConfigMap, { namespace: ns, resourceVersion: from });
    const stalledRead = await readWatch(stalled.lines, 10, 3000);
    assert.equal(stalledRead.events.length, 1, 'one event forwarded, then nothing');
    assert.ok(!stalledRead.ended, 'the stalled stream stays open');
    assert.equal(proxy.requests.at(-1)!.events, 1);
    stalled.close();

    const healthy = await client.watch(Kinds.ConfigMap, { namespace: ns, resourceVersion: from });
    const healthyRead = await readWatch(healthy.lines, 3, 10_000);
    healthy.close();
    assert.deepEqual(healthyRead.events.map((line) => (JSON.parse(line) as { object: KubeObject }).object.metadata.name), ['w1', 'w2', 'w3']);
  });
});
