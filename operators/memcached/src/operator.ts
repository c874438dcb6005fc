/**
 * Assembles a memcached operator: a manager whose cache holds Memcached objects, Deployments
 * and memcached pods (label `app=memcached`, held as metadata and phase) of the watched namespace,
 * with the controllers of controllers.ts registered and, given `webhook` server options, the
 * webhooks of webhooks.ts.
 *
 * Guarantees: nothing starts until the caller calls `start()` (or `runUntilSignal()`); two
 * operators can run in one process (each has its own manager, client, cache and metrics);
 * `watchNamespace` undefined or empty means every namespace; without a `rateLimit` the client
 * runs at `memcachedRateLimitDefaults` (no client-side limit).
 */

import { Kinds, Manager, keepFields, operatorManagerOptions, type OperatorProcessOptions, type RateLimit, type WebhookServerOptions } from '@iot-operator/runtime';
import { OPERATOR_NAME, POD_CACHE_SELECTOR, type MemcachedControllerOptions } from './controller.ts';
import { INSTANCE_LABEL } from './resources/deployment.ts';
import { registerControllers } from './controllers.ts';
import { registerWebhooks } from './webhooks.ts';

/** Kubeconfig, watched namespace (undefined or "" = all), HTTP address, leader election, logging; Memcacheds reconciled in parallel; the webhook server (undefined = none). */
export type MemcachedOperatorOptions = OperatorProcessOptions & MemcachedControllerOptions & { webhook?: WebhookServerOptions };

/**
 * The Memcached operator's client budget: no client-side limit, as controller-runtime from v0.21
 * on (kubernetes-sigs/controller-runtime#3119: rely on the API server's priority and fairness).
 * A new Memcached costs two writes (the Deployment, then `status.nodes`), so the runtime's 20 / 30
 * (controller-runtime up to v0.20) held the operator to 10 new Memcacheds a second — 2,000 took
 * 200 s whatever the concurrency — and 200 / 400 still capped it at 100 a second, which the
 * benchmark's two cores already reached (bench `throughput`, docs/performance.md). A limit buys
 * this operator little: each worker has one request in flight at a time, so even a reconcile that
 * writes in a loop sends no more than one request per round trip per worker.
 * `--kube-api-qps <n>` sets a limit again (its burst defaults to 30, the runtime's).
 */
export const memcachedRateLimitDefaults: RateLimit = { qps: 0, burst: 30 };

export async function createMemcachedOperator(options: MemcachedOperatorOptions = {}): Promise<Manager> {
  // Of a pod, status.nodes needs its name, deletion mark and phase: the cache keeps no more.
  // Indexed by the Memcached it belongs to, so a reconcile reads its own pods, not the namespace's.
  const podCache = { type: Kinds.Pod, labelSelector: POD_CACHE_SELECTOR, indexLabels: [INSTANCE_LABEL], transform: keepFields('status.phase') };
  const rateLimit = options.rateLimit ?? memcachedRateLimitDefaults;
  const mgr = await Manager.create({ ...operatorManagerOptions(OPERATOR_NAME, { ...options, rateLimit }, { byType: [podCache] }), webhook: options.webhook });
  registerControllers(mgr, { maxConcurrentReconciles: options.maxConcurrentReconciles });
  if (options.webhook) registerWebhooks(mgr);
  return mgr;
}
