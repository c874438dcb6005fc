/**
 * Group and manifest reconcile steps against the runtime's in-memory fake client (logic only;
 * sequenced.e2e.test.ts and walkthrough.e2e.test.ts show the same on the real cluster): a
 * sequenced group enables one chart at a time, a parallel one all at once, a missing chart makes
 * the group `error` and touches nothing, a chart controlled elsewhere is not taken, a manifest
 * enables its groups in order, and a parent counts a child deployed only under its release prefix.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeClient } from '@iot-operator/runtime/testing';
import { ArmadaChart, ArmadaChartGroup, ArmadaManifest, type ArmadaChartGroupObject, type ArmadaChartObject, type ArmadaManifestObject } from '../src/api/armada.ts';
import { reconcileGroup } from '../src/group/controller.ts';
import { reconcileManifest } from '../src/manifest/controller.ts';

const ns = 'demo';

function chart(name: string): ArmadaChartObject {
  return {
    apiVersion: 'armada.airshipit.org/v1alpha1',
    kind: 'ArmadaChart',
    metadata: { name, namespace: ns, generation: 1 },
    spec: { chart_name: name, release: name, source: { type: 'local', location: '/charts/testchart' }, target_state: 'uninitialized' },
    status: { actual_state: 'uninitialized', satisfied: true, observedGeneration: 1 },
  };
}

function group(names: string[], sequenced: boolean): ArmadaChartGroupObject {
  return { apiVersion: 'armada.airshipit.org/v1alpha1', kind: 'ArmadaChartGroup', metadata: { name: 'blog-group', namespace: ns, generation: 1 }, spec: { chart_group: names, sequenced } };
}

/** Marks a chart deployed for its current generation, as the chart controller would. */
async function deployed(cluster: FakeClient, name: string): Promise<void> {
  const current = cluster.peek<ArmadaChartObject>(ArmadaChart, name, ns)!;
  await cluster.patchStatus(ArmadaChart, name, ns, { status: { actual_state: 'deployed', satisfied: true, observedGeneration: current.metadata.generation } });
}

const targets = (cluster: FakeClient, names: string[]) => names.map((n) => cluster.peek<ArmadaChartObject>(ArmadaChart, n, ns)!.spec.target_state);
const groupStatus = (cluster: FakeClient) => cluster.peek<ArmadaChartGroupObject>(ArmadaChartGroup, 'blog-group', ns)!.status;

test('a sequenced group adopts its charts and enables the next only after the previous is deployed', async () => {
  const cluster = new FakeClient();
  cluster.seed(ArmadaChart, chart('blog-1'), chart('blog-2'));
  cluster.seed(ArmadaChartGroup, group(['blog-1', 'blog-2'], true));
  const reconcile = () => reconcileGroup({ namespace: ns, name: 'blog-group' }, cluster.reconcileContext());
  const groupUid = cluster.peek(ArmadaChartGroup, 'blog-group', ns)!.metadata.uid;

  await reconcile();
  for (const name of ['blog-1', 'blog-2']) {
    const owner = cluster.peek<ArmadaChartObject>(ArmadaChart, name, ns)!.metadata.ownerReferences?.[0];
    assert.deepEqual({ kind: owner?.kind, uid: owner?.uid, controller: owner?.controller }, { kind: 'ArmadaChartGroup', uid: groupUid, controller: true });
  }
  assert.deepEqual(targets(cluster, ['blog-1', 'blog-2']), ['deployed', 'uninitialized']);
  assert.equal(groupStatus(cluster)?.actual_state, 'running');
  assert.match(groupStatus(cluster)?.reason ?? '', /waiting for ArmadaChart blog-1/);

  await reconcile();
  assert.deepEqual(targets(cluster, ['blog-1', 'blog-2']), ['deployed', 'uninitialized'], 'blog-1 is enabled but not yet deployed');
  await deployed(cluster, 'blog-1');
  await reconcile();
  assert.deepEqual(targets(cluster, ['blog-1', 'blog-2']), ['deployed', 'deployed']);
  await deployed(cluster, 'blog-2');
  await reconcile();
  assert.equal(groupStatus(cluster)?.actual_state, 'deployed');
  assert.equal(groupStatus(cluster)?.satisfied, true);
});

test('a failed chart stops a sequenced group there', async () => {
  const cluster = new FakeClient();
  cluster.seed(ArmadaChart, chart('blog-1'), chart('blog-2'));
  cluster.seed(ArmadaChartGroup, group(['blog-1', 'blog-2'], true));
  const reconcile = () => reconcileGroup({ namespace: ns, name: 'blog-group' }, cluster.reconcileContext());
  await reconcile();
  await cluster.patchStatus(ArmadaChart, 'blog-1', ns, { status: { actual_state: 'failed', reason: 'helm install failed: boom', observedGeneration: 2 } });
  await reconcile();
  assert.deepEqual(targets(cluster, ['blog-1', 'blog-2']), ['deployed', 'uninitialized']);
  assert.equal(groupStatus(cluster)?.actual_state, 'failed');
  assert.match(groupStatus(cluster)?.reason ?? '', /ArmadaChart blog-1 is failed: helm install failed: boom/);
});

test('a parallel group enables every chart at once', async () => {
  const cluster = new FakeClient();
  cluster.seed(ArmadaChart, chart('blog-1'), chart('blog-2'));
  cluster.seed(ArmadaChartGroup, group(['blog-1', 'blog-2'], false));
  await reconcileGroup({ namespace: ns, name: 'blog-group' }, cluster.reconcileContext());
  assert.deepEqual(targets(cluster, ['blog-1', 'blog-2']), ['deployed', 'deployed']);
});

test('a missing chart: error naming it, nothing touched; a chart controlled elsewhere is not taken', async () => {
  const cluster = new FakeClient();
  cluster.seed(ArmadaChart, chart('blog-1'));
  cluster.seed(ArmadaChartGroup, group(['blog-1', 'blog-3'], false));
  await reconcileGroup({ namespace: ns, name: 'blog-group' }, cluster.reconcileContext());
  assert.equal(groupStatus(cluster)?.actual_state, 'error');
  assert.match(groupStatus(cluster)?.reason ?? '', /ArmadaChart blog-3 not found in namespace demo/);
  assert.deepEqual(cluster.writes.map((w) => `${w.verb} ${w.kind}`), ['status ArmadaChartGroup']);

  const taken = chart('blog-3');
  taken.metadata.ownerReferences = [{ apiVersion: 'armada.airshipit.org/v1alpha1', kind: 'ArmadaChartGroup', name: 'other-group', uid: 'uid-other', controller: true }];
  cluster.seed(ArmadaChart, taken);
  await reconcileGroup({ namespace: ns, name: 'blog-group' }, cluster.reconcileContext());
  assert.match(groupStatus(cluster)?.reason ?? '', /ArmadaChart blog-3 is controlled by ArmadaChartGroup other-group/);
  assert.deepEqual(targets(cluster, ['blog-1', 'blog-3']), ['uninitialized', 'uninitialized']);
});

test('a manifest enables its groups in order, the next after the previous is deployed', async () => {
  const cluster = new FakeClient();
  const g = (name: string): ArmadaChartGroupObject => ({ ...group([], false), metadata: { name, namespace: ns, generation: 1 }, spec: { chart_group: [], target_state: 'uninitialized' } });
  cluster.seed(ArmadaChartGroup, g('first'), g('second'));
  cluster.seed(ArmadaManifest, { apiVersion: 'armada.airshipit.org/v1alpha1', kind: 'ArmadaManifest', metadata: { name: 'simple-armada', namespace: ns, generation: 1 }, spec: { chart_groups: ['first', 'second'], release_prefix: 'armada' } } as ArmadaManifestObject);
  const reconcile = () => reconcileManifest({ namespace: ns, name: 'simple-armada' }, cluster.reconcileContext());
  const groupTargets = () => ['first', 'second'].map((n) => cluster.peek<ArmadaChartGroupObject>(ArmadaChartGroup, n, ns)!.spec.target_state);
  await reconcile();
  assert.deepEqual(groupTargets(), ['deployed', 'uninitialized']);
  const first = cluster.peek<ArmadaChartGroupObject>(ArmadaChartGroup, 'first', ns)!;
  assert.equal(first.metadata.ownerReferences?.[0]?.kind, 'ArmadaManifest');
  // Deployed, but observed before the manifest took it: its releases do not carry the prefix yet.
  await cluster.patchStatus(ArmadaChartGroup, 'first', ns, { status: { actual_state: 'deployed', observedGeneration: first.metadata.generation } });
  await reconcile();
  assert.deepEqual(groupTargets(), ['deployed', 'uninitialized']);
  assert.equal(cluster.peek<ArmadaManifestObject>(ArmadaManifest, 'simple-armada', ns)!.status?.actual_state, 'running');
  await cluster.patchStatus(ArmadaChartGroup, 'first', ns, { status: { actual_state: 'deployed', observedGeneration: first.metadata.generation, release_prefix: 'armada' } });
  await reconcile();
  assert.deepEqual(groupTargets(), ['deployed', 'deployed']);
  assert.equal(cluster.peek<ArmadaManifestObject>(ArmadaManifest, 'simple-armada', ns)!.status?.actual_state, 'running');
});

test('under a manifest, a group is deployed only once its charts are deployed with the manifest\'s release prefix', async () => {
  const cluster = new FakeClient();
  cluster.seed(ArmadaChart, chart('blog-1'));
  cluster.seed(ArmadaManifest, { apiVersion: 'armada.airshipit.org/v1alpha1', kind: 'ArmadaManifest', metadata: { name: 'simple-armada', namespace: ns, generation: 1, uid: 'uid-manifest' }, spec: { chart_groups: ['blog-group'], release_prefix: 'armada' } } as ArmadaManifestObject);
  const taken = group(['blog-1'], false);
  taken.metadata.ownerReferences = [{ apiVersion: 'armada.airshipit.org/v1alpha1', kind: 'ArmadaManifest', name: 'simple-armada', uid: 'uid-manifest', controller: true }];
  cluster.seed(ArmadaChartGroup, taken);
  const reconcile = () => reconcileGroup({ namespace: ns, name: 'blog-group' }, cluster.reconcileContext());
  await reconcile();
  await deployed(cluster, 'blog-1'); // as before the manifest took the group: no prefix on its release
  await reconcile();
  assert.equal(groupStatus(cluster)?.actual_state, 'running');
  await cluster.patchStatus(ArmadaChart, 'blog-1', ns, { status: { release_prefix: 'armada' } });
  await reconcile();
  assert.deepEqual([groupStatus(cluster)?.actual_state, groupStatus(cluster)?.release_prefix], ['deployed', 'armada']);
});

test('a failed protected chart with continue_processing does not hold the sequence back', async () => {
  const cluster = new FakeClient();
  const first = chart('blog-1');
  first.spec.protected = { continue_processing: true };
  cluster.seed(ArmadaChart, first, chart('blog-2'));
  cluster.seed(ArmadaChartGroup, group(['blog-1', 'blog-2'], true));
  const reconcile = () => reconcileGroup({ namespace: ns, name: 'blog-group' }, cluster.reconcileContext());
  await reconcile();
  await cluster.patchStatus(ArmadaChart, 'blog-1', ns, { status: { actual_state: 'failed', reason: 'helm install failed: boom' } });
  await reconcile();
  assert.deepEqual(targets(cluster, ['blog-1', 'blog-2']), ['deployed', 'deployed']);
  await deployed(cluster, 'blog-2');
  await reconcile();
  assert.equal(groupStatus(cluster)?.actual_state, 'deployed');
});
