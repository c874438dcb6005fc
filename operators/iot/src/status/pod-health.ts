/**
 * Pod and workload health as the IoT operator judges it: whether a workload is rolled out, whether
 * a pod is in trouble (waiting for its image, crash-looping) and since when, whether the scheduler
 * cannot place it because of unbound claims, and the stuck window. The status (status.ts) turns
 * these into the instance's phase and failures; pod-restarts.ts and rollout-order.ts ask them too.
 *
 * Guarantees: every function here is a pure function of the pods and workloads as observed (or as
 * pod-view.ts keeps them); none reads the clock except through its `now` argument.
 *
 * How "stuck for longer than the window" is measured: the kubelet records no time for a
 * container's waiting reason, so we take the time the pod's containers stopped being ready: the
 * lastTransitionTime of the pod's ContainersReady condition while it is not True (falling back to
 * the Ready condition, then the pod's startTime, then its creationTimestamp). For an image that
 * cannot be pulled that is the pod's start; for a crash loop it is the first crash (readiness
 * probes keep a crash-looping container not ready between restarts). A pod is stuck when it is
 * not Ready, one of its containers (init containers included) is in trouble, and that time is
 * longer ago than the window. Pods being deleted are ignored. A container is in trouble when
 *   - it waits with ErrImagePull or ImagePullBackOff: the kubelet's waiting message (since
 *     Kubernetes 1.32 the back-off message carries the last pull error too) tells `ImageNotFound`
 *     (the registry has no such tag or repository) from `ImagePullUnauthorized` (it refused the
 *     credentials: 401, 403, "denied"): `classifyImagePullError`;
 *   - it crash-loops: it waits with CrashLoopBackOff, or it has just exited with a non-zero code
 *     (the kubelet restarts it after its back-off), or it runs again after exiting with a
 *     non-zero code since the pod stopped being ready. The kubelet passes through all three in
 *     every round of a crash loop, so the instance stays Failed through the loop instead of
 *     flapping to Processing whenever the container is briefly running.
 *
 * A pod's claims are unbound when its PodScheduled condition is False with the scheduler's
 * "unbound immediate PersistentVolumeClaims"; the time is that condition's lastTransitionTime.
 */

import type { V1ContainerStatus, V1Deployment, V1Pod, V1StatefulSet } from '@kubernetes/client-node';

/** The stuck window unless the operator is told otherwise (--stuck-pod-timeout): how long a pod may fail to pull, crash or stay unschedulable before the instance is Failed. */
export const DEFAULT_STUCK_POD_TIMEOUT_MS = 5 * 60 * 1000;

export const IMAGE_PULL_BACK_OFF = 'ImagePullBackOff';
const IMAGE_PULL_REASONS = new Set([IMAGE_PULL_BACK_OFF, 'ErrImagePull']);
const CRASH_LOOP_REASON = 'CrashLoopBackOff';
/** What the scheduler says of a pod whose claims are neither bound nor waiting for it (VolumeBinding plugin). */
const UNBOUND_CLAIMS_MESSAGE = 'unbound immediate PersistentVolumeClaims';

/**
 * Like `kubectl rollout status`, and stricter on scale-down: current generation observed, exactly
 * `desired` replicas left (no old or surplus ones), all updated, available and ready.
 */
export function judgeDeployment(d: V1Deployment, desired: number): { updated: number; ready: number; rolledOut: boolean } {
  const status = d.status ?? {};
  const updated = status.updatedReplicas ?? 0;
  const ready = status.readyReplicas ?? 0;
  const rolledOut =
    generationObserved(d.metadata?.generation, status.observedGeneration) &&
    (d.spec?.replicas ?? 1) === desired &&
    updated >= desired &&
    (status.replicas ?? 0) === desired &&
    (status.availableReplicas ?? 0) >= desired &&
    ready >= desired;
  return { updated, ready, rolledOut };
}

/** Current generation observed, exactly `desired` replicas, all on the update revision and ready (rollout-order.ts asks it too). */
export function judgeStatefulSet(s: V1StatefulSet, desired: number): { updated: number; ready: number; rolledOut: boolean } {
  const status = s.status;
  const updated = status?.updatedReplicas ?? 0;
  const ready = status?.readyReplicas ?? 0;
  const rolledOut =
    generationObserved(s.metadata?.generation, status?.observedGeneration) &&
    (s.spec?.replicas ?? 1) === desired &&
    (status?.replicas ?? 0) === desired &&
    updated >= desired &&
    ready >= desired &&
    !movingToUpdateRevision(s);
  return { updated, ready, rolledOut };
}

/**
 * Whether the StatefulSet still has pods to bring onto its update revision. With RollingUpdate its
 * controller moves `currentRevision` to `updateRevision` once every pod is updated and ready (a
 * revision not reported yet counts as done). With OnDelete it never does (Kubernetes 1.33 as
 * before: currentRevision stays the first one, only `updatedReplicas` counts the pods on the update
 * revision), so there it is fewer updated pods than replicas.
 */
export function movingToUpdateRevision(s: V1StatefulSet): boolean {
  const status = s.status;
  if (!status?.updateRevision) return false;
  if (s.spec?.updateStrategy?.type === 'OnDelete') return (status.updatedReplicas ?? 0) < (status.replicas ?? 0);
  return !!status.currentRevision && status.currentRevision !== status.updateRevision;
}

function generationObserved(generation: number | undefined, observedGeneration: number | undefined): boolean {
  return generation === undefined || (observedGeneration ?? 0) >= generation;
}

/**
 * What the registry's refusal in a kubelet's ErrImagePull / ImagePullBackOff message means:
 * `ImageNotFound` (no such tag or repository), `ImagePullUnauthorized` (the credentials were
 * refused or missing), or undefined (another cause, or none given). containerd says
 * `code = NotFound ... : not found` and `401 Unauthorized`; CRI-O and registries say `manifest
 * unknown`, `name unknown`, `unauthorized: authentication required`, `denied`, `403 Forbidden`.
 */
export function classifyImagePullError(message: string | undefined): 'ImageNotFound' | 'ImagePullUnauthorized' | undefined {
  if (!message) return undefined;
  if (/401 Unauthorized|403 Forbidden|unauthori[sz]ed|authentication required|authorization failed|insufficient_scope|\bdenied\b/i.test(message)) return 'ImagePullUnauthorized';
  if (/code = NotFound|: not found\b|manifest unknown|name unknown|repository .*not found|\bnot found$/i.test(message)) return 'ImageNotFound';
  return undefined;
}

/** True when a container of the pod (not being deleted) waits to pull its image (ErrImagePull, ImagePullBackOff). */
export function waitsToPullImage(pod: V1Pod): boolean {
  if (pod.metadata?.deletionTimestamp) return false;
  const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
  return statuses.some((c) => IMAGE_PULL_REASONS.has(c.state?.waiting?.reason ?? ''));
}

/** True when the pod is not Ready and a container of it waits for its image or crash-loops (however long: no window). */
export function isStuckOrFailing(pod: V1Pod): boolean {
  return podTrouble(pod) !== undefined;
}

/** A container of a pod that is not Ready, in trouble (see the module comment), and since when the pod has not been ready. */
export type PodTrouble = { since: number; container: V1ContainerStatus } & ({ kind: 'pull'; image: string } | { kind: 'crash' });

export function podTrouble(pod: V1Pod): PodTrouble | undefined {
  if (pod.metadata?.deletionTimestamp || isPodReady(pod)) return undefined;
  const since = notReadySince(pod);
  if (since === undefined) return undefined;
  const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
  for (const container of statuses) {
    const waiting = container.state?.waiting?.reason;
    if (waiting && IMAGE_PULL_REASONS.has(waiting)) {
      const image =
        [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].find((c) => c.name === container.name)?.image ?? container.image;
      return { kind: 'pull', since, container, image };
    }
    if (crashLooping(container, since)) return { kind: 'crash', since, container };
  }
  return undefined;
}

/** In a round of a crash loop: backing off, just exited with an error, or running again after exiting with one since `since`. */
function crashLooping(container: V1ContainerStatus, since: number): boolean {
  const state = container.state;
  if (state?.waiting?.reason === CRASH_LOOP_REASON) return true;
  if (state?.terminated) return state.terminated.exitCode !== 0;
  if (state?.waiting) return false;
  const last = container.lastState?.terminated;
  return !!last && last.exitCode !== 0 && (timeOf(last.finishedAt) ?? -Infinity) >= since;
}

export function isPodReady(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

/** A pod the scheduler cannot place because of unbound claims: the claims and since when (ms). */
export function unboundClaims(pod: V1Pod): { claims: string[]; since: number | undefined } | undefined {
  if (pod.metadata?.deletionTimestamp) return undefined;
  const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status !== 'False' || !scheduled.message?.includes(UNBOUND_CLAIMS_MESSAGE)) return undefined;
  const claims = (pod.spec?.volumes ?? []).flatMap((v) => (v.persistentVolumeClaim?.claimName ? [v.persistentVolumeClaim.claimName] : []));
  return { claims, since: timeOf(scheduled.lastTransitionTime) ?? timeOf(pod.metadata?.creationTimestamp) };
}

/**
 * Milliseconds until a pod that is now in trouble (unable to pull, crash-looping), or unschedulable
 * because of unbound claims, but not yet for longer than the stuck window, would make the instance
 * Failed; undefined when no pod is on its way there. Time passing is not an event, so the
 * controller requeues the instance after this long.
 */
export function msUntilStuckPodFailure(pods: readonly V1Pod[], now: Date, window = DEFAULT_STUCK_POD_TIMEOUT_MS): number | undefined {
  let soonest: number | undefined;
  for (const pod of pods) {
    const since = podTrouble(pod)?.since ?? unboundClaims(pod)?.since;
    if (since === undefined) continue;
    const remaining = since + window - now.getTime();
    if (remaining >= 0 && (soonest === undefined || remaining < soonest)) soonest = remaining + 1;
  }
  return soonest;
}

/** Milliseconds since epoch at which the pod's containers stopped being ready (see module comment). */
function notReadySince(pod: V1Pod): number | undefined {
  const conditions = pod.status?.conditions ?? [];
  for (const type of ['ContainersReady', 'Ready']) {
    const condition = conditions.find((c) => c.type === type);
    if (condition && condition.status !== 'True') {
      const at = timeOf(condition.lastTransitionTime);
      if (at !== undefined) return at;
    }
  }
  return timeOf(pod.status?.startTime) ?? timeOf(pod.metadata?.creationTimestamp);
}

/** Timestamps arrive as RFC 3339 strings from JSON (the client-node types say Date). */
function timeOf(value: Date | string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const ms = value instanceof Date ? value.getTime() : Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}
