/**
 * The cache store: objects by key, with secondary indexes.
 *
 * Guarantees:
 * - `replaceAll` swaps the whole content and every index in one synchronous step, so a reader
 *   sees either the old snapshot or the new one, never a mix (the relist swap of guarantee 1).
 * - Indexes always agree with the content: an object's old index entries are removed when it is
 *   updated or deleted.
 * - Objects are stored by reference and must be treated as read-only by every reader.
 */
import { objectKey, type KubeObject } from '../client/resource.ts';

/** Maps an object to the index values it is found under. */
export type IndexFunc<T extends KubeObject> = (obj: T) => string[];

export const byNamespace: IndexFunc<KubeObject> = (obj) => (obj.metadata.namespace ? [obj.metadata.namespace] : []);
export const byOwnerUid: IndexFunc<KubeObject> = (obj) => (obj.metadata.ownerReferences ?? []).map((ref) => ref.uid);
export function byLabel(label: string): IndexFunc<KubeObject> {
  return (obj) => {
    const value = obj.metadata.labels?.[label];
    return value === undefined ? [] : [value];
  };
}

export const namespaceIndex = 'namespace';
export const ownerUidIndex = 'ownerUid';
export const labelIndex = (label: string): string => `label:${label}`;

export class Store<T extends KubeObject> {
  private objects = new Map<string, T>();
  private indexes = new Map<string, Map<string, Set<string>>>();

  constructor(private readonly indexers: ReadonlyMap<string, IndexFunc<T>> = new Map()) {
    for (const name of indexers.keys()) this.indexes.set(name, new Map());
  }

  get size(): number {
    return this.objects.size;
  }

  get(key: string): T | undefined {
    return this.objects.get(key);
  }

  list(): T[] {
    return [...this.objects.values()];
  }

  keys(): string[] {
    return [...this.objects.keys()];
  }

  byIndex(indexName: string, value: string): T[] {
    const index = this.indexes.get(indexName);
    if (!index) throw new Error(`no index named ${indexName}; known: ${[...this.indexes.keys()].join(', ') || 'none'}`);
    const keys = index.get(value);
    if (!keys) return [];
    const out: T[] = [];
    for (const key of keys) {
      const obj = this.objects.get(key);
      if (obj) out.push(obj);
    }
    return out;
  }

  hasIndex(indexName: string): boolean {
    return this.indexes.has(indexName);
  }

  /** Inserts or replaces; returns the previous object under that key. */
  upsert(obj: T): T | undefined {
    const key = objectKey(obj);
    const previous = this.objects.get(key);
    if (previous) this.unindex(key, previous, this.indexes);
    this.objects.set(key, obj);
    this.index(key, obj, this.indexes);
    return previous;
  }

  remove(key: string): T | undefined {
    const previous = this.objects.get(key);
    if (!previous) return undefined;
    this.objects.delete(key);
    this.unindex(key, previous, this.indexes);
    return previous;
  }

  /** Atomically replaces the whole content with `objects`. */
  replaceAll(objects: Map<string, T>): void {
    const indexes = new Map<string, Map<string, Set<string>>>();
    for (const name of this.indexers.keys()) indexes.set(name, new Map());
    for (const [key, obj] of objects) this.index(key, obj, indexes);
    this.objects = objects;
    this.indexes = indexes;
  }

  private index(key: string, obj: T, indexes: Map<string, Map<string, Set<string>>>): void {
    for (const [name, fn] of this.indexers) {
      const index = indexes.get(name)!;
      for (const value of fn(obj)) {
        let keys = index.get(value);
        if (!keys) index.set(value, (keys = new Set()));
        keys.add(key);
      }
    }
  }

  private unindex(key: string, obj: T, indexes: Map<string, Map<string, Set<string>>>): void {
    for (const [name, fn] of this.indexers) {
      const index = indexes.get(name)!;
      for (const value of fn(obj)) {
        const keys = index.get(value);
        if (!keys) continue;
        keys.delete(key);
        if (keys.size === 0) index.delete(value);
      }
    }
  }
}
