/**
 * The webhook server's Prometheus metrics, under controller-runtime's names and labels
 * (pkg/webhook/internal/metrics) so that its dashboards and alerts carry over:
 * `controller_runtime_webhook_requests_total{webhook,code}` (every request answered, by the
 * HTTP status code sent), `controller_runtime_webhook_latency_seconds{webhook}` (histogram, from
 * the request's arrival to its answer, Prometheus' default buckets as controller-runtime's) and
 * `controller_runtime_webhook_requests_in_flight{webhook}`; `webhook` is the path the handler is
 * registered at. They live in the registry passed in (the manager's), never a global one.
 */
import { Counter, Gauge, Histogram, type Registry } from '../metrics/prom-client.ts';

const defaultBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export class WebhookMetrics {
  readonly requests: Counter<'webhook' | 'code'>;
  readonly latency: Histogram<'webhook'>;
  readonly inFlight: Gauge<'webhook'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.requests = new Counter({ name: 'controller_runtime_webhook_requests_total', help: 'Total number of admission requests by HTTP status code.', labelNames: ['webhook', 'code'], registers });
    this.latency = new Histogram({ name: 'controller_runtime_webhook_latency_seconds', help: 'Histogram of the latency of processing admission requests', labelNames: ['webhook'], buckets: defaultBuckets, registers });
    this.inFlight = new Gauge({ name: 'controller_runtime_webhook_requests_in_flight', help: 'Current number of admission requests being served.', labelNames: ['webhook'], registers });
  }

  /** Makes the series of a newly registered path exist at 0, as controller-runtime's do once it is served. */
  track(webhook: string): void {
    this.inFlight.set({ webhook }, 0);
  }
}
