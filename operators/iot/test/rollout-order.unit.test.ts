/**
 * The order an instance's workloads roll in (rollout-order.ts): during an upgrade the StatefulSets
 * (broker, database) are written first and the Deployments (gateway, core, processing) only once
 * the StatefulSets are rolled out — their controller reports the current generation, every
 * replica on the update revision and ready. Shown on the pure functions and on the reconcile
 * against the runtime's in-memory fake client, whose StatefulSets report what a test sets.
 * A new instance starts all its workloads at once, and a change that rolls no pod (replicas) is
 * never held back.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Deployment, V1StatefulSet } from '@kubernetes/client-node';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { FakeClient } from '@iot-operator/runtime/testing';
import type { IoTService } from '../src/api/iotservice.ts';
import { iotReconciler } from '../src/controller.ts';
import { IoTServiceType } from '../src/iotservice-types.ts';
import { heldBackDeployments, rollsPods, statefulSetRolledOut } from '../src/rollout-order.ts';
import { iotService, TEST_CONFIG } from './fixtures.ts';

const NAMESPACE = 'devawsk8s-tenant-a';

type Set_ = V1StatefulSet & KubeObject;

function statefulSet(image: string, status: V1StatefulSet['status'], generation = 2): Set_ {
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'database', namespace: NAMESPACE, generation },
    spec: { replicas: 1, serviceName: 'database', selector: { matchLabels: { a: 'b' } }, template: { spec: { containers: [{ name: 'database', image }] } } },
    ...(status ? { status } : {}),
  };
}

const rolledOut = { observedGeneration: 2, replicas: 1, readyReplicas: 1, updatedReplicas: 1, currentRevision: 'database-2', updateRevision: 'database-2' };

describe('rollout order: the pure rules', () => {
  it('a StatefulSet is rolled out only when it matches, its controller saw this generation and every replica is updated and ready', () => {
    const desired = statefulSet('db:2.5.0', undefined);
    assert.equal(statefulSetRolledOut({ name: 'database', desired, observed: statefulSet('db:2.5.0', rolledOut) }), true);
    assert.equal(statefulSetRolledOut({ name: 'database', desired, observed: undefined }), false, 'missing');
    assert.equal(statefulSetRolledOut({ name: 'database', desired, observed: statefulSet('db:2.4.1', rolledOut) }), false, 'still the old template');
    for (const [what, status] of [
      ['generation not observed yet', { ...rolledOut, observedGeneration: 1 }],
      ['pod still on the old revision', { ...rolledOut, currentRevision: 'database-1' }],
      ['replacement not ready (restarting on its volume)', { ...rolledOut, readyReplicas: 0 }],
      ['replacement not updated', { ...rolledOut, updatedReplicas: 0 }],
      ['a surplus pod', { ...rolledOut, replicas: 2 }],
      ['no status yet', undefined],
    ] as const) {
      assert.equal(statefulSetRolledOut({ name: 'database', desired, observed: statefulSet('db:2.5.0', status) }), false, what);
    }
  });

  it('an OnDelete StatefulSet (three database replicas) is rolled out once every replica is updated, its currentRevision never advancing', () => {
    const onDelete = (status: V1StatefulSet['status']): Set_ => {
      const set = statefulSet('db:2.5.0', status);
      return { ...set, spec: { ...set.spec!, replicas: 3, updateStrategy: { type: 'OnDelete' } } };
    };
    const desired = onDelete(undefined);
    // As the StatefulSet controller reports it (Kubernetes 1.33) once the last old pod was replaced.
    const replaced = { observedGeneration: 2, replicas: 3, readyReplicas: 3, updatedReplicas: 3, currentRevision: 'database-1', updateRevision: 'database-2' };
    assert.equal(statefulSetRolledOut({ name: 'database', desired, observed: onDelete(replaced) }), true);
    assert.equal(statefulSetRolledOut({ name: 'database', desired, observed: onDelete({ ...replaced, updatedReplicas: 2 }) }), false, 'the primary not replaced yet');
    assert.equal(statefulSetRolledOut({ name: 'database', desired, observed: onDelete({ ...replaced, readyReplicas: 2 }) }), false, 'the last replacement not ready');
  });

  it('a Deployment waits only when it exists and its pod template would change, while a StatefulSet is not rolled out', () => {
    const deployment = (image: string, replicas = 1): V1Deployment => ({ spec: { replicas, selector: {}, template: { spec: { containers: [{ name: 'core', image }] } } } });
    const notRolled = [{ name: 'database', desired: statefulSet('db:2.5.0', undefined), observed: statefulSet('db:2.4.1', rolledOut) }];
    const rolled = [{ name: 'database', desired: statefulSet('db:2.5.0', undefined), observed: statefulSet('db:2.5.0', rolledOut) }];
    const upgrade = { name: 'core', desired: deployment('core:2.5.0'), observed: deployment('core:2.4.1') };
    assert.equal(rollsPods(upgrade), true);
    assert.deepEqual(heldBackDeployments(notRolled, [upgrade]), { held: ['core'], waitingFor: ['database'] });
    assert.deepEqual(heldBackDeployments(rolled, [upgrade]), { held: [], waitingFor: [] });
    assert.deepEqual(heldBackDeployments(notRolled, [{ name: 'core', desired: deployment('core:2.5.0'), observed: undefined }]), { held: [], waitingFor: [] }, 'created at once');
    assert.deepEqual(heldBackDeployments(notRolled, [{ name: 'core', desired: deployment('core:2.4.1', 3), observed: deployment('core:2.4.1', 1) }]), { held: [], waitingFor: [] }, 'scaling rolls no pod');
  });
});

describe('rollout order: the reconcile', () => {
  function setup() {
    const cluster = new FakeClient();
    cluster.seed(Kinds.Secret, { metadata: { name: 'image-pull-secret', namespace: TEST_CONFIG.operatorName }, type: 'kubernetes.io/dockerconfigjson', data: { '.dockerconfigjson': 'e30=' } });
    cluster.seed(IoTServiceType, iotService('tenant-a', { version: '2.4.1' }) as unknown as KubeObject);
    const reconciler = iotReconciler({ ...TEST_CONFIG, watchNamespace: '', maxConcurrentReconciles: 1 });
    const reconcile = () => reconciler({ namespace: TEST_CONFIG.operatorName, name: 'tenant-a' }, cluster.reconcileContext());
    const image = (kind: 'Deployment' | 'StatefulSet', name: string) =>
      cluster.peek<(V1Deployment | V1StatefulSet) & KubeObject>(kind === 'Deployment' ? Kinds.Deployment : Kinds.StatefulSet, name, NAMESPACE)?.spec?.template.spec?.containers[0]?.image;
    /** What the StatefulSet controller reports once it has rolled the current template out. */
    const rollOut = async (name: string) => {
      const set = cluster.peek<Set_>(Kinds.StatefulSet, name, NAMESPACE)!;
      const revision = `${name}-${set.metadata.generation}`;
      await cluster.patchStatus(Kinds.StatefulSet, name, NAMESPACE, {
        status: { observedGeneration: set.metadata.generation, replicas: 1, readyReplicas: 1, updatedReplicas: 1, currentRevision: revision, updateRevision: revision },
      });
    };
    const upgrade = async (version: string) => {
      const iot = cluster.peek<IoTService & KubeObject>(IoTServiceType, 'tenant-a', TEST_CONFIG.operatorName)!;
      await cluster.replace(IoTServiceType, { ...iot, spec: { ...iot.spec, version } } as unknown as KubeObject);
    };
    const phase = () => cluster.peek<IoTService & KubeObject>(IoTServiceType, 'tenant-a', TEST_CONFIG.operatorName)?.status?.phase;
    return { reconcile, image, rollOut, upgrade, phase };
  }

  it('creates every workload at once; on an upgrade rolls database and broker first and the Deployments once both are rolled out', async () => {
    const { reconcile, image, rollOut, upgrade, phase } = setup();
    await reconcile();
    for (const name of ['gateway', 'core', 'processing']) assert.match(image('Deployment', name) ?? '', /:2\.4\.1$/, `${name} created with the StatefulSets not yet ready`);
    await rollOut('database');
    await rollOut('broker');

    await upgrade('2.5.0');
    await reconcile();
    assert.match(image('StatefulSet', 'database') ?? '', /:2\.5\.0$/);
    assert.match(image('StatefulSet', 'broker') ?? '', /:2\.5\.0$/);
    for (const name of ['gateway', 'core', 'processing']) assert.match(image('Deployment', name) ?? '', /:2\.4\.1$/, `${name} waits for the StatefulSets`);
    assert.equal(phase(), 'Processing');

    await rollOut('database');
    await reconcile();
    for (const name of ['gateway', 'core', 'processing']) assert.match(image('Deployment', name) ?? '', /:2\.4\.1$/, `${name} waits for the broker too`);

    await rollOut('broker');
    await reconcile();
    for (const name of ['gateway', 'core', 'processing']) assert.match(image('Deployment', name) ?? '', /:2\.5\.0$/, `${name} rolled once both are`);
  });
});
