/**
 * The manager: owns the client, the cache, the metrics registry, the event recorder and the
 * controllers of one operator process, and runs them.
 *
 * Guarantees:
 * - Nothing global: everything lives in the manager; two managers can run in one process.
 * - Start order: HTTP server (/healthz, /readyz, /metrics), caches, wait for every cache to sync
 *   (default 2 min; on timeout `start` rejects with an error naming the unsynced caches), then,
 *   with leader election on, campaign for the Lease; controllers run only while leading
 *   (guarantees 1 and 6). Caches run on every replica, so a new leader starts warm. A `stop`
 *   during the sync ends it at once: `start` returns without waiting for the sync timeout.
 * - Losing the lease (including a renewal that hangs past the renew deadline) stops every
 *   controller at once and resolves `done` with exit code 1 at once, with no graceful period;
 *   failed Lease requests are logged at warn; /healthz fails while the elector is stuck. Lease
 *   requests take their tokens from a rate limit of their own: a manager whose controllers keep
 *   its client's budget busy still renews on time.
 * - `stop` (and SIGTERM/SIGINT under `runUntilSignal`): stop taking work, let in-flight
 *   reconciles finish within the shutdown deadline (default 30 s), stop the renew loop, then
 *   release the lease and write pending events (at most 5 s), stop the
 *   caches and the HTTP server, exit 0 (guarantee 7).
 * - Logs are pino JSON with controller, object and reconcile id on every reconcile line.
 * - With `shard` (one shard of a ControllerRing, sharding/shard.ts) instead of leader election:
 *   the manager keeps its own shard Lease (named as the shard, held by it, labelled with the
 *   ring) with leader election's timings and rules, so controllers run only while it is held, a
 *   lost Lease stops them and exits 1, and stop releases it; every default informer of a type
 *   the ring shards selects only the objects assigned to this shard, so each shard's memory
 *   holds its own share.
 * - With `secureMetrics`, the HTTP server speaks HTTPS with the given certificate and /metrics
 *   answers only callers the API server authorizes (metrics-auth.ts); /healthz and /readyz stay
 *   open, as kubelet probes carry no token. A certificate that cannot be read fails `start`.
 * - /readyz: without `webhook`, fails until every cache is synced; with `webhook`, the webhook
 *   server (webhook/server.ts) starts right after the HTTP server, before the caches (a cache of a
 *   converted CRD needs its conversion webhook), and /readyz fails only until it listens: the pod
 *   is a Service's backend, routed to while its caches sync, and its Service needs no
 *   publishNotReadyAddresses (which would keep a terminating pod routed until it exits). A
 *   certificate that cannot be used fails `start`. The webhook server stops, letting requests in
 *   flight finish, with the HTTP server.
 */
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { pino, type Logger } from 'pino';
import { clientRateLimitDefaults, KubeClient } from '../client/client.ts';
import type { RateLimit } from '../client/token-bucket.ts';
import { Kinds, collectionPath, objectPath, typeId } from '../client/resource.ts';
import { ifFound, isGone } from '../client/errors.ts';
import { Cache, type CacheOptions } from '../cache/cache.ts';
import type { ControllerHost } from '../controller/builder.ts';
import type { Controller } from '../controller/controller.ts';
import { ApiEventRecorder, type EventRecorder } from '../events/recorder.ts';
import { RuntimeMetrics } from '../metrics/runtime-metrics.ts';
import { realClock } from '../watch/watcher.ts';
import { LeaderElector, leaderElectionDefaults, type LeaseObject } from './leader-election.ts';
import { MetricsAuthorizer } from './metrics-auth.ts';
import { WebhookServer, type WebhookServerOptions } from '../webhook/server.ts';
import type { Webhook } from '../webhook/review.ts';
import { CONTROLLER_RING_LABEL, validateShardIdentity, withShardSelector, type ShardIdentity } from '../sharding/shard.ts';

export interface LeaderElectionOptions {
  namespace: string;
  /** Lease name; defaults to `<manager name>-leader`. */
  name?: string;
  identity?: string;
  /** Labels the Lease carries (kept on every renewal). */
  labels?: Record<string, string>;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
}

/** This process as one shard of a ControllerRing; its Lease lives in `namespace`. */
export interface ShardOptions extends ShardIdentity {
  namespace: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
}

export interface SecureMetricsOptions {
  /** PEM certificate (chain) and key files, e.g. tls.crt and tls.key of a mounted Secret. */
  certFile: string;
  keyFile: string;
}

export interface ManagerOptions {
  /** Component name, used for events, logs, metrics and the default lease name. */
  name: string;
  client?: KubeClient;
  kubeconfigPath?: string;
  /** The client's request rate (default controller-runtime's: 20 a second, bursts of 30); qps <= 0 = unlimited. */
  rateLimit?: RateLimit;
  logger?: Logger;
  logLevel?: string;
  cache?: CacheOptions;
  leaderElection?: LeaderElectionOptions;
  /** Run as one shard of a ControllerRing (exclusive with `leaderElection`). */
  shard?: ShardOptions;
  /** host:port for /healthz, /readyz and /metrics; port 0 picks a free port; undefined = no server. */
  httpAddress?: string;
  /** Serve over HTTPS with this certificate, /metrics only to callers allowed `get /metrics`. */
  secureMetrics?: SecureMetricsOptions;
  /** Serve admission and conversion webhooks over HTTPS (register them with `addWebhook`); undefined = no webhook server. */
  webhook?: WebhookServerOptions;
  cacheSyncTimeoutMs?: number;
  shutdownTimeoutMs?: number;
}

export class Manager implements ControllerHost {
  readonly client: KubeClient;
  readonly cache: Cache;
  readonly metrics: RuntimeMetrics;
  readonly logger: Logger;
  readonly recorder: EventRecorder;
  readonly shard: ShardIdentity | undefined;
  /** The webhook server, when `webhook` options were given. */
  readonly webhookServer: WebhookServer | undefined;
  private readonly controllers: Controller[] = [];
  private readonly abort = new AbortController();
  private readonly controllerAbort = new AbortController();
  private readonly electionAbort = new AbortController();
  /** Aborted as soon as `stop` is called: start-up stops waiting for caches. */
  private readonly stopRequested = new AbortController();
  private elector: LeaderElector | undefined;
  /** Resolves once the elector has stopped campaigning or renewing (and released a held lease). */
  private electionDone: Promise<void> = Promise.resolve();
  private server: http.Server | undefined;
  private metricsAuthorizer: MetricsAuthorizer | undefined;
  private resolveDone!: (code: number) => void;
  private stopping: Promise<void> | undefined;
  private controllersStarted = false;
  /** Resolves with the process exit code once the manager has stopped. */
  readonly done: Promise<number>;

  private constructor(readonly options: ManagerOptions, client: KubeClient, metrics: RuntimeMetrics, logger: Logger) {
    this.client = client;
    this.metrics = metrics;
    this.logger = logger;
    // Every informer's watcher listens on the shutdown signal: no listener limit (and no warning) for many types.
    setMaxListeners(0, this.abort.signal, this.controllerAbort.signal);
    this.shard = options.shard;
    this.cache = new Cache(client, {
      ...shardedCacheOptions(options.cache, options.shard),
      // An expired resourceVersion (410) is the watch protocol's own "list again", which the
      // informer does: debug, as client-go's reflector logs it; anything else is a warning.
      onError: (err, informer) =>
        logger[isGone(err) ? 'debug' : 'warn']({ informer, err: err instanceof Error ? err.message : String(err) }, 'watch failed; retrying'),
    });
    metrics.trackCache(() => this.cache.objectCounts());
    this.recorder = new ApiEventRecorder(client, options.name, logger);
    this.webhookServer = options.webhook ? new WebhookServer(options.webhook, { registry: metrics.registry, logger }) : undefined;
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
  }

  static async create(options: ManagerOptions): Promise<Manager> {
    if (options.shard) {
      if (options.leaderElection) throw new Error('a manager runs either as one shard of a ControllerRing or under leader election, not both');
      validateShardIdentity(options.shard);
    }
    const metrics = new RuntimeMetrics();
    metrics.collectProcessMetrics();
    const logger = options.logger ?? pino({ name: options.name, level: options.logLevel ?? 'info' });
    const client = options.client ?? (await KubeClient.fromKubeconfig({ kubeconfigPath: options.kubeconfigPath, metrics, rateLimit: options.rateLimit ?? clientRateLimitDefaults }));
    return new Manager(options, client, metrics, logger);
  }

  /** Registers a controller (the builder calls this). */
  addController(controller: Controller): void {
    this.controllers.push(controller);
    if (this.controllersStarted) controller.start(this.controllerAbort.signal);
  }

  /** Serves `webhook` at `path` on the webhook server (the manager needs `webhook` options). */
  addWebhook<Review>(path: string, webhook: Webhook<Review>): void {
    if (!this.webhookServer) throw new Error(`cannot serve the webhook at ${path}: the manager was created without webhook options`);
    this.webhookServer.register(path, webhook);
  }

  get httpPort(): number | undefined {
    return (this.server?.address() as AddressInfo | null)?.port;
  }

  /** True while this manager's controllers run (it holds the lease, or runs without election). */
  get isLeader(): boolean {
    return this.controllersStarted;
  }

  /** Enqueues every primary object of every controller now (a forced resync). */
  resyncAll(): void {
    for (const controller of this.controllers) controller.resyncNow();
  }

  /** Starts everything; resolves once caches are synced and leadership is being sought. */
  async start(): Promise<void> {
    if (this.options.httpAddress !== undefined) await this.listen(this.options.httpAddress);
    if (this.webhookServer) {
      try {
        await this.webhookServer.start();
      } catch (err) {
        await this.stop(1);
        throw err;
      }
    }
    this.cache.start(this.abort.signal);
    const timeoutMs = this.options.cacheSyncTimeoutMs ?? 120_000;
    try {
      if ((await this.cache.waitForSync(timeoutMs, this.stopRequested.signal)) === 'stopped') {
        this.logger.info('stopped before the caches synced');
        return;
      }
    } catch (err) {
      await this.stop(1);
      throw err;
    }
    this.logger.info('caches synced');
    const election = this.options.leaderElection ?? shardLease(this.options.shard);
    if (!election) {
      this.startControllers();
      return;
    }
    const identity = election.identity ?? `${os.hostname()}_${randomUUID()}`;
    const config = { ...leaderElectionDefaults, ...election, name: election.name ?? `${this.options.name}-leader`, identity };
    this.elector = new LeaderElector(config, this.leaseAccess(config.namespace, config.name), realClock, (err) =>
      this.logger.warn({ lease: config.name, err: err instanceof Error ? err.message : String(err) }, 'lease request failed'),
    );
    this.metrics.leaderStatus.set({ name: config.name }, 0);
    this.electionDone = this.elector.run(this.electionAbort.signal, {
      onStartedLeading: () => {
        this.logger.info({ lease: config.name, identity }, this.shard ? 'holding the shard lease' : 'became leader');
        this.metrics.leaderStatus.set({ name: config.name }, 1);
        this.startControllers();
      },
      onStoppedLeading: () => {
        this.metrics.leaderStatus.set({ name: config.name }, 0);
        this.controllersStarted = false;
        this.logger.error({ lease: config.name, identity }, `${this.shard ? 'lost the shard lease' : 'lost leadership'}; stopping every controller and exiting`);
        this.controllerAbort.abort();
        for (const controller of this.controllers) void controller.stop(0);
        // No graceful period after losing the lease: another replica may already be leading.
        this.resolveDone(1);
        void this.stop(1);
      },
    }, { releaseOnCancel: true });
  }

  /** Graceful stop; resolves when stopped. Safe to call more than once. */
  stop(exitCode = 0): Promise<void> {
    this.stopRequested.abort();
    this.stopping ??= this.shutdown(exitCode);
    return this.stopping;
  }

  /**
   * Starts, then stops gracefully on SIGTERM/SIGINT; SIGHUP forces a resync. Exits the process,
   * after `beforeExit` has run (its failure is logged; it does not change the exit code).
   */
  async runUntilSignal(beforeExit?: () => Promise<void>): Promise<never> {
    const exit = async (code: number): Promise<never> => {
      await beforeExit?.().catch((err: unknown) => this.logger.warn({ err: err instanceof Error ? err.message : String(err) }, 'clean-up before exit failed'));
      process.exit(code);
    };
    const onSignal = (signal: NodeJS.Signals) => {
      this.logger.info({ signal }, 'shutting down');
      void this.stop(0);
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
    process.on('SIGHUP', () => this.resyncAll());
    try {
      await this.start();
    } catch (err) {
      this.logger.fatal({ err: err instanceof Error ? err.message : String(err) }, 'manager failed to start');
      return exit(1);
    }
    return exit(await this.done);
  }

  private startControllers(): void {
    if (this.controllerAbort.signal.aborted) return;
    this.controllersStarted = true;
    for (const controller of this.controllers) if (!controller.isRunning) controller.start(this.controllerAbort.signal);
  }

  private async shutdown(exitCode: number): Promise<void> {
    const deadline = this.options.shutdownTimeoutMs ?? 30_000;
    await Promise.all(this.controllers.map((c) => c.stop(deadline)));
    this.controllersStarted = false;
    this.controllerAbort.abort();
    // The lease is released by the elector itself, once its renew loop has stopped (≤ 5 s);
    // pending events get at most as long.
    this.electionAbort.abort();
    await Promise.all([this.electionDone, withDeadline(this.recorder.flush(), eventFlushDeadlineMs)]);
    this.abort.abort();
    await this.cache.stopped();
    await Promise.all([
      new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve())),
      this.webhookServer?.stop(),
    ]);
    this.server?.closeAllConnections();
    if (!this.options.client) this.client.close();
    this.logger.info({ exitCode }, 'manager stopped');
    this.resolveDone(exitCode);
  }

  private leaseAccess(namespace: string, name: string) {
    // Renewals never queue behind the controllers' requests for the client's tokens.
    const client = this.client.withOwnRateLimit();
    return {
      get: (signal: AbortSignal): Promise<LeaseObject | undefined> => ifFound(client.raw<LeaseObject>({ method: 'GET', path: objectPath(Kinds.Lease, name, namespace), signal })),
      create: (lease: LeaseObject, signal: AbortSignal) => client.raw<LeaseObject>({ method: 'POST', path: collectionPath(Kinds.Lease, namespace), body: lease, signal }),
      replace: (lease: LeaseObject, signal: AbortSignal) => client.raw<LeaseObject>({ method: 'PUT', path: objectPath(Kinds.Lease, name, namespace), body: lease, signal }),
    };
  }

  private async listen(address: string): Promise<void> {
    const colon = address.lastIndexOf(':');
    const host = colon > 0 ? address.slice(0, colon) : '0.0.0.0';
    const port = Number(address.slice(colon + 1));
    const handler: http.RequestListener = (req, res) => void this.serve(req, res);
    const secure = this.options.secureMetrics;
    if (secure) {
      const [cert, key] = await Promise.all([readFile(secure.certFile), readFile(secure.keyFile)]).catch((err: unknown) => {
        throw new Error(`secure metrics: cannot read the certificate: ${err instanceof Error ? err.message : String(err)}`);
      });
      this.server = https.createServer({ cert, key }, handler);
      this.metricsAuthorizer = new MetricsAuthorizer(this.client);
    } else {
      this.server = http.createServer(handler);
    }
    return new Promise((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(port, host, () => {
        this.logger.info({ address: `${secure ? 'https' : 'http'}://${host}:${this.httpPort}` }, 'serving /metrics, /healthz and /readyz');
        resolve();
      });
    });
  }

  /**
   * Why /readyz fails, if it does. A manager serving webhooks is a Service's backend: Ready once its
   * webhook server answers, as its caches' own sync may need it (a converted CRD's list). Without
   * webhooks: once the caches are synced.
   */
  private readinessProblem(): string | undefined {
    if (this.abort.signal.aborted) return 'stopping';
    if (this.webhookServer) return this.webhookServer.listening ? undefined : 'webhook server not listening';
    return this.cache.isSynced ? undefined : 'caches not synced';
  }

  private async serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz') {
      const problem = this.abort.signal.aborted ? 'stopping' : this.elector?.healthCheck();
      return reply(res, problem ? 503 : 200, problem ?? 'ok');
    }
    if (path === '/readyz') {
      const problem = this.readinessProblem();
      return reply(res, problem ? 503 : 200, problem ?? 'ok');
    }
    if (path === '/metrics') {
      const decision = await this.metricsAuthorizer?.authorize(req.headers.authorization, path);
      if (decision && decision.code !== 200) {
        if (decision.code === 500) this.logger.warn({ reason: decision.reason }, 'metrics request not authorized');
        return reply(res, decision.code, decision.reason);
      }
      res.setHeader('Content-Type', this.metrics.registry.contentType);
      return reply(res, 200, await this.metrics.registry.metrics());
    }
    reply(res, 404, 'not found');
  }
}

/** The shard Lease as the protocol wants it: named as the shard, held by it, labelled with its ring. */
function shardLease(shard: ShardOptions | undefined): LeaderElectionOptions | undefined {
  if (!shard) return undefined;
  const { namespace, name, ring, types: _types, ...timings } = shard;
  return { namespace, name, identity: name, labels: { [CONTROLLER_RING_LABEL]: ring }, ...timings };
}

/** The cache options with every type the shard's ring shards narrowed to this shard's objects. */
function shardedCacheOptions(cache: CacheOptions | undefined, shard: ShardIdentity | undefined): CacheOptions | undefined {
  if (!shard) return cache;
  const byType = [...(cache?.byType ?? [])];
  for (const type of shard.types) if (!byType.some((entry) => typeId(entry.type) === typeId(type))) byType.push({ type });
  return { ...cache, byType: byType.map((entry) => ({ ...entry, labelSelector: withShardSelector(shard, entry.type, entry.labelSelector) })) };
}

/** How long a shutdown waits for pending events to be written. */
const eventFlushDeadlineMs = 5_000;

function withDeadline(pending: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([pending, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]).finally(() => clearTimeout(timer));
}

function reply(res: http.ServerResponse, code: number, body: string): void {
  res.statusCode = code;
  res.end(body);
}
