/**
 * `wait.resources` / `wait.labels`: Armada's own readiness check of a release, on top of Helm's
 * `--wait` (`wait.native.enabled`).
 *
 * Guarantees:
 * - `isReady(type, obj)` is a pure function: a Deployment or StatefulSet is ready when its
 *   controller has observed its generation and every desired replica is updated and ready; a
 *   DaemonSet when every scheduled pod is updated and ready; a Pod when its Ready condition is
 *   True (or it Succeeded); a Job when it has succeeded.
 * - `notReady(checks, list)` returns one sentence per unmet check: fewer ready objects of the
 *   type (with the check's labels, plus `wait.labels`) than `min_ready` (default: all of them,
 *   and at least one).
 * - `waitForResources` polls (every 2 s, reading from the API server) until every check is met or
 *   the timeout passes, then returns what is still not ready (empty when ready).
 */

import { customResource, Kinds, type KubeApi, type KubeObject, type ResourceType } from '@iot-operator/runtime';

export const WAIT_TYPES: Record<string, ResourceType> = {
  deployment: Kinds.Deployment,
  statefulset: Kinds.StatefulSet,
  daemonset: Kinds.DaemonSet,
  pod: Kinds.Pod,
  job: customResource('batch', 'v1', 'Job', 'jobs'),
};

export interface ReadinessCheck {
  type: string;
  labels?: Record<string, string>;
  min_ready?: number;
}

type Fields = Record<string, any>;

export function isReady(type: string, obj: KubeObject): boolean {
  const spec = (obj['spec'] ?? {}) as Fields;
  const status = (obj['status'] ?? {}) as Fields;
  const observed = status['observedGeneration'] === undefined || status['observedGeneration'] >= (obj.metadata.generation ?? 0);
  switch (type) {
    case 'deployment':
    case 'statefulset': {
      const desired = spec['replicas'] ?? 1;
      return observed && (status['updatedReplicas'] ?? 0) >= desired && (status['readyReplicas'] ?? 0) >= desired;
    }
    case 'daemonset': {
      const desired = status['desiredNumberScheduled'] ?? 0;
      return observed && (status['updatedNumberScheduled'] ?? 0) >= desired && (status['numberReady'] ?? 0) >= desired;
    }
    case 'pod':
      return status['phase'] === 'Succeeded' || (status['conditions'] ?? []).some((c: Fields) => c['type'] === 'Ready' && c['status'] === 'True');
    case 'job':
      return (status['succeeded'] ?? 0) >= 1;
    default:
      return false;
  }
}

/** What is not ready, one sentence per check; empty when every check is met. */
export function notReady(checks: readonly ReadinessCheck[], commonLabels: Record<string, string>, list: (check: ReadinessCheck, selector: string) => KubeObject[]): string[] {
  const problems: string[] = [];
  for (const check of checks) {
    const type = check.type.toLowerCase();
    if (!WAIT_TYPES[type]) {
      problems.push(`wait.resources type "${check.type}" is unknown: use one of ${Object.keys(WAIT_TYPES).join(', ')}`);
      continue;
    }
    const selector = labelSelector({ ...commonLabels, ...check.labels });
    const objects = list(check, selector).filter((o) => !o.metadata.deletionTimestamp);
    const ready = objects.filter((o) => isReady(type, o)).length;
    const wanted = check.min_ready ?? Math.max(objects.length, 1);
    if (ready < wanted) problems.push(`${ready} of ${wanted} ${type}(s) ready${selector ? ` (labels ${selector})` : ''}`);
  }
  return problems;
}

export async function waitForResources(client: KubeApi, namespace: string, checks: readonly ReadinessCheck[], commonLabels: Record<string, string>, timeoutSeconds: number, signal: AbortSignal): Promise<string[]> {
  const deadline = Date.now() + timeoutSeconds * 1000;
  for (;;) {
    const listed = new Map<ReadinessCheck, KubeObject[]>();
    for (const check of checks) {
      const type = WAIT_TYPES[check.type.toLowerCase()];
      if (!type) continue;
      const selector = labelSelector({ ...commonLabels, ...check.labels });
      listed.set(check, (await client.list(type, { namespace, labelSelector: selector || undefined })).items);
    }
    const problems = notReady(checks, commonLabels, (check) => listed.get(check) ?? []);
    if (problems.length === 0 || Date.now() >= deadline || signal.aborted) return problems;
    await new Promise((r) => setTimeout(r, 2000));
  }
}

function labelSelector(labels: Record<string, string>): string {
  return Object.entries(labels).map(([k, v]) => `${k}=${v}`).join(',');
}
