// run-tests: alone, before every other file: it restarts the API server.
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { Kinds, ifFound, type KubeObject, type Manager } from '../src/index.ts';
import { waitFor, type TestEnv } from '../src/testing/index.ts';
import { localTestEnv, repoRoot } from '@iot-operator/local-cluster';
import { derivedName, startDeriveOperator } from '../examples/derive-operator.ts';

const run = promisify(execFile);

let env: TestEnv;
before(async () => {
  env = await localTestEnv();
});
after(async () => {
  await env?.cleanup();
});

const configMap = (name: string, namespace: string, data: Record<string, string>): KubeObject => ({
  metadata: { name, namespace, labels: { derive: 'true' } },
  data,
});

async function secretData(namespace: string, name: string): Promise<Record<string, string> | undefined> {
  const secret = await ifFound(env.client.get<KubeObject & { data?: Record<string, string> }>(Kinds.Secret, name, namespace));
  return secret && Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]));
}

function waitForSecret(namespace: string, cm: string, expected: Record<string, string> | undefined, timeoutMs = 30_000) {
  return waitFor(
    `secret ${namespace}/${derivedName(cm)} to hold ${JSON.stringify(expected)}`,
    async () => {
      const data = await secretData(namespace, derivedName(cm));
      return { done: JSON.stringify(data) === JSON.stringify(expected), value: data, seen: data ?? 'no secret' };
    },
    { timeoutMs },
  );
}

async function metricsText(mgr: Manager): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${mgr.httpPort}/metrics`);
  return res.text();
}

describe('runtime on the real cluster', () => {
  it('create, update and delete propagate; a deleted child is restored; /metrics shows the named series', async () => {
    const ns = await env.namespace('rt-crud');
    const mgr = await startDeriveOperator({ kubeconfigPath: env.kubeconfigPath, namespace: ns });
    try {
      await env.client.create(Kinds.ConfigMap, configMap('app', ns, { colour: 'blue' }));
      await waitForSecret(ns, 'app', { colour: 'blue' });

      await env.client.patch(Kinds.ConfigMap, 'app', ns, { data: { colour: 'green', size: 'xl' } });
      await waitForSecret(ns, 'app', { colour: 'green', size: 'xl' });

      await env.client.delete(Kinds.Secret, derivedName('app'), ns);
      await waitForSecret(ns, 'app', { colour: 'green', size: 'xl' });

      await env.client.delete(Kinds.ConfigMap, 'app', ns);
      await waitForSecret(ns, 'app', undefined);

      const health = await fetch(`http://127.0.0.1:${mgr.httpPort}/healthz`);
      const ready = await fetch(`http://127.0.0.1:${mgr.httpPort}/readyz`);
      assert.equal(health.status, 200);
      assert.equal(ready.status, 200);
      const text = await metricsText(mgr);
      const host = new URL(env.client.server).host;
      for (const series of [
        'controller_runtime_reconcile_total{controller="configmap",result="success"}',
        'controller_runtime_reconcile_time_seconds_count{controller="configmap"}',
        'controller_runtime_max_concurrent_reconciles{controller="configmap"}',
        'workqueue_adds_total{name="configmap"}',
        'workqueue_queue_duration_seconds_count{name="configmap"}',
        'workqueue_work_duration_seconds_count{name="configmap"}',
        `rest_client_requests_total{code="200",host="${host}",method="GET"}`,
        `rest_client_requests_total{code="200",host="${host}",method="PATCH"}`,
        `rest_client_request_duration_seconds_count{host="${host}",verb="PATCH"}`,
      ]) {
        const line = text.split('\n').find((l) => l.startsWith(series + ' '));
        assert.ok(line, `/metrics lacks ${series}`);
        assert.ok(Number(line.split(' ').at(-1)) > 0, `${series} should be non-zero, got ${line}`);
      }
      for (const name of ['controller_runtime_reconcile_errors_total', 'controller_runtime_active_workers', 'workqueue_depth', 'workqueue_retries_total']) {
        assert.match(text, new RegExp(`^# TYPE ${name} `, 'm'), `/metrics lacks ${name}`);
      }
      const events = await env.client.list(Kinds.Event, { namespace: ns, fieldSelector: 'reason=Derived' });
      assert.ok(events.items.length > 0, 'the controller records Events on the ConfigMap');
    } finally {
      await mgr.stop();
    }
  });

  it('survives a kube-apiserver restart: no event lost, no operator restart', async () => {
    const ns = await env.namespace('rt-restart');
    const mgr = await startDeriveOperator({ kubeconfigPath: env.kubeconfigPath, namespace: ns });
    try {
      await env.client.create(Kinds.ConfigMap, configMap('before', ns, { n: '1' }));
      await waitForSecret(ns, 'before', { n: '1' });

      await run(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'cluster/cli/cluster.ts'), 'restart-apiserver'], { timeout: 180_000 });

      // Written right after the API server is back, typically before the watch has reconnected:
      // the watch must resume from its last resourceVersion and deliver them.
      await waitFor('API server to accept writes again', async () => {
        await env.client.create(Kinds.ConfigMap, configMap('after', ns, { n: '2' }));
        return { done: true, value: undefined };
      }, { timeoutMs: 60_000 });
      await env.client.patch(Kinds.ConfigMap, 'before', ns, { data: { n: '3' } });
      await waitForSecret(ns, 'after', { n: '2' }, 90_000);
      await waitForSecret(ns, 'before', { n: '3' }, 90_000);
      assert.equal(mgr.isLeader, true, 'the same manager kept running');
    } finally {
      await mgr.stop();
    }
  });

  it('with leader election only one of two managers reconciles, and a killed leader is replaced within lease duration + retry period', async () => {
    const ns = await env.namespace('rt-leader');
    const children: ChildProcess[] = [];
    const startProcess = (identity: string) => {
      const child = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'packages/runtime/examples/derive-operator-main.ts')], {
        env: { ...process.env, KUBECONFIG: env.kubeconfigPath, NAMESPACE: ns, IDENTITY: identity },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout!.on('data', (d) => (output += d));
      child.stderr!.on('data', (d) => (output += d));
      children.push(child);
      return { child, output: () => output };
    };
    const leaseHolder = async () => {
      const lease = await ifFound(env.client.get<KubeObject & { spec?: { holderIdentity?: string } }>(Kinds.Lease, 'derive-operator-leader', ns));
      return lease?.spec?.holderIdentity ?? '';
    };
    try {
      const a = startProcess('candidate-a');
      const b = startProcess('candidate-b');
      const leader = await waitFor('one candidate to hold the lease', async () => {
        const holder = await leaseHolder();
        return { done: holder !== '', value: holder, seen: holder };
      }, { timeoutMs: 60_000 });
      await env.client.create(Kinds.ConfigMap, configMap('one', ns, { v: '1' }));
      await waitForSecret(ns, 'one', { v: '1' });
      const [leaderProc, follower] = leader === 'candidate-a' ? [a, b] : [b, a];
      assert.match(leaderProc.output(), /became leader/);
      assert.doesNotMatch(follower.output(), /became leader/, 'the follower must not lead while the leader renews');
      assert.doesNotMatch(follower.output(), /controller started/, 'the follower must not reconcile');

      const killedAt = Date.now();
      leaderProc.child.kill('SIGKILL');
      const successor = await waitFor('the follower to take the lease', async () => {
        const holder = await leaseHolder();
        return { done: holder !== '' && holder !== leader, value: holder, seen: holder };
      }, { timeoutMs: 60_000, intervalMs: 200 });
      const handoverMs = Date.now() - killedAt;
      assert.notEqual(successor, leader);
      assert.ok(handoverMs <= 15_000 + 2_000 + 3_000, `handover took ${handoverMs} ms; lease duration + retry period is 17 s (+3 s polling slack)`);
      await env.client.create(Kinds.ConfigMap, configMap('two', ns, { v: '2' }));
      await waitForSecret(ns, 'two', { v: '2' });
      assert.match(follower.output(), /became leader/);
    } finally {
      for (const child of children) child.kill('SIGKILL');
    }
  });

  it('SIGTERM shuts a manager down gracefully: exit 0 and the lease released for a successor', async () => {
    const ns = await env.namespace('rt-term');
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'packages/runtime/examples/derive-operator-main.ts')], {
      env: { ...process.env, KUBECONFIG: env.kubeconfigPath, NAMESPACE: ns, IDENTITY: 'graceful' },
      stdio: 'ignore',
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await waitFor('the process to hold the lease', async () => {
      const lease = await env.client.get<KubeObject & { spec?: { holderIdentity?: string } }>(Kinds.Lease, 'derive-operator-leader', ns);
      return { done: lease.spec?.holderIdentity === 'graceful', value: undefined, seen: lease.spec };
    }, { timeoutMs: 60_000 });
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
    const lease = await env.client.get<KubeObject & { spec?: { holderIdentity?: string | null } }>(Kinds.Lease, 'derive-operator-leader', ns);
    assert.ok(!lease.spec?.holderIdentity, `lease should be released, holder is ${lease.spec?.holderIdentity}`);
  });
});
