/**
 * The one reconciler of an Armada parent and its ordered children: an ArmadaChartGroup and its
 * ArmadaCharts, an ArmadaManifest and its ArmadaChartGroups.
 *
 * Guarantees:
 * - Only children the parent names are touched, looked up in the parent's own namespace: a
 *   parent never takes an object it does not name, nor one of another namespace.
 * - A missing child makes the parent `error` naming it (recovered when it appears); a child
 *   controlled by another object makes it `error` naming that owner, and the child is left alone.
 * - Every named child is taken under the parent's controller ownerReference (ownership.ts), so
 *   deleting the parent deletes its children.
 * - `target_state: uninitialized` enables nothing. Otherwise the children's `target_state` is set
 *   to `deployed`: all at once, or when `sequenced` one at a time in the listed order, the next
 *   only once the previous is deployed; a failed child stops a sequence there (and fails the
 *   parent) unless `skippable` says it does not hold the parent back.
 * - Status: `deployed` once every child is deployed under the parent's release prefix (the
 *   manifest's `release_prefix` recorded in the child's status: a child adopted a moment ago,
 *   whose releases do not carry the prefix yet, is still progressing), `failed` naming a failed
 *   child, `running` while children progress — written through status.ts (kstatus conditions
 *   included), recording the parent's own release prefix.
 * - `reconcileOrderedParent` is a parent controller's whole reconcile: nothing for a parent that is
 *   gone or being deleted, `error` (reason InvalidSpec) naming the first problem of a spec its
 *   schema refuses, else the above.
 * - `parentsOf` maps a child to the parents controlling or naming it, for the parent's watch.
 */

import { controllerReference, type KubeObject, type MapFunc, type Manager, type ReconcileContext, type Request, type ResourceType } from '@iot-operator/runtime';
import { specError, type CommonStatus, type GroupSpecSchema, type ManifestSpecSchema, type TargetState } from './api/armada.ts';
import { adopt, enable, foreignController } from './ownership.ts';
import { isDeployed, nextStatus, writeStatus } from './status.ts';

export interface ArmadaParent extends KubeObject {
  spec: { target_state?: TargetState };
  status?: CommonStatus;
}

export interface ArmadaChild extends KubeObject {
  spec: { target_state?: TargetState };
  status?: CommonStatus;
}

export interface OrderedChildren<C extends ArmadaChild> {
  parentType: ResourceType;
  childType: ResourceType;
  /** The children's names, in order, and the spec field that lists them (for reasons). */
  names: readonly string[];
  field: string;
  sequenced: boolean;
  /** A failed child that does not hold the parent back (a group's protected chart with continue_processing). */
  skippable?: (child: C) => boolean;
  /** The manifest's `release_prefix` the parent and its children are deployed under, if any. */
  releasePrefix: string | undefined;
}

type State = NonNullable<CommonStatus['actual_state']>;

async function reconcileOrderedChildren<P extends ArmadaParent, C extends ArmadaChild>(ctx: ReconcileContext, parent: P, spec: OrderedChildren<C>): Promise<void> {
  const report = async (state: State, reason?: string): Promise<void> => {
    const next = nextStatus<CommonStatus>(spec.parentType, parent, state, reason, { release_prefix: spec.releasePrefix });
    if (spec.releasePrefix === undefined) delete next.release_prefix;
    await writeStatus(ctx, spec.parentType, parent, next);
  };
  const deployed = (child: C) => isDeployed(child) && child.status?.release_prefix === spec.releasePrefix;
  const kind = spec.childType.kind;
  const namespace = parent.metadata.namespace;
  const children = spec.names.map((name) => ctx.cache.get<C>(spec.childType, name, namespace));
  const missing = spec.names.filter((_, i) => !children[i]);
  if (missing.length > 0) return report('error', `${kind} ${missing.join(', ')} not found in namespace ${namespace}: create it or remove it from ${spec.field}`);
  const present = children as C[];
  for (const child of present) {
    const owner = foreignController(child, parent);
    if (owner) return report('error', `${kind} ${child.metadata.name} is controlled by ${owner.kind} ${owner.name}: it belongs to one ${spec.parentType.kind}`);
  }
  for (const child of present) await adopt(ctx, spec.childType, child, controllerReference(spec.parentType, parent));

  if ((parent.spec.target_state ?? 'deployed') === 'uninitialized') return report('uninitialized');

  const skippable = (child: C) => spec.skippable?.(child) ?? false;
  const failed = (child: C) => child.status?.actual_state === 'failed' || child.status?.actual_state === 'error';
  for (const child of present) {
    const enabled = (child.spec.target_state ?? 'deployed') === 'deployed';
    if (!enabled) await enable(ctx, spec.childType, child);
    if (spec.sequenced && !deployed(child)) {
      if (skippable(child)) continue;
      if (enabled && failed(child)) return report('failed', `${kind} ${child.metadata.name} is ${child.status!.actual_state}: ${child.status?.reason ?? 'see its status'}`);
      return report('running', `waiting for ${kind} ${child.metadata.name} to be deployed before the next one`);
    }
  }
  const failing = present.find((c) => failed(c) && !skippable(c));
  if (failing) return report('failed', `${kind} ${failing.metadata.name} is ${failing.status!.actual_state}: ${failing.status?.reason ?? 'see its status'}`);
  const waiting = present.filter((c) => !deployed(c) && !skippable(c)).map((c) => c.metadata.name);
  if (waiting.length > 0) return report('running', `waiting for ${kind} ${waiting.join(', ')} to be deployed`);
  return report('deployed');
}

/** A kind of parent: its type and spec schema, and what a parent of valid spec names as its ordered children. */
export interface OrderedParentKind<P extends ArmadaParent, C extends ArmadaChild> {
  parentType: ResourceType;
  childType: ResourceType;
  specSchema: typeof GroupSpecSchema | typeof ManifestSpecSchema;
  isValidSpec: (spec: unknown) => boolean;
  children: (parent: P, cache: ReconcileContext['cache']) => Omit<OrderedChildren<C>, 'parentType' | 'childType'>;
}

export async function reconcileOrderedParent<P extends ArmadaParent, C extends ArmadaChild>(req: Request, ctx: ReconcileContext, kind: OrderedParentKind<P, C>): Promise<void> {
  const parent = ctx.cache.get<P>(kind.parentType, req.name, req.namespace);
  if (!parent || parent.metadata.deletionTimestamp) return;
  if (!kind.isValidSpec(parent.spec)) {
    await writeStatus(ctx, kind.parentType, parent, nextStatus<CommonStatus>(kind.parentType, parent, 'error', `the spec is invalid: ${specError(kind.specSchema, parent.spec)}`, {}, [], 'InvalidSpec'));
    return;
  }
  await reconcileOrderedChildren<P, C>(ctx, parent, { parentType: kind.parentType, childType: kind.childType, ...kind.children(parent, ctx.cache) });
}

/** Maps a child to the parents (of `parentType`, same namespace) controlling it or naming it in `names(parent)`. */
export function parentsOf(mgr: Manager, parentType: ResourceType, names: (parent: KubeObject) => readonly string[] | undefined): MapFunc {
  return (child) => {
    const owner = child.metadata.ownerReferences?.find((r) => r.controller && r.kind === parentType.kind);
    const naming = mgr.cache
      .list(parentType, { namespace: child.metadata.namespace })
      .filter((p) => names(p)?.includes(child.metadata.name!))
      .map((p) => p.metadata.name!);
    return [...new Set([...(owner ? [owner.name] : []), ...naming])].map((name) => ({ namespace: child.metadata.namespace, name }));
  };
}
