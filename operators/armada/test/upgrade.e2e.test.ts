/**
 * Upgrades and remediation, counted in Helm's own history: a spec change that is not an input
 * causes no `helm upgrade`; a values change causes exactly one; an upgrade the API server refuses
 * (service port 70000) is rolled back to the last good revision and reported `failed` with
 * Helm's message, is not retried while the spec stays, and recovers on the next spec change;
 * `upgrade.pre.delete` runs before an upgrade; `helm test` runs and `wait.resources` are checked when asked for; deleting a protected chart keeps its release, deleting an unprotected one uninstalls it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import type { TestEnv } from '@iot-operator/runtime/testing';
import { ArmadaChart, type ArmadaChartObject } from '../src/api/armada.ts';
import { eventsOf, getOrUndefined, helmHistory, helmList, startServedNamespace, stopServedNamespace, testChart, waitForChartState, waitForStatus } from './e2e-support.ts';

let env: TestEnv;
let ns: string;
let mgr: Manager;

interface ServiceObject extends KubeObject {
  spec?: { ports?: Array<{ port: number }> };
}
interface DeploymentObject extends KubeObject {
  spec?: { replicas?: number };
}

const patchSpec = (name: string, spec: Record<string, unknown>) => env.client.patch(ArmadaChart, name, ns, { spec }, 'merge');

describe('upgrades and remediation', () => {
  before(async () => ({ env, ns, mgr } = await startServedNamespace('armada-upgrade')));
  after(() => stopServedNamespace({ env, ns, mgr }));

  test('install once; a spec change that is not an input makes no helm upgrade', async () => {
    await env.client.create(ArmadaChart, testChart('app', ns, { values: { replicaCount: 1 } }));
    const installed = await waitForChartState(env, ns, 'app', 'deployed');
    assert.equal(installed.status?.revision, 1);
    assert.equal(installed.status?.install_failures, 0);

    await patchSpec('app', { delete: { timeout: 120 } }); // a new generation, same release inputs
    await waitForStatus<ArmadaChartObject>(env, ArmadaChart, ns, 'app', 'the new generation observed', (s) => s.actual_state === 'deployed');
    const history = await helmHistory(env, ns, 'app');
    assert.deepEqual(history.map((r) => [r.revision, r.status]), [[1, 'deployed']], 'no helm upgrade for an unchanged chart');
  });

  test('a values change makes exactly one helm upgrade', async () => {
    await patchSpec('app', { values: { replicaCount: 2 } });
    const upgraded = await waitForStatus<ArmadaChartObject>(env, ArmadaChart, ns, 'app', 'deployed at revision 2', (s) => s.actual_state === 'deployed' && s.revision === 2);
    assert.equal(upgraded.status?.upgrade_failures, 0);
    const deployment = await env.client.get<DeploymentObject>(Kinds.Deployment, 'app-testchart', ns);
    assert.equal(deployment.spec?.replicas, 2);
    assert.deepEqual((await helmHistory(env, ns, 'app')).map((r) => [r.revision, r.status]), [[1, 'superseded'], [2, 'deployed']]);
    assert.ok((await eventsOf(env, ns, 'app')).some((e) => e.reason === 'Upgraded' && /revision 2/.test(e.message)));
  });

  test('an upgrade the API server refuses is rolled back, reported failed, and not retried', async () => {
    await patchSpec('app', { values: { replicaCount: 2, service: { port: 70000 } } });
    const failed = await waitForChartState(env, ns, 'app', 'failed');
    assert.equal(failed.status?.satisfied, false);
    assert.equal(failed.status?.upgrade_failures, 1);
    assert.match(failed.status?.reason ?? '', /helm upgrade failed \(rolled back to revision 2\); fix the spec to try again: .*70000/);
    assert.ok(failed.status?.conditions?.some((c) => c.type === 'Released' && c.status === 'False' && c.reason === 'UpgradeFailed'));
    const history = await env.waitFor('revision 3 failed and revision 4 the rollback', async () => {
      const h = await helmHistory(env, ns, 'app');
      return { done: h.length === 4, value: h, seen: h };
    });
    assert.deepEqual(history.map((r) => [r.revision, r.status]), [[1, 'superseded'], [2, 'superseded'], [3, 'failed'], [4, 'deployed']]);
    assert.match(history[3]!.description, /Rollback to 2/);
    const service = await env.client.get<ServiceObject>(Kinds.Service, 'app-testchart', ns);
    assert.equal(service.spec?.ports?.[0]?.port, 80, 'the service keeps the last good port');
    assert.ok((await eventsOf(env, ns, 'app')).some((e) => e.type === 'Warning' && e.reason === 'Failed'));

    // Not retried while the spec stays: a reconcile (label change) leaves Helm's history alone.
    await env.client.patch(ArmadaChart, 'app', ns, { metadata: { labels: { touched: 'yes' } } }, 'merge');
    await waitForChartState(env, ns, 'app', 'failed');
    assert.equal((await helmHistory(env, ns, 'app')).length, 4);
  });

  test('the next spec change recovers the failed chart', async () => {
    await patchSpec('app', { values: { replicaCount: 2, service: { port: 8080 } } });
    const recovered = await waitForStatus<ArmadaChartObject>(env, ArmadaChart, ns, 'app', 'deployed at revision 5', (s) => s.actual_state === 'deployed' && s.revision === 5);
    assert.equal(recovered.status?.satisfied, true);
    assert.equal(recovered.status?.upgrade_failures, 0);
    assert.equal(recovered.status?.reason, undefined);
    assert.equal(recovered.status?.failed_inputs, undefined);
    const service = await env.client.get<ServiceObject>(Kinds.Service, 'app-testchart', ns);
    assert.equal(service.spec?.ports?.[0]?.port, 8080);
  });

  test('a hand-edited resource is restored', async () => {
    await env.client.patch(Kinds.Deployment, 'app-testchart', ns, { spec: { replicas: 5 } }, 'merge'); // kubectl scale --replicas=5
    await env.waitFor('the deployment to be scaled back to the declared 2 replicas', async () => {
      const deployment = await env.client.get<DeploymentObject>(Kinds.Deployment, 'app-testchart', ns);
      return { done: deployment.spec?.replicas === 2, value: undefined, seen: deployment.spec?.replicas };
    }, { timeoutMs: 60_000 });
    const chart = await waitForStatus<ArmadaChartObject>(env, ArmadaChart, ns, 'app', 'deployed after the repair', (s) => s.actual_state === 'deployed' && s.revision === 6);
    assert.match(chart.status?.conditions?.find((c) => c.type === 'Drifted' && c.status === 'True')?.message ?? '', /deployment\/app-testchart was edited \(\.spec\.replicas\)/);
    assert.equal((await helmHistory(env, ns, 'app')).length, 6, 'one helm upgrade repaired it');
  });

  test('upgrade.pre.delete deletes the matching resources before the upgrade, not before the install', async () => {
    const doomed = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'doomed', namespace: ns, labels: { 'armada.test/pre': 'delete' } }, data: { a: 'b' } };
    await env.client.create(Kinds.ConfigMap, doomed);
    await env.client.create(ArmadaChart, testChart('pre', ns, { upgrade: { pre: { delete: [{ type: 'configmap', labels: { 'armada.test/pre': 'delete' } }] } } }));
    await waitForChartState(env, ns, 'pre', 'deployed');
    assert.ok(await getOrUndefined(env, Kinds.ConfigMap, 'doomed', ns), 'an install deletes nothing');
    await patchSpec('pre', { values: { replicaCount: 2 } });
    await waitForStatus<ArmadaChartObject>(env, ArmadaChart, ns, 'pre', 'upgraded to revision 2', (s) => s.actual_state === 'deployed' && s.revision === 2);
    assert.equal(await getOrUndefined(env, Kinds.ConfigMap, 'doomed', ns), undefined);
    assert.ok((await eventsOf(env, ns, 'pre')).some((e) => e.reason === 'PreUpgradeDelete'));
    await env.client.delete(ArmadaChart, 'pre', ns);
  });

  test('helm test runs after the install when enabled: TestSuccess, and its pod cleaned up', async () => {
    await env.client.create(ArmadaChart, testChart('tested', ns, { test: { enabled: true, timeout: 90, options: { cleanup: true } } }));
    const chart = await waitForChartState(env, ns, 'tested', 'deployed');
    const tested = chart.status?.conditions?.find((c) => c.type === 'TestSuccess');
    assert.equal(tested?.status, 'True', JSON.stringify(chart.status));
    assert.ok((await eventsOf(env, ns, 'tested')).some((e) => e.reason === 'TestSucceeded'));
    assert.equal(await getOrUndefined(env, Kinds.Pod, 'tested-testchart-test', ns), undefined, 'options.cleanup deleted the test pod');
    await env.client.delete(ArmadaChart, 'tested', ns);
  });

  test('wait.resources: met, the chart is deployed; unmet within its timeout, the chart is failed', async () => {
    const instance = (release: string) => ({ 'app.kubernetes.io/instance': release });
    await env.client.create(ArmadaChart, testChart('waited', ns, { wait: { timeout: 60, resources: [{ type: 'deployment', labels: instance('waited') }] } }));
    await waitForChartState(env, ns, 'waited', 'deployed');
    // Without Helm's own --wait: its 3-s deadline would race the pod's start on a busy machine, and
    // this test is about Armada's check (how many of the two are ready by then depends on that race).
    await env.client.create(ArmadaChart, testChart('unmet', ns, { wait: { timeout: 3, native: { enabled: false }, resources: [{ type: 'deployment', labels: instance('unmet'), min_ready: 2 }] } }));
    const unmet = await waitForChartState(env, ns, 'unmet', 'failed');
    assert.match(unmet.status?.reason ?? '', /the release's resources are not ready after 3 s \(wait\.resources\): [01] of 2 deployment\(s\) ready \(labels app\.kubernetes\.io\/instance=unmet\)/);
    await env.client.delete(ArmadaChart, 'waited', ns);
    await env.client.delete(ArmadaChart, 'unmet', ns);
  });

  test('deleting a protected chart keeps its release; deleting an unprotected one uninstalls it', async () => {
    await env.client.create(ArmadaChart, testChart('kept', ns, { protected: { continue_processing: true } }));
    await waitForChartState(env, ns, 'kept', 'deployed');
    await env.client.delete(ArmadaChart, 'kept', ns);
    await env.client.delete(ArmadaChart, 'app', ns);
    await env.waitFor('both ArmadaCharts to be gone', async () => {
      const left = await env.client.list(ArmadaChart, { namespace: ns });
      return { done: left.items.length === 0, value: undefined, seen: left.items.map((c) => c.metadata.name) };
    });
    const releases = await helmList(env, ns);
    assert.deepEqual(releases.map((r) => [r.name, r.status]), [['kept', 'deployed']]);
    assert.ok(await getOrUndefined(env, Kinds.Deployment, 'kept-testchart', ns), 'the protected release\'s resources stay');
    assert.equal(await getOrUndefined(env, Kinds.Deployment, 'app-testchart', ns), undefined);
  });
});
