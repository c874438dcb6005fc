import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Deployment, V1DeploymentCondition, V1Pod, V1StatefulSet } from '@kubernetes/client-node';
import type { IoTServiceStatus } from '../src/api/iotservice.ts';
import { imagePullSecretMissingFailure } from '../src/failure.ts';
import {
  computeStatus,
  msUntilStuckPodFailure,
  statusEqual,
  statusTransitionEvent,
  type ReconcileOutcome,
  type StatusInput,
} from '../src/status.ts';
import { testInstance } from './fixtures.ts';

const NS = 'devawsk8s-tenant-a';
const T0 = new Date('2026-01-01T10:00:00Z');
const minutes = (n: number) => new Date(T0.getTime() + n * 60_000);

interface WorkloadShape {
  replicas: number;
  ready?: number;
  updated?: number;
  total?: number;
  generation?: number;
  observedGeneration?: number;
}

function deployment(name: string, shape: WorkloadShape, conditions: V1DeploymentCondition[] = []): V1Deployment {
  const ready = shape.ready ?? shape.replicas;
  const updated = shape.updated ?? shape.replicas;
  return {
    metadata: { name, namespace: NS, generation: shape.generation ?? 1 },
    spec: { replicas: shape.replicas, selector: {}, template: {} },
    status: {
      observedGeneration: shape.observedGeneration ?? shape.generation ?? 1,
      replicas: shape.total ?? updated,
      updatedReplicas: updated,
      readyReplicas: ready,
      availableReplicas: ready,
      conditions,
    },
  };
}

function statefulSet(name: string, shape: WorkloadShape & { currentRevision?: string; updateRevision?: string }): V1StatefulSet {
  const ready = shape.ready ?? shape.replicas;
  return {
    metadata: { name, namespace: NS, generation: shape.generation ?? 1 },
    spec: { replicas: shape.replicas, selector: {}, serviceName: name, template: {} },
    status: {
      observedGeneration: shape.observedGeneration ?? shape.generation ?? 1,
      replicas: shape.total ?? shape.replicas,
      updatedReplicas: shape.updated ?? shape.replicas,
      readyReplicas: ready,
      currentRevision: shape.currentRevision ?? `${name}-1`,
      updateRevision: shape.updateRevision ?? `${name}-1`,
    },
  };
}

interface PodShape {
  phase?: string;
  waiting?: string;
  notReadySince?: Date;
  deleting?: boolean;
  image?: string;
}

function pod(name: string, shape: PodShape = {}): V1Pod {
  const ready = !shape.waiting && !shape.notReadySince;
  const transition = (shape.notReadySince ?? T0).toISOString() as unknown as Date; // JSON gives strings
  return {
    metadata: {
      name,
      namespace: NS,
      ...(shape.deleting ? { deletionTimestamp: T0.toISOString() as unknown as Date } : {}),
    },
    spec: { containers: [{ name: 'gateway', image: shape.image ?? 'registry.example.com/iot/iot-gateway:2.4.1' }] },
    status: {
      phase: shape.phase ?? 'Running',
      conditions: [
        { type: 'ContainersReady', status: ready ? 'True' : 'False', lastTransitionTime: transition },
        { type: 'Ready', status: ready ? 'True' : 'False', lastTransitionTime: transition },
      ],
      containerStatuses: [
        {
          name: 'gateway',
          image: shape.image ?? 'registry.example.com/iot/iot-gateway:2.4.1',
          imageID: '',
          ready,
          restartCount: 0,
          ...(shape.waiting ? { state: { waiting: { reason: shape.waiting, message: 'details vary' } } } : { state: { running: {} } }),
        },
      ],
    },
  };
}

/** Everything of the default spec (2+2+1+1+1 pods) rolled out and ready. */
function allReady(): { deployments: V1Deployment[]; statefulSets: V1StatefulSet[]; pods: V1Pod[] } {
  return {
    deployments: [deployment('gateway', { replicas: 2 }), deployment('core', { replicas: 2 }), deployment('processing', { replicas: 1 })],
    statefulSets: [statefulSet('broker', { replicas: 1 }), statefulSet('database', { replicas: 1 })],
    pods: ['gateway-a', 'gateway-b', 'core-a', 'core-b', 'processing-a', 'broker-0', 'database-0'].map((n) => pod(n)),
  };
}

const instance = testInstance();
const applied: ReconcileOutcome = { kind: 'applied', childrenMatched: true };

function status(overrides: Partial<StatusInput> = {}): IoTServiceStatus {
  return computeStatus({
    instance: { generation: 3, namespace: NS, spec: instance.spec },
    previous: undefined,
    outcome: applied,
    observed: allReady(),
    now: T0,
    ...overrides,
  });
}

const condition = (s: IoTServiceStatus, type: string) => s.conditions?.find((c) => c.type === type);

describe('status phase', () => {
  it('is Available when every child matches and every workload is rolled out and ready', () => {
    const s = status();
    assert.equal(s.phase, 'Available');
    assert.equal(s.reason, undefined, 'reason only when Failed');
    assert.equal(s.observedGeneration, 3);
    assert.equal(s.namespace, NS);
    assert.equal(s.ready, '7/7');
    assert.deepEqual(s.components, {
      gateway: { desired: 2, updated: 2, ready: 2 },
      core: { desired: 2, updated: 2, ready: 2 },
      processing: { desired: 1, updated: 1, ready: 1 },
      broker: { desired: 1, updated: 1, ready: 1 },
      database: { desired: 1, updated: 1, ready: 1 },
    });
    assert.deepEqual(s.pods, ['broker-0', 'core-a', 'core-b', 'database-0', 'gateway-a', 'gateway-b', 'processing-a']);
    assert.equal(condition(s, 'Ready')?.status, 'True');
    assert.equal(condition(s, 'Progressing')?.status, 'False');
    assert.equal(condition(s, 'Degraded')?.status, 'False');
    assert.equal(condition(s, 'Ready')?.observedGeneration, 3);
  });

  it('is Processing on a fresh instance whose children were just created', () => {
    const s = status({ outcome: { kind: 'applied', childrenMatched: false }, observed: { deployments: [], statefulSets: [], pods: [] } });
    assert.equal(s.phase, 'Processing');
    assert.equal(s.ready, '0/7');
    assert.deepEqual(s.pods, []);
    assert.deepEqual(s.components?.['gateway'], { desired: 2, updated: 0, ready: 0 });
    assert.equal(condition(s, 'Progressing')?.status, 'True');
    assert.equal(condition(s, 'Progressing')?.reason, 'ChildrenUpdated');
    assert.match(condition(s, 'Ready')?.message ?? '', /gateway not created yet/);
  });

  it('is Processing when a child had to be written even if all workloads are ready', () => {
    assert.equal(status({ outcome: { kind: 'applied', childrenMatched: false } }).phase, 'Processing');
  });

  it('is Processing while a Deployment rolls out a new version', () => {
    const observed = allReady();
    observed.deployments[0] = deployment('gateway', { replicas: 2, updated: 1, total: 3, ready: 2, generation: 4, observedGeneration: 4 });
    const s = status({ observed });
    assert.equal(s.phase, 'Processing');
    assert.deepEqual(s.components?.['gateway'], { desired: 2, updated: 1, ready: 2 });
    assert.equal(condition(s, 'Progressing')?.reason, 'RollingOut');
    assert.match(condition(s, 'Progressing')?.message ?? '', /gateway/);
  });

  it('is Processing while a scaled-down Deployment still has surplus pods', () => {
    const observed = allReady();
    observed.deployments[0] = deployment('gateway', { replicas: 2, updated: 4, total: 4, ready: 4, generation: 5, observedGeneration: 5 });
    const s = status({ observed });
    assert.equal(s.phase, 'Processing');
    assert.deepEqual(s.components?.['gateway'], { desired: 2, updated: 4, ready: 4 });
  });

  it('is Processing until the Deployment controller has observed the latest generation', () => {
    const observed = allReady();
    observed.deployments[1] = deployment('core', { replicas: 2, generation: 5, observedGeneration: 4 });
    assert.equal(status({ observed }).phase, 'Processing');
  });

  it('is Processing while a StatefulSet has pods of an older revision', () => {
    const observed = allReady();
    observed.statefulSets[0] = statefulSet('broker', { replicas: 1, currentRevision: 'broker-1', updateRevision: 'broker-2' });
    assert.equal(status({ observed }).phase, 'Processing');
  });

  it('is Processing while pods are not ready, and counts ready pods', () => {
    const observed = allReady();
    observed.statefulSets[1] = statefulSet('database', { replicas: 1, ready: 0 });
    const s = status({ observed });
    assert.equal(s.phase, 'Processing');
    assert.equal(s.ready, '6/7');
  });

  it('does not count surge pods beyond the desired replicas in the Ready column', () => {
    const observed = allReady();
    observed.deployments[0] = deployment('gateway', { replicas: 2, ready: 3, total: 3, updated: 2 });
    assert.equal(status({ observed }).ready, '7/7');
  });

  it('is Failed with the reason when the reconcile failed for good', () => {
    const failure = imagePullSecretMissingFailure('image-pull-secret', 'devawsk8s');
    const s = status({ outcome: { kind: 'failed', failure } });
    assert.equal(s.phase, 'Failed');
    assert.equal(s.reason, failure.message);
    assert.match(s.reason ?? '', /image-pull-secret.*devawsk8s/);
    assert.equal(condition(s, 'Degraded')?.status, 'True');
    assert.equal(condition(s, 'Degraded')?.reason, 'ImagePullSecretMissing');
    assert.equal(condition(s, 'Ready')?.status, 'False');
  });

  it('is Failed for an invalid spec, still reporting the workloads it sees', () => {
    const s = computeStatus({
      instance: { generation: 2, namespace: NS },
      previous: undefined,
      outcome: { kind: 'failed', failure: { reason: 'InvalidSpec', message: 'The spec is invalid: spec.version: required field is missing.' } },
      observed: { deployments: [deployment('core', { replicas: 2 })], statefulSets: [], pods: [] },
      now: T0,
    });
    assert.equal(s.phase, 'Failed');
    assert.deepEqual(Object.keys(s.components ?? {}), ['core']);
    assert.equal(s.ready, '2/2');
  });

  it('is Failed when a Deployment reports ProgressDeadlineExceeded', () => {
    const observed = allReady();
    observed.deployments[2] = deployment('processing', { replicas: 1, ready: 0, updated: 1 }, [
      {
        type: 'Progressing',
        status: 'False',
        reason: 'ProgressDeadlineExceeded',
        message: 'ReplicaSet "processing-7d9" has timed out progressing.',
      },
    ]);
    const s = status({ observed });
    assert.equal(s.phase, 'Failed');
    assert.equal(condition(s, 'Degraded')?.reason, 'ProgressDeadlineExceeded');
    assert.match(s.reason ?? '', /Deployment processing made no progress/);
  });

  it('is Failed when a pod cannot pull its image for more than 5 minutes, not before', () => {
    const observed = allReady();
    observed.deployments[0] = deployment('gateway', { replicas: 2, ready: 1 });
    observed.pods[0] = pod('gateway-a', { waiting: 'ImagePullBackOff', notReadySince: T0, image: 'registry.example.com/iot/iot-gateway:9.9.9' });
    assert.equal(status({ observed, now: minutes(4) }).phase, 'Processing');
    assert.equal(status({ observed, now: minutes(5) }).phase, 'Processing', 'exactly 5 minutes is not more than 5');
    const failed = status({ observed, now: minutes(6) });
    assert.equal(failed.phase, 'Failed');
    assert.equal(condition(failed, 'Degraded')?.reason, 'ImagePullFailing');
    assert.match(failed.reason ?? '', /gateway-a.*iot-gateway:9\.9\.9/);
  });

  it('reports the same failure while the kubelet alternates ErrImagePull and ImagePullBackOff', () => {
    const withReason = (waiting: string) => {
      const observed = allReady();
      observed.pods[0] = pod('gateway-a', { waiting, notReadySince: T0 });
      return status({ observed, now: minutes(7) });
    };
    assert.ok(statusEqual(withReason('ErrImagePull'), withReason('ImagePullBackOff')));
  });

  it('is Failed when a container crash-loops for more than 5 minutes', () => {
    const observed = allReady();
    observed.deployments[1] = deployment('core', { replicas: 2, ready: 1 });
    observed.pods[2] = pod('core-a', { waiting: 'CrashLoopBackOff', notReadySince: T0 });
    assert.equal(status({ observed, now: minutes(3) }).phase, 'Processing');
    const failed = status({ observed, now: minutes(10) });
    assert.equal(failed.phase, 'Failed');
    assert.equal(condition(failed, 'Degraded')?.reason, 'CrashLooping');
    assert.match(failed.reason ?? '', /core-a/);
  });

  it('tells the controller when to look again for a pod on its way to the 5-minute limit', () => {
    const pods = [pod('gateway-a', { waiting: 'ErrImagePull', notReadySince: minutes(1) }), pod('core-a', { waiting: 'CrashLoopBackOff', notReadySince: T0 })];
    assert.equal(msUntilStuckPodFailure(pods, minutes(2)), 3 * 60_000 + 1, 'the earlier pod decides');
    const later = msUntilStuckPodFailure(pods, minutes(2));
    const observed = allReady();
    observed.deployments[0] = deployment('gateway', { replicas: 2, ready: 1 });
    observed.pods.push(...pods);
    assert.equal(status({ observed, now: new Date(minutes(2).getTime() + (later ?? 0)) }).phase, 'Failed', 'failed once that time has passed');
    assert.equal(msUntilStuckPodFailure([pod('gateway-a')], T0), undefined, 'healthy pods need no recheck');
    assert.equal(msUntilStuckPodFailure([pod('core-a', { waiting: 'CrashLoopBackOff', notReadySince: T0 })], minutes(9)), undefined);
  });

  /** A StatefulSet pod the scheduler cannot place: its claim is unbound (as kube-scheduler 1.33 says it). */
  function unschedulable(name: string, since: Date): V1Pod {
    return {
      metadata: { name, namespace: NS, creationTimestamp: since.toISOString() as unknown as Date },
      spec: {
        containers: [{ name: 'database', image: 'registry.example.com/iot/iot-database:2.4.1' }],
        volumes: [{ name: 'data', persistentVolumeClaim: { claimName: `data-${name}` } }, { name: 'config', configMap: { name: 'iot-config' } }],
      },
      status: {
        phase: 'Pending',
        conditions: [
          {
            type: 'PodScheduled',
            status: 'False',
            reason: 'Unschedulable',
            lastTransitionTime: since.toISOString() as unknown as Date,
            message: '0/5 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.',
          },
        ],
      },
    };
  }
  const withStorage = testInstance({ database: { storage: '1Gi', storageClassName: 'no-such-class' } });
  const databaseUnschedulable = (since: Date) => {
    const observed = allReady();
    observed.statefulSets[1] = statefulSet('database', { replicas: 1, ready: 0 });
    observed.pods[6] = unschedulable('database-0', since);
    return observed;
  };

  it('is Failed at once, naming the claim and the StorageClass, when the claim names a StorageClass that does not exist', () => {
    const observed = { ...databaseUnschedulable(T0), missingStorageClasses: ['no-such-class'] };
    const failed = status({ instance: { generation: 3, namespace: NS, spec: withStorage.spec }, observed, now: T0 });
    assert.equal(failed.phase, 'Failed');
    assert.equal(condition(failed, 'Degraded')?.reason, 'StorageClassNotFound');
    assert.match(failed.reason ?? '', /^PersistentVolumeClaim data-database-0 cannot be provisioned: StorageClass no-such-class \(spec\.database\.storageClassName\) does not exist/);
    assert.match(failed.reason ?? '', /kubectl get storageclass/);
    const later = status({ instance: { generation: 3, namespace: NS, spec: withStorage.spec }, observed, now: minutes(1) });
    assert.equal(later.reason, failed.reason, 'the message does not change while the failure persists');
  });

  it('waits 5 minutes for an unbound claim whose StorageClass exists (or was not looked up), then says what to check', () => {
    const observed = databaseUnschedulable(T0);
    const spec = withStorage.spec;
    assert.equal(status({ instance: { generation: 3, namespace: NS, spec }, observed, now: minutes(4) }).phase, 'Processing');
    const failed = status({ instance: { generation: 3, namespace: NS, spec }, observed, now: minutes(6) });
    assert.equal(failed.phase, 'Failed');
    assert.equal(condition(failed, 'Degraded')?.reason, 'VolumeNotBound');
    assert.match(failed.reason ?? '', /PersistentVolumeClaim data-database-0 of pod database-0 has not been bound for more than 5 minutes/);
    assert.match(failed.reason ?? '', new RegExp(`StorageClass no-such-class exists.*kubectl describe pvc -n ${NS} data-database-0`));
    const defaultClass = status({ observed, now: minutes(6) });
    assert.match(defaultClass.reason ?? '', /the cluster's default StorageClass/, 'no storageClassName: the default class is to check');
    assert.equal(msUntilStuckPodFailure(observed.pods, minutes(2)), 3 * 60_000 + 1, 'the controller looks again when the 5 minutes are over');
  });

  it('does not fail a pod that is unschedulable for another reason, or whose claims are bound', () => {
    const observed = databaseUnschedulable(T0);
    const other = observed.pods[6]!;
    other.status!.conditions![0]!.message = '0/5 nodes are available: 5 Insufficient memory.';
    assert.equal(status({ observed: { ...observed, missingStorageClasses: ['no-such-class'] }, instance: { generation: 3, namespace: NS, spec: withStorage.spec }, now: minutes(10) }).phase, 'Processing');
    assert.equal(msUntilStuckPodFailure(observed.pods, minutes(1)), undefined);
  });

  it('ignores a failing pod that is being deleted', () => {
    const observed = allReady();
    observed.pods.push(pod('gateway-old', { waiting: 'CrashLoopBackOff', notReadySince: T0, deleting: true }));
    assert.equal(status({ observed, now: minutes(10) }).phase, 'Available');
  });

  it('lists only Running pods that are not being deleted', () => {
    const observed = allReady();
    observed.pods.push(pod('gateway-pending', { phase: 'Pending' }), pod('gateway-leaving', { deleting: true }));
    assert.ok(!status({ observed }).pods?.includes('gateway-pending'));
    assert.ok(!status({ observed }).pods?.includes('gateway-leaving'));
  });

  it('reports paused instances: Progressing False with reason Paused', () => {
    const s = status({ outcome: { kind: 'paused' } });
    assert.equal(s.phase, 'Available');
    assert.equal(condition(s, 'Progressing')?.reason, 'Paused');
    const drifted = status({ outcome: { kind: 'paused', childrenMatched: false } });
    assert.equal(drifted.phase, 'Processing');
    assert.equal(condition(drifted, 'Progressing')?.status, 'False');
  });
});

describe('status stability', () => {
  it('recomputing an unchanged situation later gives an equal status (no write)', () => {
    const first = status({ now: T0 });
    const again = status({ previous: first, now: minutes(30) });
    assert.ok(statusEqual(first, again));
    assert.equal(condition(again, 'Ready')?.lastTransitionTime, '2026-01-01T10:00:00Z');
  });

  it('moves lastTransitionTime only for conditions whose status changed', () => {
    const available = status({ now: T0 });
    const observed = allReady();
    observed.deployments[0] = deployment('gateway', { replicas: 2, ready: 1 });
    const processing = status({ previous: available, observed, now: minutes(1) });
    assert.equal(condition(processing, 'Ready')?.lastTransitionTime, '2026-01-01T10:01:00Z');
    assert.equal(condition(processing, 'Degraded')?.lastTransitionTime, '2026-01-01T10:00:00Z', 'Degraded stayed False');
    assert.ok(!statusEqual(available, processing));
  });

  it('follows the generation', () => {
    const s = computeStatus({
      instance: { generation: 8, namespace: NS, spec: instance.spec },
      previous: status(),
      outcome: applied,
      observed: allReady(),
      now: T0,
    });
    assert.equal(s.observedGeneration, 8);
    assert.equal(condition(s, 'Ready')?.observedGeneration, 8);
  });

  it('statusEqual ignores key order and undefined fields', () => {
    assert.ok(statusEqual({ phase: 'Available', ready: '1/1' }, { ready: '1/1', phase: 'Available', reason: undefined }));
    assert.ok(!statusEqual({ phase: 'Available' }, { phase: 'Processing' }));
    assert.ok(!statusEqual({ pods: ['a', 'b'] }, { pods: ['b', 'a'] }));
  });
});

describe('status transition events', () => {
  const processing = status({ outcome: { kind: 'applied', childrenMatched: false } });
  const available = status();
  const failed = status({ outcome: { kind: 'failed', failure: imagePullSecretMissingFailure('image-pull-secret', 'devawsk8s') } });

  it('announces a new instance, availability and recovery as Normal events', () => {
    const created = statusTransitionEvent(undefined, processing);
    assert.equal(created?.type, 'Normal');
    assert.match(created?.message ?? '', /devawsk8s-tenant-a/);
    assert.deepEqual(statusTransitionEvent(processing, available), {
      type: 'Normal',
      reason: 'Available',
      message: 'The instance is available: 7/7 pods ready.',
    });
    assert.equal(statusTransitionEvent(failed, processing)?.reason, 'Recovered');
    assert.equal(statusTransitionEvent(available, processing)?.reason, 'Processing');
  });

  it('reports a failure as a Warning with the failure reason', () => {
    const event = statusTransitionEvent(available, failed);
    assert.equal(event?.type, 'Warning');
    assert.equal(event?.reason, 'ImagePullSecretMissing');
    assert.equal(event?.message, failed.reason);
  });

  it('stays silent when nothing a user cares about changed', () => {
    assert.equal(statusTransitionEvent(available, available), undefined);
    assert.equal(statusTransitionEvent(failed, failed), undefined);
    const stillProcessing = status({ previous: processing, outcome: { kind: 'applied', childrenMatched: false }, now: minutes(1) });
    assert.equal(statusTransitionEvent(processing, stillProcessing), undefined);
  });
});
