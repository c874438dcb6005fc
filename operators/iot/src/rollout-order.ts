/**
 * The order an instance's workloads roll in: the StatefulSets (broker, database) before the
 * Deployments whose pods use them (gateway, core, processing).
 *
 * Guarantees (pure functions of the desired and the cached objects):
 * - `statefulSetRolledOut` is true for a StatefulSet that matches its desired form and whose
 *   controller has rolled it out: the current generation observed, exactly the desired replicas,
 *   all of them on the update revision (`updatedReplicas`, and for RollingUpdate
 *   `currentRevision == updateRevision`; with OnDelete, the three-replica database, its controller
 *   never advances currentRevision) and ready. A StatefulSet with volume claims replaces its pods
 *   one by one, each only once the one before it is ready (the database's the operator replaces,
 *   database-roll.ts), so this is reached only once the last pod came back on its volume.
 * - `heldBackDeployments` names the Deployments that must wait: those that exist and whose pod
 *   template differs from the desired one (writing them would roll their pods), while some
 *   StatefulSet of the instance is not rolled out. A Deployment that does not exist yet is never
 *   held back (an instance being created starts everything at once), nor is a change that rolls
 *   no pod (replicas).
 * So during an upgrade the database and the broker run the new version before any gateway, core
 * or processing pod does — the servers before their clients — and a StatefulSet that does not
 * come up on the new version keeps the Deployments on the old one.
 */
import type { V1Deployment, V1StatefulSet } from '@kubernetes/client-node';
import { firstDifference, type KubeObject } from '@iot-operator/runtime';
import { judgeStatefulSet } from './status/pod-health.ts';

export interface Workload<T> {
  name: string;
  desired: T;
  /** As cached; undefined when it does not exist. */
  observed: T | undefined;
}

export function statefulSetRolledOut({ desired, observed }: Workload<V1StatefulSet & KubeObject>): boolean {
  if (!observed || firstDifference(desired, observed) !== undefined) return false;
  // Both revisions are required here: without them its controller has not taken the StatefulSet up yet.
  const { currentRevision, updateRevision } = observed.status ?? {};
  return !!currentRevision && !!updateRevision && judgeStatefulSet(observed, desired.spec?.replicas ?? 1).rolledOut;
}

/** True when writing `desired` over `observed` would roll the Deployment's pods. */
export function rollsPods({ desired, observed }: Workload<V1Deployment>): boolean {
  return !!observed && firstDifference(desired.spec?.template, observed.spec?.template) !== undefined;
}

/** The Deployments to leave as they are for now, and the StatefulSets they wait for. */
export function heldBackDeployments(
  statefulSets: readonly Workload<V1StatefulSet & KubeObject>[],
  deployments: readonly Workload<V1Deployment>[],
): { held: string[]; waitingFor: string[] } {
  const waitingFor = statefulSets.filter((s) => !statefulSetRolledOut(s)).map((s) => s.name);
  if (waitingFor.length === 0) return { held: [], waitingFor };
  const held = deployments.filter(rollsPods).map((d) => d.name);
  return { held, waitingFor: held.length > 0 ? waitingFor : [] };
}
