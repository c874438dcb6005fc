#!/usr/bin/env -S node --import tsx
/**
 * The memcached operator process: flags and environment → a running manager.
 *
 * Guarantees (through the runtime's `parseOperatorCommandLine`): the kubeconfig comes from
 * `--kubeconfig`, else `$KUBECONFIG`, else ~/.kube/config or the in-cluster service account;
 * the watched namespace from `--namespace`, else `$WATCH_NAMESPACE` (empty = all namespaces);
 * /healthz, /readyz and /metrics listen on `--metrics-bind-address` (default 127.0.0.1:8080;
 * `0` turns the server off). With `--leader-elect` only the holder of the Lease
 * `memcached-operator-leader` reconciles. `$OPERATOR_NAME` renames the operator (Lease, metrics
 * Service). Run in a pod (`POD_NAMESPACE`, `POD_NAME`), it creates Service
 * `memcached-operator-metrics` and, with the Prometheus Operator's API, a ServiceMonitor; elsewhere it
 * logs why not. `--max-concurrent-reconciles` sets how many Memcacheds are reconciled in parallel
 * (default 1). SIGTERM/SIGINT stop gracefully (exit 0); SIGHUP forces a resync.
 *
 * Run: node --import tsx operators/memcached/src/main.ts [flags]
 */

import { InvalidArgumentError } from 'commander';
import { exposeOperatorMetrics, parseOperatorCommandLine } from '@iot-operator/runtime';
import { createMemcachedOperator, memcachedRateLimitDefaults } from './operator.ts';

const positiveInt = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
};

const options = parseOperatorCommandLine({
  name: 'memcached-operator',
  description: 'Runs one memcached Deployment of spec.size pods per Memcached (cache.example.com/v1alpha1).',
  rateLimitDefaults: memcachedRateLimitDefaults,
  extraOptions: (program) => {
    program.option('--max-concurrent-reconciles <n>', 'Memcacheds reconciled in parallel', positiveInt, 1);
  },
});
const mgr = await createMemcachedOperator({ ...options, maxConcurrentReconciles: options.flags['maxConcurrentReconciles'] as number });
mgr.logger.info({ namespace: options.watchNamespace || '<all>', metrics: options.metricsBindAddress }, 'starting memcached operator');
void exposeOperatorMetrics(mgr, options.httpAddress);
await mgr.runUntilSignal();
