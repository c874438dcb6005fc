/**
 * The Ptemplate reconcile step against the runtime's in-memory fake client (reconcile logic
 * only; the end-to-end tests show the same on the real cluster): which writes happen, and that
 * a second pass over an unchanged world writes nothing — with and without the KMM Module API.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApiError, Kinds, type KubeObject, type ListOptions, type ObjectList, type ResourceType } from '@iot-operator/runtime';
import { FakeClient } from '@iot-operator/runtime/testing';
import { Ptemplate, type PtemplateObject } from '../src/api/ptemplate.ts';
import { reconcilePtemplate } from '../src/controller.ts';
import { KmmModules, type ModuleCache } from '../src/kmm.ts';
import { Module, type ModuleObject } from '../src/resources/module.ts';
import type { DaemonSetObject } from '../src/resources/daemonset.ts';
import { example } from './fixtures/example.ts';

/** A fake cluster that may or may not serve the Module API. */
class Cluster extends FakeClient {
  kmmInstalled = false;

  override async list<T extends KubeObject = KubeObject>(type: ResourceType, options: ListOptions = {}): Promise<ObjectList<T>> {
    this.refuseWithoutKmm(type);
    return super.list<T>(type, options);
  }

  override async apply<T extends KubeObject>(type: ResourceType, obj: T, options: { fieldManager: string; force?: boolean }): Promise<T> {
    this.refuseWithoutKmm(type);
    return super.apply(type, obj, options);
  }

  private refuseWithoutKmm(type: ResourceType): void {
    if (type === Module && !this.kmmInstalled) throw new ApiError(404, 'NotFound', 'the server could not find the requested resource');
  }
}

function setup(kmmInstalled: boolean) {
  const cluster = new Cluster();
  cluster.kmmInstalled = kmmInstalled;
  const { uid: _uid, generation: _g, ...metadata } = example.metadata;
  cluster.seed(Ptemplate, { ...example, metadata });
  const cache = cluster.cacheReader();
  const moduleCache: ModuleCache = { informer: () => ({ isSynced: true, addHandler: () => undefined }), get: (type, name, ns) => cache.get(type, name, ns) };
  const kmm = new KmmModules(moduleCache);
  const ctx = cluster.reconcileContext(cache);
  const reconcile = () => reconcilePtemplate({ namespace: 'demo', name: 'consumer-pod' }, ctx, kmm, { kmmPollIntervalMs: 1234 });
  const writes = () => cluster.writes.map((w) => `${w.verb} ${w.kind}`);
  return { cluster, reconcile, writes };
}

test('with KMM installed: the DaemonSet, the Module and the status are written once, then nothing', async () => {
  const { cluster, reconcile, writes } = setup(true);
  assert.equal(await reconcile(), undefined, 'no requeue needed');
  assert.deepEqual(writes(), ['apply DaemonSet', 'apply Module', 'status Ptemplate']);
  const module = cluster.peek<ModuleObject>(Module, 'consumer-pod', 'demo');
  assert.deepEqual(module?.spec?.moduleLoader.container.modprobe.parameters, ['max_dev=5', 'default_msg=ptemplate']);
  const pt = cluster.peek<PtemplateObject>(Ptemplate, 'consumer-pod', 'demo');
  assert.equal(module?.metadata.ownerReferences?.[0]?.uid, pt?.metadata.uid);
  assert.equal(pt?.status?.conditions?.find((c) => c.type === 'KMMAvailable')?.status, 'True');

  cluster.writes.length = 0;
  await reconcile();
  assert.deepEqual(writes(), [], 'an unchanged world needs no write');
});

test('a spec change rewrites the children it affects', async () => {
  const { cluster, reconcile, writes } = setup(true);
  await reconcile();
  await cluster.patch(Ptemplate, 'consumer-pod', 'demo', { spec: { consumerimage: 'consumer:2' } });
  cluster.writes.length = 0;
  await reconcile();
  assert.deepEqual(writes(), ['apply DaemonSet', 'status Ptemplate'], 'the Module does not depend on the consumer image; observedGeneration moved');
  assert.equal(cluster.peek<DaemonSetObject>(Kinds.DaemonSet, 'consumer-pod-consumer', 'demo')?.spec?.template.spec?.containers[0]?.image, 'consumer:2');

  await cluster.patch(Ptemplate, 'consumer-pod', 'demo', { spec: { maxdev: 8 } });
  cluster.writes.length = 0;
  await reconcile();
  assert.deepEqual(writes(), ['apply Module', 'status Ptemplate']);
  assert.deepEqual(cluster.peek<ModuleObject>(Module, 'consumer-pod', 'demo')?.spec?.moduleLoader.container.modprobe.parameters, ['max_dev=8', 'default_msg=ptemplate']);
});

test('without KMM: the DaemonSet is still written, KMMAvailable=False/ModuleCRDMissing, and the Ptemplate is looked at again', async () => {
  const { cluster, reconcile, writes } = setup(false);
  assert.deepEqual(await reconcile(), { requeueAfterMs: 1234 });
  assert.deepEqual(writes(), ['apply DaemonSet', 'status Ptemplate']);
  const kmmCondition = () => cluster.peek<PtemplateObject>(Ptemplate, 'consumer-pod', 'demo')?.status?.conditions?.find((c) => c.type === 'KMMAvailable');
  assert.deepEqual([kmmCondition()?.status, kmmCondition()?.reason], ['False', 'ModuleCRDMissing']);

  cluster.writes.length = 0;
  assert.deepEqual(await reconcile(), { requeueAfterMs: 1234 });
  assert.deepEqual(writes(), [], 'still missing: nothing to write');

  cluster.kmmInstalled = true;
  assert.equal(await reconcile(), undefined);
  assert.deepEqual(writes(), ['apply Module', 'status Ptemplate']);
  assert.deepEqual([kmmCondition()?.status, kmmCondition()?.reason], ['True', 'ModuleInPlace']);
});

test('a child controlled by someone else is not taken over', async () => {
  const { cluster, reconcile, writes } = setup(true);
  cluster.seed(Kinds.DaemonSet, {
    metadata: { name: 'consumer-pod-consumer', namespace: 'demo', ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'other', uid: 'uid-other', controller: true }] },
  });
  await assert.rejects(reconcile(), /DaemonSet consumer-pod-consumer exists and is controlled by Deployment other/);
  assert.deepEqual(writes(), []);
});
