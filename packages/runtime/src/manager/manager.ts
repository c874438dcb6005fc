/**
 * The manager: owns the client, the cache, the metrics registry, the event recorder and the
 * controllers of one operator process, and runs them.
 *
 * Guarantees:
 * - Nothing global: everything lives in the manager; two managers can run in one process.
 * - Start order: HTTP server (/healthz, /readyz, /metrics), caches, wait for every cache to sync
 *   (default 2 min; on timeout `start` rejects with an error naming the unsynced caches), then,
 *   with leader election on, campaign for the Lease; controllers run only while leading
 *   (guarantees 1 and 6). Caches run on every replica, so a new leader starts warm.
 * - Losing the lease stops every controller at once and ends the manager with exit code 1.
 * - `stop` (and SIGTERM/SIGINT under `runUntilSignal`): stop taking work, let in-flight
 *   reconciles finish within the shutdown deadline (default 30 s), release the lease, stop the
 *   caches and the HTTP server, exit 0 (guarantee 7).
 * - Logs are pino JSON with controller, object and reconcile id on every reconcile line.
 */
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { pino, type Logger } from 'pino';
import { KubeClient } from '../client/client.ts';
import { Kinds } from '../client/resource.ts';
import { isNotFound } from '../client/errors.ts';
import { Cache, type CacheOptions } from '../cache/cache.ts';
import type { Controller } from '../controller/controller.ts';
import { ApiEventRecorder, type EventRecorder } from '../events/recorder.ts';
import { RuntimeMetrics } from '../metrics/runtime-metrics.ts';
import { realClock } from '../watch/watcher.ts';
import { LeaderElector, leaderElectionDefaults, type LeaseObject } from './leader-election.ts';

export interface LeaderElectionOptions {
  namespace: string;
  /** Lease name; defaults to `<manager name>-leader`. */
  name?: string;
  identity?: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
}

export interface ManagerOptions {
  /** Component name, used for events, logs, metrics and the default lease name. */
  name: string;
  client?: KubeClient;
  kubeconfigPath?: string;
  logger?: Logger;
  logLevel?: string;
  cache?: CacheOptions;
  leaderElection?: LeaderElectionOptions;
  /** host:port for /healthz, /readyz and /metrics; port 0 picks a free port; undefined = no server. */
  httpAddress?: string;
  cacheSyncTimeoutMs?: number;
  shutdownTimeoutMs?: number;
}

export class Manager {
  readonly client: KubeClient;
  readonly cache: Cache;
  readonly metrics: RuntimeMetrics;
  readonly logger: Logger;
  readonly recorder: EventRecorder;
  private readonly controllers: Controller[] = [];
  private readonly abort = new AbortController();
  private readonly controllerAbort = new AbortController();
  private elector: LeaderElector | undefined;
  private server: http.Server | undefined;
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
    this.cache = new Cache(client, {
      ...options.cache,
      onError: (err, informer) => logger.warn({ informer, err: err instanceof Error ? err.message : String(err) }, 'watch failed; retrying'),
    });
    this.recorder = new ApiEventRecorder(client, options.name, logger);
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
  }

  static async create(options: ManagerOptions): Promise<Manager> {
    const metrics = new RuntimeMetrics();
    const logger = options.logger ?? pino({ name: options.name, level: options.logLevel ?? 'info' });
    const client = options.client ?? (await KubeClient.fromKubeconfig({ kubeconfigPath: options.kubeconfigPath, metrics }));
    return new Manager(options, client, metrics, logger);
  }

  /** Registers a controller (the builder calls this). */
  addController(controller: Controller): void {
    this.controllers.push(controller);
    if (this.controllersStarted) controller.start(this.controllerAbort.signal);
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
    this.cache.start(this.abort.signal);
    const timeoutMs = this.options.cacheSyncTimeoutMs ?? 120_000;
    try {
      await this.cache.waitForSync(timeoutMs);
    } catch (err) {
      await this.stop(1);
      throw err;
    }
    this.logger.info('caches synced');
    const election = this.options.leaderElection;
    if (!election) {
      this.startControllers();
      return;
    }
    const identity = election.identity ?? `${os.hostname()}_${randomUUID()}`;
    const config = { ...leaderElectionDefaults, ...election, name: election.name ?? `${this.options.name}-leader`, identity };
    this.elector = new LeaderElector(config, this.leaseAccess(config.namespace, config.name), realClock, (err) =>
      this.logger.debug({ err: err instanceof Error ? err.message : String(err) }, 'lease request failed'),
    );
    this.metrics.leaderStatus.set({ name: config.name }, 0);
    void this.elector.run(this.abort.signal, {
      onStartedLeading: () => {
        this.logger.info({ lease: config.name, identity }, 'became leader');
        this.metrics.leaderStatus.set({ name: config.name }, 1);
        this.startControllers();
      },
      onStoppedLeading: () => {
        this.metrics.leaderStatus.set({ name: config.name }, 0);
        this.controllersStarted = false;
        this.logger.error({ lease: config.name, identity }, 'lost leadership; stopping');
        this.controllerAbort.abort();
        for (const controller of this.controllers) void controller.stop(0);
        void this.stop(1);
      },
    });
  }

  /** Graceful stop; resolves when stopped. Safe to call more than once. */
  stop(exitCode = 0): Promise<void> {
    this.stopping ??= this.shutdown(exitCode);
    return this.stopping;
  }

  /** Starts, then stops gracefully on SIGTERM/SIGINT; SIGHUP forces a resync. Exits the process. */
  async runUntilSignal(): Promise<never> {
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
      process.exit(1);
    }
    process.exit(await this.done);
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
    await this.elector?.release();
    await this.recorder.flush();
    this.abort.abort();
    await this.cache.stopped();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    this.server?.closeAllConnections();
    if (!this.options.client) this.client.close();
    this.logger.info({ exitCode }, 'manager stopped');
    this.resolveDone(exitCode);
  }

  private leaseAccess(namespace: string, name: string) {
    const client = this.client;
    return {
      async get(): Promise<LeaseObject | undefined> {
        try {
          return await client.get<LeaseObject>(Kinds.Lease, name, namespace);
        } catch (err) {
          if (isNotFound(err)) return undefined;
          throw err;
        }
      },
      create: (lease: LeaseObject) => client.create(Kinds.Lease, lease),
      replace: (lease: LeaseObject) => client.replace(Kinds.Lease, lease),
    };
  }

  private listen(address: string): Promise<void> {
    const colon = address.lastIndexOf(':');
    const host = colon > 0 ? address.slice(0, colon) : '0.0.0.0';
    const port = Number(address.slice(colon + 1));
    this.server = http.createServer((req, res) => void this.serve(req, res));
    return new Promise((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(port, host, () => {
        this.logger.info({ address: `${host}:${this.httpPort}` }, 'serving /metrics, /healthz and /readyz');
        resolve();
      });
    });
  }

  private async serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz') return reply(res, this.abort.signal.aborted ? 503 : 200, this.abort.signal.aborted ? 'stopping' : 'ok');
    if (path === '/readyz') return reply(res, this.cache.isSynced && !this.abort.signal.aborted ? 200 : 503, this.cache.isSynced ? 'ok' : 'caches not synced');
    if (path === '/metrics') {
      res.setHeader('Content-Type', this.metrics.registry.contentType);
      return reply(res, 200, await this.metrics.registry.metrics());
    }
    reply(res, 404, 'not found');
  }
}

function reply(res: http.ServerResponse, code: number, body: string): void {
  res.statusCode = code;
  res.end(body);
}
