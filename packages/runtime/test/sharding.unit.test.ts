import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { Kinds, type KubeObject } from '../src/client/resource.ts';
import { passingDrains, shardReconciler } from '../src/controller/sharded.ts';
import type { ReconcileContext, Reconciler } from '../src/controller/reconcile.ts';
import { generationChanged } from '../src/controller/predicates.ts';
import { LeaderElector, leaderElectionDefaults, type LeaseAccess, type LeaseObject } from '../src/manager/leader-election.ts';
import { CONTROLLER_RING_LABEL, drainLabel, responsibility, shardLabel, validateShardIdentity, withShardSelector, type ShardIdentity } from '../src/sharding/shard.ts';
import { FakeClient } from '../src/testing/fake-client.ts';

const shard: ShardIdentity = { ring: 'iot', name: 'operator-0', types: [Kinds.ConfigMap] };

function configMap(labels: Record<string, string>, generation = 1): KubeObject {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a', namespace: 'ns', labels, generation } };
}

describe('the shard protocol’s names', () => {
  it('uses the sharder’s label keys for the ring, the shard and the drain', () => {
    assert.equal(CONTROLLER_RING_LABEL, 'alpha.sharding.timebertt.dev/controllerring');
    assert.equal(shardLabel('iot'), 'shard.alpha.sharding.timebertt.dev/iot');
    assert.equal(drainLabel('iot'), 'drain.alpha.sharding.timebertt.dev/iot');
  });

  it('narrows the selector of sharded types only, keeping their own selector', () => {
    assert.equal(withShardSelector(shard, Kinds.ConfigMap, undefined), 'shard.alpha.sharding.timebertt.dev/iot=operator-0');
    assert.equal(withShardSelector(shard, Kinds.ConfigMap, 'app=x'), 'app=x,shard.alpha.sharding.timebertt.dev/iot=operator-0');
    assert.equal(withShardSelector(shard, Kinds.Secret, 'app=x'), 'app=x', 'a type the ring does not shard keeps its selector');
    assert.equal(withShardSelector(undefined, Kinds.ConfigMap, 'app=x'), 'app=x', 'no shard, no narrowing');
  });

  it('refuses ring names too long for a label key and shard names that cannot be a Lease name', () => {
    assert.throws(() => validateShardIdentity({ ...shard, ring: 'r'.repeat(64) }), /at most 63/);
    assert.throws(() => validateShardIdentity({ ...shard, name: 'Operator_0' }), /shard name "Operator_0"/);
    assert.doesNotThrow(() => validateShardIdentity({ ...shard, name: 'iot-operator-7d9c-x2k4p' }));
  });

  it('says whose an object is: this shard’s, being drained from it, or another’s', () => {
    assert.equal(responsibility(configMap({ [shardLabel('iot')]: 'operator-0' }), shard), 'reconcile');
    assert.equal(responsibility(configMap({ [shardLabel('iot')]: 'operator-0', [drainLabel('iot')]: 'true' }), shard), 'drain');
    assert.equal(responsibility(configMap({ [shardLabel('iot')]: 'operator-1' }), shard), 'elsewhere');
    assert.equal(responsibility(configMap({}), shard), 'elsewhere', 'an unassigned object is nobody’s yet');
    assert.equal(responsibility(configMap({ [shardLabel('other')]: 'operator-0' }), shard), 'elsewhere', 'the label of another ring does not count');
  });
});

describe('a sharded primary', () => {
  function setup(labels: Record<string, string>) {
    const client = new FakeClient();
    client.seed(Kinds.ConfigMap, configMap(labels));
    const reconciled: string[] = [];
    const inner: Reconciler = async (request) => void reconciled.push(request.name);
    const cached = () => client.cacheReader().get(Kinds.ConfigMap, 'a', 'ns');
    const ctx = { client, cache: client.cacheReader(), log: pino({ level: 'silent' }), recorder: { event() {}, flush: async () => {} }, signal: new AbortController().signal } as ReconcileContext;
    const reconcile = () => shardReconciler(inner, shard, Kinds.ConfigMap, cached)({ namespace: 'ns', name: 'a' }, ctx);
    return { client, reconciled, reconcile };
  }

  it('is reconciled while assigned to this shard, with no write of the runtime’s own', async () => {
    const { client, reconciled, reconcile } = setup({ [shardLabel('iot')]: 'operator-0' });
    await reconcile();
    assert.deepEqual(reconciled, ['a']);
    assert.deepEqual(client.writes, []);
  });

  it('being drained: handed back by removing the drain and shard labels in one patch, never reconciled', async () => {
    const { client, reconciled, reconcile } = setup({ [shardLabel('iot')]: 'operator-0', [drainLabel('iot')]: 'true', app: 'x' });
    await reconcile();
    assert.deepEqual(reconciled, []);
    assert.equal(client.writes.length, 1);
    assert.equal(client.writes[0]!.verb, 'patch');
    const after = await client.get(Kinds.ConfigMap, 'a', 'ns');
    assert.deepEqual(after.metadata.labels, { app: 'x' }, 'only the two sharding labels are gone');
  });

  it('a drain the cache still shows after this shard handed the object back: nothing more is written or reconciled', async () => {
    const { client, reconciled } = setup({ [shardLabel('iot')]: 'operator-0', [drainLabel('iot')]: 'true' });
    const stale = await client.get(Kinds.ConfigMap, 'a', 'ns');
    const ctx = { client, cache: client.cacheReader(), log: pino({ level: 'silent' }) } as unknown as ReconcileContext;
    const reconcileFrom = (cached: KubeObject) => shardReconciler(async (r) => void reconciled.push(r.name), shard, Kinds.ConfigMap, () => cached)({ namespace: 'ns', name: 'a' }, ctx);
    await reconcileFrom(stale);
    await reconcileFrom(stale);
    assert.deepEqual(reconciled, []);
    assert.equal(client.writes.length, 1, 'handed back once');
    assert.deepEqual((await client.get(Kinds.ConfigMap, 'a', 'ns')).metadata.labels, {});
  });

  it('a drain whose object changed since it was cached: handed back at the stored version', async () => {
    const { client, reconciled } = setup({ [shardLabel('iot')]: 'operator-0', [drainLabel('iot')]: 'true' });
    const stale = await client.get(Kinds.ConfigMap, 'a', 'ns');
    await client.patch(Kinds.ConfigMap, 'a', 'ns', { metadata: { labels: { app: 'y' } } });
    const ctx = { client, cache: client.cacheReader(), log: pino({ level: 'silent' }) } as unknown as ReconcileContext;
    await shardReconciler(async (r) => void reconciled.push(r.name), shard, Kinds.ConfigMap, () => stale)({ namespace: 'ns', name: 'a' }, ctx);
    assert.deepEqual(reconciled, []);
    assert.deepEqual((await client.get(Kinds.ConfigMap, 'a', 'ns')).metadata.labels, { app: 'y' }, 'the sharding labels are gone, the new one kept');
  });

  it('assigned to another shard: left alone', async () => {
    const { client, reconciled, reconcile } = setup({ [shardLabel('iot')]: 'operator-1' });
    await reconcile();
    assert.deepEqual(reconciled, []);
    assert.deepEqual(client.writes, []);
  });

  it('no longer cached (deleted or moved away): reaches the reconciler as gone', async () => {
    const client = new FakeClient();
    const reconciled: string[] = [];
    const ctx = { client, cache: client.cacheReader(), log: pino({ level: 'silent' }) } as unknown as ReconcileContext;
    await shardReconciler(async (r) => void reconciled.push(r.name), shard, Kinds.ConfigMap, () => undefined)({ namespace: 'ns', name: 'a' }, ctx);
    assert.deepEqual(reconciled, ['a']);
  });

  it('an update that only adds the drain label passes predicates that would drop it', () => {
    const predicate = passingDrains([generationChanged()], shard.ring);
    const before = configMap({ [shardLabel('iot')]: 'operator-0' });
    const drained = configMap({ [shardLabel('iot')]: 'operator-0', [drainLabel('iot')]: 'true' });
    assert.equal(predicate.update!(before, drained), true);
    assert.equal(predicate.update!(before, configMap({ [shardLabel('iot')]: 'operator-0', other: 'y' })), false, 'other label changes still filtered');
    assert.equal(predicate.update!(before, configMap({ [shardLabel('iot')]: 'operator-0' }, 2)), true);
  });
});

describe('the shard Lease', () => {
  it('carries the ring label from creation on, and gets it back if someone removes it', async () => {
    let lease: LeaseObject | undefined;
    let rv = 0;
    const access: LeaseAccess = {
      get: async () => lease && structuredClone(lease),
      create: async (l) => (lease = { ...structuredClone(l), metadata: { ...l.metadata, resourceVersion: String(++rv) } }),
      replace: async (l) => (lease = { ...structuredClone(l), metadata: { ...l.metadata, resourceVersion: String(++rv) } }),
    };
    const labels = { [CONTROLLER_RING_LABEL]: 'iot' };
    const elector = new LeaderElector({ namespace: 'ns', name: 'operator-0', identity: 'operator-0', labels, ...leaderElectionDefaults }, access, {
      now: () => Date.now(),
      sleep: async () => {},
    });
    assert.equal(await elector.tryAcquireOrRenew(), true);
    assert.deepEqual(lease?.metadata.labels, labels);
    assert.equal(lease?.spec?.holderIdentity, 'operator-0', 'held under its own name, as the sharder requires');
    lease = { ...lease!, metadata: { ...lease!.metadata, labels: { keep: 'me' } } };
    assert.equal(await elector.tryAcquireOrRenew(), true);
    assert.deepEqual(lease?.metadata.labels, { keep: 'me', ...labels });
  });
});
