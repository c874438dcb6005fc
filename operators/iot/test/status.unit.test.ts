import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Deployment, V1DeploymentCondition, V1Pod, V1StatefulSet } from '@kubernetes/client-node';
import type { IoTServiceStatus } from '../src/api/iotservice.ts';
import { imagePullSecretMissingFailure } from '../src/failure.ts';
import { msUntilStuckPodFailure } from '../src/status/pod-health.ts';
import { computeStatus, statusEqual, statusTransitionEvent, type ReconcileOutcome, type StatusInput } from '../src/status/status.ts';
import type { IngestionReading, IngestionVerdict } from '../src/ingestion.ts';
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
  /** The kubelet's message with the waiting reason. */
  message?: string;
  notReadySince?: Date;
  deleting?: boolean;
  image?: string;
  /** The container's (and component's) name; default gateway. */
  container?: string;
  /** The container has just exited with this code. */
  exited?: number;
  /** The container runs again after exiting with `code` at `at`. */
  lastExit?: { code: number; at: Date };
  /** The container's restartCount (default 3 after an exit, else 0). */
  restarts?: number;
}

function pod(name: string, shape: PodShape = {}): V1Pod {
  const ready = !shape.waiting && !shape.notReadySince;
  const transition = (shape.notReadySince ?? T0).toISOString() as unknown as Date; // JSON gives strings
  const container = shape.container ?? 'gateway';
  const image = shape.image ?? `registry.example.com/iot/iot-${container}:2.4.1`;
  const state = shape.waiting
    ? { waiting: { reason: shape.waiting, message: shape.message ?? 'details vary' } }
    : shape.exited !== undefined
      ? { terminated: { exitCode: shape.exited } }
      : { running: {} };
  return {
    metadata: {
      name,
      namespace: NS,
      ...(shape.deleting ? { deletionTimestamp: T0.toISOString() as unknown as Date } : {}),
    },
    spec: { containers: [{ name: container, image }] },
    status: {
      phase: shape.phase ?? 'Running',
      conditions: [
        { type: 'ContainersReady', status: ready ? 'True' : 'False', lastTransitionTime: transition },
        { type: 'Ready', status: ready ? 'True' : 'False', lastTransitionTime: transition },
      ],
      containerStatuses: [
        {
          name: container,
          image,
          imageID: '',
          ready,
          restartCount: shape.restarts ?? (shape.lastExit ? 3 : 0),
          state,
          ...(shape.lastExit ? { lastState: { terminated: { exitCode: shape.lastExit.code, finishedAt: shape.lastExit.at.toISOString() as unknown as Date } } } : {}),
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

  it("is Processing, not Failed, while it waits for cert-manager's certificate, the conditions saying what for; Available once it has it", () => {
    const waiting = { reason: 'WaitingForCertificate', message: 'Waiting for cert-manager to issue Certificate ls/a-gateway: Issuing certificate as Secret does not exist.' };
    const before = status({ outcome: { kind: 'waiting', waiting }, observed: { deployments: [], statefulSets: [], pods: [] } });
    assert.equal(before.phase, 'Processing');
    assert.equal(before.reason, undefined, 'no failure');
    for (const type of ['Ready', 'Progressing']) {
      assert.equal(condition(before, type)?.reason, 'WaitingForCertificate', type);
      assert.equal(condition(before, type)?.message, waiting.message, type);
    }
    assert.equal(condition(before, 'Ready')?.status, 'False');
    assert.equal(condition(before, 'Degraded')?.status, 'False');
    const reissuing = status({ outcome: { kind: 'applied', childrenMatched: true, waiting } });
    assert.equal(reissuing.phase, 'Processing', 'every workload ready, yet the certificate is being issued anew');
    assert.equal(condition(reissuing, 'Ready')?.reason, 'WaitingForCertificate');
    const after = status({ outcome: { kind: 'applied', childrenMatched: true }, previous: reissuing });
    assert.equal(after.phase, 'Available');
    assert.deepEqual(statusTransitionEvent(reissuing, after)?.reason, 'Available');
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

  it('while a deleted database pod is replaced and a component waits for it: Processing, naming the pods in the way, never Failed', () => {
    const observed = allReady();
    // The StatefulSet controller counts the terminating pod as not updated; processing's readiness check fails meanwhile.
    observed.statefulSets[1] = statefulSet('database', { replicas: 1, updated: 0 });
    observed.deployments[2] = deployment('processing', { replicas: 1, ready: 0 });
    observed.pods = observed.pods.map((p) =>
      p.metadata?.name === 'database-0' ? pod('database-0', { deleting: true, container: 'database' }) : p.metadata?.name === 'processing-a' ? pod('processing-a', { notReadySince: T0, container: 'processing' }) : p,
    );
    const s = status({ observed });
    assert.equal(s.phase, 'Processing');
    assert.equal(s.reason, undefined);
    assert.equal(condition(s, 'Degraded')?.status, 'False');
    assert.equal(condition(s, 'Ready')?.message, 'Waiting for processing 0/1 ready (processing-a not ready), database 1/1 ready (database-0 terminating).');

    observed.pods = observed.pods.map((p) => (p.metadata?.name === 'database-0' ? pod('database-0', { waiting: 'ContainerCreating', container: 'database' }) : p));
    observed.statefulSets[1] = statefulSet('database', { replicas: 1, ready: 0 });
    assert.match(condition(status({ observed }), 'Ready')?.message ?? '', /database 0\/1 ready \(database-0 ContainerCreating\)/);
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

  it("names the backup repository's StorageClass when its claim cannot be provisioned", () => {
    const backed = testInstance({ backup: { target: { volumeClaim: { size: '10Gi', storageClassName: 'no-backup-class' } } } });
    const ready = allReady();
    const observed = { ...ready, pods: [...ready.pods, unschedulable('backup-0', T0)], missingStorageClasses: ['no-backup-class'] };
    const failed = status({ instance: { generation: 3, namespace: NS, spec: backed.spec }, observed, now: T0 });
    assert.equal(condition(failed, 'Degraded')?.reason, 'StorageClassNotFound');
    assert.match(failed.reason ?? '', /^PersistentVolumeClaim data-backup-0 cannot be provisioned: StorageClass no-backup-class \(spec\.backup\.target\.volumeClaim\.storageClassName\) does not exist/);
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

describe('what a user meets when pods are stuck (the stuck window)', () => {
  const seconds = (n: number) => new Date(T0.getTime() + n * 1000);
  const MISSING = 'registry.example.com/iot/iot-broker:9.9.9';
  const notFound = `Back-off pulling image "${MISSING}": ErrImagePull: rpc error: code = NotFound desc = failed to pull and unpack image "${MISSING}": failed to resolve reference "${MISSING}": ${MISSING}: not found`;
  const refused = `Back-off pulling image "${MISSING}": ErrImagePull: failed to pull and unpack image "${MISSING}": failed to resolve reference "${MISSING}": pulling from host registry.example.com failed with status code [manifests 9.9.9]: 401 Unauthorized`;
  const unreachable = `failed to pull and unpack image "${MISSING}": failed to resolve reference "${MISSING}": failed to do request: Head "https://registry.example.com/v2/iot/iot-broker/manifests/9.9.9": dial tcp 203.0.113.7:443: connect: connection refused`;

  /** The default instance with its broker pod in `shape`, observed at `now`, after `previous`. */
  const withBroker = (shape: PodShape, now: Date, extra: Partial<StatusInput> = {}) => {
    const observed = allReady();
    observed.statefulSets[0] = statefulSet('broker', { replicas: 1, ready: 0 });
    observed.pods[5] = pod('broker-0', { container: 'broker', notReadySince: T0, ...shape });
    return status({ observed, now, instance: { generation: 3, namespace: NS, spec: instance.spec, landscape: 'devawsk8s' }, ...extra });
  };

  it('a spec.version with no such image: ImageNotFound naming the image and component, saying to set spec.version', () => {
    const failed = withBroker({ waiting: 'ErrImagePull', message: notFound.slice(notFound.indexOf('rpc error')), image: MISSING }, minutes(6));
    assert.equal(failed.phase, 'Failed');
    assert.equal(condition(failed, 'Degraded')?.reason, 'ImageNotFound');
    assert.equal(failed.reason, `Image ${MISSING} of component broker does not exist in its registry: set spec.version to a version published there (or correct spec.registry).`);
    const backingOff = withBroker({ waiting: 'ImagePullBackOff', message: notFound, image: MISSING }, minutes(7));
    assert.equal(backingOff.reason, failed.reason, 'the same failure while the kubelet backs off and retries, minutes later');
    assert.equal(condition(backingOff, 'Degraded')?.reason, 'ImageNotFound');
  });

  it('an image named in spec.<component>.image that does not exist: ImageNotFound saying to correct that field', () => {
    const spec = testInstance({ broker: { image: MISSING } }).spec;
    const observed = allReady();
    observed.pods[5] = pod('broker-0', { container: 'broker', waiting: 'ErrImagePull', message: notFound, image: MISSING, notReadySince: T0 });
    const failed = status({ observed, now: minutes(6), instance: { generation: 3, namespace: NS, spec } });
    assert.match(failed.reason ?? '', /does not exist in its registry: correct spec\.broker\.image\.$/);
  });

  it('credentials the registry refuses: ImagePullUnauthorized naming the landscape\'s image-pull-secret and its namespace, and no credential', () => {
    const failed = withBroker({ waiting: 'ImagePullBackOff', message: refused, image: MISSING }, minutes(6));
    assert.equal(condition(failed, 'Degraded')?.reason, 'ImagePullUnauthorized');
    assert.equal(
      failed.reason,
      `The registry refused to serve image ${MISSING} of component broker with the credentials of Secret image-pull-secret: ` +
        `put valid credentials for that registry into Secret image-pull-secret in namespace devawsk8s (the operator copies it into namespace ${NS} and restarts the pods waiting for their image).`,
    );
    for (const message of ['unauthorized: authentication required', 'denied: requested access to the resource is denied', 'unexpected status from HEAD request to https://r/v2/x/manifests/1: 403 Forbidden', 'failed to authorize: failed to fetch oauth token: 401 Unauthorized']) {
      assert.equal(condition(withBroker({ waiting: 'ErrImagePull', message }, minutes(6)), 'Degraded')?.reason, 'ImagePullUnauthorized', message);
    }
  });

  it('any other pull failure stays ImagePullFailing, naming pod and image and where to see why', () => {
    const failed = withBroker({ waiting: 'ErrImagePull', message: unreachable, image: MISSING }, minutes(6));
    assert.equal(condition(failed, 'Degraded')?.reason, 'ImagePullFailing');
    assert.equal(
      failed.reason,
      `Pod broker-0 has not been able to pull image ${MISSING} for more than 5 minutes; see why with kubectl describe pod -n ${NS} broker-0, ` +
        "then check spec.version, spec.registry (or the component's image) and the image-pull-secret.",
    );
    for (const message of ['manifest unknown: manifest unknown', 'reading manifest 9.9.9 in registry.example.com/iot/iot-broker: name unknown']) {
      assert.equal(condition(withBroker({ waiting: 'ErrImagePull', message }, minutes(6)), 'Degraded')?.reason, 'ImageNotFound', message);
    }
  });

  it('a back-off message without the cause (kubelets before 1.32) keeps the classification of the previous status for that image', () => {
    const first = withBroker({ waiting: 'ErrImagePull', message: notFound, image: MISSING }, minutes(6));
    const bare = { waiting: 'ImagePullBackOff', message: `Back-off pulling image "${MISSING}"`, image: MISSING };
    assert.ok(statusEqual(withBroker(bare, minutes(7), { previous: first }), first), 'still ImageNotFound, unchanged');
    assert.equal(condition(withBroker(bare, minutes(7)), 'Degraded')?.reason, 'ImagePullFailing', 'without a classified previous status');
    const otherImage = withBroker({ ...bare, image: 'registry.example.com/iot/iot-broker:9.9.10', message: 'Back-off pulling image "registry.example.com/iot/iot-broker:9.9.10"' }, minutes(7), { previous: first });
    assert.equal(condition(otherImage, 'Degraded')?.reason, 'ImagePullFailing', 'not for another image');
  });

  it('a crash loop: CrashLooping naming the component, the pod and the loop, the same through every round of the loop', () => {
    // One round: back-off, running again (not ready), exited; the first crash ended 20 s after the pod stopped being ready.
    const rounds: PodShape[] = [
      { container: 'core', waiting: 'CrashLoopBackOff', message: 'back-off 40s restarting failed container=core pod=core-a_ns(uid)' },
      { container: 'core', lastExit: { code: 1, at: seconds(20) } },
      { container: 'core', exited: 1 },
      { container: 'core', waiting: 'CrashLoopBackOff', message: 'back-off 1m20s restarting failed container=core pod=core-a_ns(uid)' },
    ];
    const at = (shape: PodShape, now: Date, previous?: IoTServiceStatus) => {
      const observed = allReady();
      observed.deployments[1] = deployment('core', { replicas: 2, ready: 1 });
      observed.pods[2] = pod('core-a', { notReadySince: T0, ...shape });
      return status({ observed, now, previous, stuckPodTimeoutMs: 20_000 });
    };
    // Reconcile after reconcile, each status computed from the one before.
    const statuses: IoTServiceStatus[] = [];
    rounds.forEach((shape, i) => statuses.push(at(shape, seconds(30 + 10 * i), statuses.at(-1))));
    assert.equal(statuses[0]!.phase, 'Failed');
    assert.equal(condition(statuses[0]!, 'Degraded')?.reason, 'CrashLooping');
    assert.equal(
      statuses[0]!.reason,
      'Component core is in a crash loop: container core of pod core-a keeps exiting and has not been ready for more than 20 seconds; ' +
        `see why with kubectl logs -n ${NS} core-a -c core --previous, then fix its image (spec.version or spec.core.image) or what it depends on.`,
    );
    for (const s of statuses) assert.ok(statusEqual(s, statuses[0]), `the same in every state of the loop: ${s.phase} ${s.reason}`);
    assert.equal(at(rounds[1]!, seconds(15)).phase, 'Processing', 'not before the window has passed');
  });

  it('of several crash loops, names the container restarted most: a gateway not ready since its start (core down) and restarted once is not the one to fix', () => {
    const observed = allReady();
    observed.pods[0] = pod('gateway-a', { container: 'gateway', lastExit: { code: 137, at: seconds(30) }, restarts: 1, notReadySince: T0 });
    observed.pods[2] = pod('core-a', { container: 'core', waiting: 'CrashLoopBackOff', restarts: 5, notReadySince: seconds(2) });
    const failed = status({ observed, now: seconds(40), stuckPodTimeoutMs: 20_000 });
    assert.equal(condition(failed, 'Degraded')?.reason, 'CrashLooping');
    assert.match(failed.reason ?? '', /^Component core is in a crash loop: container core of pod core-a keeps exiting/);
  });

  it('names the pod stuck longest: pods of other components crossing the window later do not change the message', () => {
    const observed = allReady();
    const missing = (component: string) => `registry.example.com/iot/iot-${component}:9.9.9`;
    observed.pods[5] = pod('broker-0', { container: 'broker', waiting: 'ErrImagePull', message: notFound, image: missing('broker'), notReadySince: seconds(5) });
    observed.pods[2] = pod('core-a', { container: 'core', waiting: 'ErrImagePull', message: notFound, image: missing('core'), notReadySince: T0 });
    const first = status({ observed, now: seconds(24), stuckPodTimeoutMs: 20_000 });
    const later = status({ observed, now: seconds(60), stuckPodTimeoutMs: 20_000 });
    assert.match(first.reason ?? '', /iot-core:9\.9\.9 of component core/);
    assert.equal(later.reason, first.reason, 'broker-0, stuck too by now, comes first by name but was stuck later');
  });

  it('a container that exited before its pod last stopped being ready, and runs again, is not crash-looping', () => {
    const observed = allReady();
    observed.pods[2] = pod('core-a', { container: 'core', notReadySince: minutes(1), lastExit: { code: 1, at: T0 } });
    assert.equal(status({ observed, now: minutes(20) }).reason, undefined);
  });

  it('the stuck window is the operator\'s (--stuck-pod-timeout): before it Processing, after it Failed, and the recheck is due when it ends', () => {
    const shape: PodShape = { waiting: 'ImagePullBackOff', message: notFound, image: MISSING };
    assert.equal(withBroker(shape, seconds(20), { stuckPodTimeoutMs: 20_000 }).phase, 'Processing', '20 s is not more than 20 s');
    assert.equal(withBroker(shape, seconds(21), { stuckPodTimeoutMs: 20_000 }).phase, 'Failed');
    assert.equal(withBroker(shape, seconds(21)).phase, 'Processing', 'the default is 5 minutes');
    const pods = [pod('broker-0', { container: 'broker', notReadySince: T0, ...shape })];
    assert.equal(msUntilStuckPodFailure(pods, seconds(5), 20_000), 15_001);
    assert.equal(msUntilStuckPodFailure(pods, seconds(5)), 295_001);
  });
});

describe('ingestion in the status', () => {
  const reading = (r: Partial<IngestionReading> = {}): IngestionReading => ({
    backlogMessages: 1234,
    backlogBytes: 5_347_738,
    backlogLimitBytes: 268_435_456,
    oldestUnstoredSeconds: 95.4,
    lastStoredSecondsAgo: 95.2,
    deadLetters: 12,
    ...r,
  });
  const stalled = (r: Partial<IngestionReading> = {}): IngestionVerdict => ({ state: 'Stalled', reading: reading(r) });
  const full: IngestionVerdict = { state: 'Full', reading: reading({ backlogBytes: 260_000_000, oldestUnstoredSeconds: 12, lastStoredSecondsAgo: 0.4 }) };
  const flowing: IngestionVerdict = { state: 'Flowing', reading: reading({ backlogMessages: 3, backlogBytes: 126, oldestUnstoredSeconds: 0.2, lastStoredSecondsAgo: 0.1 }) };

  it('a Stalled reading makes an instance otherwise Available Failed with IngestionStalled, saying what waits and where to look', () => {
    const s = status({ ingestion: stalled() });
    assert.equal(s.phase, 'Failed');
    assert.equal(condition(s, 'Degraded')?.status, 'True');
    assert.equal(condition(s, 'Degraded')?.reason, 'IngestionStalled');
    assert.equal(condition(s, 'Ready')?.status, 'False', 'not Available while nothing is stored');
    assert.equal(
      s.reason,
      `Ingestion stalled: 1234 messages (5.1 MiB) wait in the broker, the oldest for 95 s, and processing has stored none for 95 s; check processing's pods and logs (kubectl -n ${NS} logs deploy/processing) and the database.`,
    );
    assert.deepEqual(s.ingestion, { state: 'Stalled', backlogMessages: 1234, backlogBytes: 5_347_738, backlogLimitBytes: 268_435_456, oldestUnstoredSeconds: 95, lastStoredSecondsAgo: 95 });
    assert.match(status({ ingestion: stalled({ lastStoredSecondsAgo: undefined }) }).reason ?? '', /processing has stored none yet/);
  });

  it('a Full reading: Failed with StorageFull, naming the backlog and its limit and what to raise', () => {
    const s = status({ ingestion: full });
    assert.equal(s.phase, 'Failed');
    assert.equal(condition(s, 'Degraded')?.reason, 'StorageFull');
    assert.equal(
      s.reason,
      `The broker's backlog is full (248.0 MiB of 256.0 MiB, 1234 messages): devices are slowed or refused until processing catches up; raise spec.broker.maxBacklog (or spec.broker.storage) or spec.processing.replicas, and check processing (kubectl -n ${NS} logs deploy/processing).`,
    );
  });

  it('a Flowing reading changes nothing but status.ingestion', () => {
    const s = status({ ingestion: flowing });
    const { ingestion, ...rest } = s;
    assert.ok(statusEqual(rest, status()));
    assert.deepEqual(ingestion, { state: 'Flowing', backlogMessages: 3, backlogBytes: 126, backlogLimitBytes: 268_435_456, oldestUnstoredSeconds: 0, lastStoredSecondsAgo: 0 });
  });

  it('an unknown reading neither makes an instance Failed nor ends its ingestion failure', () => {
    assert.ok(statusEqual(status({ ingestion: undefined }), status()), 'Available unchanged');
    const failed = status({ ingestion: stalled() });
    const unknown = status({ previous: failed, ingestion: undefined, now: minutes(1) });
    assert.ok(statusEqual(unknown, failed), 'still Failed, same message and figures');
    const wasFlowing = status({ ingestion: flowing });
    assert.equal(status({ previous: wasFlowing, ingestion: undefined }).phase, 'Available');
    assert.deepEqual(status({ previous: wasFlowing, ingestion: undefined }).ingestion, wasFlowing.ingestion, 'figures kept');
  });

  it('an unknown reading does not turn an instance that was Processing Failed by an earlier Stalled state', () => {
    const rolling = allReady();
    rolling.deployments[2] = deployment('processing', { replicas: 1, ready: 0 });
    const processing = status({ observed: rolling, ingestion: stalled() });
    assert.equal(processing.phase, 'Processing', 'a rollout in progress comes first');
    assert.equal(processing.ingestion?.state, 'Stalled');
    assert.equal(status({ previous: processing, ingestion: undefined, now: minutes(1) }).phase, 'Available');
  });

  it('readings with other figures in the same state give an equal status: figures and message are those of the change of state', () => {
    const first = status({ ingestion: stalled() });
    const later = status({ previous: first, ingestion: stalled({ backlogMessages: 5000, backlogBytes: 21_000_000, oldestUnstoredSeconds: 110, lastStoredSecondsAgo: 110 }), now: minutes(1) });
    assert.ok(statusEqual(first, later));
    const recovered = status({ previous: later, ingestion: flowing, now: minutes(2) });
    assert.equal(recovered.phase, 'Available');
    assert.equal(recovered.ingestion?.state, 'Flowing');
    assert.equal(statusTransitionEvent(later, recovered)?.reason, 'Available');
    assert.equal(statusTransitionEvent(status(), first)?.reason, 'IngestionStalled', 'a Warning Event names the reason');
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

describe('status: the gateway over TLS', () => {
  it('PlaintextProtocols is True, naming them, while the gateway serves mqtt, http or coap; False with mqtts and https only (the default)', () => {
    const listed = testInstance({ gateway: { protocols: ['mqtt', 'http'] } });
    const plaintext = condition(status({ instance: { generation: 3, namespace: NS, spec: listed.spec } }), 'PlaintextProtocols');
    assert.equal(plaintext?.status, 'True');
    assert.equal(plaintext?.reason, 'PlaintextServed');
    assert.match(plaintext?.message ?? '', /serves mqtt, http without TLS: devices' passwords and telemetry cross the network in clear/);
    const secure = condition(status(), 'PlaintextProtocols');
    assert.equal(secure?.status, 'False');
    assert.equal(secure?.reason, 'TLSOnly');
    const mixed = testInstance({ gateway: { protocols: ['mqtts', 'coap'] } });
    assert.match(condition(status({ instance: { generation: 3, namespace: NS, spec: mixed.spec } }), 'PlaintextProtocols')?.message ?? '', /serves coap without TLS/);
  });

  it('status.gateway.tls is what the reconcile made, else the previous one (paused, failed)', () => {
    const tls = { caCertificate: 'PEM', notAfter: '2026-04-01T10:00:00.000Z' };
    const made = status({ gatewayTls: tls });
    assert.deepEqual(made.gateway, { tls });
    assert.deepEqual(status({ previous: made, outcome: { kind: 'paused' } }).gateway, { tls });
    assert.equal(status().gateway, undefined);
  });
});
