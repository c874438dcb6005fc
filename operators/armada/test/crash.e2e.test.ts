/**
 * The operator as it runs in a container — a separate process started from its bin/ entry point,
 * authenticated only as the deploy/ ServiceAccount bound by the deploy/ RBAC, with KUBECONFIG,
 * WATCH_NAMESPACE and HELM_BINARY from the environment and leader election on — is killed
 * (SIGKILL, with the helm process it was running, as a container's death would) in the middle of
 * `helm install --wait`. Restarted, it recovers the release Helm left `pending-install`
 * (uninstalled, installed again) and converges: one release, deployed, no request forbidden.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Kinds } from '@iot-operator/runtime';
import { serviceAccountKubeconfig, spawnOperator, type OperatorProcess, type ServiceAccountKubeconfig, type TestEnv } from '@iot-operator/runtime/testing';
import { repoRoot } from '@iot-operator/local-cluster';
import { ArmadaChart } from '../src/api/armada.ts';
import { armadaTestEnv, eventsOf, FIXTURES, helmBinary, helmHistory, helmList, testChart, waitForChartState } from './e2e-support.ts';

const deploy = (file: string) => path.join(repoRoot, 'operators/armada/deploy', file);

let env: TestEnv;
let ns: string;
let account: ServiceAccountKubeconfig;
const processes: OperatorProcess[] = [];

/** The operator process, as its ServiceAccount. */
async function startProcess(): Promise<OperatorProcess> {
  const operator = spawnOperator(['operators/armada/bin/armada-operator.js', '--leader-elect', '--metrics-bind-address', '127.0.0.1:0'], {
    KUBECONFIG: account.file,
    WATCH_NAMESPACE: ns,
    HELM_BINARY: await helmBinary(),
    LOG_LEVEL: 'info',
  }, { output: 'all' });
  processes.push(operator);
  return operator;
}

/** The pids of the processes `pid` started (read from /proc). */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) children.push(Number(entry));
    } catch {
      // the process ended meanwhile
    }
  }
  return children;
}

describe('an operator killed in the middle of helm install', () => {
  before(async () => {
    env = await armadaTestEnv();
    ns = await env.namespace('armada-crash');
    account = await serviceAccountKubeconfig(env, ns, ['service_account.yml', 'role.yml', 'role_binding.yml'].map(deploy));
  });

  after(async () => {
    for (const p of processes) await p.stop();
    await env.client.delete(ArmadaChart, 'crash', ns).catch(() => undefined);
    await account?.cleanup();
    await env?.cleanup();
  });

  test('converges after a restart with exactly one release, as its ServiceAccount', async () => {
    const first = await startProcess();
    // Pods that no node accepts keep `helm install --wait` in progress.
    await env.client.create(ArmadaChart, testChart('crash', ns, {
      source: { type: 'local', location: path.join(FIXTURES, 'slowchart') },
      values: { nodeSelector: { 'armada.test/nowhere': 'true' } },
      wait: { timeout: 600 },
    }));
    await env.waitFor('the install to be in progress (release pending-install)', async () => {
      const secrets = await env.client.list(Kinds.Secret, { namespace: ns, labelSelector: 'owner=helm,name=crash' });
      const statuses = secrets.items.map((s) => s.metadata.labels?.['status']);
      return { done: statuses.includes('pending-install'), value: undefined, seen: statuses };
    }, { timeoutMs: 90_000 });
    const helmProcesses = childrenOf(first.pid!);
    assert.ok(helmProcesses.length > 0, 'the operator is running helm');
    first.kill('SIGKILL');
    for (const pid of helmProcesses) process.kill(pid, 'SIGKILL');
    assert.equal(await first.stop(), null, 'the first operator died of SIGKILL');
    assert.deepEqual((await helmList(env, ns)).map((r) => [r.name, r.status]), [['crash', 'pending-install']], 'Helm was left pending-install');

    // While no operator runs, the pods are made schedulable.
    await env.client.patch(ArmadaChart, 'crash', ns, { spec: { values: { nodeSelector: { 'armada.test/nowhere': null } } } }, 'merge');
    const second = await startProcess();
    const chart = await waitForChartState(env, ns, 'crash', 'deployed', 180_000).catch((err: unknown) => {
      throw new Error(`${String(err)}\nsecond operator's log: ${second.output().slice(-4000)}`);
    });
    assert.equal(chart.status?.revision, 1);

    const releases = await helmList(env, ns);
    assert.deepEqual(releases.map((r) => [r.name, r.status]), [['crash', 'deployed']], 'one release, deployed');
    assert.deepEqual((await helmHistory(env, ns, 'crash')).map((r) => [r.revision, r.status]), [[1, 'deployed']]);
    assert.ok((await eventsOf(env, ns, 'crash')).some((e) => e.reason === 'Replacing' && /pending-install/.test(e.message)));
    const lease = await env.client.get(Kinds.Lease, 'armada-operator-leader', ns);
    assert.ok(lease.metadata.uid, 'the operator holds its leader-election Lease');

    const code = await second.stop();
    assert.equal(code, 0, `second operator exit code (stderr: ${second.output().slice(-2000)})`);
    for (const p of [first, second]) assert.doesNotMatch(p.output(), /forbidden/i, 'no request was refused by RBAC');
  });
});
