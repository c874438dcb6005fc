/**
 * The IoTService status, derived (never accumulated) from what is observed.
 *
 * Guarantees: `computeStatus` is a pure function of its input. The phase is
 *   - Failed when the reconcile failed in a way retrying will not fix, when the restore of
 *     spec.restore failed (its init container's latest run: `restoreFailure`), when a Deployment of the
 *     instance reports ProgressDeadlineExceeded, when a pod of the instance has been unable to
 *     pull an image or in a crash loop for longer than the stuck window (`stuckPodTimeoutMs`, the
 *     operator's --stuck-pod-timeout, default five minutes), or when a pod cannot be scheduled
 *     because its volume claim is unbound: at once when the claim's StorageClass
 *     (spec.<component>.storageClassName) was looked up and does not exist (that does not fix
 *     itself), otherwise after the stuck window (a provisioner may be slow);
 *   - Processing when a child was missing or differed (the reconcile just wrote it), when the
 *     reconcile waits for something another party makes (`Waiting`: cert-manager's certificate;
 *     conditions Ready and Progressing then carry its reason and message), or any workload is
 *     missing, not fully rolled out or not ready;
 *   - otherwise Failed when the instance's ingestion (ingestion.ts) is Stalled (`IngestionStalled`)
 *     or Full (`StorageFull`);
 *   - Available otherwise.
 * The ingestion reading is an input: `status.ingestion` takes its figures only when its state
 * differs from the previous status's, and the failure's message is made from `status.ingestion`,
 * so readings with other figures but the same state change nothing. An unknown reading (the
 * broker could not be asked) keeps `status.ingestion` as it is and neither makes an instance
 * Failed nor ends such a failure: it keeps an ingestion failure of the previous status.
 * `observedGeneration` is the instance's generation; `reason` is present only when Failed;
 * `pods` lists the instance's Running pods by name, sorted; `components` gives desired / updated /
 * ready replicas per workload; `ready` is "<ready pods>/<desired pods>". While Processing, the
 * Ready and Progressing messages name each workload waited for and what its pods in the way are
 * doing (`database 0/1 ready (database-0 terminating)`): a pod deleted or restarting is reported
 * so, never as Failed unless it is stuck as described below. Condition PersistentStorage says
 * whether broker and database keep their data on volumes, naming each emptyDir and why; condition
 * PlaintextProtocols whether the gateway serves a protocol without TLS, naming each. `gateway.tls`
 * (the CA devices trust, the server certificate's expiry) is the reconcile's, or the previous
 * status's when the reconcile rendered nothing (paused, failed); so is `restore` (status.restore,
 * restores.ts), which once Restored stays so. Conditions Ready,
 * Progressing and Degraded are maintained with the runtime's `setCondition`, so a condition's
 * lastTransitionTime moves only when its status changes. No field depends on `now` except those
 * transition times, so recomputing an unchanged situation yields an equal status (`statusEqual`)
 * and no write.
 *
 * How long a pod has been stuck, and when a container is in trouble (waiting for its image,
 * crash-looping), is pod-health.ts's to say; the failure names the pod stuck longest, so pods that
 * cross the window later do not change it. For an image that cannot be pulled the failure is
 * `ImageNotFound` or `ImagePullUnauthorized` as the kubelet's waiting message tells
 * (`classifyImagePullError`); any other cause is `ImagePullFailing`. A back-off message without
 * the cause (older kubelets) keeps the classification the previous status made for the same
 * image, so the reason does not alternate with the kubelet's two waiting reasons.
 * Every message names what to fix (the image and component, the landscape's image-pull-secret,
 * the component and pod of the crash loop) and nothing that changes between reconciles.
 *
 * For a pod whose claims are unbound (pod-health.ts `unboundClaims`), the failure names the first
 * such claim of the pod (spec.volumes) and what to fix.
 */

import type { V1ContainerStatus, V1Deployment, V1Pod, V1StatefulSet } from '@kubernetes/client-node';
import { canonicalJson, setCondition, type Condition, type ConditionUpdate } from '@iot-operator/runtime';
import {
  COMPONENTS,
  EPHEMERAL_STORAGE,
  type ComponentName,
  PLAINTEXT_PROTOCOLS,
  type ComponentStatus,
  type DefaultedIoTServiceSpec,
  type BackupStatus,
  type RestoreStatus,
  type GatewayStatus,
  type IngestionStatus,
  type IoTServicePhase,
  type IoTServiceStatus,
} from '../api/iotservice.ts';
import {
  crashLoopingFailure,
  durationText,
  imageNotFoundFailure,
  imagePullFailingFailure,
  imagePullUnauthorizedFailure,
  ingestionStalledFailure,
  storageFullFailure,
  type Failure,
  type FailureReason,
  type ImagePull,
} from '../failure.ts';
import type { IngestionVerdict } from '../ingestion.ts';
import type { StatusEvent } from '../iotservice-types.ts';
import {
  DEFAULT_STUCK_POD_TIMEOUT_MS,
  IMAGE_PULL_BACK_OFF,
  classifyImagePullError,
  isPodReady,
  judgeDeployment,
  judgeStatefulSet,
  podTrouble,
  unboundClaims,
  type PodTrouble,
} from './pod-health.ts';
import { hasEmptyDirData } from '../resources/data-volume.ts';
import { IMAGE_PULL_SECRET_NAME } from '../resources/secrets.ts';

export const CONDITION_READY = 'Ready';
export const CONDITION_PROGRESSING = 'Progressing';
export const CONDITION_DEGRADED = 'Degraded';
export const CONDITION_PERSISTENT_STORAGE = 'PersistentStorage';
export const CONDITION_PLAINTEXT_PROTOCOLS = 'PlaintextProtocols';

/** Something the instance needs that another party is making (cert-manager's certificate): why it is not Available yet. */
export interface Waiting {
  /** CamelCase, the Ready and Progressing conditions' reason. */
  reason: string;
  /** One sentence naming what is waited for, without anything that changes between reconciles. */
  message: string;
}

/** What the reconcile did (or could not do) this time. */
export type ReconcileOutcome =
  /** The spec cannot be realised, or the API server refused a write for good. */
  | { kind: 'failed'; failure: Failure }
  /** Children were compared and, where they differed, applied; `childrenMatched`: nothing had to be written; `waiting`: what is still awaited. */
  | { kind: 'applied'; childrenMatched: boolean; waiting?: Waiting }
  /** Nothing was written: what the children need is not there yet. */
  | { kind: 'waiting'; waiting: Waiting }
  /** spec.paused: nothing was written; `childrenMatched` when the controller compared anyway. */
  | { kind: 'paused'; childrenMatched?: boolean };

export interface StatusInput {
  instance: {
    generation: number;
    /** The instance namespace; undefined when `<landscape>-<id>` is not a valid name. */
    namespace?: string;
    /** The validated spec with defaults; undefined when it is invalid. */
    spec?: DefaultedIoTServiceSpec;
    /** The landscape namespace (the IoTService's own): where its image-pull-secret is. */
    landscape?: string;
  };
  previous: IoTServiceStatus | undefined;
  outcome: ReconcileOutcome;
  /** The instance's workloads and pods as observed (from the cache). */
  observed: {
    deployments: readonly V1Deployment[];
    statefulSets: readonly V1StatefulSet[];
    pods: readonly V1Pod[];
    /** StorageClasses named in the spec that were looked up and do not exist. */
    missingStorageClasses?: readonly string[];
  };
  /** The latest reading of the instance's broker (ingestion.ts); undefined when unknown. */
  ingestion?: IngestionVerdict;
  /** status.gateway.tls as the reconcile made it; undefined when it made none (the previous one stays). */
  gatewayTls?: GatewayStatus['tls'];
  /** status.backup as the repository host reported it now; undefined when unknown (the previous one stays while the spec asks for backups). */
  backup?: BackupStatus;
  /** status.restore as the reconcile made it (restores.ts `restoreStatus`); undefined: none, or the previous one stays (the reconcile rendered nothing). */
  restore?: RestoreStatus;
  /** The restore's init container failed (restores.ts `restoreProgress`): the instance is Failed with it. */
  restoreFailure?: Failure;
  now: Date;
  /** The stuck window; default DEFAULT_STUCK_POD_TIMEOUT_MS. */
  stuckPodTimeoutMs?: number;
}

/** One workload as observed, judged against the spec. */
interface WorkloadView {
  component: ComponentName;
  kind: 'Deployment' | 'StatefulSet';
  exists: boolean;
  desired: number;
  updated: number;
  ready: number;
  rolledOut: boolean;
}

const WORKLOAD_KIND: Readonly<Record<ComponentName, 'Deployment' | 'StatefulSet'>> = {
  gateway: 'Deployment',
  core: 'Deployment',
  processing: 'Deployment',
  broker: 'StatefulSet',
  database: 'StatefulSet',
};

export function computeStatus(input: StatusInput): IoTServiceStatus {
  const { instance, outcome, observed, now } = input;
  const window = input.stuckPodTimeoutMs ?? DEFAULT_STUCK_POD_TIMEOUT_MS;
  const workloads = viewWorkloads(input);
  const workloadFailure =
    outcome.kind === 'failed'
      ? outcome.failure
      : (input.restoreFailure ??
        progressDeadlineFailure(observed.deployments) ??
        stuckPodFailure(observed.pods, instance, input.previous, now, window) ??
        unboundClaimFailure(observed.pods, instance, observed.missingStorageClasses ?? [], now, window));

  const childrenDiffered = (outcome.kind === 'applied' || outcome.kind === 'paused') && outcome.childrenMatched === false;
  const waiting = outcome.kind === 'waiting' || outcome.kind === 'applied' ? outcome.waiting : undefined;
  const pending = workloads.filter((w) => !w.rolledOut);
  const ingestion = ingestionStatus(input.ingestion, input.previous?.ingestion);
  const settled = !workloadFailure && !childrenDiffered && !waiting && pending.length === 0;
  const failure = workloadFailure ?? (settled ? ingestionFailure(input, ingestion) : undefined);
  const phase: IoTServicePhase = failure ? 'Failed' : childrenDiffered || waiting || pending.length > 0 ? 'Processing' : 'Available';

  const desiredPods = workloads.reduce((sum, w) => sum + w.desired, 0);
  const readyPods = workloads.reduce((sum, w) => sum + Math.min(w.ready, w.desired), 0);
  const components: Record<string, ComponentStatus> = {};
  for (const w of workloads) components[w.component] = { desired: w.desired, updated: w.updated, ready: w.ready };

  const generation = instance.generation;
  const paused = outcome.kind === 'paused';
  const progress = progressMessage(childrenDiffered, pending, observed.pods);
  const updates = conditionUpdates({ phase, failure, waiting, paused, progress, readyPods, desiredPods, generation, childrenDiffered });
  let conditions: Condition[] = (input.previous?.conditions ?? []) as Condition[];
  for (const update of updates) conditions = setCondition(conditions, update, now);
  const storage = instance.spec && persistentStorageCondition(instance.spec, observed.statefulSets, generation);
  if (storage) conditions = setCondition(conditions, storage, now);
  if (instance.spec) conditions = setCondition(conditions, plaintextProtocolsCondition(instance.spec, generation), now);
  const gateway = input.gatewayTls ? { tls: input.gatewayTls } : input.previous?.gateway;
  const backup = instance.spec?.backup ? (input.backup ?? input.previous?.backup) : undefined;
  const restore = instance.spec?.restore ? (input.restore ?? input.previous?.restore) : undefined;

  return {
    phase,
    observedGeneration: generation,
    ...(failure ? { reason: failure.message } : {}),
    ...(instance.namespace ? { namespace: instance.namespace } : {}),
    ready: `${readyPods}/${desiredPods}`,
    ...(workloads.length > 0 ? { components } : {}),
    pods: runningPodNames(observed.pods),
    ...(ingestion ? { ingestion } : {}),
    ...(gateway ? { gateway } : {}),
    ...(backup ? { backup } : {}),
    ...(restore ? { restore } : {}),
    conditions,
  };
}

// ---------------------------------------------------------------------------------------------
// Ingestion
// ---------------------------------------------------------------------------------------------

const INGESTION_REASONS: ReadonlySet<string> = new Set<FailureReason>(['IngestionStalled', 'StorageFull']);

/** status.ingestion: the previous one while the state is the same or unknown, else the reading's figures. */
function ingestionStatus(verdict: IngestionVerdict | undefined, previous: IngestionStatus | undefined): IngestionStatus | undefined {
  if (!verdict || verdict.state === previous?.state) return previous;
  const { reading } = verdict;
  const whole = (n: number) => Math.max(0, Math.round(n));
  return {
    state: verdict.state,
    backlogMessages: whole(reading.backlogMessages),
    backlogBytes: whole(reading.backlogBytes),
    ...(reading.backlogLimitBytes !== undefined ? { backlogLimitBytes: whole(reading.backlogLimitBytes) } : {}),
    oldestUnstoredSeconds: whole(reading.oldestUnstoredSeconds),
    ...(reading.lastStoredSecondsAgo !== undefined ? { lastStoredSecondsAgo: whole(reading.lastStoredSecondsAgo) } : {}),
  };
}

/**
 * The failure of an instance otherwise Available whose ingestion is Stalled or Full: by the
 * reading when there is one, else (unknown) only the one the previous status reported.
 */
function ingestionFailure(input: StatusInput, ingestion: IngestionStatus | undefined): Failure | undefined {
  if (!ingestion) return undefined;
  if (!input.ingestion) {
    const previous = input.previous;
    const reason = previous?.conditions?.find((c) => c.type === CONDITION_DEGRADED && c.status === 'True')?.reason;
    if (previous?.phase !== 'Failed' || !reason || !INGESTION_REASONS.has(reason)) return undefined;
  }
  const namespace = input.instance.namespace ?? '';
  if (ingestion.state === 'Stalled') return ingestionStalledFailure(ingestion, namespace);
  if (ingestion.state === 'Full') return storageFullFailure(ingestion, namespace);
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------------------------

function viewWorkloads(input: StatusInput): WorkloadView[] {
  const { spec } = input.instance;
  const views: WorkloadView[] = [];
  for (const component of COMPONENTS) {
    const kind = WORKLOAD_KIND[component];
    const object =
      kind === 'Deployment'
        ? input.observed.deployments.find((d) => d.metadata?.name === component)
        : input.observed.statefulSets.find((s) => s.metadata?.name === component);
    if (!spec && !object) continue; // nothing to judge against
    const desired = spec ? spec[component].replicas : (object?.spec?.replicas ?? 1);
    if (!object) {
      views.push({ component, kind, exists: false, desired, updated: 0, ready: 0, rolledOut: false });
      continue;
    }
    const judged =
      kind === 'Deployment' ? judgeDeployment(object as V1Deployment, desired) : judgeStatefulSet(object as V1StatefulSet, desired);
    views.push({ component, kind, exists: true, desired, ...judged });
  }
  return views;
}

// ---------------------------------------------------------------------------------------------
// Failures found in observed objects
// ---------------------------------------------------------------------------------------------

function progressDeadlineFailure(deployments: readonly V1Deployment[]): Failure | undefined {
  for (const d of [...deployments].sort(byName)) {
    const progressing = d.status?.conditions?.find((c) => c.type === 'Progressing');
    if (progressing?.status === 'False' && progressing.reason === 'ProgressDeadlineExceeded') {
      const seconds = d.spec?.progressDeadlineSeconds ?? 600;
      const detail = progressing.message ? `: ${progressing.message.replace(/\.$/, '')}` : '';
      return {
        reason: 'ProgressDeadlineExceeded',
        message: `Deployment ${d.metadata?.name ?? '?'} made no progress for ${seconds} seconds${detail}.`,
      };
    }
  }
  return undefined;
}

function stuckPodFailure(
  pods: readonly V1Pod[],
  instance: StatusInput['instance'],
  previous: IoTServiceStatus | undefined,
  now: Date,
  window: number,
): Failure | undefined {
  // The pod stuck longest (then by name): pods that cross the window later do not change the message.
  const stuck = pods
    .map((pod) => ({ pod, trouble: podTrouble(pod) }))
    .filter((p): p is { pod: V1Pod; trouble: PodTrouble } => !!p.trouble && now.getTime() - p.trouble.since > window)
    .sort((a, b) => a.trouble.since - b.trouble.since || byName(a.pod, b.pod));
  // Among crash loops, the container restarted most: a pod not ready since its start because of
  // what it depends on (core crashing) and restarted once (a liveness probe on a busy node) counts as
  // stuck since its start too, but the component to fix is the one that keeps exiting.
  if (stuck[0]?.trouble.kind === 'crash') {
    const restarts = (p: (typeof stuck)[number]) => (p.trouble.kind === 'crash' ? (p.trouble.container.restartCount ?? 0) : -1);
    stuck.sort((a, b) => restarts(b) - restarts(a));
  }
  for (const { pod, trouble } of stuck) {
    const podName = pod.metadata?.name ?? '?';
    const ns = instance.namespace ?? pod.metadata?.namespace ?? '';
    const { container } = trouble;
    if (trouble.kind === 'crash') return crashLoopingFailure(container.name, podName, container.name, ns, window);
    const pull: ImagePull = { image: trouble.image, component: container.name, overridden: !!instance.spec?.[container.name as ComponentName]?.image };
    const cause = classifyImagePullError(container.state?.waiting?.message);
    if (cause === 'ImageNotFound') return imageNotFoundFailure(pull);
    if (cause === 'ImagePullUnauthorized') return imagePullUnauthorizedFailure(pull, IMAGE_PULL_SECRET_NAME, instance.landscape, ns);
    const earlier = earlierPullFailure(previous, container, pull.image);
    return earlier ?? imagePullFailingFailure(pull, podName, ns, window);
  }
  return undefined;
}

/**
 * The classified pull failure of the previous status for this image, kept while the kubelet's
 * back-off message gives no cause (kubelets before 1.32 say only `Back-off pulling image "x"`).
 */
function earlierPullFailure(previous: IoTServiceStatus | undefined, container: V1ContainerStatus, image: string): Failure | undefined {
  const waiting = container.state?.waiting;
  if (waiting?.reason !== IMAGE_PULL_BACK_OFF || (waiting.message ?? '').includes(': ')) return undefined;
  const reason = previous?.conditions?.find((c) => c.type === CONDITION_DEGRADED && c.status === 'True')?.reason;
  if ((reason === 'ImageNotFound' || reason === 'ImagePullUnauthorized') && previous?.reason?.includes(` ${image} `)) {
    return { reason, message: previous.reason };
  }
  return undefined;
}

/** The components that may have volume claims (spec.<component>.storage): the StatefulSets. */
export const STORAGE_COMPONENTS = ['broker', 'database'] as const satisfies readonly ComponentName[];
type StorageComponent = (typeof STORAGE_COMPONENTS)[number];

/** The StatefulSet component a pod belongs to, by its name (`<component>-<ordinal>`). */
/**
 * The StorageClass the claims of StatefulSet pod `podName` are made with, and the spec field that
 * names it: the broker's and the database's own, the backup repository host's (`backup-0`) its
 * target's. Undefined for any other pod.
 */
export function claimStorageClass(spec: DefaultedIoTServiceSpec | undefined, podName: string): { className?: string; field: string } | undefined {
  const owner = /^([a-z]+)-\d+$/.exec(podName)?.[1];
  if (owner === 'backup') return { className: spec?.backup?.target.volumeClaim?.storageClassName, field: 'spec.backup.target.volumeClaim.storageClassName' };
  const component = STORAGE_COMPONENTS.find((c) => c === owner);
  return component && { className: spec?.[component].storageClassName, field: `spec.${component}.storageClassName` };
}

function unboundClaimFailure(
  pods: readonly V1Pod[],
  instance: StatusInput['instance'],
  missingStorageClasses: readonly string[],
  now: Date,
  window: number,
): Failure | undefined {
  for (const pod of [...pods].sort(byName)) {
    const unbound = unboundClaims(pod);
    if (!unbound) continue;
    const podName = pod.metadata?.name ?? '?';
    const storageClass = claimStorageClass(instance.spec, podName);
    const className = storageClass?.className;
    const claim = unbound.claims[0] ? `PersistentVolumeClaim ${unbound.claims[0]}` : `The volume claim of pod ${podName}`;
    const ns = instance.namespace ?? pod.metadata?.namespace ?? '';
    if (storageClass && className && missingStorageClasses.includes(className)) {
      return {
        reason: 'StorageClassNotFound',
        message:
          `${claim} cannot be provisioned: StorageClass ${className} (${storageClass.field}) does not exist. ` +
          `Create it, or recreate the IoTService with a StorageClass that exists (kubectl get storageclass); storage settings cannot be changed in place.`,
      };
    }
    if (unbound.since === undefined || now.getTime() - unbound.since <= window) continue;
    const whose = className ? `StorageClass ${className}` : "the cluster's default StorageClass";
    const target = unbound.claims[0] ? `kubectl describe pvc -n ${ns} ${unbound.claims[0]}` : `kubectl describe pod -n ${ns} ${podName}`;
    return {
      reason: 'VolumeNotBound',
      message:
        `${claim} of pod ${podName} has not been bound for more than ${durationText(window)}, so the pod cannot be scheduled; ` +
        `check that ${whose} exists and that its provisioner runs (${target}).`,
    };
  }
  return undefined;
}

function byName(a: { metadata?: { name?: string } }, b: { metadata?: { name?: string } }): number {
  const x = a.metadata?.name ?? '';
  const y = b.metadata?.name ?? '';
  return x < y ? -1 : x > y ? 1 : 0;
}

function runningPodNames(pods: readonly V1Pod[]): string[] {
  return pods
    .filter((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp)
    .map((p) => p.metadata?.name ?? '')
    .filter((name) => name !== '')
    .sort();
}

// ---------------------------------------------------------------------------------------------
// Conditions
// ---------------------------------------------------------------------------------------------

function progressMessage(childrenDiffered: boolean, pending: readonly WorkloadView[], pods: readonly V1Pod[]): string {
  const waiting = pending.map((w) => {
    if (!w.exists) return `${w.component} not created yet`;
    const notes = podNotes(w.component, pods);
    return `${w.component} ${Math.min(w.ready, w.desired)}/${w.desired} ready${notes.length > 0 ? ` (${notes.join(', ')})` : ''}`;
  });
  if (childrenDiffered) {
    return waiting.length > 0
      ? `Applying the spec to the instance's children; waiting for ${waiting.join(', ')}.`
      : "Applying the spec to the instance's children.";
  }
  return waiting.length > 0 ? `Waiting for ${waiting.join(', ')}.` : 'All workloads are rolled out and ready.';
}

/**
 * What each of a component's pods that keeps it from being rolled out is doing: terminating
 * (deleted, its replacement not there yet), the reason a container waits (ContainerCreating,
 * PodInitializing, ...), or not ready (running, its readiness check failing — a dependency away).
 * A pod belongs to a component by its name: `<component>-<ordinal>` or `<component>-<hash>-<id>`.
 */
function podNotes(component: ComponentName, pods: readonly V1Pod[]): string[] {
  return [...pods]
    .filter((pod) => (pod.metadata?.name ?? '').startsWith(`${component}-`))
    .sort(byName)
    .flatMap((pod) => {
      const name = pod.metadata?.name ?? '?';
      if (pod.metadata?.deletionTimestamp) return [`${name} terminating`];
      if (isPodReady(pod)) return [];
      const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
      const waiting = statuses.map((c) => c.state?.waiting?.reason).find((reason) => !!reason);
      return [`${name} ${waiting ?? 'not ready'}`];
    });
}

function conditionUpdates(state: {
  phase: IoTServicePhase;
  failure: Failure | undefined;
  waiting: Waiting | undefined;
  paused: boolean;
  progress: string;
  readyPods: number;
  desiredPods: number;
  generation: number;
  childrenDiffered: boolean;
}): ConditionUpdate[] {
  const { phase, failure, waiting, paused, progress, generation } = state;
  const condition = (type: string, status: 'True' | 'False', reason: string, message: string): ConditionUpdate => ({
    type,
    status,
    reason,
    message,
    observedGeneration: generation,
  });

  if (phase === 'Failed' && failure) {
    return [
      condition(CONDITION_READY, 'False', failure.reason, failure.message),
      condition(CONDITION_PROGRESSING, 'False', failure.reason, 'Progress has stopped; see the Degraded condition.'),
      condition(CONDITION_DEGRADED, 'True', failure.reason, failure.message),
    ];
  }
  const notDegraded = condition(CONDITION_DEGRADED, 'False', 'AsExpected', 'No failure.');
  const pausedProgressing = condition(
    CONDITION_PROGRESSING,
    'False',
    'Paused',
    'spec.paused is true: the operator leaves every child as it is.',
  );
  if (phase === 'Available') {
    return [
      condition(CONDITION_READY, 'True', 'Available', `All ${state.desiredPods} pods of the instance are ready.`),
      paused ? pausedProgressing : condition(CONDITION_PROGRESSING, 'False', 'RolloutComplete', progress),
      notDegraded,
    ];
  }
  if (waiting) {
    return [condition(CONDITION_READY, 'False', waiting.reason, waiting.message), condition(CONDITION_PROGRESSING, 'True', waiting.reason, waiting.message), notDegraded];
  }
  return [
    condition(CONDITION_READY, 'False', 'Processing', progress),
    paused
      ? pausedProgressing
      : condition(CONDITION_PROGRESSING, 'True', state.childrenDiffered ? 'ChildrenUpdated' : 'RollingOut', progress),
    notDegraded,
  ];
}

/**
 * PersistentStorage: True when broker and database keep their data on volumes; False, naming each
 * that keeps it in an emptyDir and why, when deleting its pod would lose that data. A StatefulSet
 * not made yet is judged by its spec.
 */
function persistentStorageCondition(spec: DefaultedIoTServiceSpec, statefulSets: readonly V1StatefulSet[], generation: number): ConditionUpdate {
  const ephemeral = STORAGE_COMPONENTS.flatMap((component) => {
    const observed = statefulSets.find((s) => s.metadata?.name === component);
    if (spec[component].storage === EPHEMERAL_STORAGE && (!observed || hasEmptyDirData(observed))) {
      return [`${component} keeps its data in an emptyDir (spec.${component}.storage: ${EPHEMERAL_STORAGE})`];
    }
    if (observed && hasEmptyDirData(observed)) {
      return [`${component} keeps its data in an emptyDir (its StatefulSet was made before volumes were the default and cannot change; recreate the IoTService to give it a volume)`];
    }
    return [];
  });
  if (ephemeral.length === 0) {
    return { type: CONDITION_PERSISTENT_STORAGE, status: 'True', reason: 'PersistentVolumes', message: 'Broker and database keep their data on persistent volumes.', observedGeneration: generation };
  }
  return {
    type: CONDITION_PERSISTENT_STORAGE,
    status: 'False',
    reason: 'EmptyDir',
    message: `${ephemeral.join('; ')}. Deleting that pod loses its data: the broker's unstored telemetry, the database's registry and telemetry.`,
    observedGeneration: generation,
  };
}

/**
 * PlaintextProtocols: True, naming them, when the gateway serves a protocol without TLS (mqtt,
 * http, coap), over which devices' passwords cross the network in clear; False when it serves
 * only mqtts and https.
 */
function plaintextProtocolsCondition(spec: DefaultedIoTServiceSpec, generation: number): ConditionUpdate {
  const plaintext = spec.gateway.protocols.filter((p) => PLAINTEXT_PROTOCOLS.includes(p));
  if (plaintext.length === 0) {
    return { type: CONDITION_PLAINTEXT_PROTOCOLS, status: 'False', reason: 'TLSOnly', message: 'The gateway serves devices over TLS only (mqtts, https).', observedGeneration: generation };
  }
  return {
    type: CONDITION_PLAINTEXT_PROTOCOLS,
    status: 'True',
    reason: 'PlaintextServed',
    message: `The gateway serves ${plaintext.join(', ')} without TLS: devices' passwords and telemetry cross the network in clear. Serve mqtts and https instead (spec.gateway.protocols).`,
    observedGeneration: generation,
  };
}

// ---------------------------------------------------------------------------------------------
// Comparing statuses and describing transitions
// ---------------------------------------------------------------------------------------------

/** Deep equality ignoring key order and undefined fields: decides whether a status write is needed. */
export function statusEqual(a: IoTServiceStatus | undefined, b: IoTServiceStatus | undefined): boolean {
  return canonicalJson(a ?? {}) === canonicalJson(b ?? {});
}

/**
 * The Event to record on the IoTService for a status change, or undefined when nothing a user
 * would care about changed: a new phase, or a different failure while Failed.
 */
export function statusTransitionEvent(previous: IoTServiceStatus | undefined, next: IoTServiceStatus): StatusEvent | undefined {
  const before = previous?.phase;
  const after = next.phase;
  if (!after) return undefined;
  const conditionOf = (status: IoTServiceStatus | undefined, type: string) => status?.conditions?.find((c) => c.type === type);

  if (after === 'Failed') {
    if (before === 'Failed' && previous?.reason === next.reason) return undefined;
    const reason = (conditionOf(next, CONDITION_DEGRADED)?.reason as FailureReason | undefined) ?? 'Failed';
    return { type: 'Warning', reason, message: next.reason ?? 'The instance failed.' };
  }
  if (before === after) return undefined;
  if (after === 'Available') {
    return { type: 'Normal', reason: 'Available', message: `The instance is available: ${next.ready ?? '?'} pods ready.` };
  }
  const progress = conditionOf(next, CONDITION_PROGRESSING)?.message ?? 'Rolling out.';
  if (before === 'Failed') return { type: 'Normal', reason: 'Recovered', message: `The failure is resolved. ${progress}` };
  if (before === undefined && next.namespace) {
    return { type: 'Normal', reason: 'Processing', message: `Creating the instance in namespace ${next.namespace}. ${progress}` };
  }
  return { type: 'Normal', reason: 'Processing', message: progress };
}
