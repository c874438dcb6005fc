import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isApiError } from '../src/client/errors.ts';
import { Kinds, type KubeObject } from '../src/client/resource.ts';
import { addFinalizer, removeFinalizer } from '../src/controller/finalizers.ts';
import { setCondition } from '../src/status/conditions.ts';
import { FakeClient } from '../src/testing/fake-client.ts';

const cm = (name: string, data: Record<string, string> = {}, labels: Record<string, string> = {}): KubeObject => ({ metadata: { name, namespace: 'ns', labels }, data });

describe('fake client', () => {
  it('bumps generation only on spec changes and rejects stale replaces with Conflict', async () => {
    const fake = new FakeClient();
    const created = await fake.create(Kinds.ConfigMap, cm('a', { k: '1' }));
    assert.equal(created.metadata.generation, 1);
    const statusOnly = await fake.patchStatus(Kinds.ConfigMap, 'a', 'ns', { status: { seen: true } });
    assert.equal(statusOnly.metadata.generation, 1);
    const labelled = await fake.patch(Kinds.ConfigMap, 'a', 'ns', { metadata: { labels: { x: 'y' } } });
    assert.equal(labelled.metadata.generation, 1, 'metadata changes do not bump generation');
    const changed = await fake.replace(Kinds.ConfigMap, { ...labelled, data: { k: '2' } });
    assert.equal(changed.metadata.generation, 2);
    await assert.rejects(fake.replace(Kinds.ConfigMap, { ...created, data: { k: '3' } }), (err) => isApiError(err, 'Conflict'));
    await assert.rejects(fake.create(Kinds.ConfigMap, cm('a')), (err) => isApiError(err, 'AlreadyExists'));
    await assert.rejects(fake.get(Kinds.ConfigMap, 'nope', 'ns'), (err) => isApiError(err, 'NotFound'));
  });

  it('lists by label selector and records every write', async () => {
    const fake = new FakeClient();
    await fake.create(Kinds.ConfigMap, cm('a', {}, { app: 'x' }));
    await fake.create(Kinds.ConfigMap, cm('b', {}, { app: 'y' }));
    const { items } = await fake.list(Kinds.ConfigMap, { namespace: 'ns', labelSelector: 'app=x' });
    assert.deepEqual(items.map((o) => o.metadata.name), ['a']);
    assert.deepEqual(fake.writes.map((w) => `${w.verb} ${w.key}`), ['create ns/a', 'create ns/b']);
  });
});

describe('finalizers', () => {
  it('add and remove only our own entry, and deletion completes when the last finalizer goes', async () => {
    const fake = new FakeClient();
    fake.seed(Kinds.ConfigMap, { metadata: { name: 'a', namespace: 'ns', finalizers: ['other.io/keep'] } });
    let obj = await fake.get(Kinds.ConfigMap, 'a', 'ns');
    obj = await addFinalizer(fake, Kinds.ConfigMap, obj, 'ours.io/cleanup');
    assert.deepEqual(obj.metadata.finalizers, ['other.io/keep', 'ours.io/cleanup']);
    const again = await addFinalizer(fake, Kinds.ConfigMap, obj, 'ours.io/cleanup');
    assert.equal(again, obj, 'adding twice writes nothing');
    await fake.delete(Kinds.ConfigMap, 'a', 'ns');
    obj = await fake.get(Kinds.ConfigMap, 'a', 'ns');
    assert.ok(obj.metadata.deletionTimestamp, 'deletion waits for finalizers');
    obj = await removeFinalizer(fake, Kinds.ConfigMap, obj, 'ours.io/cleanup');
    assert.deepEqual(obj.metadata.finalizers, ['other.io/keep'], "another party's finalizer stays");
  });

  it('a remove based on a stale list fails instead of dropping someone else', async () => {
    const fake = new FakeClient();
    fake.seed(Kinds.ConfigMap, { metadata: { name: 'a', namespace: 'ns', finalizers: ['ours.io/cleanup', 'b.io/x'] } });
    const stale = await fake.get(Kinds.ConfigMap, 'a', 'ns');
    await fake.patch(Kinds.ConfigMap, 'a', 'ns', [{ op: 'remove', path: '/metadata/finalizers/0' }], 'json');
    await assert.rejects(removeFinalizer(fake, Kinds.ConfigMap, stale, 'ours.io/cleanup'));
    assert.deepEqual((await fake.get(Kinds.ConfigMap, 'a', 'ns')).metadata.finalizers, ['b.io/x']);
  });
});

describe('conditions', () => {
  it('move lastTransitionTime only when the status changes', () => {
    const t1 = new Date('2026-01-01T00:00:00Z');
    const t2 = new Date('2026-01-01T01:00:00Z');
    let list = setCondition([], { type: 'Ready', status: 'False', reason: 'Starting', message: 'starting' }, t1);
    list = setCondition(list, { type: 'Ready', status: 'False', reason: 'StillStarting', message: 'still' }, t2);
    assert.equal(list[0]!.lastTransitionTime, '2026-01-01T00:00:00Z');
    assert.equal(list[0]!.reason, 'StillStarting');
    list = setCondition(list, { type: 'Ready', status: 'True', reason: 'Ready', message: 'ok' }, t2);
    assert.equal(list[0]!.lastTransitionTime, '2026-01-01T01:00:00Z');
    assert.equal(list.length, 1);
  });
});
