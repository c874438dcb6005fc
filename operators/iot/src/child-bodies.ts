/**
 * The bodies of children the cache holds as metadata only (ConfigMaps and Secrets: see
 * METADATA_ONLY_TYPES in iotservice-types.ts), read when such a child is compared with its desired form.
 *
 * Guarantees:
 * - `read` returns the child as the API server has it at the resourceVersion the cache shows, or
 *   at a newer one; undefined when it is gone.
 * - The first read of a child of some kind and name in this process lists every child of that
 *   kind and name (the caches' label selection, pages of 50) instead of getting them one by one:
 *   after a restart, the first reconcile of every instance compares with bodies from a few list
 *   requests, not one GET per child, which the client's rate limit would make last seconds at a
 *   thousand instances.
 * - Of the listed objects, only those `wanted` accepts are held, each until it is read once and
 *   none longer than a minute after the list. The list selects the child's name, so objects
 *   planted with our labels reach the process only if named like a child, one per namespace, and
 *   a page holds at most 50 of them for the time of one request.
 * - Any other read, a body listed at another resourceVersion than the cache's, and every read
 *   after a failed list are one GET each.
 */
import { apiVersionOf, dropManagedFields, isNotFound, type KubeApi, type KubeObject, type ResourceType } from '@iot-operator/runtime';

const PAGE_SIZE = 50;
const LISTED_BODIES_KEPT_MS = 60_000;

export interface ChildBodySelection {
  /** undefined: every namespace. */
  namespace?: string;
  labelSelector: string;
}

export class ChildBodies {
  /** By kind and name: the listed bodies, by namespace. */
  private readonly listed = new Map<string, Promise<Map<string | undefined, KubeObject>>>();

  constructor(
    private readonly selection: ChildBodySelection,
    private readonly wanted: (obj: KubeObject) => boolean,
    private readonly keptMs = LISTED_BODIES_KEPT_MS,
  ) {}

  /** The child `observed` (as cached) with its body, as the API server has it now. */
  async read(client: KubeApi, type: ResourceType, observed: KubeObject): Promise<KubeObject | undefined> {
    const { name, namespace, resourceVersion } = observed.metadata;
    const bodies = await this.listedOnce(client, type, name!);
    const listed = bodies.get(namespace);
    bodies.delete(namespace);
    if (listed && listed.metadata.resourceVersion === resourceVersion) return listed;
    try {
      return await client.get(type, name!, namespace);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  private listedOnce(client: KubeApi, type: ResourceType, name: string): Promise<Map<string | undefined, KubeObject>> {
    const key = `${type.group}/${type.plural}/${name}`;
    let bodies = this.listed.get(key);
    if (!bodies) {
      // A failed list leaves every read of these children to a GET of its own.
      bodies = this.list(client, type, name).catch(() => new Map<string | undefined, KubeObject>());
      this.listed.set(key, bodies);
    }
    return bodies;
  }

  private async list(client: KubeApi, type: ResourceType, name: string): Promise<Map<string | undefined, KubeObject>> {
    const bodies = new Map<string | undefined, KubeObject>();
    const apiVersion = apiVersionOf(type);
    let continueToken: string | undefined;
    do {
      const page = await client.list(type, { ...this.selection, fieldSelector: `metadata.name=${name}`, limit: PAGE_SIZE, continue: continueToken });
      for (const item of page.items) {
        // The items of a list carry no apiVersion and kind of their own.
        const obj = dropManagedFields({ ...item, apiVersion, kind: type.kind });
        if (this.wanted(obj)) bodies.set(obj.metadata.namespace, obj);
      }
      continueToken = page.metadata?.continue || undefined;
    } while (continueToken);
    setTimeout(() => bodies.clear(), this.keptMs).unref();
    return bodies;
  }
}
