/**
 * The runtime's Prometheus metrics, under controller-runtime's and client-go's names so that
 * existing dashboards and alerts carry over.
 *
 * Guarantees: every metric lives in the registry passed in (nothing global), so two managers in
 * one process keep separate figures; names and label sets are those listed in the runtime
 * guarantees (row 9). `collectProcessMetrics()` adds the process metrics
 * (`process_resident_memory_bytes`, `process_cpu_seconds_total`, `process_open_fds`,
 * `process_start_time_seconds`, ...; process-metrics.ts) to the registry. `workqueue_unfinished_work_seconds` and
 * `workqueue_longest_running_processor_seconds` are computed at scrape time from the keys each
 * registered queue is processing, so they are exact when read; so is `cache_objects` (objects held
 * by each informer of the cache, by resource and selection) from the counter the cache registers.
 */
import { Counter, Gauge, Histogram, Registry } from './prom-client.ts';
import { registerProcessMetrics } from './process-metrics.ts';

/** When (performance.now()) each key a queue is processing was handed out. */
export type InFlightStarts = () => Iterable<number>;

/** The number of objects each informer of a cache holds, by its description (resource and selection). */
export type CacheObjectCounts = () => Iterable<[informer: string, objects: number]>;

const durationBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const queueBuckets = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1, 10, 100, 1000];

export class RuntimeMetrics {
  readonly restRequests: Counter<'code' | 'host' | 'method'>;
  readonly restDuration: Histogram<'host' | 'verb'>;
  readonly rateLimiterDuration: Histogram<'host' | 'verb'>;
  readonly reconcileTotal: Counter<'controller' | 'result'>;
  readonly reconcileErrors: Counter<'controller'>;
  readonly terminalReconcileErrors: Counter<'controller'>;
  readonly reconcileTime: Histogram<'controller'>;
  readonly maxConcurrentReconciles: Gauge<'controller'>;
  readonly activeWorkers: Gauge<'controller'>;
  readonly queueDepth: Gauge<'name'>;
  readonly queueAdds: Counter<'name'>;
  readonly queueDuration: Histogram<'name'>;
  readonly workDuration: Histogram<'name'>;
  readonly queueRetries: Counter<'name'>;
  readonly unfinishedWork: Gauge<'name'>;
  readonly longestRunningProcessor: Gauge<'name'>;
  readonly leaderStatus: Gauge<'name'>;
  readonly cacheObjects: Gauge<'informer'>;
  private readonly inFlight = new Map<string, InFlightStarts>();
  private cacheCounts: CacheObjectCounts = () => [];

  constructor(readonly registry: Registry = new Registry()) {
    const r = [registry];
    this.restRequests = new Counter({ name: 'rest_client_requests_total', help: 'Number of HTTP requests, partitioned by status code and method.', labelNames: ['code', 'host', 'method'], registers: r });
    this.restDuration = new Histogram({ name: 'rest_client_request_duration_seconds', help: 'Request latency in seconds. Broken down by verb and host.', labelNames: ['host', 'verb'], buckets: durationBuckets, registers: r });
    this.rateLimiterDuration = new Histogram({ name: 'rest_client_rate_limiter_duration_seconds', help: 'Client side rate limiter latency in seconds. Broken down by verb and host.', labelNames: ['host', 'verb'], buckets: durationBuckets, registers: r });
    this.reconcileTotal = new Counter({ name: 'controller_runtime_reconcile_total', help: 'Total number of reconciliations per controller.', labelNames: ['controller', 'result'], registers: r });
    this.reconcileErrors = new Counter({ name: 'controller_runtime_reconcile_errors_total', help: 'Total number of reconciliation errors per controller.', labelNames: ['controller'], registers: r });
    this.terminalReconcileErrors = new Counter({ name: 'controller_runtime_terminal_reconcile_errors_total', help: 'Total number of terminal reconciliation errors per controller.', labelNames: ['controller'], registers: r });
    this.reconcileTime = new Histogram({ name: 'controller_runtime_reconcile_time_seconds', help: 'Length of time per reconciliation per controller.', labelNames: ['controller'], buckets: durationBuckets, registers: r });
    this.maxConcurrentReconciles = new Gauge({ name: 'controller_runtime_max_concurrent_reconciles', help: 'Maximum number of concurrent reconciles per controller.', labelNames: ['controller'], registers: r });
    this.activeWorkers = new Gauge({ name: 'controller_runtime_active_workers', help: 'Number of currently used workers per controller.', labelNames: ['controller'], registers: r });
    this.queueDepth = new Gauge({ name: 'workqueue_depth', help: 'Current depth of workqueue.', labelNames: ['name'], registers: r });
    this.queueAdds = new Counter({ name: 'workqueue_adds_total', help: 'Total number of adds handled by workqueue.', labelNames: ['name'], registers: r });
    this.queueDuration = new Histogram({ name: 'workqueue_queue_duration_seconds', help: 'How long in seconds an item stays in workqueue before being requested.', labelNames: ['name'], buckets: queueBuckets, registers: r });
    this.workDuration = new Histogram({ name: 'workqueue_work_duration_seconds', help: 'How long in seconds processing an item from workqueue takes.', labelNames: ['name'], buckets: queueBuckets, registers: r });
    this.queueRetries = new Counter({ name: 'workqueue_retries_total', help: 'Total number of retries handled by workqueue.', labelNames: ['name'], registers: r });
    const inFlight = this.inFlight;
    this.unfinishedWork = new Gauge({
      name: 'workqueue_unfinished_work_seconds',
      help: 'How many seconds of work has been done that is in progress and hasn\'t been observed by work_duration. Large values indicate stuck threads.',
      labelNames: ['name'],
      registers: r,
      collect() {
        const now = performance.now();
        for (const [name, starts] of inFlight) this.set({ name }, sum(starts(), (at) => (now - at) / 1000));
      },
    });
    this.longestRunningProcessor = new Gauge({
      name: 'workqueue_longest_running_processor_seconds',
      help: 'How many seconds has the longest running processor for workqueue been running.',
      labelNames: ['name'],
      registers: r,
      collect() {
        const now = performance.now();
        for (const [name, starts] of inFlight) this.set({ name }, Math.max(0, ...[...starts()].map((at) => (now - at) / 1000)));
      },
    });
    const counts = () => this.cacheCounts();
    this.cacheObjects = new Gauge({
      name: 'cache_objects',
      help: 'Number of objects the cache holds, per informer (resource and selection).',
      labelNames: ['informer'],
      registers: r,
      collect() {
        this.reset();
        for (const [informer, objects] of counts()) this.set({ informer }, objects);
      },
    });
    this.leaderStatus = new Gauge({ name: 'leader_election_master_status', help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master.', labelNames: ['name'], registers: r });
  }

  /** Reports the keys queue `name` is processing in the in-progress work gauges. */
  trackQueue(name: string, starts: InFlightStarts): void {
    this.inFlight.set(name, starts);
  }

  /** Reports what `counts` says in `cache_objects`. */
  trackCache(counts: CacheObjectCounts): void {
    this.cacheCounts = counts;
  }

  /** Adds the process metrics (memory, CPU, open file descriptors, start time, ...) to the registry, computed when scraped. */
  collectProcessMetrics(): void {
    registerProcessMetrics(this.registry);
  }
}

function sum<T>(values: Iterable<T>, of: (value: T) => number): number {
  let total = 0;
  for (const value of values) total += of(value);
  return total;
}
