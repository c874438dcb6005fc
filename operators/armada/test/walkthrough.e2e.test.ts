/**
 * The seed's walkthrough on the real local cluster with the real Helm CLI: two ArmadaCharts, a
 * group and a manifest are created at once; the manifest, group and charts end `deployed` and
 * Helm lists both releases (labelled with the manifest's release_prefix); deleting
 * `deployment.apps/blog-2-testchart` brings it back (Drifted condition, Events); deleting the
 * manifest cascades to the group, the charts and the releases — `helm list` ends empty.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import type { TestEnv } from '@iot-operator/runtime/testing';
import {
  ArmadaChart,
  ArmadaChartGroup,
  ArmadaManifest,
  type ArmadaChartGroupObject,
  type ArmadaChartObject,
  type ArmadaManifestObject,
} from '../src/api/armada.ts';
import { eventsOf, getOrUndefined, helmList, startServedNamespace, stopServedNamespace, testChart, waitForChartState, waitForStatus } from './e2e-support.ts';

let env: TestEnv;
let ns: string;
let mgr: Manager;

describe('the seed walkthrough (examples/armada)', () => {
  before(async () => ({ env, ns, mgr } = await startServedNamespace('armada-walk')));
  after(() => stopServedNamespace({ env, ns, mgr }));

  test('creating two charts, a group and a manifest deploys both releases', async () => {
    await env.client.create(ArmadaChart, testChart('blog-1', ns));
    await env.client.create(ArmadaChart, testChart('blog-2', ns));
    await env.client.create<ArmadaChartGroupObject>(ArmadaChartGroup, {
      apiVersion: 'armada.airshipit.org/v1alpha1',
      kind: 'ArmadaChartGroup',
      metadata: { name: 'blog-group', namespace: ns },
      spec: { chart_group: ['blog-1', 'blog-2'], description: 'Deploys Simple Service', sequenced: false },
    });
    await env.client.create<ArmadaManifestObject>(ArmadaManifest, {
      apiVersion: 'armada.airshipit.org/v1alpha1',
      kind: 'ArmadaManifest',
      metadata: { name: 'simple-armada', namespace: ns },
      spec: { chart_groups: ['blog-group'], release_prefix: 'armada' },
    });

    // kubectl get amf / acg / act
    const manifest = await waitForStatus<ArmadaManifestObject>(env, ArmadaManifest, ns, 'simple-armada', 'deployed', (s) => s.actual_state === 'deployed');
    assert.equal(manifest.status?.satisfied, true);
    const group = await waitForStatus<ArmadaChartGroupObject>(env, ArmadaChartGroup, ns, 'blog-group', 'deployed', (s) => s.actual_state === 'deployed');
    assert.equal(group.metadata.ownerReferences?.[0]?.name, 'simple-armada');
    for (const name of ['blog-1', 'blog-2']) {
      // The release label of the prefix arrives with the manifest: wait for the release to carry it.
      const chart = await waitForChartState(env, ns, name, 'deployed');
      assert.equal(chart.status?.satisfied, true);
      assert.equal(chart.status?.version, '0.1.0');
      assert.equal(chart.metadata.ownerReferences?.find((r) => r.controller)?.name, 'blog-group');
      assert.ok(chart.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
      assert.ok(chart.status?.conditions?.some((c) => c.type === 'Released' && c.status === 'True'));
    }
    await env.waitFor('both releases to carry the manifest\'s release_prefix label', async () => {
      const secrets = await env.client.list(Kinds.Secret, { namespace: ns, labelSelector: 'owner=helm,status=deployed' });
      const prefixed = secrets.items.filter((s) => s.metadata.labels?.['armada.airshipit.org/release-prefix'] === 'armada').map((s) => s.metadata.labels?.['name']);
      return { done: prefixed.includes('blog-1') && prefixed.includes('blog-2'), value: undefined, seen: secrets.items.map((s) => s.metadata.labels) };
    });

    const releases = await helmList(env, ns);
    assert.deepEqual(releases.map((r) => [r.name, r.status, r.chart]).sort(), [['blog-1', 'deployed', 'testchart-0.1.0'], ['blog-2', 'deployed', 'testchart-0.1.0']]);
    const deployment = await env.client.get(Kinds.Deployment, 'blog-2-testchart', ns);
    assert.equal(deployment.metadata.annotations?.['meta.helm.sh/release-name'], 'blog-2');
    await getOrUndefined(env, Kinds.Service, 'blog-1-testchart', ns).then((svc) => assert.ok(svc, 'service/blog-1-testchart exists'));
  });

  test('kubectl delete deployment.apps/blog-2-testchart: the operator brings it back through Helm', async () => {
    const old = await env.client.get(Kinds.Deployment, 'blog-2-testchart', ns);
    const before = await env.client.get<ArmadaChartObject>(ArmadaChart, 'blog-2', ns);
    await env.client.delete(Kinds.Deployment, 'blog-2-testchart', ns, { propagationPolicy: 'Background' });
    const back = await env.waitFor('deployment.apps/blog-2-testchart to come back', async () => {
      const d = await getOrUndefined<KubeObject>(env, Kinds.Deployment, 'blog-2-testchart', ns);
      return { done: !!d && d.metadata.uid !== old.metadata.uid && !d.metadata.deletionTimestamp, value: d!, seen: d?.metadata.uid };
    }, { timeoutMs: 60_000 });
    assert.equal(back.metadata.annotations?.['meta.helm.sh/release-name'], 'blog-2', 'recreated by Helm');

    const chart = await waitForStatus<ArmadaChartObject>(env, ArmadaChart, ns, 'blog-2', 'deployed after the repair', (s) => s.actual_state === 'deployed' && (s.revision ?? 0) > (before.status?.revision ?? 0));
    const drifted = chart.status?.conditions?.find((c) => c.type === 'Drifted');
    assert.equal(drifted?.status, 'True');
    assert.match(drifted?.message ?? '', /deployment\/blog-2-testchart was deleted; restored by helm upgrade/);
    const events = await env.waitFor('the DriftDetected and DriftRepaired events', async () => {
      const list = await eventsOf(env, ns, 'blog-2');
      return { done: list.some((e) => e.reason === 'DriftDetected') && list.some((e) => e.reason === 'DriftRepaired'), value: list, seen: list };
    });
    assert.ok(events.some((e) => e.type === 'Warning' && /deployment\/blog-2-testchart was deleted/.test(e.message)));
    // blog-1 was not touched.
    assert.equal((await helmList(env, ns)).find((r) => r.name === 'blog-1')?.revision, String((await env.client.get<ArmadaChartObject>(ArmadaChart, 'blog-1', ns)).status?.revision));
  });

  test('deleting the manifest deletes the group, the charts and uninstalls both releases', async () => {
    await env.client.delete(ArmadaManifest, 'simple-armada', ns);
    await env.waitFor('the group and the charts to be gone and helm list to be empty', async () => {
      const groups = await env.client.list(ArmadaChartGroup, { namespace: ns });
      const charts = await env.client.list(ArmadaChart, { namespace: ns });
      const releases = await helmList(env, ns);
      return { done: groups.items.length === 0 && charts.items.length === 0 && releases.length === 0, value: undefined, seen: { groups: groups.items.length, charts: charts.items.map((c) => c.metadata.finalizers), releases } };
    }, { timeoutMs: 120_000 });
    assert.equal(await getOrUndefined(env, Kinds.Deployment, 'blog-2-testchart', ns), undefined);
  });
});
