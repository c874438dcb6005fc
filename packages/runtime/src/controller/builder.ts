/**
 * The controller builder: wiring a reconciler to the events that should trigger it, in a
 * sentence —
 *
 *   controller(mgr).for(Kinds.ConfigMap).owns(Kinds.Secret).withPredicates(generationChanged())
 *     .maxConcurrentReconciles(2).reconcile(fn)
 *
 * Guarantees:
 * - `for(type)`: every event of a primary object enqueues its own key; its add (a new object, or
 *   the initial list) at low priority, so events of objects already being worked on go first
 *   (queue/workqueue.ts), as controller-runtime's priority queue does with its initial list.
 * - `owns(type)`: an event of a child enqueues the owner named by its *controller*
 *   ownerReference when that owner is of the primary type (Kubernetes forbids cross-namespace
 *   owners, so the owner lives in the child's namespace).
 * - `watches(type, map)`: an event of any other object enqueues the keys `map` returns; on
 *   update both the old and the new object are mapped, so moving an object between owners
 *   reaches both. `mapByLabel(nameLabel, matching)` maps an object carrying every `matching`
 *   label to the primary its `nameLabel` names, in the object's namespace, and others to nothing.
 * - Predicates filter events before they reach the queue (`withPredicates` applies to the
 *   primary type; `owns`/`watches` take their own).
 * - On a shard of a ControllerRing (`ControllerHost.shard`) whose ring shards the primary type,
 *   the reconciler runs only for primaries assigned to this shard and not being drained; a drain
 *   is acknowledged instead of reconciling (sharding/shard.ts), and events of a primary being
 *   drained pass whatever the predicates say. An object that left the shard's cache reaches the
 *   reconciler as gone, so it forgets what it remembered of it.
 * - `reconcile(fn)` completes the builder, registers the controller with the manager and
 *   returns it. The builder asks of the manager only what `ControllerHost` declares (the
 *   manager satisfies it), so the controller floor does not depend on the manager's.
 * - The types declared here say what a controller reads and writes; `ExtraPermission` names a
 *   client call beyond them (operator-ts computes an operator's RBAC from both).
 */
import type { Logger } from 'pino';
import type { KubeApi } from '../client/client.ts';
import type { KubeObject, ResourceType } from '../client/resource.ts';
import { parseApiVersion, typeId } from '../client/resource.ts';
import type { Cache } from '../cache/cache.ts';
import type { EventHandler } from '../cache/informer.ts';
import type { EventRecorder } from '../events/recorder.ts';
import type { RuntimeMetrics } from '../metrics/runtime-metrics.ts';
import type { Selection } from '../watch/source.ts';
import { Controller, defaultControllerOptions, type ControllerOptions } from './controller.ts';
import type { Priority } from '../queue/workqueue.ts';
import { isSharded, type ShardIdentity } from '../sharding/shard.ts';
import { passingDrains, shardReconciler } from './sharded.ts';
import type { Predicate } from './predicates.ts';
import { requestKey, type Reconciler, type Request } from './reconcile.ts';

export type MapFunc = (obj: KubeObject) => Request[];

/**
 * What runs controllers, as the builder needs it (the Manager is one): what every controller
 * shares — client, cache, metrics, logger, event recorder — and where a built controller is
 * registered to be started and stopped with the others.
 */
export interface ControllerHost {
  readonly client: KubeApi;
  readonly cache: Cache;
  readonly metrics: RuntimeMetrics;
  readonly logger: Logger;
  readonly recorder: EventRecorder;
  /** Set when this process is one shard of a ControllerRing. */
  readonly shard?: ShardIdentity;
  addController(controller: Controller): void;
}

/**
 * A client call a controller makes beyond what its `for`, `owns` and `watches` imply: the verbs
 * on `type` (or on its `subresource`, e.g. `pods` + `eviction`), and why (the comment the RBAC
 * generator writes above the rule). An operator lists them as `extraPermissions` in its
 * src/controllers.ts.
 */
export interface ExtraPermission {
  type: ResourceType;
  verbs: string[];
  subresource?: string;
  reason?: string;
}

/** Maps an object that names its primary in a label (a pod of a workload, say) to that primary. */
export function mapByLabel(nameLabel: string, matching: Record<string, string> = {}): MapFunc {
  return (obj) => {
    const labels = obj.metadata.labels ?? {};
    const name = labels[nameLabel];
    if (!name || Object.entries(matching).some(([key, value]) => labels[key] !== value)) return [];
    return [{ namespace: obj.metadata.namespace, name }];
  };
}

interface Watch {
  type: ResourceType;
  selection?: Selection;
  map: MapFunc;
  predicates: Predicate[];
}

export class ControllerBuilder {
  private primary: ResourceType | undefined;
  private primaryPredicates: Predicate[] = [];
  private readonly watchList: Watch[] = [];
  private name: string | undefined;
  private options: ControllerOptions = { ...defaultControllerOptions };

  constructor(private readonly mgr: ControllerHost) {}

  named(name: string): this {
    this.name = name;
    return this;
  }

  for(type: ResourceType, ...predicates: Predicate[]): this {
    if (this.primary) throw new Error(`controller already reconciles ${typeId(this.primary)}; for() may be called once`);
    this.primary = type;
    this.primaryPredicates.push(...predicates);
    return this;
  }

  owns(type: ResourceType, ...predicates: Predicate[]): this {
    this.watchList.push({ type, map: (obj) => this.ownerRequests(obj), predicates });
    return this;
  }

  watches(type: ResourceType, map: MapFunc, ...predicates: Predicate[]): this {
    this.watchList.push({ type, map, predicates });
    return this;
  }

  /** Like `watches`, on a separate informer limited to `selection` (see Cache.informer). */
  watchesSelected(type: ResourceType, selection: Selection, map: MapFunc, ...predicates: Predicate[]): this {
    this.watchList.push({ type, selection, map, predicates });
    return this;
  }

  withPredicates(...predicates: Predicate[]): this {
    this.primaryPredicates.push(...predicates);
    return this;
  }

  maxConcurrentReconciles(n: number): this {
    if (!Number.isInteger(n) || n < 1) throw new Error(`maxConcurrentReconciles must be a positive integer, got ${n}`);
    this.options.maxConcurrentReconciles = n;
    return this;
  }

  resyncPeriod(ms: number): this {
    this.options.resyncPeriodMs = ms;
    return this;
  }

  reconcile(reconciler: Reconciler): Controller {
    const primary = this.primary;
    if (!primary) throw new Error('controller needs a primary type: call for(type) before reconcile()');
    const name = this.name ?? primary.kind.toLowerCase();
    const { mgr } = this;
    const primaryInformer = mgr.cache.informer(primary);
    const shard = mgr.shard && isSharded(mgr.shard, primary) ? mgr.shard : undefined;
    const controller = new Controller(name, shard ? shardReconciler(reconciler, shard, primary, (key) => primaryInformer.store.get(key)) : reconciler, this.options, {
      client: mgr.client,
      cache: mgr.cache,
      metrics: mgr.metrics,
      logger: mgr.logger,
      recorder: mgr.recorder,
      primaryKeys: () => primaryInformer.store.keys(),
      primaryType: primary,
      primary: (key) => primaryInformer.store.get(key),
    });
    const enqueueSelf: MapFunc = (obj) => [{ namespace: obj.metadata.namespace, name: obj.metadata.name ?? '' }];
    const primaryPredicates = shard ? [passingDrains(this.primaryPredicates, shard.ring)] : this.primaryPredicates;
    primaryInformer.addHandler(handlerFor(controller, enqueueSelf, primaryPredicates, 'low'));
    for (const watch of this.watchList) mgr.cache.informer(watch.type, watch.selection).addHandler(handlerFor(controller, watch.map, watch.predicates));
    mgr.addController(controller);
    return controller;
  }

  private ownerRequests(obj: KubeObject): Request[] {
    const primary = this.primary!;
    const owner = obj.metadata.ownerReferences?.find((ref) => ref.controller && ref.kind === primary.kind && parseApiVersion(ref.apiVersion).group === primary.group);
    if (!owner) return [];
    return [{ namespace: primary.namespaced ? obj.metadata.namespace : undefined, name: owner.name }];
  }
}

export function controller(mgr: ControllerHost): ControllerBuilder {
  return new ControllerBuilder(mgr);
}

/** Enqueues what `map` names for each event passing `predicates`; adds get `addPriority`, the rest normal. */
function handlerFor(controller: Controller, map: MapFunc, predicates: Predicate[], addPriority: Priority = 'normal'): EventHandler<KubeObject> {
  const enqueue = (objects: KubeObject[], priority: Priority = 'normal') => {
    const seen = new Set<string>();
    for (const obj of objects) {
      for (const request of map(obj)) {
        const key = requestKey(request);
        if (seen.has(key)) continue;
        seen.add(key);
        controller.enqueue(request, priority);
      }
    }
  };
  return {
    onAdd: (obj) => predicates.every((p) => p.create?.(obj) ?? true) && enqueue([obj], addPriority),
    onUpdate: (oldObj, newObj) => predicates.every((p) => p.update?.(oldObj, newObj) ?? true) && enqueue([oldObj, newObj]),
    onDelete: (obj) => predicates.every((p) => p.delete?.(obj) ?? true) && enqueue([obj]),
  };
}
