#!/usr/bin/env -S node --import tsx --max-semi-space-size=2 --heap-growing-percent=20 --no-opt --single-threaded
/**
 * The memcached operator process: flags and environment → a running manager.
 *
 * Guarantees (through `parseMemcachedCommandLine`, options.ts, and the runtime's
 * `parseOperatorCommandLine`): the kubeconfig comes from
 * `--kubeconfig`, else `$KUBECONFIG`, else ~/.kube/config or the in-cluster service account;
 * the watched namespace from `--namespace`, else `$WATCH_NAMESPACE` (empty = all namespaces);
 * /healthz, /readyz and /metrics listen on `--metrics-bind-address` (default 127.0.0.1:8080;
 * `0` turns the server off). With `--leader-elect` only the holder of the Lease
 * `memcached-operator-leader` reconciles. `$OPERATOR_NAME` renames the operator (Lease, metrics
 * Service). Run in a pod (`POD_NAMESPACE`, `POD_NAME`), it creates Service
 * `memcached-operator-metrics` and, with the Prometheus Operator's API, a ServiceMonitor; elsewhere it
 * logs why not. `--max-concurrent-reconciles` sets how many Memcacheds are reconciled in parallel
 * (default 1); `--kube-api-qps` / `--kube-api-burst` the client's budget (default: no client-side limit).
 * `--webhook-cert-dir` serves the defaulting and validating webhooks (README, Webhooks) on
 * `--webhook-bind-address`. SIGTERM/SIGINT stop gracefully (exit 0); SIGHUP forces a resync.
 *
 * Run: node --import tsx operators/memcached/src/main.ts [flags]
 */

import { exposeOperatorMetrics } from '@iot-operator/runtime';
import { parseMemcachedCommandLine } from './options.ts';
import { createMemcachedOperator } from './operator.ts';

const options = parseMemcachedCommandLine();
const mgr = await createMemcachedOperator(options);
mgr.logger.info({ namespace: options.watchNamespace || '<all>', metrics: options.metricsBindAddress }, 'starting memcached operator');
void exposeOperatorMetrics(mgr, options.httpAddress);
await mgr.runUntilSignal();
