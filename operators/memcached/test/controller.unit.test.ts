/**
 * The Memcached reconcile step against the runtime's in-memory fake client (reconcile logic
 * only; the end-to-end tests show the same on the real cluster): the Deployment and the status
 * are written when they differ, never when nothing changed, and a Deployment controlled by
 * someone else is left alone.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Kinds } from '@iot-operator/runtime';
import { FakeClient } from '@iot-operator/runtime/testing';
import { Memcached, type MemcachedObject } from '../src/api/memcached.ts';
import { reconcileMemcached } from '../src/controller.ts';
import type { DeploymentObject } from '../src/resources/deployment.ts';

function setup() {
  const cluster = new FakeClient();
  cluster.seed(Memcached, { apiVersion: 'cache.example.com/v1alpha1', kind: 'Memcached', metadata: { name: 'example-memcached', namespace: 'demo' }, spec: { size: 3 } });
  const reconcile = () => reconcileMemcached({ namespace: 'demo', name: 'example-memcached' }, cluster.reconcileContext());
  const writes = () => cluster.writes.map((w) => `${w.verb} ${w.kind}`);
  const addPod = (name: string) =>
    cluster.seed(Kinds.Pod, { metadata: { name, namespace: 'demo', labels: { app: 'memcached', memcached_cr: 'example-memcached' } }, status: { phase: 'Running' } });
  return { cluster, reconcile, writes, addPod };
}

test('first pass: the Deployment and an empty status.nodes are written; second pass: nothing', async () => {
  const { cluster, reconcile, writes } = setup();
  await reconcile();
  assert.deepEqual(writes(), ['apply Deployment', 'status Memcached']);
  assert.equal(cluster.peek<DeploymentObject>(Kinds.Deployment, 'example-memcached', 'demo')?.spec?.replicas, 3);
  assert.deepEqual(cluster.peek<MemcachedObject>(Memcached, 'example-memcached', 'demo')?.status, { nodes: [] });
  cluster.writes.length = 0;
  await reconcile();
  assert.deepEqual(writes(), []);
});

test('new pods are written to status.nodes, sorted; a size change rewrites the Deployment only', async () => {
  const { cluster, reconcile, writes, addPod } = setup();
  await reconcile();
  addPod('example-memcached-b');
  addPod('example-memcached-a');
  cluster.writes.length = 0;
  await reconcile();
  assert.deepEqual(writes(), ['status Memcached']);
  assert.deepEqual(cluster.peek<MemcachedObject>(Memcached, 'example-memcached', 'demo')?.status?.nodes, ['example-memcached-a', 'example-memcached-b']);

  await cluster.patch(Memcached, 'example-memcached', 'demo', { spec: { size: 4 } });
  cluster.writes.length = 0;
  await reconcile();
  assert.deepEqual(writes(), ['apply Deployment']);
  assert.equal(cluster.peek<DeploymentObject>(Kinds.Deployment, 'example-memcached', 'demo')?.spec?.replicas, 4);
});

test('a Deployment of the same name controlled by another object is not taken over', async () => {
  const { cluster, reconcile, writes } = setup();
  cluster.seed(Kinds.Deployment, {
    metadata: { name: 'example-memcached', namespace: 'demo', ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'other', uid: 'uid-other', controller: true }] },
  });
  await assert.rejects(reconcile(), /Deployment example-memcached exists and is controlled by StatefulSet other/);
  assert.deepEqual(writes(), []);
});
