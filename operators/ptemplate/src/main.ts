#!/usr/bin/env -S node --import tsx
/**
 * The ptemplate operator process: flags and environment → a running manager.
 *
 * Guarantees: the kubeconfig comes from `--kubeconfig`, else `$KUBECONFIG`, else
 * ~/.kube/config or the in-cluster service account; the watched namespace from `--namespace`,
 * else `$WATCH_NAMESPACE` (empty = all namespaces); /healthz, /readyz and /metrics listen on
 * `--metrics-bind-address` (default 127.0.0.1:8080; `0` turns the server off). With
 * `--leader-elect` only the holder of the Lease `ptemplate-operator-leader` reconciles.
 * SIGTERM/SIGINT stop gracefully (exit 0); SIGHUP forces a resync.
 *
 * Run: node --import tsx operators/ptemplate/src/main.ts [flags]
 */

import { Command } from 'commander';
import { createPtemplateOperator } from './operator.ts';

const program = new Command()
  .name('ptemplate-operator')
  .description('Per Ptemplate (pt.example.com/v1alpha1): a KMM Module loading the pt kernel module and a DaemonSet of consumer pods.')
  .option('--kubeconfig <path>', 'kubeconfig file (default: $KUBECONFIG, ~/.kube/config or in-cluster)', process.env.KUBECONFIG)
  .option('--namespace <namespace>', 'namespace to watch, empty = all namespaces; $WATCH_NAMESPACE sets the default', process.env.WATCH_NAMESPACE ?? '')
  .option('--metrics-bind-address <host:port>', 'address of /healthz, /readyz and /metrics; 0 = off', '127.0.0.1:8080')
  .option('--leader-elect', 'reconcile only while holding the Lease ptemplate-operator-leader', false)
  .option('--leader-election-namespace <namespace>', 'namespace of the Lease (default: the watched namespace, else $POD_NAMESPACE)')
  .option('--log-level <level>', 'pino log level', process.env.LOG_LEVEL ?? 'info')
  .parse();

const flags = program.opts<{
  kubeconfig?: string;
  namespace: string;
  metricsBindAddress: string;
  leaderElect: boolean;
  leaderElectionNamespace?: string;
  logLevel: string;
}>();

const leaseNamespace = flags.leaderElectionNamespace || flags.namespace || process.env.POD_NAMESPACE;
if (flags.leaderElect && !leaseNamespace) {
  program.error('--leader-elect needs a namespace for the Lease: set --leader-election-namespace, --namespace or $POD_NAMESPACE');
}

const mgr = await createPtemplateOperator({
  kubeconfigPath: flags.kubeconfig || undefined,
  watchNamespace: flags.namespace,
  httpAddress: flags.metricsBindAddress === '0' ? undefined : flags.metricsBindAddress,
  leaderElection: flags.leaderElect && leaseNamespace ? { namespace: leaseNamespace } : undefined,
  logLevel: flags.logLevel,
});
mgr.logger.info({ namespace: flags.namespace || '<all>', metrics: flags.metricsBindAddress }, 'starting ptemplate operator');
await mgr.runUntilSignal();
