/**
 * Drift detection on the real cluster, without false drift: a resource quantity the API server
 * writes another way (`0.5` → `500m`) is no drift; replicas set through the scale subresource
 * (as an autoscaler does) are another controller's and stay; a field under a `drift.ignore` path
 * is never repaired; `drift.mode: warn` reports a hand edit (Drifted, Event) without repairing it.
 * (The default mode, repair, is tested by upgrade.e2e.test.ts and the README walkthrough.)
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import type { TestEnv } from '@iot-operator/runtime/testing';
import { ArmadaChart, type ArmadaChartObject } from '../src/api/armada.ts';
import { deleteCharts, eventsOf, kubectl, startServedNamespace, stopServedNamespace, testChart, waitForChartState, waitForStatus } from './e2e-support.ts';

let env: TestEnv;
let ns: string;
let mgr: Manager;

type DeploymentObject = KubeObject & { spec?: { replicas?: number; template?: { spec?: { containers?: Array<{ resources?: { limits?: Record<string, string> } }> } } } };

const replicas = async (name: string) => (await env.client.get<DeploymentObject>(Kinds.Deployment, `${name}-testchart`, ns)).spec?.replicas;
/** Makes the chart reconcile (an annotation the manifest does not set changes on its Deployment), then gives it time. */
async function nudge(name: string): Promise<void> {
  await env.client.patch(Kinds.Deployment, `${name}-testchart`, ns, { metadata: { annotations: { nudged: String(Date.now()) } } }, 'merge');
  await new Promise((r) => setTimeout(r, 4_000));
}
const driftEvents = async (name: string) => (await eventsOf(env, ns, name)).filter((e) => e.reason === 'DriftDetected' || e.reason === 'DriftRepaired');

describe('drift without false drift', () => {
  before(async () => ({ env, ns, mgr } = await startServedNamespace('armada-drift')));

  after(async () => {
    if (ns) await deleteCharts(env, ns).catch(() => undefined); // while the operator still removes their finalizers
    await stopServedNamespace({ env, ns, mgr });
  });

  test('a quantity the API server writes another way is no drift', async () => {
    await env.client.create(ArmadaChart, testChart('quantities', ns, { values: { resources: { limits: { cpu: '0.5', memory: '1024Mi' } } } }));
    await waitForChartState(env, ns, 'quantities', 'deployed');
    const live = await env.client.get<DeploymentObject>(Kinds.Deployment, 'quantities-testchart', ns);
    assert.deepEqual(live.spec?.template?.spec?.containers?.[0]?.resources?.limits, { cpu: '500m', memory: '1Gi' }, 'the server wrote them its way');
    await nudge('quantities');
    const chart = await env.client.get<ArmadaChartObject>(ArmadaChart, 'quantities', ns);
    assert.equal(chart.status?.revision, 1, 'no repair upgrade');
    assert.deepEqual(await driftEvents('quantities'), []);
  });

  test('replicas set through the scale subresource (an autoscaler) are another controller\'s: kept, no drift', async () => {
    await env.client.create(ArmadaChart, testChart('scaled', ns));
    await waitForChartState(env, ns, 'scaled', 'deployed');
    await kubectl(env, 'scale', '--namespace', ns, 'deployment/scaled-testchart', '--replicas=4');
    await nudge('scaled');
    assert.equal(await replicas('scaled'), 4);
    assert.equal((await env.client.get<ArmadaChartObject>(ArmadaChart, 'scaled', ns)).status?.revision, 1);
    assert.deepEqual(await driftEvents('scaled'), []);
  });

  test('a field under a drift.ignore path is never repaired', async () => {
    await env.client.create(ArmadaChart, testChart('ignoring', ns, { drift: { ignore: [{ paths: ['/spec/replicas'], target: { kind: 'Deployment' } }] } }));
    await waitForChartState(env, ns, 'ignoring', 'deployed');
    await env.client.patch(Kinds.Deployment, 'ignoring-testchart', ns, { spec: { replicas: 3 } }, 'merge');
    await nudge('ignoring');
    assert.equal(await replicas('ignoring'), 3);
    assert.deepEqual(await driftEvents('ignoring'), []);
  });

  test('drift.mode warn: a hand edit is reported (Drifted, Event), not repaired', async () => {
    await env.client.create(ArmadaChart, testChart('warned', ns, { drift: { mode: 'warn' } }));
    await waitForChartState(env, ns, 'warned', 'deployed');
    await env.client.patch(Kinds.Deployment, 'warned-testchart', ns, { spec: { replicas: 3 } }, 'merge');
    const drifted = await waitForStatus<ArmadaChartObject>(env, ArmadaChart, ns, 'warned', 'Drifted', (s) => s.conditions?.some((c) => c.type === 'Drifted' && c.status === 'True') ?? false, 30_000);
    assert.match(drifted.status?.conditions?.find((c) => c.type === 'Drifted')?.message ?? '', /deployment\/warned-testchart was edited \(\.spec\.replicas\)/);
    assert.equal(drifted.status?.revision, 1);
    assert.equal(await replicas('warned'), 3, 'not repaired');
    assert.ok((await driftEvents('warned')).some((e) => /drift\.mode: warn, not repaired/.test(e.message)));
  });
});
