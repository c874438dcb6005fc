import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { localTestEnv } from '@iot-operator/local-cluster';
import { Kinds, type KubeObject } from '../../src/index.ts';
import { faults, spawnOperator, waitFor, type FaultProxy, type OperatorProcess, type RecordedRequest, type TestEnv } from '../../src/testing/index.ts';
import { reportFault } from './fault-report.ts';
import { startProxiedEnv, stopProxiedEnv } from './proxied-env.ts';

const leaseDurationMs = 15_000;
const retryPeriodMs = 2_000;
/** A candidate sees a renewal at its next poll: up to one retry period after it happened. */
const observationLagMs = retryPeriodMs;
/** Slack for the latency of the lease requests themselves on a loaded machine. */
const requestSlackMs = 1_000;

let env: TestEnv;
let proxy: FaultProxy;
const processes: OperatorProcess[] = [];

before(async () => ({ env, proxy } = await startProxiedEnv()));
after(() => stopProxiedEnv({ env, proxy, spawned: processes }));

/** The derive operator with leader election, as its own process, talking through the proxy as `identity`. */
async function replica(identity: string, namespace: string): Promise<OperatorProcess & { exitedAt: Promise<number> }> {
  const child = spawnOperator(['--import', 'tsx', 'packages/runtime/examples/derive-operator-main.ts'], { KUBECONFIG: await proxy.kubeconfigFor(identity), NAMESPACE: namespace, IDENTITY: identity }, { output: 'all' });
  processes.push(child);
  const exitedAt = new Promise<number>((resolve) => child.once('exit', () => resolve(Date.now())));
  return Object.assign(child, { exitedAt });
}

const succeeded = (r: RecordedRequest) => r.status !== undefined && r.status >= 200 && r.status < 300;
const leaseWrites = (client: string) => proxy.requestsMatching({ client, group: 'coordination.k8s.io', verb: ['create', 'update'] }).filter(succeeded);
const secretWrites = (namespace: string) => proxy.requestsMatching({ resource: 'secrets', namespace, verb: ['create', 'update', 'patch'] }).filter(succeeded);

/** Changes the watched ConfigMap every 300 ms so that whoever leads keeps writing its Secret. */
function keepChanging(namespace: string): () => Promise<void> {
  let stopped = false;
  const loop = (async () => {
    for (let i = 0; !stopped; i++) {
      await env.client.patch(Kinds.ConfigMap, 'tick', namespace, { data: { i: String(i) } }).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 300));
    }
  })();
  return async () => {
    stopped = true;
    await loop;
  };
}

describe('leader election under a hung API server', () => {
  it('a leader whose Lease requests hang stops writing and exits before the other replica takes over, within lease duration + retry period of its last observed renewal', async () => {
    const ns = await env.namespace('fault-leader');
    await env.client.create(Kinds.ConfigMap, { metadata: { name: 'tick', namespace: ns, labels: { derive: 'true' } }, data: { i: 'start' } } as KubeObject);
    const a = await replica('replica-a', ns);
    await waitFor('replica-a to hold the lease', async () => ({ done: leaseWrites('replica-a').length > 0, value: undefined, seen: a.output().slice(-500) }), { timeoutMs: 60_000 });
    const b = await replica('replica-b', ns);
    const stopChanging = keepChanging(ns);
    try {
      await waitFor('replica-a to write the Secret', async () => ({ done: secretWrites(ns).some((r) => r.client === 'replica-a'), value: undefined }), { timeoutMs: 30_000 });
      await waitFor('replica-b to watch and campaign', async () => ({ done: proxy.requestsMatching({ client: 'replica-b', group: 'coordination.k8s.io', verb: 'get' }).length > 0, value: undefined, seen: b.output().slice(-500) }), { timeoutMs: 60_000 });

      const hungAt = Date.now();
      proxy.inject({ client: 'replica-a', group: 'coordination.k8s.io' }, faults.hang());

      const takeover = await waitFor('replica-b to take the lease', async () => {
        const first = leaseWrites('replica-b')[0];
        return { done: first !== undefined, value: first! };
      }, { timeoutMs: 60_000, intervalMs: 100 });
      await waitFor('replica-b to write the Secret', async () => ({ done: secretWrites(ns).some((r) => r.client === 'replica-b' && r.at > takeover.at), value: undefined }), { timeoutMs: 30_000 });
      // Let both run on for a while: an old leader still alive would keep writing now.
      await new Promise((r) => setTimeout(r, 3_000));
      await stopChanging();

      const writes = secretWrites(ns);
      const firstOfB = writes.find((r) => r.client === 'replica-b')!;
      const lateWritesOfA = writes.filter((r) => r.client === 'replica-a' && r.at >= firstOfB.at);
      assert.deepEqual(lateWritesOfA.map((r) => new Date(r.at).toISOString()), [], 'replica-a must not write once replica-b writes');
      // Takeover is counted from the old leader's last successful renewal. The other replica dates
      // that renewal by when it sees it (its next poll, up to one retry period later: it never
      // trusts another machine's clock), waits the lease duration, and acquires at its next poll.
      const lastRenewal = leaseWrites('replica-a').at(-1)!;
      const takeoverMs = takeover.answeredAt! - lastRenewal.answeredAt!;
      const boundMs = leaseDurationMs + retryPeriodMs + observationLagMs;
      assert.ok(takeoverMs <= boundMs + requestSlackMs, `takeover took ${takeoverMs} ms after the last renewal; bound: lease duration + retry period + observation lag = ${boundMs} ms (+${requestSlackMs} ms request latency)`);
      const sinceHangMs = takeover.answeredAt! - hungAt;

      const exitCode = await Promise.race([a.stop(), new Promise<'alive'>((r) => setTimeout(() => r('alive'), 0))]);
      assert.notEqual(exitCode, 'alive', 'replica-a must have exited by itself');
      assert.equal(exitCode, 1, 'losing the lease is a non-zero exit');
      assert.ok((await a.exitedAt) < firstOfB.at, 'replica-a exited before replica-b wrote anything');
      const lines = a.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as { level: number; msg: string });
      assert.ok(lines.some((line) => line.level === 40 && /lease/.test(line.msg)), 'a failed lease request is logged at warn');
      const exitedAfterMs = (await a.exitedAt) - hungAt;
      await reportFault({
        fault: "Leader's Lease requests hang (API server unresponsive for one replica)",
        injection: "proxy `hang()` on every coordination.k8s.io request of the leader's process only",
        behaviour: `renewal cancelled at the 10 s renew deadline; leader stopped its controllers and exited 1 ${(exitedAfterMs / 1000).toFixed(1)} s after the hang; the other replica took the lease ${(takeoverMs / 1000).toFixed(1)} s after the old leader's last renewal (${(sinceHangMs / 1000).toFixed(1)} s after the hang; bound 15 s lease + 2 s retry + ≤ 2 s until it observes the last renewal); no write of the old leader after the new one's first (before: the old leader kept writing after the new one's first write, its hung renewal failing only at the 60 s request timeout)`,
        recoveryMs: sinceHangMs,
        objectsLost: 0,
        test: 'packages/runtime/test/faults/leader-election.e2e.test.ts',
      });
    } finally {
      await stopChanging();
      await b.stop();
    }
  });

  it('a leader stopped with SIGTERM releases the lease after its renew loop has stopped, so the successor takes over without waiting for expiry', async () => {
    const ns = await env.namespace('fault-release');
    const a = await replica('replica-c', ns);
    await waitFor('replica-c to hold the lease', async () => ({ done: leaseWrites('replica-c').length > 0, value: undefined, seen: a.output().slice(-500) }), { timeoutMs: 60_000 });
    const b = await replica('replica-d', ns);
    try {
      await waitFor('replica-d to campaign', async () => ({ done: proxy.requestsMatching({ client: 'replica-d', group: 'coordination.k8s.io', verb: 'get' }).length > 0, value: undefined }), { timeoutMs: 60_000 });
      // Hold the leader's next Lease read for 3 s and stop it while that read is pending: the read
      // reaches the API server only after the release, so a renew loop still running would see
      // the lease free and take it back.
      proxy.inject({ client: 'replica-c', group: 'coordination.k8s.io', verb: 'get' }, faults.delay(3_000));
      await waitFor('a Lease read of replica-c to be held', async () => ({ done: proxy.requestsMatching({ client: 'replica-c', group: 'coordination.k8s.io', verb: 'get' }).some((r) => r.fault === 'delay' && r.status === undefined), value: undefined }), { timeoutMs: 30_000, intervalMs: 50 });
      const stoppedAt = Date.now();
      assert.equal(await a.stop(), 0);
      const takeover = await waitFor('replica-d to take the lease', async () => {
        const first = leaseWrites('replica-d')[0];
        return { done: first !== undefined, value: first! };
      }, { timeoutMs: 60_000, intervalMs: 100 });
      const writesAfterStop = leaseWrites('replica-c').filter((r) => r.at >= stoppedAt);
      assert.equal(writesAfterStop.length, 1, 'the stopped leader writes the Lease once after SIGTERM: its release');
      assert.ok(takeover.at - stoppedAt < leaseDurationMs, `the successor took over ${takeover.at - stoppedAt} ms after SIGTERM; it must not wait for the ${leaseDurationMs} ms lease to expire`);
      await reportFault({
        fault: 'Leader stopped (SIGTERM) while a Lease read is in flight',
        injection: "proxy `delay(3000)` on the leader's Lease reads; SIGTERM while one is held",
        behaviour: 'renew loop stopped and its request cancelled, then the lease released (one Lease write after SIGTERM); successor took over without waiting for expiry',
        recoveryMs: takeover.at - stoppedAt,
        objectsLost: 0,
        test: 'packages/runtime/test/faults/leader-election.e2e.test.ts',
      });
    } finally {
      await b.stop();
    }
  });
});
