// Client flow control under a failing API server: 500 keys whose writes the fault proxy answers
// with 500. The operator's requests, counted per second where the proxy sees them, stay within
// its client token bucket (20 a second, bursts of 30); with the client unlimited, its retries
// stay within the work queue's overall bucket (bursts of 100, then 10 a second); once the fault
// is removed every object is written.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { localTestEnv } from '@iot-operator/local-cluster';
import { Kinds, type KubeObject, type Manager, type RateLimit } from '../../src/index.ts';
import { faults, type FaultProxy, type RecordedRequest, type TestEnv } from '../../src/testing/index.ts';
import { derivedName, startDeriveOperator } from '../../examples/derive-operator.ts';
import { reportFault } from './fault-report.ts';
import { startProxiedEnv, stopProxiedEnv } from './proxied-env.ts';

const keys = 500;
const observeMs = 12_000;

let env: TestEnv;
let proxy: FaultProxy;
let ns: string;
const managers: Manager[] = [];

before(async () => {
  ({ env, proxy } = await startProxiedEnv());
  ns = await env.namespace('flow-control');
  const names = Array.from({ length: keys }, (_, i) => `cm-${i}`);
  for (let i = 0; i < names.length; i += 50) {
    await Promise.all(names.slice(i, i + 50).map((name) => env.client.create(Kinds.ConfigMap, { metadata: { name, namespace: ns, labels: { derive: 'true' } }, data: { k: name } })));
  }
});
after(async () => {
  for (const mgr of managers) await mgr.stop();
  await stopProxiedEnv({ env, proxy });
});

/** Starts the derive operator through the proxy as `client`, its secret writes all answered 500. */
async function failingOperator(client: string, rateLimit: RateLimit) {
  const fault = proxy.inject({ client, verb: 'patch', resource: 'secrets' }, faults.status(500));
  const started = Date.now();
  const mgr = await startDeriveOperator({ kubeconfigPath: await proxy.kubeconfigFor(client), namespace: ns, rateLimit, logLevel: 'fatal' });
  managers.push(mgr);
  return { mgr, fault, started };
}

/** The most requests that arrived within any `seconds`-long window. */
function busiestWindow(requests: RecordedRequest[], seconds: number): number {
  const times = requests.map((r) => r.at).sort((a, b) => a - b);
  let best = 0;
  let first = 0;
  for (let last = 0; last < times.length; last++) {
    while (times[last]! - times[first]! >= seconds * 1000) first++;
    best = Math.max(best, last - first + 1);
  }
  return best;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('client flow control through a 500-answering API server', () => {
  it('500 failing keys: the requests the proxy sees stay within the client bucket (20 a second, bursts of 30)', async () => {
    const client = 'bucket-20-30';
    const { mgr, fault } = await failingOperator(client, { qps: 20, burst: 30 });
    await sleep(observeMs);
    await mgr.stop();
    fault.remove();
    const seen = proxy.requestsMatching({ client });
    const writes = proxy.requestsMatching({ client, verb: 'patch', resource: 'secrets' });
    const span = (Math.max(...seen.map((r) => r.at)) - Math.min(...seen.map((r) => r.at))) / 1000;
    const perSecond = busiestWindow(seen, 1);
    // Arrival at the proxy may bunch requests a little closer than they left: a quarter second of slack.
    assert.ok(perSecond <= 30 + 20 * 1.25, `${perSecond} requests within one second; the bucket allows 30 + 20`);
    assert.ok(busiestWindow(seen, 5) <= 30 + 20 * 5.25, `${busiestWindow(seen, 5)} requests within five seconds`);
    assert.ok(seen.length <= 30 + 20 * (span + 0.25), `${seen.length} requests in ${span.toFixed(1)} s`);
    assert.ok(writes.length < keys, `the bucket, not the work, set the pace: ${writes.length} of ${keys} first writes were tried`);
    await reportFault({
      fault: 'API server answers 500 to every write; 500 keys failing (client bucket)',
      injection: 'fault proxy: status 500 on every secret patch of one client',
      behaviour: `requests held by the client token bucket (QPS 20, burst 30): busiest second ${perSecond} requests, ${seen.length} in ${span.toFixed(1)} s`,
      recoveryMs: 0,
      objectsLost: 0,
      test: 'packages/runtime/test/faults/flow-control.e2e.test.ts',
    });
  });

  it('with the client unlimited, retries stay within the queue bucket (bursts of 100, then 10 a second); all objects are written once the fault is gone', async () => {
    const client = 'unlimited';
    const { fault } = await failingOperator(client, { qps: -1, burst: 1 });
    await sleep(observeMs);
    const writes = proxy.requestsMatching({ client, verb: 'patch', resource: 'secrets' });
    const firstAttempts = new Set(writes.map((r) => r.name)).size;
    assert.equal(firstAttempts, keys, 'unlimited client: every key was tried at once');
    const firstFailure = Math.min(...writes.map((r) => r.at));
    const retries = writes.length - firstAttempts;
    const elapsed = (Date.now() - firstFailure) / 1000;
    assert.ok(retries <= 100 + 10 * (elapsed + 0.5), `${retries} retries of ${keys} failing keys in ${elapsed.toFixed(1)} s; the queue bucket allows 100 + 10 a second`);

    const removedAt = Date.now();
    fault.remove();
    await env.waitFor(
      `all ${keys} derived secrets to be written after the fault is removed`,
      async () => {
        const secrets = await env.client.list<KubeObject>(Kinds.Secret, { namespace: ns });
        const written = secrets.items.filter((s) => s.metadata.name?.endsWith(derivedName(''))).length;
        return { done: written === keys, value: written, seen: `${written} written` };
      },
      { timeoutMs: 180_000, intervalMs: 1000 },
    );
    const recoveryMs = Date.now() - removedAt;
    await reportFault({
      fault: 'API server answers 500 to every write; 500 keys failing (queue bucket)',
      injection: 'fault proxy: status 500 on every secret patch of one client; then removed',
      behaviour: `retries held by the work queue's overall bucket (10 a second, burst 100) on top of per-key backoff: ${retries} retries in ${elapsed.toFixed(1)} s; every object written after the fault was removed`,
      recoveryMs,
      objectsLost: 0,
      test: 'packages/runtime/test/faults/flow-control.e2e.test.ts',
    });
  });
});
