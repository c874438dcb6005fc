/**
 * The informer: a watcher feeding a store, with event handlers and a "synced" signal.
 *
 * Guarantees:
 * - `synced` resolves once the first complete list has been swapped into the store; handlers
 *   see the initial objects as adds before it resolves.
 * - A relist (after 410 Gone) is buffered and swapped in atomically at `InitDone`; handlers then
 *   get an add for new objects, an update for changed ones (resourceVersion differs) and a
 *   delete for every object that vanished while the watch was down.
 * - The transform runs once per received object before it is stored (by default it drops
 *   `metadata.managedFields`, which is often the largest part of an object); with `strings`,
 *   the stored object then refers to their shared copies of its string values.
 * - Handlers receive the stored object itself (no copy); they must not mutate it. A handler
 *   that throws is reported and does not stop the informer.
 * - `served` is false while the resource is one the API server does not serve (an `optional`
 *   resource, its CRD not installed: watcher.ts); the store is then empty and the informer synced.
 */
import { objectKey, type KubeObject } from '../client/resource.ts';
import type { ListWatchSource } from '../watch/source.ts';
import { Watcher, type WatcherConfig, type WatcherClock, type WatcherEvent } from '../watch/watcher.ts';
import type { SharedStrings } from './shared-strings.ts';
import { Store, type IndexFunc } from './store.ts';

export interface EventHandler<T extends KubeObject> {
  onAdd?(obj: T): void;
  onUpdate?(oldObj: T, newObj: T): void;
  onDelete?(obj: T): void;
}

export type Transform<T extends KubeObject> = (obj: T) => T;

/** Drops managedFields: the cache never needs them and they dominate object size. */
export function dropManagedFields<T extends KubeObject>(obj: T): T {
  if (obj.metadata.managedFields === undefined) return obj;
  const { managedFields: _dropped, ...metadata } = obj.metadata;
  return { ...obj, metadata };
}

export interface InformerOptions<T extends KubeObject> {
  transform?: Transform<T>;
  /** Where stored objects take their string values from (one per cache, shared by its informers). */
  strings?: SharedStrings;
  indexers?: ReadonlyMap<string, IndexFunc<T>>;
  watcherConfig?: Partial<WatcherConfig>;
  clock?: WatcherClock;
  onError?: (err: unknown) => void;
}

export class Informer<T extends KubeObject> {
  readonly store: Store<T>;
  private readonly handlers: EventHandler<T>[] = [];
  private readonly transform: Transform<T>;
  private readonly watcher: Watcher<T>;
  private relistBuffer: Map<string, T> | undefined;
  private hasSynced = false;
  private resolveSynced!: () => void;
  readonly synced: Promise<void>;

  constructor(source: ListWatchSource<T>, private readonly options: InformerOptions<T> = {}) {
    this.store = new Store<T>(options.indexers);
    this.transform = options.transform ?? dropManagedFields;
    this.synced = new Promise((resolve) => (this.resolveSynced = resolve));
    this.watcher = new Watcher<T>(source, (event) => this.apply(event), (err) => options.onError?.(err), options.watcherConfig, options.clock);
  }

  get description(): string {
    return this.watcher.description;
  }

  get isSynced(): boolean {
    return this.hasSynced;
  }

  get served(): boolean {
    return this.watcher.served;
  }

  addHandler(handler: EventHandler<T>): void {
    this.handlers.push(handler);
    if (this.hasSynced) for (const obj of this.store.list()) this.safely(() => handler.onAdd?.(obj));
  }

  run(signal: AbortSignal): Promise<void> {
    return this.watcher.run(signal);
  }

  private apply(event: WatcherEvent<T>): void {
    switch (event.type) {
      case 'Init':
        this.relistBuffer = new Map();
        return;
      case 'InitApply': {
        const obj = this.toStore(event.object);
        this.relistBuffer?.set(objectKey(obj), obj);
        return;
      }
      case 'InitDone':
        this.swapInRelist();
        return;
      case 'Apply': {
        const obj = this.toStore(event.object);
        const previous = this.store.upsert(obj);
        if (previous) this.emit((h) => h.onUpdate?.(previous, obj));
        else this.emit((h) => h.onAdd?.(obj));
        return;
      }
      case 'Delete': {
        const previous = this.store.remove(objectKey(event.object));
        const gone = previous ?? this.transform(event.object);
        this.emit((h) => h.onDelete?.(gone));
        return;
      }
    }
  }

  /** A received object as it is stored: transformed, its string values shared. */
  private toStore(received: T): T {
    const obj = this.transform(received);
    return this.options.strings ? this.options.strings.share(obj) : obj;
  }

  private swapInRelist(): void {
    const fresh = this.relistBuffer ?? new Map<string, T>();
    this.relistBuffer = undefined;
    const before = new Map(this.store.keys().map((key) => [key, this.store.get(key)!]));
    this.store.replaceAll(fresh);
    for (const [key, obj] of fresh) {
      const old = before.get(key);
      if (!old) this.emit((h) => h.onAdd?.(obj));
      else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) this.emit((h) => h.onUpdate?.(old, obj));
    }
    for (const [key, old] of before) if (!fresh.has(key)) this.emit((h) => h.onDelete?.(old));
    if (!this.hasSynced) {
      this.hasSynced = true;
      this.resolveSynced();
    }
  }

  private emit(call: (handler: EventHandler<T>) => void): void {
    for (const handler of this.handlers) this.safely(() => call(handler));
  }

  private safely(call: () => void): void {
    try {
      call();
    } catch (err) {
      this.options.onError?.(err);
    }
  }
}
