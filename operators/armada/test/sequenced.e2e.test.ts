/**
 * examples/sequenced on the real cluster: disabled charts (`uninitialized`, nothing installed)
 * are enabled by a sequenced group one at a time — a chart is never enabled before the previous
 * one is deployed, and Helm's release timestamps show the order; a chart missing from the group
 * makes it `error` naming the chart, and the group recovers when the chart appears. Enabling a
 * chart by hand (`kubectl patch`, what the seed's Argo step does) installs it; a chart with
 * `dependencies` waits `pending` until they are deployed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Kinds, type Manager } from '@iot-operator/runtime';
import type { TestEnv } from '@iot-operator/runtime/testing';
import { ArmadaChart, ArmadaChartGroup, type ArmadaChartGroupObject, type ArmadaChartObject } from '../src/api/armada.ts';
import { helmList, startServedNamespace, stopServedNamespace, testChart, waitForChartState, waitForStatus } from './e2e-support.ts';

let env: TestEnv;
let ns: string;
let mgr: Manager;

const isDeployed = (c: ArmadaChartObject) => c.status?.actual_state === 'deployed' && c.status.observedGeneration === c.metadata.generation;

describe('a sequenced group', () => {
  before(async () => ({ env, ns, mgr } = await startServedNamespace('armada-seq')));
  after(() => stopServedNamespace({ env, ns, mgr }));

  test('disabled charts install nothing', async () => {
    for (const name of ['blog-1', 'blog-2']) await env.client.create(ArmadaChart, testChart(name, ns, { target_state: 'uninitialized' }));
    for (const name of ['blog-1', 'blog-2']) {
      const chart = await waitForChartState(env, ns, name, 'uninitialized');
      assert.equal(chart.status?.satisfied, true);
    }
    assert.deepEqual(await helmList(env, ns), []);
  });

  test('a group naming a missing chart is error, and recovers when the chart appears; charts deploy in order', async () => {
    await env.client.create<ArmadaChartGroupObject>(ArmadaChartGroup, {
      apiVersion: 'armada.airshipit.org/v1alpha1',
      kind: 'ArmadaChartGroup',
      metadata: { name: 'blog-group', namespace: ns },
      spec: { chart_group: ['blog-1', 'blog-2', 'blog-3'], sequenced: true, description: 'Deploys Simple Service in order' },
    });
    const broken = await waitForStatus<ArmadaChartGroupObject>(env, ArmadaChartGroup, ns, 'blog-group', 'error', (s) => s.actual_state === 'error');
    assert.match(broken.status?.reason ?? '', /ArmadaChart blog-3 not found in namespace/);
    assert.deepEqual(await helmList(env, ns), [], 'nothing is enabled while the group is incomplete');

    await env.client.create(ArmadaChart, testChart('blog-3', ns, { target_state: 'uninitialized' }));
    // Watch the order: whenever a chart is enabled, the one before it is already deployed
    // (read the later chart first: deployed never goes back during this test).
    const violations: string[] = [];
    await env.waitFor('the group to be deployed', async () => {
      const charts: ArmadaChartObject[] = [];
      for (const name of ['blog-3', 'blog-2', 'blog-1']) charts.unshift(await env.client.get<ArmadaChartObject>(ArmadaChart, name, ns));
      const [c1, c2, c3] = charts as [ArmadaChartObject, ArmadaChartObject, ArmadaChartObject];
      if (c3.spec.target_state === 'deployed' && !isDeployed(c2)) violations.push('blog-3 enabled before blog-2 was deployed');
      if (c2.spec.target_state === 'deployed' && !isDeployed(c1)) violations.push('blog-2 enabled before blog-1 was deployed');
      const group = await env.client.get<ArmadaChartGroupObject>(ArmadaChartGroup, 'blog-group', ns);
      return { done: group.status?.actual_state === 'deployed' && group.status.observedGeneration === group.metadata.generation, value: undefined, seen: group.status };
    }, { timeoutMs: 180_000, intervalMs: 100 });
    assert.deepEqual(violations.slice(0, 3), []);

    // Helm's own record of the order: each release was created after the previous one was deployed.
    const releaseSecret = async (release: string) => (await env.client.list(Kinds.Secret, { namespace: ns, labelSelector: `owner=helm,name=${release},version=1` })).items[0]!;
    const deployedAt = (secret: { metadata: { managedFields?: unknown[] } }) =>
      Math.max(...(secret.metadata.managedFields as Array<{ time: string }>).map((f) => Date.parse(f.time)));
    const [s1, s2, s3] = [await releaseSecret('blog-1'), await releaseSecret('blog-2'), await releaseSecret('blog-3')];
    assert.ok(deployedAt(s1) <= Date.parse(s2.metadata.creationTimestamp!), 'blog-2 installed after blog-1 was deployed');
    assert.ok(deployedAt(s2) <= Date.parse(s3.metadata.creationTimestamp!), 'blog-3 installed after blog-2 was deployed');
    for (const name of ['blog-1', 'blog-2', 'blog-3']) {
      const chart = await env.client.get<ArmadaChartObject>(ArmadaChart, name, ns);
      assert.equal(chart.metadata.ownerReferences?.find((r) => r.controller)?.name, 'blog-group');
    }
  });

  test('kubectl patch enabling a chart (the Argo step) installs it', async () => {
    await env.client.create(ArmadaChart, testChart('by-hand', ns, { target_state: 'uninitialized' }));
    await waitForChartState(env, ns, 'by-hand', 'uninitialized');
    await env.client.patch(ArmadaChart, 'by-hand', ns, { spec: { target_state: 'deployed' } }, 'merge');
    await waitForChartState(env, ns, 'by-hand', 'deployed');
    assert.ok((await helmList(env, ns)).some((r) => r.name === 'by-hand' && r.status === 'deployed'));
  });

  test('a chart waits (pending) for its dependencies to be deployed', async () => {
    await env.client.create(ArmadaChart, testChart('dep-a', ns, { target_state: 'uninitialized' }));
    await env.client.create(ArmadaChart, testChart('dep-b', ns, { dependencies: ['dep-a'] }));
    const pending = await waitForChartState(env, ns, 'dep-b', 'pending');
    assert.match(pending.status?.reason ?? '', /waiting for ArmadaChart dep-a \(dependencies\) to be deployed/);
    assert.equal((await helmList(env, ns)).some((r) => r.name === 'dep-b'), false);
    await env.client.patch(ArmadaChart, 'dep-a', ns, { spec: { target_state: 'deployed' } }, 'merge');
    await waitForChartState(env, ns, 'dep-b', 'deployed');
    assert.equal((await env.client.get<ArmadaChartObject>(ArmadaChart, 'dep-a', ns)).status?.actual_state, 'deployed');
  });
});
