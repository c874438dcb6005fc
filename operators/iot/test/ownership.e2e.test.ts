/**
 * Namespace ownership on the real cluster: an instance namespace is the operator's only when it
 * carries the instance labels and the owning IoTService's UID. A namespace someone merely
 * labelled is never adopted or deleted; a namespace whose IoTService is gone (its finalizer was
 * removed by hand while no operator ran) is deleted on startup with a Warning Event, and nothing
 * else is touched.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { createLandscape, getIoT, getOrUndefined, iotService, iotTestEnv, startOperator, stopOperator, waitForPhase } from './e2e-support.ts';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';

let env: TestEnv;
const operators: Array<{ mgr: Manager; landscape: string }> = [];
const strayNamespaces: string[] = [];

before(async () => (env = await iotTestEnv()));

after(async () => {
  for (const { mgr, landscape } of operators) await stopOperator(env, landscape, mgr);
  for (const name of strayNamespaces) await env.client.delete(Kinds.Namespace, name).catch(() => undefined);
  await env?.cleanup();
});

/** The three labels the operator puts on an instance namespace, without the owner UID. */
function instanceLabels(landscape: string, id: string): Record<string, string> {
  return { 'app.kubernetes.io/managed-by': 'iot-operator', 'cp.iotservices.io/landscape': landscape, 'cp.iotservices.io/instance': id };
}

async function createLabelledNamespace(name: string, labels: Record<string, string>): Promise<void> {
  await env.client.create(Kinds.Namespace, { metadata: { name, labels } });
  strayNamespaces.push(name);
  await env.client.create(Kinds.ConfigMap, { metadata: { name: 'precious', namespace: name }, data: { keep: 'me' } });
}

async function notTerminating(name: string): Promise<KubeObject> {
  const ns = await env.client.get<KubeObject>(Kinds.Namespace, name);
  assert.equal(ns.metadata.deletionTimestamp, undefined, `namespace ${name} is not being deleted`);
  assert.ok(await getOrUndefined(env, Kinds.ConfigMap, 'precious', name), `the content of ${name} is untouched`);
  return ns;
}

describe('instance namespace ownership', () => {
  it('a namespace merely labelled as the instance’s is never adopted, and survives the IoTService’s deletion', async () => {
    const landscape = await createLandscape(env);
    operators.push({ mgr: await startOperator(env, landscape), landscape });
    const name = `${landscape}-tenant-l`;
    await createLabelledNamespace(name, instanceLabels(landscape, 'tenant-l'));

    await env.client.create(IoTServiceV1alpha1Type, iotService('tenant-l', landscape));
    const failed = await waitForPhase(env, landscape, 'tenant-l', 'Failed', 60_000);
    assert.equal(failed.status?.conditions?.find((c) => c.type === 'Degraded')?.reason, 'NamespaceNotOwned');
    assert.match(failed.status?.reason ?? '', new RegExp(`Namespace ${name} already exists and was not created by this operator for this IoTService`));
    assert.match(failed.status?.reason ?? '', /cp\.iotservices\.io\/owner-uid/);
    const ns = await notTerminating(name);
    assert.equal(ns.metadata.annotations?.['cp.iotservices.io/owner-uid'], undefined, 'the namespace was not claimed');
    assert.deepEqual((await env.client.list(Kinds.Deployment, { namespace: name })).items, [], 'nothing was created in it');

    await env.client.delete(IoTServiceV1alpha1Type, 'tenant-l', landscape);
    await waitFor('the IoTService to be gone', async () => ({ done: !(await getIoT(env, landscape, 'tenant-l')), value: undefined }));
    await notTerminating(name);
  });

  it('on startup an instance namespace whose IoTService is gone is deleted with a Warning Event; nothing else is touched', async () => {
    const landscape = await createLandscape(env);
    const first = await startOperator(env, landscape);
    operators.push({ mgr: first, landscape }); // stopped below; stopping again is harmless
    await env.client.create(IoTServiceV1alpha1Type, iotService('tenant-o', landscape));
    await env.client.create(IoTServiceV1alpha1Type, iotService('tenant-k', landscape));
    await waitForPhase(env, landscape, 'tenant-o', 'Available');
    await waitForPhase(env, landscape, 'tenant-k', 'Available');
    const orphan = await env.client.get<KubeObject>(Kinds.Namespace, `${landscape}-tenant-o`);
    const ownerUid = orphan.metadata.annotations?.['cp.iotservices.io/owner-uid'];
    assert.equal(ownerUid, (await getIoT(env, landscape, 'tenant-o'))?.metadata.uid, 'the namespace records its IoTService’s UID');
    await first.stop();

    // While no operator runs, someone removes the finalizer by hand and deletes the IoTService.
    await env.client.patch(IoTServiceV1alpha1Type, 'tenant-o', landscape, { metadata: { finalizers: null } }, 'merge');
    await env.client.delete(IoTServiceV1alpha1Type, 'tenant-o', landscape);
    await waitFor('the IoTService to be gone', async () => ({ done: !(await getIoT(env, landscape, 'tenant-o')), value: undefined }));
    // Bystanders: a namespace merely labelled for this landscape, and one claiming an owner UID
    // under a name that does not match its instance label.
    await createLabelledNamespace(`${landscape}-labelled`, instanceLabels(landscape, 'labelled'));
    await createLabelledNamespace(`${landscape}-misnamed`, instanceLabels(landscape, 'tenant-o'));
    await env.client.patch(Kinds.Namespace, `${landscape}-misnamed`, undefined, { metadata: { annotations: { 'cp.iotservices.io/owner-uid': ownerUid } } }, 'merge');

    operators.push({ mgr: await startOperator(env, landscape), landscape });
    await waitFor(`orphaned namespace ${landscape}-tenant-o to be deleted`, async () => {
      const ns = await getOrUndefined(env, Kinds.Namespace, `${landscape}-tenant-o`);
      return { done: !ns || !!ns.metadata.deletionTimestamp, value: undefined, seen: ns ? 'present' : 'gone' };
    });
    const events = await waitFor('a Warning Event on the orphaned namespace', async () => {
      const list = await env.client.list(Kinds.Event, { namespace: 'default', fieldSelector: `involvedObject.kind=Namespace,involvedObject.name=${landscape}-tenant-o` });
      return { done: list.items.length > 0, value: list.items as Array<KubeObject & { type?: string; reason?: string; message?: string }> };
    });
    assert.equal(events[0]!.type, 'Warning');
    assert.equal(events[0]!.reason, 'OrphanedNamespaceDeleted');
    assert.match(events[0]!.message ?? '', new RegExp(`IoTService ${landscape}/tenant-o with UID ${ownerUid}.*no longer exists`));

    await notTerminating(`${landscape}-labelled`);
    await notTerminating(`${landscape}-misnamed`);
    const kept = await env.client.get<KubeObject>(Kinds.Namespace, `${landscape}-tenant-k`);
    assert.equal(kept.metadata.deletionTimestamp, undefined, 'the namespace of an existing IoTService is kept');
    assert.equal((await getIoT(env, landscape, 'tenant-k'))?.status?.phase, 'Available');
  });
});
