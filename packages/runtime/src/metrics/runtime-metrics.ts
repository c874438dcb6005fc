/**
 * The runtime's Prometheus metrics, under controller-runtime's and client-go's names so that
 * existing dashboards and alerts carry over.
 *
 * Guarantees: every metric lives in the registry passed in (nothing global), so two managers in
 * one process keep separate figures; names and label sets are those listed in the runtime
 * guarantees (row 9).
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

const durationBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const queueBuckets = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1, 10, 100, 1000];

export class RuntimeMetrics {
  readonly restRequests: Counter<'code' | 'method'>;
  readonly restDuration: Histogram<'verb'>;
  readonly reconcileTotal: Counter<'controller' | 'result'>;
  readonly reconcileErrors: Counter<'controller'>;
  readonly reconcileTime: Histogram<'controller'>;
  readonly maxConcurrentReconciles: Gauge<'controller'>;
  readonly activeWorkers: Gauge<'controller'>;
  readonly queueDepth: Gauge<'name'>;
  readonly queueAdds: Counter<'name'>;
  readonly queueDuration: Histogram<'name'>;
  readonly workDuration: Histogram<'name'>;
  readonly queueRetries: Counter<'name'>;
  readonly leaderStatus: Gauge<'name'>;

  constructor(readonly registry: Registry = new Registry()) {
    const r = [registry];
    this.restRequests = new Counter({ name: 'rest_client_requests_total', help: 'Number of HTTP requests, partitioned by status code and method.', labelNames: ['code', 'method'], registers: r });
    this.restDuration = new Histogram({ name: 'rest_client_request_duration_seconds', help: 'Request latency in seconds, by verb.', labelNames: ['verb'], buckets: durationBuckets, registers: r });
    this.reconcileTotal = new Counter({ name: 'controller_runtime_reconcile_total', help: 'Total number of reconciliations per controller.', labelNames: ['controller', 'result'], registers: r });
    this.reconcileErrors = new Counter({ name: 'controller_runtime_reconcile_errors_total', help: 'Total number of reconciliation errors per controller.', labelNames: ['controller'], registers: r });
    this.reconcileTime = new Histogram({ name: 'controller_runtime_reconcile_time_seconds', help: 'Length of time per reconciliation per controller.', labelNames: ['controller'], buckets: durationBuckets, registers: r });
    this.maxConcurrentReconciles = new Gauge({ name: 'controller_runtime_max_concurrent_reconciles', help: 'Maximum number of concurrent reconciles per controller.', labelNames: ['controller'], registers: r });
    this.activeWorkers = new Gauge({ name: 'controller_runtime_active_workers', help: 'Number of currently used workers per controller.', labelNames: ['controller'], registers: r });
    this.queueDepth = new Gauge({ name: 'workqueue_depth', help: 'Current depth of workqueue.', labelNames: ['name'], registers: r });
    this.queueAdds = new Counter({ name: 'workqueue_adds_total', help: 'Total number of adds handled by workqueue.', labelNames: ['name'], registers: r });
    this.queueDuration = new Histogram({ name: 'workqueue_queue_duration_seconds', help: 'How long in seconds an item stays in workqueue before being requested.', labelNames: ['name'], buckets: queueBuckets, registers: r });
    this.workDuration = new Histogram({ name: 'workqueue_work_duration_seconds', help: 'How long in seconds processing an item from workqueue takes.', labelNames: ['name'], buckets: queueBuckets, registers: r });
    this.queueRetries = new Counter({ name: 'workqueue_retries_total', help: 'Total number of retries handled by workqueue.', labelNames: ['name'], registers: r });
    this.leaderStatus = new Gauge({ name: 'leader_election_master_status', help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master.', labelNames: ['name'], registers: r });
  }
}
