/**
 * Access to KMM Modules, whose API may not exist.
 *
 * The manager's cache cannot watch a type the API server does not serve, so the Module API is
 * looked up with the client until it is found, and only then watched.
 *
 * Guarantees:
 * - `available(client, namespace)` answers whether the Module API is served, by listing at most
 *   one Module: a 404 means the CRD is not installed. Once the API was found it is not asked
 *   again (no request per reconcile) until `markMissing` is called (e.g. after a write got a
 *   404 because the CRD was deleted).
 * - The first time the API is found, a Module informer is started in the manager's cache and
 *   every Module event is mapped, through the Module's controller ownerReference, to the owning
 *   Ptemplate's key (as `owns()` does for types known at start).
 * - `get` reads from that informer once it has synced, and from the API server before that (a
 *   404 then means "no such Module").
 */

import { ifFound, isNotFound, parseApiVersion, type EventHandler, type KubeApi, type KubeObject, type ResourceType, type Request } from '@iot-operator/runtime';
import { API_GROUP, PTEMPLATE_KIND } from './api/ptemplate.ts';
import { Module, type ModuleObject } from './resources/module.ts';

/** Maps an owned object to its owning Ptemplate through its controller ownerReference. */
export function ownerPtemplate(obj: KubeObject): Request[] {
  const owner = obj.metadata.ownerReferences?.find((ref) => ref.controller && ref.kind === PTEMPLATE_KIND && parseApiVersion(ref.apiVersion).group === API_GROUP);
  return owner ? [{ namespace: obj.metadata.namespace, name: owner.name }] : [];
}

/** The part of the manager's cache used here: informers created on demand and cached reads. */
export interface ModuleCache {
  informer(type: ResourceType): { readonly isSynced: boolean; addHandler(handler: EventHandler<KubeObject>): void };
  get<T extends KubeObject = KubeObject>(type: ResourceType, name: string, namespace?: string): T | undefined;
}

export class KmmModules {
  private found = false;
  private watching = false;
  private enqueue: (request: Request) => void = () => undefined;

  constructor(private readonly cache: ModuleCache) {}

  /** Where Module events go (the Ptemplate controller's queue). */
  routeEventsTo(enqueue: (request: Request) => void): void {
    this.enqueue = enqueue;
  }

  async available(client: KubeApi, namespace: string | undefined): Promise<boolean> {
    if (this.found) return true;
    try {
      await client.list(Module, { namespace, limit: 1 });
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
    this.found = true;
    this.watch();
    return true;
  }

  markMissing(): void {
    this.found = false;
  }

  async get(client: KubeApi, name: string, namespace: string | undefined): Promise<ModuleObject | undefined> {
    if (this.watching && this.cache.informer(Module).isSynced) return this.cache.get<ModuleObject>(Module, name, namespace);
    return ifFound(client.get<ModuleObject>(Module, name, namespace));
  }

  private watch(): void {
    if (this.watching) return;
    this.watching = true;
    const route = (obj: KubeObject) => ownerPtemplate(obj).forEach((request) => this.enqueue(request));
    this.cache.informer(Module).addHandler({
      onAdd: route,
      onUpdate: (oldObj, newObj) => {
        route(oldObj);
        route(newObj);
      },
      onDelete: route,
    });
  }
}
