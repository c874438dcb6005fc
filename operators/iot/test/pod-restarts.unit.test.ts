/**
 * The pods the IoT operator restarts (src/pod-restarts.ts) and the reconcile that does it, on the
 * runtime's in-memory fake (reconcile logic only; real-failures.e2e shows both on the real node):
 * once the copy of the image-pull-secret changed, the pods waiting for their image are deleted
 * and a `PodsRestarted` Event names them — running pods and pods merely starting are left alone,
 * and nothing is deleted while the secret is unchanged; a StatefulSet pod stuck (no image, crash
 * loop) on an earlier revision than the StatefulSet's update revision is deleted, one stuck on the
 * current revision or still starting on the old one is not.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod, V1StatefulSet } from '@kubernetes/client-node';
import { Kinds, type KubeObject } from '@iot-operator/runtime';
import { FakeClient } from '@iot-operator/runtime/testing';
import { iotReconciler } from '../src/controller.ts';
import { IoTServiceType } from '../src/iotservice-types.ts';
import { podsBlockingStatefulSetRollouts, podsWaitingForImages } from '../src/pod-restarts.ts';
import { iotService, TEST_CONFIG } from './fixtures.ts';

const NS = 'devawsk8s-tenant-a';
const T0 = '2026-01-01T10:00:00Z';

type Shape = { waiting?: string; ready?: boolean; revision?: string; deleting?: boolean; exited?: number };

function pod(name: string, shape: Shape): V1Pod & KubeObject {
  const ready = shape.ready ?? false;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: NS,
      uid: `uid-${name}`,
      labels: { 'app.kubernetes.io/managed-by': 'iot-operator', 'cp.iotservices.io/landscape': 'devawsk8s', 'cp.iotservices.io/instance': 'tenant-a', ...(shape.revision ? { 'controller-revision-hash': shape.revision } : {}) },
      ...(shape.deleting ? { deletionTimestamp: T0 as never } : {}),
    },
    spec: { containers: [{ name: name.split('-')[0]!, image: 'registry.example.com/iot/iot-broker:2.4.1' }] },
    status: {
      phase: ready ? 'Running' : 'Pending',
      conditions: [
        { type: 'ContainersReady', status: ready ? 'True' : 'False', lastTransitionTime: T0 as unknown as Date },
        { type: 'Ready', status: ready ? 'True' : 'False', lastTransitionTime: T0 as unknown as Date },
      ],
      containerStatuses: [
        {
          name: name.split('-')[0]!,
          image: 'registry.example.com/iot/iot-broker:2.4.1',
          imageID: '',
          ready,
          restartCount: 0,
          state: shape.waiting ? { waiting: { reason: shape.waiting } } : shape.exited !== undefined ? { terminated: { exitCode: shape.exited } } : { running: {} },
        },
      ],
    },
  };
}

const names = (pods: readonly V1Pod[]) => pods.map((p) => p.metadata?.name);

describe('which pods are restarted', () => {
  it('after the image-pull-secret changed: the pods waiting for their image, not those running, starting or being deleted', () => {
    const pods = [
      pod('gateway-a', { waiting: 'ImagePullBackOff' }),
      pod('core-a', { waiting: 'ErrImagePull' }),
      pod('core-b', { ready: true }),
      pod('processing-a', { waiting: 'ContainerCreating' }),
      pod('broker-0', { waiting: 'ImagePullBackOff', deleting: true }),
    ];
    assert.deepEqual(names(podsWaitingForImages(pods)), ['core-a', 'gateway-a']);
  });

  it('of a StatefulSet rolling out: its pods stuck on an earlier revision, not those of the update revision or still starting', () => {
    const sets: V1StatefulSet[] = [
      { metadata: { name: 'broker' }, status: { replicas: 2, currentRevision: 'broker-old', updateRevision: 'broker-new' } },
      { metadata: { name: 'database' }, status: { replicas: 1, currentRevision: 'database-1', updateRevision: 'database-1' } },
    ];
    const pods = [
      pod('broker-0', { waiting: 'ImagePullBackOff', revision: 'broker-old' }),
      pod('broker-1', { exited: 1, revision: 'broker-old' }),
      pod('broker-2', { waiting: 'ImagePullBackOff', revision: 'broker-new' }),
      pod('broker-3', { waiting: 'ContainerCreating', revision: 'broker-old' }),
      pod('broker-4', { ready: true, revision: 'broker-old' }),
      pod('database-0', { waiting: 'CrashLoopBackOff', revision: 'database-1' }),
      pod('brokerage-0', { waiting: 'ImagePullBackOff', revision: 'other' }),
    ];
    assert.deepEqual(names(podsBlockingStatefulSetRollouts(sets, pods)), ['broker-0', 'broker-1']);
  });
});

describe('the reconcile restarts them', () => {
  function setup() {
    const cluster = new FakeClient();
    cluster.seed(Kinds.Secret, { metadata: { name: 'image-pull-secret', namespace: TEST_CONFIG.operatorName }, type: 'kubernetes.io/dockerconfigjson', data: { '.dockerconfigjson': 'e30=' } });
    cluster.seed(IoTServiceType, iotService('tenant-a', { version: '2.4.1' }) as unknown as KubeObject);
    const events: string[] = [];
    const ctx = { ...cluster.reconcileContext(), recorder: { event: (_o: KubeObject, type: string, reason: string, message: string) => void events.push(`${type} ${reason}: ${message}`), flush: async () => undefined } };
    const reconciler = iotReconciler({ ...TEST_CONFIG, watchNamespace: '', maxConcurrentReconciles: 1 });
    const reconcile = () => reconciler({ namespace: TEST_CONFIG.operatorName, name: 'tenant-a' }, ctx);
    const deleted = () => cluster.writes.filter((w) => w.verb === 'delete' && w.kind === 'Pod').map((w) => w.key);
    return { cluster, reconcile, events, deleted };
  }

  it('deletes the pods waiting for their image once the landscape secret changed, and says so in an Event', async () => {
    const { cluster, reconcile, events, deleted } = setup();
    await reconcile();
    cluster.seed(Kinds.Pod, pod('gateway-a', { waiting: 'ImagePullBackOff' }), pod('core-a', { ready: true }));
    await reconcile();
    assert.deepEqual(deleted(), [], 'nothing while the secret is unchanged');

    const source = cluster.peek(Kinds.Secret, 'image-pull-secret', TEST_CONFIG.operatorName)!;
    await cluster.replace(Kinds.Secret, { ...source, data: { '.dockerconfigjson': Buffer.from('{"auths":{}}').toString('base64') } } as KubeObject);
    await reconcile();
    assert.deepEqual(deleted(), [`${NS}/gateway-a`]);
    assert.equal(cluster.peek(Kinds.Pod, 'core-a', NS)?.metadata.name, 'core-a', 'the running pod stays');
    assert.deepEqual(events.filter((e) => e.includes('PodsRestarted')), ['Normal PodsRestarted: Restarted pod gateway-a: it waited to pull an image, now with the changed image-pull-secret.']);
  });

  it('deletes a StatefulSet pod stuck on an earlier revision, also while nothing else changed', async () => {
    const { cluster, reconcile, deleted } = setup();
    await reconcile();
    await cluster.patchStatus(Kinds.StatefulSet, 'broker', NS, { status: { replicas: 1, currentRevision: 'broker-old', updateRevision: 'broker-new' } });
    cluster.seed(Kinds.Pod, pod('broker-0', { waiting: 'ImagePullBackOff', revision: 'broker-old' }));
    await reconcile();
    assert.deepEqual(deleted(), [`${NS}/broker-0`]);
  });
});
