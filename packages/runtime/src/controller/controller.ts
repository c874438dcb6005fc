/**
 * A running controller: a work queue of primary-object keys and `maxConcurrentReconciles`
 * workers calling the reconciler.
 *
 * Guarantees:
 * - A key is reconciled by at most one worker at a time; bursts of events for it merge
 *   (guarantee 2, through the work queue).
 * - A reconciler that throws, or returns a rejected promise, never kills the process: the error
 *   is logged with the controller, object and reconcile id, counted, and the key retried with
 *   backoff; a `TerminalError` is not retried (guarantees 4 and 5); an `UnexpectedShapeError`
 *   (status/shape.ts) also gets a Warning Event and the object's `Degraded` condition, written to
 *   the object (retried with backoff until the write succeeds) and set back to False after the
 *   object's next successful reconcile — by whichever process reconciles it: the condition is
 *   read from the cached object, not remembered in memory, so a restart does not lose it.
 * - Every primary object is re-enqueued every resync period (default 10 h, ±10 % jitter) so
 *   that missed drift is eventually repaired (guarantee 3); `resyncNow` does it at once. Resyncs
 *   are low-priority adds: events of objects already being worked on go first (queue/workqueue.ts).
 * - `stop` takes no new work and waits up to the deadline (default 30 s) for in-flight
 *   reconciles (guarantee 7).
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { KubeApi } from '../client/client.ts';
import type { CacheReader } from '../cache/cache.ts';
import type { EventRecorder } from '../events/recorder.ts';
import type { RuntimeMetrics } from '../metrics/runtime-metrics.ts';
import { WorkQueue, type Priority } from '../queue/workqueue.ts';
import { TerminalError } from '../errors/terminal-error.ts';
import { requestKey, type Reconciler, type Request } from './reconcile.ts';
import { splitKey } from '../client/resource.ts';
import { clearUnexpectedShape, reportedUnexpectedShape, reportUnexpectedShape, UnexpectedShapeError } from '../status/shape.ts';
import type { KubeObject, ResourceType } from '../client/resource.ts';

export interface ControllerOptions {
  maxConcurrentReconciles: number;
  /** Re-enqueue every primary object this often (default 10 h, jittered ±10 %). */
  resyncPeriodMs: number;
}

export interface ControllerDeps {
  client: KubeApi;
  cache: CacheReader;
  metrics: RuntimeMetrics;
  logger: Logger;
  recorder: EventRecorder;
  /** Keys of every primary object currently cached, for resyncs. */
  primaryKeys: () => string[];
  /** The type of the primary objects and the cached one of a key. */
  primaryType: ResourceType;
  primary: (key: string) => KubeObject | undefined;
}

export const defaultControllerOptions: ControllerOptions = {
  maxConcurrentReconciles: 1,
  resyncPeriodMs: 10 * 60 * 60 * 1000,
};

export class Controller {
  readonly queue: WorkQueue;
  private readonly log: Logger;
  private workers: Promise<void>[] = [];
  private resyncTimer: NodeJS.Timeout | undefined;
  private signal: AbortSignal | undefined;

  constructor(
    readonly name: string,
    private readonly reconciler: Reconciler,
    private readonly options: ControllerOptions,
    private readonly deps: ControllerDeps,
  ) {
    this.queue = new WorkQueue(name, deps.metrics);
    this.log = deps.logger.child({ controller: name });
  }

  enqueue(request: Request, priority: Priority = 'normal'): void {
    this.queue.add(requestKey(request), priority);
  }

  get isRunning(): boolean {
    return this.signal !== undefined && !this.signal.aborted;
  }

  start(signal: AbortSignal): void {
    this.signal = signal;
    const { metrics } = this.deps;
    metrics.maxConcurrentReconciles.set({ controller: this.name }, this.options.maxConcurrentReconciles);
    // Series exist from the start (at 0), as controller-runtime does, so alerts on rates work at once.
    for (const result of ['success', 'error', 'requeue_after']) metrics.reconcileTotal.inc({ controller: this.name, result }, 0);
    metrics.reconcileErrors.inc({ controller: this.name }, 0);
    metrics.terminalReconcileErrors.inc({ controller: this.name }, 0);
    metrics.activeWorkers.set({ controller: this.name }, 0);
    for (let i = 0; i < this.options.maxConcurrentReconciles; i++) this.workers.push(this.work(signal));
    this.scheduleResync();
    this.log.info({ workers: this.options.maxConcurrentReconciles }, 'controller started');
  }

  resyncNow(): void {
    for (const key of this.deps.primaryKeys()) this.queue.add(key, 'low');
  }

  /** Stops taking work and waits for in-flight reconciles, at most `deadlineMs`. */
  async stop(deadlineMs = 30_000): Promise<void> {
    clearTimeout(this.resyncTimer);
    this.queue.shutdown();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), deadlineMs)));
    const outcome = await Promise.race([Promise.all(this.workers).then(() => 'drained' as const), deadline]);
    clearTimeout(timer);
    if (outcome === 'timeout') this.log.warn({ deadlineMs }, 'in-flight reconciles did not finish before the shutdown deadline');
  }

  private scheduleResync(): void {
    const jitter = 1 + (Math.random() - 0.5) * 0.2;
    this.resyncTimer = setTimeout(() => {
      this.resyncNow();
      this.scheduleResync();
    }, this.options.resyncPeriodMs * jitter);
    this.resyncTimer.unref();
  }

  private async work(signal: AbortSignal): Promise<void> {
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined) return;
      try {
        await this.reconcileKey(key, signal);
      } finally {
        this.queue.done(key);
      }
    }
  }

  private async reconcileKey(key: string, signal: AbortSignal): Promise<void> {
    const { metrics } = this.deps;
    const request = splitKey(key);
    const log = this.log.child({ object: key, reconcileID: randomUUID() });
    const started = performance.now();
    metrics.activeWorkers.inc({ controller: this.name });
    try {
      const result = await this.reconciler(request, { client: this.deps.client, cache: this.deps.cache, log, recorder: this.deps.recorder, signal });
      const after = result?.requeueAfterMs;
      this.queue.forget(key);
      const cached = this.deps.primary(key);
      if (cached && reportedUnexpectedShape(cached)) {
        await clearUnexpectedShape(this.deps.primaryType, request.name, request.namespace, this.deps.client).catch((clearErr: unknown) =>
          log.warn({ err: describe(clearErr) }, 'could not clear the Degraded condition of a corrected object'),
        );
      }
      if (after !== undefined && after > 0) {
        metrics.reconcileTotal.inc({ controller: this.name, result: 'requeue_after' });
        this.queue.addAfter(key, after);
      } else {
        metrics.reconcileTotal.inc({ controller: this.name, result: 'success' });
      }
    } catch (err) {
      metrics.reconcileErrors.inc({ controller: this.name });
      if (err instanceof TerminalError) {
        metrics.terminalReconcileErrors.inc({ controller: this.name });
        metrics.reconcileTotal.inc({ controller: this.name, result: 'error' });
        this.queue.forget(key);
        log.error({ err: describe(err) }, 'reconcile failed with a terminal error; not retrying');
        if (err instanceof UnexpectedShapeError) {
          await reportUnexpectedShape(err, this.deps.client, this.deps.recorder).catch((reportErr: unknown) => {
            // Not on the object yet: reconciled again with backoff, which reports it again.
            log.warn({ err: describe(reportErr) }, 'could not set the Degraded condition of an object of unexpected shape; retrying');
            this.queue.addRateLimited(key);
          });
        }
      } else {
        metrics.reconcileTotal.inc({ controller: this.name, result: 'error' });
        this.queue.addRateLimited(key);
        log.error({ err: describe(err), retries: this.queue.backoff.retries(key) }, 'reconcile failed; retrying with backoff');
      }
    } finally {
      metrics.activeWorkers.dec({ controller: this.name });
      metrics.reconcileTime.observe({ controller: this.name }, (performance.now() - started) / 1000);
    }
  }
}

function describe(err: unknown): { name: string; message: string; reason?: string; code?: number } {
  if (err instanceof Error) {
    const { reason, code } = err as { reason?: string; code?: number };
    return { name: err.name, message: err.message, reason, code };
  }
  return { name: 'NonError', message: String(err) };
}
