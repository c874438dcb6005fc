#!/usr/bin/env -S node --import tsx --max-semi-space-size=2 --heap-growing-percent=20 --no-opt --single-threaded
/**
 * The ptemplate operator process: flags and environment → a running manager.
 *
 * Guarantees (through the runtime's `parseOperatorCommandLine`): the kubeconfig comes from
 * `--kubeconfig`, else `$KUBECONFIG`, else ~/.kube/config or the in-cluster service account;
 * the watched namespace from `--namespace`, else `$WATCH_NAMESPACE` (empty = all namespaces);
 * /healthz, /readyz and /metrics listen on `--metrics-bind-address` (default 127.0.0.1:8080;
 * `0` turns the server off). With `--leader-elect` only the holder of the Lease
 * `ptemplate-operator-leader` reconciles. `$OPERATOR_NAME` renames the operator (Lease, metrics
 * Service). Run in a pod (`POD_NAMESPACE`, `POD_NAME`), it creates Service
 * `ptemplate-operator-metrics` and, with the Prometheus Operator's API, a ServiceMonitor; elsewhere it
 * logs why not. SIGTERM/SIGINT stop gracefully (exit 0); SIGHUP forces a resync.
 *
 * Run: node --import tsx operators/ptemplate/src/main.ts [flags]
 */

import { exposeOperatorMetrics, parseOperatorCommandLine } from '@iot-operator/runtime';
import { createPtemplateOperator } from './operator.ts';

const options = parseOperatorCommandLine({
  name: 'ptemplate-operator',
  description: 'Per Ptemplate (pt.example.com/v1alpha1): a KMM Module loading the pt kernel module and a DaemonSet of consumer pods.',
});
const mgr = await createPtemplateOperator(options);
mgr.logger.info({ namespace: options.watchNamespace || '<all>', metrics: options.metricsBindAddress }, 'starting ptemplate operator');
void exposeOperatorMetrics(mgr, options.httpAddress);
await mgr.runUntilSignal();
