import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import type { KubeObject } from '@iot-operator/runtime';
import { leanPod, readyPodIP } from '../src/pod-view.ts';
import { msUntilStuckPodFailure } from '../src/status/pod-health.ts';
import { computeStatus } from '../src/status/status.ts';
import { testInstance } from './fixtures.ts';

const NS = 'devawsk8s-tenant-a';
const T0 = new Date('2026-01-01T10:00:00Z');
const at = (minutes: number) => new Date(T0.getTime() + minutes * 60_000).toISOString();

interface PodState {
  phase: string;
  ready: boolean;
  /** Waiting reason of the main container. */
  waiting?: string;
  /** The kubelet's message with it (default: one the classification makes nothing of). */
  waitingMessage?: string;
  /** The main container has just exited with this code (instead of running). */
  exited?: number;
  /** Its last termination: exit code and minute (after T0) it ended. */
  lastExit?: { code: number; minute: number };
  /** The StatefulSet revision the pod was created from. */
  revision?: string;
  /** Waiting reason of the init container. */
  initWaiting?: string;
  /** When the containers stopped being ready (minutes after T0). */
  sinceMinute?: number;
  deleting?: boolean;
  /** Not scheduled: the scheduler's message. */
  unschedulable?: string;
}

/** A pod as the API server sends it: every metadata field and container detail a kubelet fills in. */
function fullPod(name: string, state: PodState): KubeObject {
  const transition = at(state.sinceMinute ?? 0);
  const container = (containerName: string, image: string, waiting: string | undefined, ready: boolean, main: boolean) => ({
    name: containerName,
    image,
    imageID: `${image}@sha256:0123`,
    containerID: 'containerd://abc',
    ready,
    restartCount: waiting === 'CrashLoopBackOff' || (main && state.lastExit) ? 4 : 0,
    started: ready,
    state: waiting
      ? { waiting: { reason: waiting, message: (main && state.waitingMessage) || 'details vary' } }
      : main && state.exited !== undefined
        ? { terminated: { exitCode: state.exited, reason: 'Error', startedAt: at(0), finishedAt: at(0.1), containerID: 'containerd://abc' } }
        : { running: { startedAt: at(0) } },
    lastState: main && state.lastExit ? { terminated: { exitCode: state.lastExit.code, reason: 'Error', startedAt: at(0), finishedAt: at(state.lastExit.minute), containerID: 'containerd://old' } } : {},
  });
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      generateName: 'gateway-7c9f-',
      namespace: NS,
      uid: `uid-${name}`,
      resourceVersion: '4711',
      creationTimestamp: at(-1),
      ...(state.deleting ? { deletionTimestamp: at(1), deletionGracePeriodSeconds: 30 } : {}),
      labels: {
        'app.kubernetes.io/managed-by': 'iot-operator',
        'cp.iotservices.io/landscape': 'devawsk8s',
        'cp.iotservices.io/instance': 'tenant-a',
        'app.kubernetes.io/name': 'iot-gateway',
        'app.kubernetes.io/component': 'gateway',
        'pod-template-hash': '7c9f',
        ...(state.revision ? { 'controller-revision-hash': state.revision } : {}),
      },
      annotations: { 'kubernetes.io/limit-ranger': 'LimitRanger plugin set: cpu, memory request for container gateway' },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'gateway-7c9f', uid: 'rs-uid', controller: true, blockOwnerDeletion: true }],
    },
    spec: {
      initContainers: [{ name: 'wait-for-broker', image: 'registry.example.com/iot/iot-init:2.4.1', command: ['sh', '-c', 'true'] }],
      containers: [
        {
          name: 'gateway',
          image: 'registry.example.com/iot/iot-gateway:2.4.1',
          env: [{ name: 'BROKER_PASSWORD', valueFrom: { secretKeyRef: { name: 'iot-credentials', key: 'brokerPassword' } } }],
          ports: [{ containerPort: 1883, protocol: 'TCP' }],
          resources: { requests: { cpu: '100m', memory: '128Mi' } },
        },
      ],
      volumes: [
        { name: 'data', persistentVolumeClaim: { claimName: `data-${name}` } },
        { name: 'config', configMap: { name: 'iot-config', defaultMode: 420 } },
      ],
      ...(state.unschedulable ? {} : { nodeName: 'kwok-node-0' }),
    },
    status: {
      phase: state.phase,
      startTime: at(0),
      podIP: '10.0.0.7',
      qosClass: 'Burstable',
      conditions: [
        state.unschedulable
          ? { type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: state.unschedulable, lastTransitionTime: transition }
          : { type: 'PodScheduled', status: 'True', lastTransitionTime: at(-1) },
        { type: 'Initialized', status: state.initWaiting ? 'False' : 'True', lastTransitionTime: transition },
        { type: 'ContainersReady', status: state.ready ? 'True' : 'False', lastTransitionTime: transition },
        { type: 'Ready', status: state.ready ? 'True' : 'False', lastTransitionTime: transition },
      ],
      initContainerStatuses: [container('wait-for-broker', 'registry.example.com/iot/iot-init:2.4.1', state.initWaiting, !state.initWaiting, false)],
      containerStatuses: [container('gateway', 'registry.example.com/iot/iot-gateway:2.4.1', state.waiting, state.ready, true)],
    },
  };
}

const PODS: Record<string, PodState> = {
  ready: { phase: 'Running', ready: true },
  starting: { phase: 'Pending', ready: false, waiting: 'ContainerCreating' },
  imagePullFailing: { phase: 'Pending', ready: false, waiting: 'ImagePullBackOff', sinceMinute: 0 },
  crashLooping: { phase: 'Running', ready: false, waiting: 'CrashLoopBackOff', sinceMinute: 3 },
  initImageFailing: { phase: 'Pending', ready: false, initWaiting: 'ErrImagePull', sinceMinute: 1 },
  readyBeingDeleted: { phase: 'Running', ready: true, deleting: true },
  failingBeingDeleted: { phase: 'Running', ready: false, waiting: 'CrashLoopBackOff', deleting: true },
  imageNotFound: {
    phase: 'Pending',
    ready: false,
    waiting: 'ErrImagePull',
    waitingMessage: 'rpc error: code = NotFound desc = failed to pull and unpack image "registry.example.com/iot/iot-gateway:2.4.1": failed to resolve reference "registry.example.com/iot/iot-gateway:2.4.1": registry.example.com/iot/iot-gateway:2.4.1: not found',
    sinceMinute: 0.5,
  },
  credentialsRefused: {
    phase: 'Pending',
    ready: false,
    waiting: 'ImagePullBackOff',
    waitingMessage: 'Back-off pulling image "registry.example.com/iot/iot-gateway:2.4.1": ErrImagePull: failed to pull and unpack image "registry.example.com/iot/iot-gateway:2.4.1": failed to resolve reference "registry.example.com/iot/iot-gateway:2.4.1": pulling from host registry.example.com failed with status code [manifests 2.4.1]: 401 Unauthorized',
    sinceMinute: 0.7,
  },
  crashedAndRunningAgain: { phase: 'Running', ready: false, lastExit: { code: 1, minute: 3.2 }, sinceMinute: 3, revision: 'database-5d8' },
  justExited: { phase: 'Running', ready: false, exited: 1, sinceMinute: 3.5 },
  crashedBeforeNotReady: { phase: 'Running', ready: false, lastExit: { code: 1, minute: 2 }, sinceMinute: 3 },
  readyAfterCrash: { phase: 'Running', ready: true, lastExit: { code: 137, minute: 1 }, revision: 'database-5d8' },
  'database-0': {
    phase: 'Pending',
    ready: false,
    sinceMinute: 2,
    unschedulable: '0/5 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.',
  },
};

const instance = testInstance();

function statusOf(pods: KubeObject[], nowMinute: number) {
  return computeStatus({
    instance: { generation: 1, namespace: NS, spec: instance.spec },
    previous: undefined,
    outcome: { kind: 'applied', childrenMatched: true },
    observed: { deployments: [], statefulSets: [], pods: pods as unknown as V1Pod[] },
    now: new Date(at(nowMinute)),
  });
}

describe('leanPod', () => {
  it('gives the status computation the same result as the pod as received, in every state, at every time', () => {
    const entries = Object.entries(PODS);
    const full = entries.map(([name, state]) => fullPod(name, state));
    // Each pod alone, and all together; before, near and after the five-minute rule of each.
    for (const nowMinute of [0, 2, 4.5, 6, 9]) {
      for (const pods of [...full.map((p) => [p]), full]) {
        const lean = pods.map(leanPod);
        const label = `${pods.map((p) => p.metadata.name).join('+')} at minute ${nowMinute}`;
        assert.deepEqual(statusOf(lean, nowMinute), statusOf(pods, nowMinute), label);
        assert.equal(msUntilStuckPodFailure(lean as unknown as V1Pod[], new Date(at(nowMinute))), msUntilStuckPodFailure(pods as unknown as V1Pod[], new Date(at(nowMinute))), label);
      }
    }
    // The states above do reach every outcome, so the equality is not of empty statuses.
    const alone = (name: string, nowMinute: number) => statusOf([full[entries.findIndex(([n]) => n === name)]!], nowMinute);
    assert.match(statusOf(full, 6).reason!, /^Pod imagePullFailing has not been able to pull/, 'the pod stuck longest names the failure');
    assert.match(alone('imagePullFailing', 6).reason!, /has not been able to pull image registry\.example\.com\/iot\/iot-gateway:2\.4\.1/);
    assert.match(alone('crashLooping', 9).reason!, /Component gateway is in a crash loop: container gateway of pod crashLooping keeps exiting/);
    assert.match(alone('initImageFailing', 7).reason!, /pull image registry\.example\.com\/iot\/iot-init:2\.4\.1/);
    assert.match(alone('database-0', 9).reason!, /PersistentVolumeClaim data-database-0 of pod database-0 has not been bound for more than 5 minutes/);
    assert.match(alone('imageNotFound', 6).reason!, /^Image registry\.example\.com\/iot\/iot-gateway:2\.4\.1 of component gateway does not exist in its registry/);
    assert.match(alone('credentialsRefused', 6).reason!, /refused to serve image registry\.example\.com\/iot\/iot-gateway:2\.4\.1 of component gateway with the credentials of Secret image-pull-secret/);
    assert.match(alone('crashedAndRunningAgain', 9).reason!, /crash loop/);
    assert.match(alone('justExited', 9).reason!, /crash loop/);
    assert.equal(alone('crashedBeforeNotReady', 9).reason, undefined, 'a crash before the pod last became not ready is no crash loop');
    assert.equal(alone('readyAfterCrash', 9).reason, undefined);
    assert.deepEqual(statusOf(full, 0).pods, ['crashLooping', 'crashedAndRunningAgain', 'crashedBeforeNotReady', 'justExited', 'ready', 'readyAfterCrash']);
  });

  it('keeps of a Ready pod its identity, phase, IP and the labels that tie it to its instance', () => {
    assert.deepEqual(leanPod(fullPod('ready', PODS['ready']!)), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: 'ready',
        namespace: NS,
        uid: 'uid-ready',
        resourceVersion: '4711',
        creationTimestamp: at(-1),
        labels: { 'app.kubernetes.io/managed-by': 'iot-operator', 'cp.iotservices.io/landscape': 'devawsk8s', 'cp.iotservices.io/instance': 'tenant-a' },
      },
      status: { phase: 'Running', podIP: '10.0.0.7' },
    });
    assert.equal(leanPod(fullPod('gone', PODS['readyBeingDeleted']!)).metadata.deletionTimestamp, at(1));
  });

  it('gives the IP of a pod only while it is Ready and not being deleted, as received and as kept', () => {
    for (const view of [(pod: KubeObject) => pod, leanPod]) {
      assert.equal(readyPodIP(view(fullPod('ready', PODS['ready']!))), '10.0.0.7');
      assert.equal(readyPodIP(view(fullPod('gone', PODS['readyBeingDeleted']!))), undefined);
      assert.equal(readyPodIP(view(fullPod('crashed', PODS['crashedAndRunningAgain']!))), undefined);
    }
  });

  it('keeps of a pod that is not Ready its start, conditions, StatefulSet revision, each container image, waiting reason and message, and its exits', () => {
    const crashed = leanPod(fullPod('crashedAndRunningAgain', PODS['crashedAndRunningAgain']!)) as unknown as V1Pod;
    assert.deepEqual(crashed.status?.containerStatuses, [{ name: 'gateway', image: 'registry.example.com/iot/iot-gateway:2.4.1', lastState: { terminated: { exitCode: 1, finishedAt: at(3.2) } } }]);
    assert.equal(crashed.metadata?.labels?.['controller-revision-hash'], 'database-5d8');
    assert.equal(leanPod(fullPod('readyAfterCrash', PODS['readyAfterCrash']!)).metadata.labels?.['controller-revision-hash'], undefined, 'a Ready pod keeps no revision');
    const exited = leanPod(fullPod('justExited', PODS['justExited']!)) as unknown as V1Pod;
    assert.deepEqual(exited.status?.containerStatuses?.[0]?.state, { terminated: { exitCode: 1 } });
    const lean = leanPod(fullPod('imagePullFailing', PODS['imagePullFailing']!)) as unknown as V1Pod;
    assert.deepEqual(lean.spec, {
      initContainers: [{ name: 'wait-for-broker', image: 'registry.example.com/iot/iot-init:2.4.1' }],
      containers: [{ name: 'gateway', image: 'registry.example.com/iot/iot-gateway:2.4.1' }],
      volumes: [{ persistentVolumeClaim: { claimName: 'data-imagePullFailing' } }, {}],
    });
    assert.equal(lean.status?.startTime, at(0));
    assert.deepEqual(lean.status?.containerStatuses, [{ name: 'gateway', image: 'registry.example.com/iot/iot-gateway:2.4.1', state: { waiting: { reason: 'ImagePullBackOff', message: 'details vary' } } }]);
    assert.deepEqual(lean.status?.conditions?.map((c) => `${c.type}=${c.status}`), ['PodScheduled=True', 'Initialized=True', 'ContainersReady=False', 'Ready=False']);
    assert.equal(lean.metadata?.annotations, undefined);
    assert.equal(lean.metadata?.ownerReferences, undefined);
  });
});
