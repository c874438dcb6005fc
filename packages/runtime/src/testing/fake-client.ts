/**
 * An in-memory fake of the client and the cache reader, for unit tests of reconcile logic only
 * (never as evidence that an operator works against Kubernetes).
 *
 * Guarantees, mirroring the API server where reconcilers depend on it:
 * - every write bumps a global resourceVersion; `replace`, or a merge patch naming
 *   metadata.resourceVersion, with a stale one fails with Conflict; creating an existing object
 *   fails with AlreadyExists; reads of absent objects fail with NotFound;
 * - `metadata.generation` starts at 1 and is bumped only when something outside metadata and
 *   status changes; status writes change nothing but status;
 * - deleting an object with finalizers only sets deletionTimestamp; removing the last
 *   finalizer of such an object deletes it;
 * - lists honour namespace and label selectors;
 * - `writes` records every write (verb, kind, key) so tests can assert "no write";
 * - `reconcileContext()` runs a reconciler on the fake: it is the client and the cache.
 * - a type marked `notServed` (a CRD not installed) is absent from the cache reader (`served`
 *   false) and every call of the client on it fails with NotFound, as the API server's does.
 */
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { ApiError } from '../client/errors.ts';
import type { ApplyOptions, DeleteOptions, KubeApi, ListOptions, ObjectList, PatchType } from '../client/client.ts';
import { objectKey, typeId, type KubeObject, type ResourceType } from '../client/resource.ts';
import type { CacheListOptions, CacheReader } from '../cache/cache.ts';
import { matchesSelector, parseSelector } from '../cache/selector.ts';
import { kubeTimestamp } from '../client/timestamp.ts';
import type { ReconcileContext } from '../controller/reconcile.ts';

export interface RecordedWrite {
  verb: 'create' | 'replace' | 'patch' | 'apply' | 'status' | 'delete';
  kind: string;
  key: string;
}

type JsonPatchOp = { op: 'add' | 'remove' | 'replace' | 'test'; path: string; value?: unknown };

/** A write that names a resourceVersion (a replace, a merge patch's metadata) fails with Conflict unless it is the stored one. */
function mustBeCurrent(existing: KubeObject, resourceVersion: string | undefined): void {
  if (resourceVersion && resourceVersion !== existing.metadata.resourceVersion) {
    throw new ApiError(409, 'Conflict', `the object has been modified; please apply your changes to the latest version and try again`);
  }
}

export class FakeClient implements KubeApi {
  private readonly objects = new Map<string, Map<string, KubeObject>>();
  private revision = 0;
  private readonly unserved = new Set<string>();
  readonly writes: RecordedWrite[] = [];

  /** Makes `type` one the API server does not serve (its CRD not installed), until `serve`. */
  notServed(type: ResourceType): void {
    this.unserved.add(typeId(type));
  }

  /** Makes `type` served again (its CRD installed), with the objects it held before. */
  serve(type: ResourceType): void {
    this.unserved.delete(typeId(type));
  }

  /** Seeds objects without recording writes. */
  seed(type: ResourceType, ...objects: KubeObject[]): void {
    for (const obj of objects) this.store(type, this.stamp(type, structuredClone(obj), undefined));
  }

  async get<T extends KubeObject = KubeObject>(type: ResourceType, name: string, namespace?: string): Promise<T> {
    this.mustBeServed(type);
    const found = this.peek<T>(type, name, namespace);
    if (!found) throw notFound(type, name);
    return structuredClone(found);
  }

  async list<T extends KubeObject = KubeObject>(type: ResourceType, options: ListOptions = {}): Promise<ObjectList<T>> {
    this.mustBeServed(type);
    return { items: this.select<T>(type, options.namespace, options.labelSelector).map((o) => structuredClone(o)), metadata: { resourceVersion: String(this.revision) } };
  }

  listAll<T extends KubeObject = KubeObject>(type: ResourceType, options: ListOptions = {}): Promise<ObjectList<T>> {
    return this.list<T>(type, options);
  }

  async create<T extends KubeObject>(type: ResourceType, obj: T): Promise<T> {
    this.mustBeServed(type);
    const copy = structuredClone(obj);
    if (!copy.metadata.name && copy.metadata.generateName) copy.metadata.name = copy.metadata.generateName + randomUUID().slice(0, 5);
    if (this.peek(type, copy.metadata.name ?? '', copy.metadata.namespace)) throw new ApiError(409, 'AlreadyExists', `${type.plural} "${copy.metadata.name}" already exists`);
    this.record('create', type, copy);
    return structuredClone(this.store(type, this.stamp(type, copy, undefined)) as T);
  }

  async replace<T extends KubeObject>(type: ResourceType, obj: T): Promise<T> {
    this.mustBeServed(type);
    const existing = this.mustGet(type, obj.metadata.name ?? '', obj.metadata.namespace);
    mustBeCurrent(existing, obj.metadata.resourceVersion);
    this.record('replace', type, obj);
    const next = { ...structuredClone(obj), status: existing.status };
    return structuredClone(this.commit(type, existing, next) as T);
  }

  async patch<T extends KubeObject = KubeObject>(type: ResourceType, name: string, namespace: string | undefined, patch: unknown, patchType: PatchType = 'merge'): Promise<T> {
    this.mustBeServed(type);
    const existing = this.mustGet(type, name, namespace);
    if (patchType === 'merge') mustBeCurrent(existing, (patch as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion);
    const patched = patchType === 'json' ? applyJsonPatch(existing, patch as JsonPatchOp[]) : mergePatch(existing, patch) as KubeObject;
    this.record('patch', type, existing);
    return structuredClone(this.commit(type, existing, { ...patched, status: existing.status }) as T);
  }

  async apply<T extends KubeObject>(type: ResourceType, obj: T, _options: ApplyOptions): Promise<T> {
    this.mustBeServed(type);
    this.record('apply', type, obj);
    const existing = this.peek(type, obj.metadata.name ?? '', obj.metadata.namespace);
    if (!existing) return structuredClone(this.store(type, this.stamp(type, structuredClone(obj), undefined)) as T);
    const { status: _ignored, ...spec } = structuredClone(obj);
    const merged = mergePatch(existing, spec) as KubeObject;
    return structuredClone(this.commit(type, existing, { ...merged, status: existing.status }) as T);
  }

  async replaceStatus<T extends KubeObject>(type: ResourceType, obj: T): Promise<T> {
    this.mustBeServed(type);
    const existing = this.mustGet(type, obj.metadata.name ?? '', obj.metadata.namespace);
    this.record('status', type, obj);
    return structuredClone(this.commit(type, existing, { ...existing, status: structuredClone(obj.status) }) as T);
  }

  async patchStatus<T extends KubeObject = KubeObject>(type: ResourceType, name: string, namespace: string | undefined, patch: unknown): Promise<T> {
    this.mustBeServed(type);
    const existing = this.mustGet(type, name, namespace);
    this.record('status', type, existing);
    const merged = mergePatch(existing, patch) as KubeObject;
    return structuredClone(this.commit(type, existing, { ...existing, status: merged.status }) as T);
  }

  async applyStatus<T extends KubeObject>(type: ResourceType, obj: T, _options: ApplyOptions): Promise<T> {
    return this.patchStatus<T>(type, obj.metadata.name ?? '', obj.metadata.namespace, { status: obj.status });
  }

  async delete(type: ResourceType, name: string, namespace?: string, _options: DeleteOptions = {}): Promise<void> {
    this.mustBeServed(type);
    const existing = this.mustGet(type, name, namespace);
    this.record('delete', type, existing);
    if (existing.metadata.finalizers?.length) {
      if (!existing.metadata.deletionTimestamp) {
        this.commit(type, existing, { ...existing, metadata: { ...existing.metadata, deletionTimestamp: kubeTimestamp(new Date()) } });
      }
      return;
    }
    this.bucket(type).delete(objectKey(existing));
  }

  /** A synchronous read, as reconcilers read the cache. */
  peek<T extends KubeObject = KubeObject>(type: ResourceType, name: string, namespace?: string): T | undefined {
    return this.bucket(type).get(objectKey({ metadata: { name, namespace: type.namespaced ? namespace : undefined } })) as T | undefined;
  }

  /** The fake's content as a cache reader (what `ctx.cache` is in a reconcile). */
  cacheReader(): CacheReader {
    return {
      get: <T extends KubeObject>(type: ResourceType, name: string, namespace?: string) => (this.isServed(type) ? this.peek<T>(type, name, namespace) : undefined),
      list: <T extends KubeObject>(type: ResourceType, options: CacheListOptions = {}) => (this.isServed(type) ? this.select<T>(type, options.namespace, options.labelSelector) : []),
      served: (type: ResourceType) => this.isServed(type),
    };
  }

  /** A reconcile's context on this fake: itself as the client, its content as the cache, silent logs, Events dropped. */
  reconcileContext(cache: CacheReader = this.cacheReader()): ReconcileContext {
    return { client: this, cache, log: pino({ level: 'silent' }), recorder: { event: () => undefined, flush: async () => undefined }, signal: new AbortController().signal };
  }

  private isServed(type: ResourceType): boolean {
    return !this.unserved.has(typeId(type));
  }

  /** The API server's answer to any request on a resource it does not serve. */
  private mustBeServed(type: ResourceType): void {
    if (!this.isServed(type)) throw new ApiError(404, 'NotFound', `the server could not find the requested resource (${type.plural}.${type.group})`);
  }

  private select<T extends KubeObject>(type: ResourceType, namespace: string | undefined, labelSelector: string | Record<string, string> | undefined): T[] {
    const selector = parseSelector(labelSelector);
    return [...this.bucket(type).values()].filter((o) => (!namespace || o.metadata.namespace === namespace) && matchesSelector(o.metadata.labels, selector)) as T[];
  }

  private bucket(type: ResourceType): Map<string, KubeObject> {
    let bucket = this.objects.get(typeId(type));
    if (!bucket) this.objects.set(typeId(type), (bucket = new Map()));
    return bucket;
  }

  private mustGet(type: ResourceType, name: string, namespace?: string): KubeObject {
    const found = this.peek(type, name, namespace);
    if (!found) throw notFound(type, name);
    return found;
  }

  private stamp(type: ResourceType, obj: KubeObject, previous: KubeObject | undefined): KubeObject {
    obj.apiVersion ??= type.group ? `${type.group}/${type.version}` : type.version;
    obj.kind ??= type.kind;
    obj.metadata.uid = previous?.metadata.uid ?? obj.metadata.uid ?? randomUUID();
    obj.metadata.creationTimestamp = previous?.metadata.creationTimestamp ?? kubeTimestamp(new Date());
    obj.metadata.generation = previous?.metadata.generation ?? 1;
    obj.metadata.resourceVersion = String(++this.revision);
    return obj;
  }

  private commit(type: ResourceType, previous: KubeObject, next: KubeObject): KubeObject {
    const stamped = this.stamp(type, next, previous);
    if (JSON.stringify(spec(previous)) !== JSON.stringify(spec(stamped))) stamped.metadata.generation = (previous.metadata.generation ?? 1) + 1;
    if (stamped.metadata.deletionTimestamp && !stamped.metadata.finalizers?.length) {
      this.bucket(type).delete(objectKey(stamped));
      return stamped;
    }
    return this.store(type, stamped);
  }

  private store(type: ResourceType, obj: KubeObject): KubeObject {
    this.bucket(type).set(objectKey(obj), obj);
    return obj;
  }

  private record(verb: RecordedWrite['verb'], type: ResourceType, obj: KubeObject): void {
    this.writes.push({ verb, kind: type.kind, key: objectKey(obj) });
  }
}

/** Everything except metadata and status: what bumps generation. */
function spec(obj: KubeObject): unknown {
  const { metadata: _m, status: _s, ...rest } = obj;
  return rest;
}

function notFound(type: ResourceType, name: string): ApiError {
  return new ApiError(404, 'NotFound', `${type.plural} "${name}" not found`);
}

/** RFC 7386 JSON merge patch. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return structuredClone(patch);
  const base: Record<string, unknown> = typeof target === 'object' && target !== null && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete base[key];
    else base[key] = mergePatch(base[key], value);
  }
  return base;
}

function applyJsonPatch(target: KubeObject, ops: JsonPatchOp[]): KubeObject {
  const doc = structuredClone(target) as unknown as Record<string, unknown>;
  for (const op of ops) {
    const parts = op.path.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = parts.pop()!;
    let parent: any = doc; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON pointer walk over arbitrary JSON
    for (const part of parts) {
      parent = parent?.[part];
      if (parent === undefined) throw new ApiError(422, 'Invalid', `json patch path ${op.path} does not exist`);
    }
    if (op.op === 'test') {
      if (JSON.stringify(parent[last]) !== JSON.stringify(op.value)) throw new ApiError(422, 'Invalid', `json patch test failed at ${op.path}`);
    } else if (op.op === 'remove') {
      if (Array.isArray(parent)) parent.splice(Number(last), 1);
      else delete parent[last];
    } else if (Array.isArray(parent)) {
      if (last === '-') parent.push(op.value);
      else if (op.op === 'add') parent.splice(Number(last), 0, op.value);
      else parent[Number(last)] = op.value;
    } else parent[last] = op.value;
  }
  return doc as unknown as KubeObject;
}
