/**
 * The bodies of children the cache holds as metadata only (ConfigMaps and Secrets: see
 * METADATA_ONLY_TYPES in controller.ts), read when such a child is compared with its desired form.
 *
 * Guarantees:
 * - `read` returns the child as the API server has it at the resourceVersion the cache shows, or
 *   at a newer one; undefined when it is gone.
 * - The first read of a kind in this process lists the children of that kind (the caches' label
 *   selection, pages of 50) instead of getting them one by one: after a restart, the first
 *   reconcile of every instance compares with bodies from a few list requests, not one GET per
 *   child, which the client's rate limit would make last seconds at a thousand instances.
 * - Of the listed objects, only those `wanted` accepts are held, each until it is read once and
 *   none longer than a minute after the list; a page holds at most 50 bodies, so objects planted
 *   with our labels elsewhere cost at most one page of memory, for the time of one request.
 * - Any other read, a body listed at another resourceVersion than the cache's, and every read
 *   after a failed list are one GET each.
 */
import { dropManagedFields, isNotFound, type KubeApi, type KubeObject, type ResourceType } from '@iot-operator/runtime';

const PAGE_SIZE = 50;
const LISTED_BODIES_KEPT_MS = 60_000;

export interface ChildBodySelection {
  /** undefined: every namespace. */
  namespace?: string;
  labelSelector: string;
}

export class ChildBodies {
  private readonly listed = new Map<ResourceType, Promise<Map<string, KubeObject>>>();

  constructor(
    private readonly selection: ChildBodySelection,
    private readonly wanted: (type: ResourceType, obj: KubeObject) => boolean,
    private readonly keptMs = LISTED_BODIES_KEPT_MS,
  ) {}

  /** The child `observed` (as cached) with its body, as the API server has it now. */
  async read(client: KubeApi, type: ResourceType, observed: KubeObject): Promise<KubeObject | undefined> {
    const { name, namespace, resourceVersion } = observed.metadata;
    const bodies = await this.listedOnce(client, type);
    const key = `${namespace}/${name}`;
    const listed = bodies.get(key);
    bodies.delete(key);
    if (listed && listed.metadata.resourceVersion === resourceVersion) return listed;
    try {
      return await client.get(type, name!, namespace);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  private listedOnce(client: KubeApi, type: ResourceType): Promise<Map<string, KubeObject>> {
    let bodies = this.listed.get(type);
    if (!bodies) {
      // A failed list leaves every read of this kind to a GET of its own.
      bodies = this.list(client, type).catch(() => new Map<string, KubeObject>());
      this.listed.set(type, bodies);
    }
    return bodies;
  }

  private async list(client: KubeApi, type: ResourceType): Promise<Map<string, KubeObject>> {
    const bodies = new Map<string, KubeObject>();
    const apiVersion = type.group ? `${type.group}/${type.version}` : type.version;
    let continueToken: string | undefined;
    do {
      const page = await client.list(type, { ...this.selection, limit: PAGE_SIZE, continue: continueToken });
      for (const item of page.items) {
        // The items of a list carry no apiVersion and kind of their own.
        const obj = dropManagedFields({ ...item, apiVersion, kind: type.kind });
        if (this.wanted(type, obj)) bodies.set(`${obj.metadata.namespace}/${obj.metadata.name}`, obj);
      }
      continueToken = page.metadata?.continue || undefined;
    } while (continueToken);
    setTimeout(() => bodies.clear(), this.keptMs).unref();
    return bodies;
  }
}
