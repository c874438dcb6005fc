/**
 * What the IoT operator keeps of a pod: the cache transform of its pod informer, also applied to
 * pods a shard lists.
 *
 * Guarantees: the kept pod carries exactly what the status computation (status.ts,
 * pod-health.ts) reads, so `computeStatus` and `msUntilStuckPodFailure` give the same result for
 * the kept pod as for the pod as received:
 * - of its metadata: name, namespace, uid, resourceVersion, creation and deletion times, the
 *   labels that tie it to its landscape and instance (the cache's label index and selectors read
 *   no other) and, while it is not Ready, its StatefulSet revision (`controller-revision-hash`:
 *   pod-restarts.ts replaces pods stuck on an earlier one);
 * - its phase (which pods are Running);
 * - only while its Ready condition is not True: its start time, its conditions' type, status,
 *   transition time and message (the scheduler's, naming unbound claims), the claim name of each
 *   volume, and of each container (init containers too) its name, image, waiting reason and
 *   message (the kubelet's pull error: no such image, or credentials refused), and the exit code
 *   of its current and the exit code and end of its last termination (a crash loop). A Ready pod
 *   is neither stuck nor on its way to being stuck (pod-health.ts looks only at pods that are not
 *   Ready), and most pods of an instance at rest are Ready: they cost their identity, phase and
 *   IP (the ingestion monitor, ingestion.ts, asks the Ready broker pod at its IP: `readyPodIP`).
 * Every event brings the whole pod again, so a pod that stops being Ready is kept in full detail
 * from that event on.
 */
import { keepFields, type KubeObject, type ObjectMeta } from '@iot-operator/runtime';
import { INSTANCE_LABEL, LANDSCAPE_LABEL, MANAGED_BY_LABEL } from './resources/index.ts';

/** The label the StatefulSet controller puts on each pod: the revision it was created from. */
export const REVISION_LABEL = 'controller-revision-hash';

const KEPT_LABELS = [MANAGED_BY_LABEL, LANDSCAPE_LABEL, INSTANCE_LABEL] as const;
const NOT_READY_KEPT_LABELS = [...KEPT_LABELS, REVISION_LABEL] as const;

const readyPodFields = keepFields<KubeObject>('status.phase', 'status.podIP');

const notReadyPodFields = keepFields<KubeObject>(
  ...['spec.containers[]', 'spec.initContainers[]'].flatMap((list) => [`${list}.name`, `${list}.image`]),
  'status.phase',
  'spec.volumes[].persistentVolumeClaim.claimName',
  'status.startTime',
  ...['type', 'status', 'lastTransitionTime', 'message'].map((field) => `status.conditions[].${field}`),
  ...['status.containerStatuses[]', 'status.initContainerStatuses[]'].flatMap((list) => [
    `${list}.name`,
    `${list}.image`,
    `${list}.state.waiting.reason`,
    `${list}.state.waiting.message`,
    `${list}.state.terminated.exitCode`,
    `${list}.lastState.terminated.exitCode`,
    `${list}.lastState.terminated.finishedAt`,
  ]),
);

interface PodConditions {
  status?: { conditions?: readonly { type?: string; status?: string }[] };
}

/** True when the pod's Ready condition is True. */
function isReady(pod: KubeObject): boolean {
  return (pod as PodConditions).status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

/**
 * The IP of a pod that is Running, Ready and not being deleted, as received or as `leanPod` keeps
 * it (a kept pod without conditions was Ready: leanPod drops them only then).
 */
export function readyPodIP(pod: KubeObject): string | undefined {
  const status = (pod as { status?: { phase?: string; podIP?: string } } & PodConditions).status;
  const notReady = status?.conditions?.some((c) => c.type === 'Ready' && c.status !== 'True') ?? false;
  if (pod.metadata.deletionTimestamp || status?.phase !== 'Running' || notReady) return undefined;
  return status.podIP || undefined;
}

export function leanPod(pod: KubeObject): KubeObject {
  const { name, namespace, uid, resourceVersion, creationTimestamp, deletionTimestamp, labels } = pod.metadata;
  const ready = isReady(pod);
  const keptLabels: Record<string, string> = {};
  for (const label of ready ? KEPT_LABELS : NOT_READY_KEPT_LABELS) {
    const value = labels?.[label];
    if (value !== undefined) keptLabels[label] = value;
  }
  const metadata: ObjectMeta = { name, namespace, uid, resourceVersion, labels: keptLabels };
  if (creationTimestamp !== undefined) metadata.creationTimestamp = creationTimestamp;
  if (deletionTimestamp !== undefined) metadata.deletionTimestamp = deletionTimestamp;
  // keepFields keeps the metadata it is given: the lean one, not a copy of the received one.
  const withLeanMetadata = { ...pod, metadata };
  return ready ? readyPodFields(withLeanMetadata) : notReadyPodFields(withLeanMetadata);
}
