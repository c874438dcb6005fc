/**
 * The Memcached status: a pure function of the observed pods.
 *
 * Guarantees: `memcachedStatus(pods)` lists, sorted, the names of the pods that are or will be
 * serving — pods being deleted and pods that have finished (Succeeded or Failed) are left out,
 * so `status.nodes` does not list pods on their way out. `sameStatus` tells whether a write
 * would change anything; the controller writes status only when it would.
 */

import type { V1PodSpec, V1PodStatus } from '@kubernetes/client-node';
import type { KubeObject } from '@iot-operator/runtime';
import type { MemcachedStatus } from './api/memcached.ts';

/** A pod as the cache holds it (metadata typed as on the wire: timestamps are strings). */
export interface PodObject extends KubeObject {
  spec?: V1PodSpec;
  status?: V1PodStatus;
}

export function isServingPod(pod: PodObject): boolean {
  if (pod.metadata.deletionTimestamp) return false;
  const phase = pod.status?.phase;
  return phase !== 'Succeeded' && phase !== 'Failed';
}

export function memcachedStatus(pods: readonly PodObject[]): MemcachedStatus {
  const nodes = pods.filter(isServingPod).map((pod) => pod.metadata.name ?? '');
  return { nodes: nodes.sort() };
}

export function sameStatus(current: MemcachedStatus | undefined, next: MemcachedStatus): boolean {
  const nodes = current?.nodes;
  return Array.isArray(nodes) && nodes.length === next.nodes.length && nodes.every((name, i) => name === next.nodes[i]);
}
