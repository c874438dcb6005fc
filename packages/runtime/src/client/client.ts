/**
 * The Kubernetes client: typed verbs for any resource type, built-in or custom.
 *
 * Guarantees:
 * - Every failure is an `ApiError` with the HTTP code and Kubernetes reason.
 * - A 429 or a 5xx carrying Retry-After is retried after the delay the server asked for (at most
 *   `maxRetryAfterAttempts` times, each delay capped at 30 s), as client-go does; without the
 *   header it fails at once (a disruption budget refusing an eviction answers 429 without it).
 * - Every request is counted in `rest_client_requests_total{code,host,method}` and timed in
 *   `rest_client_request_duration_seconds{host,verb}` (code "<error>" for transport failures;
 *   host is the API server's host:port, as client-go labels it).
 * - With a `rateLimit`, every request (each retry and each watch included) first takes a token
 *   from the client's token bucket, as client-go's rate limiter does; the wait is recorded in
 *   `rest_client_rate_limiter_duration_seconds{host,verb}`. Without one, requests are not held.
 *   `withOwnRateLimit()` is a client on the same connections whose requests take tokens from a
 *   bucket of their own at the same rate: they never wait behind this client's (client-go builds
 *   leader election's client so, from a copy of the manager's config).
 * - `listAll` pages through large collections (limit 500, continue tokens) and returns the
 *   resourceVersion of the consistent snapshot it read.
 */
import type { RuntimeMetrics } from '../metrics/runtime-metrics.ts';
import { ApiError } from './errors.ts';
import { TokenBucket, type RateLimit } from './token-bucket.ts';
import { apiVersionOf, collectionPath, objectPath, type KubeObject, type ResourceType } from './resource.ts';
import { Transport, type HttpRequest, type HttpStream } from './transport.ts';

export type PatchType = 'merge' | 'json' | 'strategic';
export type PropagationPolicy = 'Foreground' | 'Background' | 'Orphan';

export interface ListOptions {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  limit?: number;
  continue?: string;
  resourceVersion?: string;
  /** Accept header (see HttpRequest.accept). */
  accept?: string;
}

export interface ObjectList<T extends KubeObject = KubeObject> {
  items: T[];
  metadata: { resourceVersion?: string; continue?: string };
}

export interface WatchOptions {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  resourceVersion?: string;
  allowWatchBookmarks?: boolean;
  timeoutSeconds?: number;
  signal?: AbortSignal;
  /** Accept header (see HttpRequest.accept). */
  accept?: string;
}

export interface ApplyOptions {
  fieldManager: string;
  force?: boolean;
}

export interface DeleteOptions {
  propagationPolicy?: PropagationPolicy;
  preconditions?: { uid?: string; resourceVersion?: string };
}

/** The verbs reconcilers use; the real client and the unit-test fake both provide them. */
export type KubeApi = Pick<KubeClient, 'get' | 'list' | 'listAll' | 'create' | 'replace' | 'patch' | 'apply' | 'replaceStatus' | 'patchStatus' | 'applyStatus' | 'delete'>;

const patchContentTypes: Record<PatchType, string> = {
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
  strategic: 'application/strategic-merge-patch+json',
};
const applyContentType = 'application/apply-patch+yaml';
const maxRetryAfterAttempts = 5;

/** controller-runtime's client defaults: 20 requests a second, bursts of 30. */
export const clientRateLimitDefaults: RateLimit = { qps: 20, burst: 30 };

export interface ClientOptions {
  kubeconfigPath?: string;
  metrics?: RuntimeMetrics;
  /** Requests per second and burst; undefined or qps <= 0 = not limited. */
  rateLimit?: RateLimit;
}

export class KubeClient {
  private readonly bucket: TokenBucket | undefined;

  constructor(
    private readonly transport: Transport,
    private readonly metrics?: RuntimeMetrics,
    rateLimit?: RateLimit,
  ) {
    this.bucket = rateLimit && rateLimit.qps > 0 ? new TokenBucket(rateLimit) : undefined;
  }

  static async fromKubeconfig(options: ClientOptions = {}): Promise<KubeClient> {
    return new KubeClient(await Transport.load(options.kubeconfigPath), options.metrics, options.rateLimit);
  }

  withOwnRateLimit(): KubeClient {
    return new KubeClient(this.transport, this.metrics, this.bucket?.limit);
  }

  get server(): string {
    return this.transport.server;
  }

  close(): void {
    this.transport.close();
  }

  async get<T extends KubeObject = KubeObject>(type: ResourceType, name: string, namespace?: string): Promise<T> {
    return this.call<T>({ method: 'GET', path: objectPath(type, name, namespace) });
  }

  async list<T extends KubeObject = KubeObject>(type: ResourceType, options: ListOptions = {}): Promise<ObjectList<T>> {
    const { namespace, accept, ...query } = options;
    return this.call<ObjectList<T>>({ method: 'GET', path: collectionPath(type, namespace), query: { ...query }, accept });
  }

  /** Lists every page (500 objects per request) and returns all items with the snapshot's resourceVersion. */
  async listAll<T extends KubeObject = KubeObject>(type: ResourceType, options: ListOptions = {}): Promise<ObjectList<T>> {
    const items: T[] = [];
    let continueToken: string | undefined;
    let resourceVersion: string | undefined;
    do {
      const page = await this.list<T>(type, { limit: 500, ...options, continue: continueToken });
      items.push(...(page.items ?? []));
      continueToken = page.metadata?.continue || undefined;
      resourceVersion = page.metadata?.resourceVersion;
    } while (continueToken);
    return { items, metadata: { resourceVersion } };
  }

  async create<T extends KubeObject>(type: ResourceType, obj: T): Promise<T> {
    return this.call<T>({ method: 'POST', path: collectionPath(type, obj.metadata.namespace), body: withTypeMeta(type, obj) });
  }

  /** PUT: replaces the object; the object's resourceVersion guards against lost updates. */
  async replace<T extends KubeObject>(type: ResourceType, obj: T): Promise<T> {
    return this.call<T>({ method: 'PUT', path: objectPath(type, obj.metadata.name ?? '', obj.metadata.namespace), body: withTypeMeta(type, obj) });
  }

  async patch<T extends KubeObject = KubeObject>(type: ResourceType, name: string, namespace: string | undefined, patch: unknown, patchType: PatchType = 'merge'): Promise<T> {
    return this.call<T>({ method: 'PATCH', path: objectPath(type, name, namespace), body: patch, contentType: patchContentTypes[patchType] });
  }

  /** Server-side apply: the object holds exactly the fields this field manager owns. */
  async apply<T extends KubeObject>(type: ResourceType, obj: T, options: ApplyOptions): Promise<T> {
    return this.call<T>({
      method: 'PATCH',
      path: objectPath(type, obj.metadata.name ?? '', obj.metadata.namespace),
      query: { fieldManager: options.fieldManager, force: options.force ? true : undefined },
      body: withTypeMeta(type, obj),
      contentType: applyContentType,
    });
  }

  async replaceStatus<T extends KubeObject>(type: ResourceType, obj: T): Promise<T> {
    return this.call<T>({ method: 'PUT', path: `${objectPath(type, obj.metadata.name ?? '', obj.metadata.namespace)}/status`, body: withTypeMeta(type, obj) });
  }

  async patchStatus<T extends KubeObject = KubeObject>(type: ResourceType, name: string, namespace: string | undefined, patch: unknown, patchType: PatchType = 'merge'): Promise<T> {
    return this.call<T>({ method: 'PATCH', path: `${objectPath(type, name, namespace)}/status`, body: patch, contentType: patchContentTypes[patchType] });
  }

  async applyStatus<T extends KubeObject>(type: ResourceType, obj: T, options: ApplyOptions): Promise<T> {
    return this.call<T>({
      method: 'PATCH',
      path: `${objectPath(type, obj.metadata.name ?? '', obj.metadata.namespace)}/status`,
      query: { fieldManager: options.fieldManager, force: options.force ? true : undefined },
      body: withTypeMeta(type, obj),
      contentType: applyContentType,
    });
  }

  async delete(type: ResourceType, name: string, namespace?: string, options: DeleteOptions = {}): Promise<void> {
    const body = options.propagationPolicy || options.preconditions ? { apiVersion: 'v1', kind: 'DeleteOptions', ...options } : undefined;
    await this.call({ method: 'DELETE', path: objectPath(type, name, namespace), body });
  }

  /** Opens a watch stream; the caller reads `lines` (one JSON watch event each) and closes it. */
  async watch(type: ResourceType, options: WatchOptions): Promise<HttpStream> {
    const { namespace, signal, accept, ...query } = options;
    await this.throttle('WATCH', signal);
    const started = performance.now();
    let stream: HttpStream;
    try {
      stream = await this.transport.stream({ method: 'GET', path: collectionPath(type, namespace), query: { watch: true, ...query }, signal, accept });
    } catch (err) {
      this.record('WATCH', '<error>', started);
      throw ApiError.transport(err, 'WATCH', collectionPath(type, namespace));
    }
    this.record('WATCH', String(stream.code), started);
    if (stream.code < 200 || stream.code >= 300) {
      throw ApiError.fromResponse(stream.code, stream.errorBody, 'WATCH', collectionPath(type, namespace));
    }
    return stream;
  }

  /** Any request, for paths not covered by the verbs above (e.g. /version, /readyz). */
  async raw<T>(req: HttpRequest): Promise<T> {
    return this.call<T>(req);
  }

  private async call<T>(req: HttpRequest): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      await this.throttle(req.method, req.signal);
      const started = performance.now();
      let response;
      try {
        response = await this.transport.send(req);
      } catch (err) {
        this.record(req.method, '<error>', started);
        throw ApiError.transport(err, req.method, req.path);
      }
      this.record(req.method, String(response.code), started);
      if (response.code >= 200 && response.code < 300) return response.body as T;
      const retryAfter = retryAfterMs(response.code, response.headers['retry-after']);
      if (retryAfter !== undefined && attempt < maxRetryAfterAttempts) {
        await sleep(retryAfter, req.signal);
        continue;
      }
      throw ApiError.fromResponse(response.code, response.body, req.method, req.path);
    }
  }

  /** Waits for the client's token bucket, if it has one. */
  private async throttle(verb: string, signal?: AbortSignal): Promise<void> {
    if (!this.bucket) return;
    const waitedMs = await this.bucket.wait(signal);
    this.metrics?.rateLimiterDuration.observe({ host: this.transport.host, verb }, waitedMs / 1000);
  }

  private record(method: string, code: string, started: number): void {
    if (!this.metrics) return;
    const host = this.transport.host;
    this.metrics.restRequests.inc({ code, host, method });
    this.metrics.restDuration.observe({ host, verb: method }, (performance.now() - started) / 1000);
  }
}

function withTypeMeta<T extends KubeObject>(type: ResourceType, obj: T): T {
  return { ...obj, apiVersion: obj.apiVersion ?? apiVersionOf(type), kind: obj.kind ?? type.kind };
}

function retryAfterMs(code: number, header: string | string[] | undefined): number | undefined {
  // A 429 without Retry-After is a refusal, not throttling (an eviction a disruption budget
  // refuses): client-go retries neither it nor a 5xx without the header.
  if (header === undefined || (code !== 429 && code < 500)) return undefined;
  const value = Array.isArray(header) ? header[0] : header;
  const seconds = Number(value);
  return Math.min(Number.isFinite(seconds) && seconds >= 0 ? seconds : 1, 30) * 1000;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });
}
