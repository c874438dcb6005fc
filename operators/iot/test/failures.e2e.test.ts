import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApiError, Kinds, type KubeObject, type Manager } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { createLandscape, createPullSecret, getIoT, getOrUndefined, iotService, iotTestEnv, startOperator, stopOperator, waitForPhase } from './e2e-support.ts';
import { IoTServiceType, IoTServiceV1alpha1Type, StorageClassType } from '../src/iotservice-types.ts';

let env: TestEnv;
const operators: Array<{ mgr: Manager; landscape: string }> = [];

before(async () => (env = await iotTestEnv()));

after(async () => {
  for (const { mgr, landscape } of operators) await stopOperator(env, landscape, mgr);
  await env?.cleanup();
});

async function landscapeWithOperator(withSecret = true, watchNamespace = ''): Promise<string> {
  const landscape = await createLandscape(env, withSecret);
  operators.push({ mgr: await startOperator(env, landscape, { watchNamespace }), landscape });
  return landscape;
}

describe('bad input on the real cluster', () => {
  it('schema-invalid specs are rejected by the API server with a message naming the field', async () => {
    const landscape = await createLandscape(env);
    const alpha = 'cp.iotservices.io/v1alpha1';
    const beta = 'cp.iotservices.io/v1beta1';
    const cases: Array<[string, string, Record<string, unknown>, RegExp]> = [
      ['missing version', alpha, { gateway: { replicas: 1 } }, /spec\.version: Required value/],
      ['replicas out of range', alpha, { version: '1.0.0', gateway: { replicas: 99 } }, /spec\.gateway\.replicas: Invalid value: 99/],
      ['unknown protocol', alpha, { version: '1.0.0', gateway: { protocols: ['ftp'] } }, /spec\.gateway\.protocols\[0\]: Unsupported value: "ftp"/],
      ['malformed storage quantity', alpha, { version: '1.0.0', broker: { storage: 'lots' } }, /spec\.broker\.storage/],
      // The CRD types affinity in v1beta1 only (crd-schema.ts); v1alpha1's is the operator's to check (below).
      [
        'unknown node affinity operator',
        beta,
        { version: '1.0.0', gateway: { placement: { affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'Near', values: ['node-000000'] }] }] } } } } } },
        /spec\.gateway\.placement\.affinity\.nodeAffinity\.requiredDuringSchedulingIgnoredDuringExecution\.nodeSelectorTerms\[0\]\.matchExpressions\[0\]\.operator: Unsupported value: "Near"/,
      ],
      [
        'affinity weight out of range',
        beta,
        { version: '1.0.0', core: { placement: { affinity: { podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 101, podAffinityTerm: { topologyKey: 'kubernetes.io/hostname' } }] } } } } },
        /spec\.core\.placement\.affinity\.podAntiAffinity\.preferredDuringSchedulingIgnoredDuringExecution\[0\]\.weight: Invalid value: 101/,
      ],
      [
        'pod affinity term without topologyKey',
        beta,
        { version: '1.0.0', broker: { placement: { affinity: { podAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ labelSelector: { matchLabels: { app: 'x' } } }] } } } } },
        /spec\.broker\.placement\.affinity\.podAffinity\.requiredDuringSchedulingIgnoredDuringExecution\[0\]\.topologyKey: Required value/,
      ],
      ['unknown toleration operator', alpha, { version: '1.0.0', database: { tolerations: [{ key: 'dedicated', operator: 'Is' }] } }, /spec\.database\.tolerations\[0\]\.operator: Unsupported value: "Is"/],
    ];
    for (const [what, apiVersion, spec, message] of cases) {
      await assert.rejects(
        env.client.create(apiVersion === alpha ? IoTServiceV1alpha1Type : IoTServiceType, { apiVersion, kind: 'IoTService', metadata: { name: 'bad', namespace: landscape }, spec }),
        (err: unknown) => {
          assert.ok(err instanceof ApiError, `${what}: expected an ApiError`);
          assert.equal(err.reason, 'Invalid', `${what}: reason`);
          assert.match(err.message, message, `${what}: message`);
          return true;
        },
      );
    }
    assert.equal((await env.client.list(IoTServiceV1alpha1Type, { namespace: landscape })).items.length, 0, 'nothing was stored');
  });

  it('an affinity the API server does not check (v1alpha1\'s, a label selector): stored as written, Failed InvalidSpec naming the field, nothing created', async () => {
    const landscape = await landscapeWithOperator();
    const weight = { podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 101, podAffinityTerm: { topologyKey: 'kubernetes.io/hostname' } }] } };
    await env.client.create(IoTServiceV1alpha1Type, iotService('tenant-w', landscape, { core: { affinity: weight } } as never));
    const selector = { podAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: 'kubernetes.io/hostname', labelSelector: { matchExpressions: [{ key: 'app', operator: 'in', values: ['x'] }] } }] } };
    await env.client.create(IoTServiceType, { apiVersion: 'cp.iotservices.io/v1beta1', kind: 'IoTService', metadata: { name: 'tenant-l', namespace: landscape }, spec: { version: '2.4.1', broker: { placement: { affinity: selector } } } });
    const cases: Array<[string, string]> = [
      ['tenant-w', 'spec.core.placement.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: must be an integer from 1 to 100'],
      ['tenant-l', 'spec.broker.placement.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator: must be one of In, NotIn, Exists, DoesNotExist'],
    ];
    for (const [name, error] of cases) {
      const failed = await waitForPhase(env, landscape, name, 'Failed');
      assert.equal(failed.status?.reason, `The spec is invalid: ${error}.`, name);
      assert.equal(failed.status?.conditions?.find((c) => c.type === 'Degraded')?.reason, 'InvalidSpec', name);
    }
    assert.deepEqual((await getIoT(env, landscape, 'tenant-w'))?.spec.core?.affinity, weight, 'v1alpha1 reads it back as written');
    const namespaces = await env.client.list(Kinds.Namespace, { labelSelector: `cp.iotservices.io/landscape=${landscape}` });
    assert.deepEqual(namespaces.items.map((n) => n.metadata.name), [], 'no namespace was created');
  });

  it('an instance name too long for its namespace: Failed with a reason naming the limit, nothing created', async () => {
    const landscape = await landscapeWithOperator();
    const name = `tenant-${'x'.repeat(60)}`;
    await env.client.create(IoTServiceV1alpha1Type, iotService(name, landscape));
    const iot = await waitForPhase(env, landscape, name, 'Failed');
    assert.match(iot.status?.reason ?? '', /63/);
    assert.match(iot.status?.reason ?? '', new RegExp(landscape));
    const namespaces = await env.client.list(Kinds.Namespace, { labelSelector: `cp.iotservices.io/landscape=${landscape}` });
    assert.deepEqual(namespaces.items.map((n) => n.metadata.name), [], 'no namespace was created');
    const events = await env.client.list(Kinds.Event, { namespace: landscape, fieldSelector: `involvedObject.name=${name},type=Warning` });
    assert.ok(events.items.length >= 1, 'a Warning Event explains the failure');
  });

  it('a missing image-pull-secret: Failed naming the secret and namespace, recovers once it is created', async () => {
    const landscape = await landscapeWithOperator(false);
    await env.client.create(IoTServiceV1alpha1Type, iotService('tenant-s', landscape));
    const failed = await waitForPhase(env, landscape, 'tenant-s', 'Failed');
    assert.match(failed.status?.reason ?? '', /image-pull-secret/);
    assert.match(failed.status?.reason ?? '', new RegExp(`namespace ${landscape}`));
    await createPullSecret(env, landscape);
    const recovered = await waitForPhase(env, landscape, 'tenant-s', 'Available');
    assert.equal(recovered.status?.reason, undefined, 'reason is cleared when no longer Failed');
  });

  it('a database claim naming a StorageClass that does not exist: Failed at once naming the claim and the class; Processing again once the class exists', async () => {
    const landscape = await landscapeWithOperator();
    const className = `no-such-class-${landscape}`;
    await env.client.create(IoTServiceV1alpha1Type, iotService('tenant-v', landscape, { database: { replicas: 1, storage: '1Gi', storageClassName: className } }));
    const failed = await waitForPhase(env, landscape, 'tenant-v', 'Failed', 120_000);
    assert.match(
      failed.status?.reason ?? '',
      new RegExp(`^PersistentVolumeClaim data-database-0 cannot be provisioned: StorageClass ${className} \\(spec\\.database\\.storageClassName\\) does not exist`),
    );
    assert.equal(failed.status?.conditions?.find((c) => c.type === 'Degraded')?.reason, 'StorageClassNotFound');
    // Created, the class is found: the claim waits for a volume (none is offered), no longer Failed.
    await env.client.create(StorageClassType, { metadata: { name: className }, provisioner: 'kubernetes.io/no-provisioner', volumeBindingMode: 'WaitForFirstConsumer' });
    try {
      const processing = await waitForPhase(env, landscape, 'tenant-v', 'Processing', 120_000);
      assert.equal(processing.status?.reason, undefined);
    } finally {
      await env.client.delete(StorageClassType, className);
    }
  });

  it('a foreign namespace of the same name: Failed, never adopted or deleted; recovers once it is gone', async () => {
    const landscape = await landscapeWithOperator();
    const foreign = `${landscape}-tenant-f`;
    await env.client.create(Kinds.Namespace, { metadata: { name: foreign, labels: { team: 'someone-else' } } });
    await env.client.create(Kinds.ConfigMap, { metadata: { name: 'precious', namespace: foreign }, data: { keep: 'me' } });
    await env.client.create(IoTServiceV1alpha1Type, iotService('tenant-f', landscape));
    const failed = await waitForPhase(env, landscape, 'tenant-f', 'Failed');
    assert.match(failed.status?.reason ?? '', new RegExp(`Namespace ${foreign} already exists and was not created by this operator`));
    const ns = await env.client.get(Kinds.Namespace, foreign);
    assert.deepEqual(ns.metadata.labels?.['cp.iotservices.io/landscape'], undefined, 'the foreign namespace was not labelled');
    assert.ok(await getOrUndefined(env, Kinds.ConfigMap, 'precious', foreign), 'its content is untouched');
    assert.deepEqual((await env.client.list(Kinds.Deployment, { namespace: foreign })).items, [], 'nothing was created in it');

    await env.client.delete(Kinds.Namespace, foreign);
    await waitFor(`namespace ${foreign} to be gone`, async () => ({ done: !(await getOrUndefined(env, Kinds.Namespace, foreign)), value: undefined }), { timeoutMs: 120_000 });
    await waitForPhase(env, landscape, 'tenant-f', 'Available', 120_000);
  });

  it('deleting an instance whose namespace is foreign removes the finalizer and leaves the namespace alone', async () => {
    const landscape = await landscapeWithOperator();
    const foreign = `${landscape}-tenant-g`;
    await env.client.create(Kinds.Namespace, { metadata: { name: foreign } });
    await env.client.create(IoTServiceV1alpha1Type, iotService('tenant-g', landscape));
    await waitForPhase(env, landscape, 'tenant-g', 'Failed');
    await env.client.delete(IoTServiceV1alpha1Type, 'tenant-g', landscape);
    await waitFor('the IoTService to be gone', async () => ({ done: !(await getIoT(env, landscape, 'tenant-g')), value: undefined }));
    const ns = await env.client.get(Kinds.Namespace, foreign);
    assert.equal(ns.metadata.deletionTimestamp, undefined, 'the foreign namespace is not deleted');
    await env.client.delete(Kinds.Namespace, foreign);
  });

  it('WATCH_NAMESPACE set to another namespace: the instance is Failed with a reason saying how to fix it', async () => {
    const landscape = await landscapeWithOperator(true, 'elsewhere');
    await env.client.create(IoTServiceV1alpha1Type, iotService('tenant-w', landscape));
    const iot = await waitForPhase(env, landscape, 'tenant-w', 'Failed');
    assert.match(iot.status?.reason ?? '', /WATCH_NAMESPACE=elsewhere/);
    assert.match(iot.status?.reason ?? '', /WATCH_NAMESPACE=""/);
    assert.equal(await getOrUndefined(env, Kinds.Namespace, `${landscape}-tenant-w`), undefined, 'nothing was created');
  });

  it('two operators with different OPERATOR_NAME never touch each other’s instances', async () => {
    const landscapeA = await landscapeWithOperator();
    const landscapeB = await createLandscape(env);
    await env.client.create(IoTServiceV1alpha1Type, iotService('shared-name', landscapeA));
    await env.client.create(IoTServiceV1alpha1Type, iotService('shared-name', landscapeB));
    const a = await waitForPhase(env, landscapeA, 'shared-name', 'Available');
    assert.equal(a.status?.namespace, `${landscapeA}-shared-name`);
    await new Promise((r) => setTimeout(r, 2000));
    const b = await getIoT(env, landscapeB, 'shared-name');
    assert.equal(b?.status, undefined, 'the operator of landscape A left landscape B’s instance alone');
    assert.deepEqual(b?.metadata.finalizers ?? [], []);
    assert.equal(await getOrUndefined(env, Kinds.Namespace, `${landscapeB}-shared-name`), undefined);

    operators.push({ mgr: await startOperator(env, landscapeB), landscape: landscapeB });
    const bAvailable = await waitForPhase(env, landscapeB, 'shared-name', 'Available');
    assert.equal(bAvailable.status?.namespace, `${landscapeB}-shared-name`);
    const instanceA = await env.client.get<KubeObject>(Kinds.Namespace, `${landscapeA}-shared-name`);
    assert.equal(instanceA.metadata.labels?.['cp.iotservices.io/landscape'], landscapeA);

    await env.client.delete(IoTServiceV1alpha1Type, 'shared-name', landscapeB);
    await waitFor('landscape B’s instance namespace to be gone', async () => ({ done: !(await getOrUndefined(env, Kinds.Namespace, `${landscapeB}-shared-name`)), value: undefined }), { timeoutMs: 120_000 });
    const stillA = await getIoT(env, landscapeA, 'shared-name');
    assert.equal(stillA?.status?.phase, 'Available', 'deleting B’s instance left A’s alone');
    assert.ok(await getOrUndefined(env, Kinds.Namespace, `${landscapeA}-shared-name`));
  });
});
