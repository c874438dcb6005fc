/**
 * The Memcached controller: watches and the reconcile step.
 *
 * Guarantees:
 * - Watches: Memcached objects (primary), Deployments through their controller ownerReference,
 *   and memcached pods through their `memcached_cr` label (pods are owned by ReplicaSets, not by
 *   the Memcached). Pod updates reach the queue only when they change what the status shows
 *   (phase or deletion), so pod heartbeats cost nothing.
 * - Reconcile reads from the cache only; it server-side applies the Deployment only when the
 *   cached one is missing or differs from `desiredDeployment` (a deleted or edited Deployment is
 *   recreated or corrected; `replicas` follows `spec.size`; thanks to the desired-hash stamp a
 *   field dropped from the desired form is a difference too, while owner references others
 *   added are not), and patches `status.nodes` only when the sorted pod names differ from the
 *   cached status. A reconcile with nothing to change writes nothing.
 * - A Deployment of the same name controlled by another object is left alone: the Memcached gets
 *   a Warning event and the error is not retried until something changes.
 * - Deleting a Memcached needs no work here: its Deployment goes through garbage collection.
 */

import {
  childDifference,
  controller,
  Kinds,
  mapByLabel,
  phaseOrDeletionChanged,
  TerminalError,
  type Controller,
  type Manager,
  type MapFunc,
  type Predicate,
  type ReconcileContext,
  type Request,
} from '@iot-operator/runtime';
import { isValidMemcachedSpec, Memcached, type MemcachedObject } from './api/memcached.ts';
import { APP_LABEL, APP_VALUE, desiredDeployment, INSTANCE_LABEL, labelsForMemcached, type DeploymentObject } from './resources/deployment.ts';
import { memcachedStatus, sameStatus, type PodObject } from './status.ts';

export const OPERATOR_NAME = 'memcached-operator';
export const FIELD_MANAGER = OPERATOR_NAME;
/** The pods the operator's cache holds: memcached pods only. */
export const POD_CACHE_SELECTOR = `${APP_LABEL}=${APP_VALUE}`;

/** Maps a memcached pod to its Memcached through the `memcached_cr` label. */
export const podToMemcached: MapFunc = mapByLabel(INSTANCE_LABEL, { [APP_LABEL]: APP_VALUE });

/** Pod updates that can change `status.nodes`: the phase or the deletion mark. */
export const podMembershipChanged: Predicate = phaseOrDeletionChanged();

export async function reconcileMemcached(req: Request, ctx: ReconcileContext): Promise<void> {
  const memcached = ctx.cache.get<MemcachedObject>(Memcached, req.name, req.namespace);
  if (!memcached || memcached.metadata.deletionTimestamp) return;
  if (!isValidMemcachedSpec(memcached.spec)) {
    throw new TerminalError(`Memcached ${req.namespace}/${req.name} has an invalid spec: ${JSON.stringify(memcached.spec)}`);
  }

  const desired = desiredDeployment(memcached);
  const current = ctx.cache.get<DeploymentObject>(Kinds.Deployment, req.name, req.namespace);
  const foreign = current?.metadata.ownerReferences?.find((ref) => ref.controller && ref.uid !== memcached.metadata.uid);
  if (foreign) {
    const message = `Deployment ${req.name} exists and is controlled by ${foreign.kind} ${foreign.name}; not taking it over`;
    ctx.recorder.event(memcached, 'Warning', 'DeploymentConflict', message);
    throw new TerminalError(message);
  }
  if (!current || childDifference(desired, current) !== undefined) {
    await ctx.client.apply(Kinds.Deployment, desired, { fieldManager: FIELD_MANAGER, force: true });
    ctx.log.info({ replicas: memcached.spec.size, created: !current }, current ? 'corrected the memcached Deployment' : 'created the memcached Deployment');
  }

  const pods = ctx.cache.list<PodObject>(Kinds.Pod, { namespace: req.namespace, labelSelector: labelsForMemcached(req.name) });
  const status = memcachedStatus(pods);
  if (!sameStatus(memcached.status, status)) {
    await ctx.client.patchStatus(Memcached, req.name, req.namespace, { status }, 'merge');
    ctx.log.info({ nodes: status.nodes }, 'updated status.nodes');
  }
}

export interface MemcachedControllerOptions {
  /** Memcacheds reconciled in parallel (default 1, as controller-runtime's). */
  maxConcurrentReconciles?: number;
}

/** Registers the Memcached controller with the manager. */
export function registerMemcachedController(mgr: Manager, options: MemcachedControllerOptions = {}): Controller {
  return controller(mgr)
    .named('memcached')
    .for(Memcached)
    .maxConcurrentReconciles(options.maxConcurrentReconciles ?? 1)
    .owns(Kinds.Deployment)
    .watches(Kinds.Pod, podToMemcached, podMembershipChanged)
    .reconcile(reconcileMemcached);
}
