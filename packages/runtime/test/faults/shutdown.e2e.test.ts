import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { localTestEnv } from '@iot-operator/local-cluster';
import { FaultProxy, faults, spawnOperator, waitFor, type OperatorProcess, type TestEnv } from '../../src/testing/index.ts';
import { reportFault } from './fault-report.ts';

/** The manager's drain deadline: a stop must never take longer than this when nothing is in flight. */
const drainDeadlineMs = 30_000;

let env: TestEnv;
let proxy: FaultProxy;
const processes: OperatorProcess[] = [];

before(async () => {
  env = await localTestEnv();
  proxy = await FaultProxy.start({ kubeconfigPath: env.kubeconfigPath });
});
after(async () => {
  for (const child of processes) child.kill('SIGKILL');
  await proxy?.stop();
  await env?.cleanup();
});

describe('shutdown under API faults', () => {
  it('SIGTERM while the caches cannot sync (list requests hang) exits 0 at once, not after the 120 s sync timeout', async () => {
    const ns = await env.namespace('fault-sigterm-sync');
    proxy.inject({ client: 'unsynced', verb: 'list' }, faults.hang());
    // The memcached operator's own process: flags, then the manager's runUntilSignal.
    const child = spawnOperator(
      ['--import', 'tsx', 'operators/memcached/src/main.ts', '--kubeconfig', await proxy.kubeconfigFor('unsynced'), '--namespace', ns, '--metrics-bind-address', '0', '--leader-elect'],
      {},
      { output: 'all' },
    );
    processes.push(child);
    const exited = new Promise<{ code: number | null; at: number }>((resolve) => child.once('exit', (code) => resolve({ code, at: Date.now() })));
    await waitFor('the operator to be waiting on a hung list', async () => ({ done: proxy.requestsMatching({ client: 'unsynced', verb: 'list' }).some((r) => r.fault === 'hang'), value: undefined, seen: child.output().slice(-500) }), { timeoutMs: 60_000, intervalMs: 100 });
    assert.equal(proxy.requestsMatching({ client: 'unsynced', group: 'coordination.k8s.io' }).length, 0, 'no campaign before the caches sync');
    const termAt = Date.now();
    child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const exit = await Promise.race([exited, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), drainDeadlineMs + 10_000)))]);
    clearTimeout(timer);
    assert.ok(exit, `the operator was still running ${(drainDeadlineMs + 10_000) / 1000} s after SIGTERM`);
    const exitMs = exit.at - termAt;
    assert.ok(exitMs < drainDeadlineMs, `exited ${exitMs} ms after SIGTERM; the drain deadline is ${drainDeadlineMs} ms`);
    assert.equal(exit.code, 0, 'a requested shutdown is a clean exit');
    assert.match(child.output(), /stopped before the caches synced/);
    await reportFault({
      fault: 'SIGTERM while caches cannot sync',
      injection: 'proxy `hang()` on every list request of the operator process; SIGTERM once one is held',
      behaviour: `start-up stopped waiting for the caches; exit 0 ${(exitMs / 1000).toFixed(1)} s after SIGTERM (before: waited for the 120 s sync timeout, then exit 1)`,
      recoveryMs: exitMs,
      objectsLost: 0,
      test: 'packages/runtime/test/faults/shutdown.e2e.test.ts',
    });
  });
});
