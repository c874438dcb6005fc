/**
 * The pods the IoT operator deletes besides a three-replica database's outdated pods, which it
 * rolls itself (database-roll.ts): pods that will not come up by themselves, or only after the
 * kubelet's back-off, although what kept them down has been fixed. Their workloads
 * recreate them at once from the current spec. Pods that run, and pods of the current revision
 * that are merely starting, are never chosen.
 *
 * Guarantees (pure functions of the pods and StatefulSets as cached, see pod-view.ts):
 * - `podsWaitingForImages`: once the instance's copy of the image-pull-secret has been written
 *   anew, the pods with a container waiting to pull its image (ErrImagePull, ImagePullBackOff). The
 *   kubelet retries a failed pull only after its back-off, which doubles from 10 s up to 5
 *   minutes, so fixed credentials would otherwise take up to 5 minutes to be tried.
 * - `podsBlockingStatefulSetRollouts`: pods of a StatefulSet whose revision
 *   (`controller-revision-hash`) is not the StatefulSet's update revision and that are stuck
 *   (waiting for their image or crash-looping, see pod-health.ts `isStuckOrFailing`). The StatefulSet
 *   controller's rolling update replaces pods in order and only once each is Running and Ready
 *   (whatever the podManagementPolicy, see resources/broker-rollout.ts), so a pod stuck on a broken revision — a `spec.version` with no such image, or
 *   one that crashes — blocks the rollout of the fixed spec forever; Kubernetes' documentation
 *   says to delete such pods by hand after reverting the template ("Forced rollback").
 * Pods being deleted are never chosen again.
 */
import type { V1Pod, V1StatefulSet } from '@kubernetes/client-node';
import { REVISION_LABEL } from './pod-view.ts';
import { isStuckOrFailing, waitsToPullImage } from './status/pod-health.ts';

export function podsWaitingForImages(pods: readonly V1Pod[]): V1Pod[] {
  return pods.filter((pod) => !pod.metadata?.deletionTimestamp && waitsToPullImage(pod)).sort(byName);
}

export function podsBlockingStatefulSetRollouts(statefulSets: readonly V1StatefulSet[], pods: readonly V1Pod[]): V1Pod[] {
  const blocking: V1Pod[] = [];
  for (const set of statefulSets) {
    const name = set.metadata?.name;
    const updateRevision = set.status?.updateRevision;
    if (!name || !updateRevision) continue;
    const ordinal = new RegExp(`^${name}-\\d+$`);
    for (const pod of pods) {
      const revision = pod.metadata?.labels?.[REVISION_LABEL];
      if (pod.metadata?.deletionTimestamp || !ordinal.test(pod.metadata?.name ?? '') || !revision || revision === updateRevision) continue;
      if (isStuckOrFailing(pod)) blocking.push(pod);
    }
  }
  return blocking.sort(byName);
}

function byName(a: V1Pod, b: V1Pod): number {
  const x = a.metadata?.name ?? '';
  const y = b.metadata?.name ?? '';
  return x < y ? -1 : x > y ? 1 : 0;
}
