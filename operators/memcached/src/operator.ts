/**
 * Assembles a memcached operator: a manager whose cache holds Memcached objects, Deployments
 * and memcached pods (label `app=memcached`) of the watched namespace, with the Memcached
 * controller registered.
 *
 * Guarantees: nothing starts until the caller calls `start()` (or `runUntilSignal()`); two
 * operators can run in one process (each has its own manager, client, cache and metrics);
 * `watchNamespace` undefined or empty means every namespace; without a `rateLimit` the client
 * runs at `memcachedRateLimitDefaults`.
 */

import { Kinds, Manager, operatorManagerOptions, type OperatorProcessOptions, type RateLimit } from '@iot-operator/runtime';
import { OPERATOR_NAME, POD_CACHE_SELECTOR, registerMemcachedController, type MemcachedControllerOptions } from './controller.ts';

/** Kubeconfig, watched namespace (undefined or "" = all), HTTP address, leader election, logging; Memcacheds reconciled in parallel. */
export type MemcachedOperatorOptions = OperatorProcessOptions & MemcachedControllerOptions;

/**
 * The Memcached operator's client budget, above the runtime's 20 / 30 (controller-runtime's up to
 * v0.20): a new Memcached costs two writes (the Deployment, then `status.nodes`), so at 20 a
 * second the client alone held the operator to 10 new Memcacheds a second — 2,000 took 200 s
 * whatever the concurrency (bench `throughput`, docs/performance.md). 200 / 400, as the IoT
 * operator's, lets it create up to 100 a second, more than the API server on the benchmark's
 * two cores accepts, while a reconcile that writes in a loop is still held to a bounded rate
 * (controller-runtime v0.21 and later set no client-side limit; `--kube-api-qps 0` does the same).
 */
export const memcachedRateLimitDefaults: RateLimit = { qps: 200, burst: 400 };

export async function createMemcachedOperator(options: MemcachedOperatorOptions = {}): Promise<Manager> {
  const mgr = await Manager.create(
    operatorManagerOptions(OPERATOR_NAME, { ...options, rateLimit: options.rateLimit ?? memcachedRateLimitDefaults }, { byType: [{ type: Kinds.Pod, labelSelector: POD_CACHE_SELECTOR }] }),
  );
  registerMemcachedController(mgr, { maxConcurrentReconciles: options.maxConcurrentReconciles });
  return mgr;
}
