/**
 * The Ptemplate status: a pure function of what the operator observed.
 *
 * Guarantees:
 * - `consumers` lists, sorted, the consumer pods that are or will be running (pods being
 *   deleted or finished are left out).
 * - Condition `KMMAvailable`: True (reason `ModuleInPlace`) when the Module exists as desired;
 *   False (reason `ModuleCRDMissing`) when the cluster has no KMM Module API.
 * - Condition `ConsumersReady`: True (`AllConsumersReady`) when every scheduled consumer pod is
 *   ready and up to date; False with `NoMatchingNodes` when no node matches the selector, or
 *   `ConsumersNotReady`; Unknown (`Progressing`) until the DaemonSet controller has seen the
 *   current DaemonSet. The message reads `<ready>/<desired> consumer pods ready`.
 * - Conditions keep their `lastTransitionTime` unless their status changes, carry the
 *   Ptemplate's generation, and keep a stable order; `sameStatus` compares ignoring key order,
 *   so the controller writes status only when something a user would see changed. A
 *   `status.conditions` of another shape (written under an older CRD) is an
 *   `UnexpectedShapeError` naming the field: the runtime marks the Ptemplate `Degraded`.
 */

import { isDeepStrictEqual } from 'node:util';
import type { V1PodSpec, V1PodStatus } from '@kubernetes/client-node';
import { readConditions, setCondition, type ConditionUpdate, type KubeObject } from '@iot-operator/runtime';
import { Ptemplate, type PtemplateObject, type PtemplateStatus } from './api/ptemplate.ts';
import type { DaemonSetObject } from './resources/daemonset.ts';
import { MODULE_CRD_NAME } from './resources/module.ts';

export const KMM_AVAILABLE = 'KMMAvailable';
export const CONSUMERS_READY = 'ConsumersReady';
export const MODULE_CRD_MISSING = 'ModuleCRDMissing';

/** A pod as the cache holds it (metadata typed as on the wire: timestamps are strings). */
export interface PodObject extends KubeObject {
  spec?: V1PodSpec;
  status?: V1PodStatus;
}

/** What became of the Module in this reconcile. */
export type KmmState = { crd: 'missing' } | { crd: 'installed'; module: string };

export interface Observed {
  pods: readonly PodObject[];
  daemonSet: DaemonSetObject | undefined;
  kmm: KmmState;
}

export function isLivePod(pod: PodObject): boolean {
  if (pod.metadata.deletionTimestamp) return false;
  const phase = pod.status?.phase;
  return phase !== 'Succeeded' && phase !== 'Failed';
}

export function kmmCondition(kmm: KmmState, generation: number | undefined): ConditionUpdate {
  return kmm.crd === 'installed'
    ? { type: KMM_AVAILABLE, status: 'True', reason: 'ModuleInPlace', message: `Module ${kmm.module} loads the pt kernel module on the selected nodes`, observedGeneration: generation }
    : {
        type: KMM_AVAILABLE,
        status: 'False',
        reason: MODULE_CRD_MISSING,
        message: `KMM is not installed (no ${MODULE_CRD_NAME} API); the consumers run without it and the Module is created once the CRD appears`,
        observedGeneration: generation,
      };
}

export function consumersCondition(ds: DaemonSetObject | undefined, generation: number | undefined): ConditionUpdate {
  const base = { type: CONSUMERS_READY, observedGeneration: generation };
  const status = ds?.status;
  if (!ds || !status || (status.observedGeneration ?? 0) < (ds.metadata.generation ?? 0)) {
    return { ...base, status: 'Unknown', reason: 'Progressing', message: 'waiting for the DaemonSet controller to roll out the consumer pods' };
  }
  const desired = status.desiredNumberScheduled ?? 0;
  const ready = status.numberReady ?? 0;
  const upToDate = status.updatedNumberScheduled ?? 0;
  const message = `${ready}/${desired} consumer pods ready`;
  if (desired === 0) return { ...base, status: 'False', reason: 'NoMatchingNodes', message: `${message}: no node matches the selector` };
  if (ready >= desired && upToDate >= desired) return { ...base, status: 'True', reason: 'AllConsumersReady', message };
  return { ...base, status: 'False', reason: 'ConsumersNotReady', message };
}

export function ptemplateStatus(pt: PtemplateObject, observed: Observed, now: Date = new Date()): PtemplateStatus {
  const generation = pt.metadata.generation;
  let conditions = setCondition(readConditions(Ptemplate, pt), kmmCondition(observed.kmm, generation), now);
  conditions = setCondition(conditions, consumersCondition(observed.daemonSet, generation), now);
  const consumers = observed.pods.filter(isLivePod).map((pod) => pod.metadata.name ?? '').sort();
  return { consumers, conditions };
}

export function sameStatus(current: PtemplateStatus | undefined, next: PtemplateStatus): boolean {
  return current !== undefined && isDeepStrictEqual(normalise(current), normalise(next));
}

/** Drops undefined members, as a JSON round trip through the API server does. */
function normalise(status: PtemplateStatus): unknown {
  return JSON.parse(JSON.stringify(status));
}
