/**
 * The Ptemplate controller: watches and the reconcile step.
 *
 * Guarantees:
 * - Watches: Ptemplate objects (primary), consumer DaemonSets through their controller
 *   ownerReference, KMM Modules the same way once their API exists (see kmm.ts), and consumer
 *   pods through their `pt.example.com/ptemplate` label; pod updates count only when the phase
 *   or the deletion mark changes.
 * - Reconcile reads from the cache; a child is server-side applied only when it is missing or
 *   differs from the desired one (`childDifference`; desired children carry the desired-hash
 *   stamp, so removed selector keys, secrets or resources count as differences, while owner
 *   references others added do not); status is patched only when it would change. A
 *   reconcile with nothing to change writes nothing.
 * - Without the KMM Module API the DaemonSet is still reconciled, `KMMAvailable` is False with
 *   reason `ModuleCRDMissing`, and the Ptemplate is looked at again every `kmmPollIntervalMs`
 *   (default 10 s) until the API appears; then the Module is created.
 * - A child of the same name controlled by another object is left alone: the Ptemplate gets a
 *   Warning event and the error is not retried until something changes.
 */

import {
  childDifference,
  controller,
  isNotFound,
  Kinds,
  mapByLabel,
  phaseOrDeletionChanged,
  requeueAfter,
  TerminalError,
  type Controller,
  type KubeObject,
  type Manager,
  type MapFunc,
  type Predicate,
  type ReconcileContext,
  type ReconcileResult,
  type Request,
  type ResourceType,
} from '@iot-operator/runtime';
import { isValidPtemplateSpec, Ptemplate, type PtemplateObject } from './api/ptemplate.ts';
import { KmmModules } from './kmm.ts';
import {
  CONSUMER_APP,
  CONSUMER_APP_LABEL,
  consumerDaemonSetName,
  consumerPodLabels,
  desiredConsumerDaemonSet,
  type DaemonSetObject,
} from './resources/daemonset.ts';
import { desiredModule, Module } from './resources/module.ts';
import { INSTANCE_LABEL, OPERATOR_NAME } from './resources/owner.ts';
import { ptemplateStatus, sameStatus, type KmmState, type PodObject } from './status.ts';

export const FIELD_MANAGER = OPERATOR_NAME;
/** The pods the operator's cache holds: consumer pods only. */
export const POD_CACHE_SELECTOR = `${CONSUMER_APP_LABEL}=${CONSUMER_APP}`;
export const DEFAULT_KMM_POLL_INTERVAL_MS = 10_000;

export interface PtemplateControllerOptions {
  /** How often a Ptemplate is looked at again while the KMM Module API is missing. */
  kmmPollIntervalMs?: number;
}

/** Maps a consumer pod to its Ptemplate through the instance label. */
export const podToPtemplate: MapFunc = mapByLabel(INSTANCE_LABEL, { [CONSUMER_APP_LABEL]: CONSUMER_APP });

/** Pod updates that can change the status: the phase or the deletion mark. */
export const podMembershipChanged: Predicate = phaseOrDeletionChanged();

function refuseForeign(ctx: ReconcileContext, pt: PtemplateObject, kind: string, child: KubeObject | undefined): void {
  const foreign = child?.metadata.ownerReferences?.find((ref) => ref.controller && ref.uid !== pt.metadata.uid);
  if (!foreign) return;
  const message = `${kind} ${child?.metadata.name} exists and is controlled by ${foreign.kind} ${foreign.name}; not taking it over`;
  ctx.recorder.event(pt, 'Warning', `${kind}Conflict`, message);
  throw new TerminalError(message);
}

async function applyChild(ctx: ReconcileContext, type: ResourceType, desired: KubeObject, current: KubeObject | undefined): Promise<void> {
  await ctx.client.apply(type, desired, { fieldManager: FIELD_MANAGER, force: true });
  ctx.log.info({ kind: type.kind, name: desired.metadata.name }, current ? `corrected the ${type.kind}` : `created the ${type.kind}`);
}

async function reconcileModule(ctx: ReconcileContext, kmm: KmmModules, pt: PtemplateObject): Promise<KmmState> {
  const { name = '', namespace } = pt.metadata;
  if (!(await kmm.available(ctx.client, namespace))) return { crd: 'missing' };
  const desired = desiredModule(pt);
  const current = await kmm.get(ctx.client, name, namespace);
  refuseForeign(ctx, pt, 'Module', current);
  if (!current || childDifference(desired, current) !== undefined) {
    try {
      await applyChild(ctx, Module, desired, current);
    } catch (err) {
      if (!isNotFound(err)) throw err;
      kmm.markMissing(); // the CRD went away since it was found
      return { crd: 'missing' };
    }
  }
  return { crd: 'installed', module: name };
}

export async function reconcilePtemplate(req: Request, ctx: ReconcileContext, kmm: KmmModules, options: PtemplateControllerOptions = {}): Promise<ReconcileResult> {
  const pt = ctx.cache.get<PtemplateObject>(Ptemplate, req.name, req.namespace);
  if (!pt || pt.metadata.deletionTimestamp) return;
  if (!isValidPtemplateSpec(pt.spec)) {
    throw new TerminalError(`Ptemplate ${req.namespace}/${req.name} has an invalid spec: ${JSON.stringify(pt.spec)}`);
  }

  const desiredDs = desiredConsumerDaemonSet(pt);
  const ds = ctx.cache.get<DaemonSetObject>(Kinds.DaemonSet, consumerDaemonSetName(req.name), req.namespace);
  refuseForeign(ctx, pt, 'DaemonSet', ds);
  if (!ds || childDifference(desiredDs, ds) !== undefined) await applyChild(ctx, Kinds.DaemonSet, desiredDs, ds);

  const kmmState = await reconcileModule(ctx, kmm, pt);

  const pods = ctx.cache.list<PodObject>(Kinds.Pod, { namespace: req.namespace, labelSelector: consumerPodLabels(req.name) });
  const status = ptemplateStatus(pt, { pods, daemonSet: ds, kmm: kmmState });
  if (!sameStatus(pt.status, status)) {
    await ctx.client.patchStatus(Ptemplate, req.name, req.namespace, { status }, 'merge');
    ctx.log.info({ consumers: status.consumers, conditions: status.conditions?.map((c) => `${c.type}=${c.status}`) }, 'updated status');
  }
  return kmmState.crd === 'missing' ? requeueAfter(options.kmmPollIntervalMs ?? DEFAULT_KMM_POLL_INTERVAL_MS) : undefined;
}

/** Registers the Ptemplate controller with the manager. */
export function registerPtemplateController(mgr: Manager, options: PtemplateControllerOptions = {}): Controller {
  const kmm = new KmmModules(mgr.cache);
  const registered = controller(mgr)
    .named('ptemplate')
    .for(Ptemplate)
    .owns(Kinds.DaemonSet)
    .watches(Kinds.Pod, podToPtemplate, podMembershipChanged)
    .reconcile((req, ctx) => reconcilePtemplate(req, ctx, kmm, options));
  kmm.routeEventsTo((request) => registered.enqueue(request));
  return registered;
}

