/**
 * The manager's cache: one shared informer per resource type, scoped as configured, and the
 * read API reconcilers use.
 *
 * Guarantees:
 * - One informer (one list+watch) per resource type and selection, however many controllers
 *   read or watch it.
 * - Every informer is scoped by the type's configured namespace, label selector and field
 *   selector (or the cache-wide default namespace), so memory holds only what is selected
 *   (guarantee 10); each informer indexes by namespace, owner UID and the configured labels.
 *   A type configured `metadataOnly` receives and holds only object metadata. Cached objects
 *   of every type share one copy of each repeated string value (shared-strings.ts).
 * - A type configured `optional` may be one the API server does not serve (a CRD not installed):
 *   its informer is then synced and empty, lists again every 30 s, and `served` says false until
 *   it is served (watch/watcher.ts).
 * - `waitForSync` resolves when every informer has listed once, and fails with an error naming
 *   the types still unsynced when the timeout passes; it returns at once when its signal aborts
 *   (a shutdown during start-up does not wait for the sync timeout).
 * - Reads never reach the API server; `get` and `list` return stored objects (read-only).
 */
import type { KubeClient } from '../client/client.ts';
import { objectKey, typeId, type KubeObject, type ResourceType } from '../client/resource.ts';
import { clientSource, type Selection } from '../watch/source.ts';
import { Informer, type Transform } from './informer.ts';
import { metadataSource } from './metadata-source.ts';
import { SharedStrings } from './shared-strings.ts';
import type { WatcherConfig } from '../watch/watcher.ts';
import { matchesSelector, parseSelector, type LabelSelector } from './selector.ts';
import { byLabel, byNamespace, byOwnerUid, labelIndex, namespaceIndex, ownerUidIndex, type IndexFunc } from './store.ts';

export interface TypeCacheOptions extends Selection {
  /** Labels to index by (e.g. an instance label), for `list({ index: { label, value } })`. */
  indexLabels?: string[];
  transform?: Transform<KubeObject>;
  /** Receive and hold only metadata (PartialObjectMetadata): no spec, data or status. */
  metadataOnly?: boolean;
  /** The API server may not serve the type (its CRD not installed): see `served`. */
  optional?: boolean;
}

export interface CacheOptions {
  /** Namespace every informer is limited to unless its type says otherwise; undefined = all. */
  defaultNamespace?: string;
  byType?: ReadonlyArray<{ type: ResourceType } & TypeCacheOptions>;
  onError?: (err: unknown, informer: string) => void;
  /** Watcher settings of every informer (page size, backoff, idle timeout); defaults as client-go. */
  watcher?: Partial<WatcherConfig>;
}

export interface CacheListOptions {
  /** Read from the separate informer of this selection instead of the type's default one. */
  selection?: Selection;
  namespace?: string;
  labelSelector?: string | Record<string, string>;
  /** Use an index: a label configured in `indexLabels`, or the owner UID. A `labelSelector` term `label=value` on an indexed label uses its index too. */
  label?: { name: string; value: string };
  ownerUid?: string;
}

/** Read access to cached objects, as reconcilers see it. */
export interface CacheReader {
  get<T extends KubeObject = KubeObject>(type: ResourceType, name: string, namespace?: string, selection?: Selection): T | undefined;
  list<T extends KubeObject = KubeObject>(type: ResourceType, options?: CacheListOptions): T[];
  /** False while the API server does not serve the type (only an `optional` type can be unserved). */
  served(type: ResourceType, selection?: Selection): boolean;
}

export class Cache implements CacheReader {
  private readonly informers = new Map<string, Informer<KubeObject>>();
  private readonly strings = new SharedStrings();
  private started: AbortSignal | undefined;
  private readonly running: Promise<void>[] = [];

  constructor(
    private readonly client: KubeClient,
    private readonly options: CacheOptions = {},
  ) {}

  /**
   * The informer of a type, created on first use (and started at once if the cache runs).
   * Without `selection` it is the type's default informer, scoped as configured in `byType`;
   * with one, a separate informer for exactly that selection (e.g. one named Secret in another
   * namespace beside the label-selected Secrets of the default informer).
   */
  informer<T extends KubeObject = KubeObject>(type: ResourceType, selection?: Selection): Informer<T> {
    const id = selection ? `${typeId(type)}?${JSON.stringify(selection)}` : typeId(type);
    let informer = this.informers.get(id);
    if (!informer) {
      const typeOptions = selection ? undefined : this.options.byType?.find((entry) => typeId(entry.type) === typeId(type));
      const namespace = type.namespaced ? (selection ? selection.namespace : (typeOptions?.namespace ?? this.options.defaultNamespace)) : undefined;
      const scope: Selection = selection
        ? { ...selection, namespace }
        : { namespace, labelSelector: typeOptions?.labelSelector, fieldSelector: typeOptions?.fieldSelector };
      const indexers = new Map<string, IndexFunc<KubeObject>>([
        [namespaceIndex, byNamespace],
        [ownerUidIndex, byOwnerUid],
        ...(typeOptions?.indexLabels ?? []).map((label): [string, IndexFunc<KubeObject>] => [labelIndex(label), byLabel(label)]),
      ]);
      const source = typeOptions?.metadataOnly ? metadataSource<KubeObject>(this.client, type, scope) : clientSource<KubeObject>(this.client, type, scope);
      informer = new Informer(source, {
        indexers,
        transform: typeOptions?.transform,
        strings: this.strings,
        watcherConfig: typeOptions?.optional ? { ...this.options.watcher, optional: true } : this.options.watcher,
        onError: (err) => this.options.onError?.(err, source.description),
      });
      this.informers.set(id, informer);
      if (this.started) this.running.push(informer.run(this.started));
    }
    return informer as unknown as Informer<T>;
  }

  start(signal: AbortSignal): void {
    this.started = signal;
    for (const informer of this.informers.values()) this.running.push(informer.run(signal));
  }

  /** Resolves when every informer has stopped (after the start signal aborted). */
  async stopped(): Promise<void> {
    await Promise.all(this.running);
  }

  /** How many objects each informer holds, by its description (resource and selection). */
  *objectCounts(): Iterable<[string, number]> {
    for (const informer of this.informers.values()) yield [informer.description, informer.store.size];
  }

  get isSynced(): boolean {
    return [...this.informers.values()].every((i) => i.isSynced);
  }

  /** Resolves 'synced' once every informer has synced, or 'stopped' as soon as `signal` aborts. */
  async waitForSync(timeoutMs: number, signal?: AbortSignal): Promise<'synced' | 'stopped'> {
    if (signal?.aborted) return 'stopped';
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const stopped = new Promise<'stopped'>((resolve) => {
      onAbort = () => resolve('stopped');
      signal?.addEventListener('abort', onAbort, { once: true });
    });
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const pending = [...this.informers.values()].filter((i) => !i.isSynced).map((i) => i.description);
        reject(new Error(`caches did not sync within ${Math.round(timeoutMs / 1000)} s: ${pending.join('; ')}`));
      }, timeoutMs);
    });
    try {
      const synced = Promise.all([...this.informers.values()].map((i) => i.synced)).then(() => 'synced' as const);
      return await Promise.race([synced, timeout, stopped]);
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener('abort', onAbort);
    }
  }

  served(type: ResourceType, selection?: Selection): boolean {
    return this.informer(type, selection).served;
  }

  get<T extends KubeObject = KubeObject>(type: ResourceType, name: string, namespace?: string, selection?: Selection): T | undefined {
    return this.informer<T>(type, selection).store.get(objectKey({ metadata: { name, namespace: type.namespaced ? namespace : undefined } }));
  }

  list<T extends KubeObject = KubeObject>(type: ResourceType, options: CacheListOptions = {}): T[] {
    const store = this.informer<T>(type, options.selection).store;
    const selector = options.labelSelector === undefined ? undefined : parseSelector(options.labelSelector);
    // A selector term `label=value` on an indexed label is answered from the index, so listing
    // one instance's objects does not scan every object of the namespace.
    const label = options.label ?? (selector && indexedEquality(selector, (name) => store.hasIndex(labelIndex(name))));
    let items: T[];
    if (label) items = store.byIndex(labelIndex(label.name), label.value);
    else if (options.ownerUid) items = store.byIndex(ownerUidIndex, options.ownerUid);
    else if (options.namespace) items = store.byIndex(namespaceIndex, options.namespace);
    else items = store.list();
    if (options.namespace && (label || options.ownerUid)) items = items.filter((o) => o.metadata.namespace === options.namespace);
    if (selector) items = items.filter((o) => matchesSelector(o.metadata.labels, selector));
    return items;
  }
}

/** The first `label=value` term of a selector whose label is indexed. */
function indexedEquality(selector: LabelSelector, indexed: (label: string) => boolean): { name: string; value: string } | undefined {
  for (const term of selector) {
    if (term.op === 'in' && term.values.length === 1 && indexed(term.key)) return { name: term.key, value: term.values[0]! };
  }
  return undefined;
}
