/**
 * What every operator process is configured with — kubeconfig, watched namespace, HTTP address,
 * leader election, logging — and the command line that sets it.
 *
 * Guarantees: `parseOperatorCommandLine({ name, description })` documents every flag in
 * `--help` and reads the kubeconfig from `--kubeconfig`, else `$KUBECONFIG` (undefined then
 * means ~/.kube/config or the in-cluster service account); the watched namespace from
 * `--namespace`, else `$WATCH_NAMESPACE` (empty = all namespaces); /healthz, /readyz and
 * /metrics listen on `--metrics-bind-address` (default 127.0.0.1:8080; `0` = no HTTP server);
 * with `--leader-elect` only the holder of the Lease `<name>-leader` reconciles, the Lease living
 * in `--leader-election-namespace`, else the watched namespace, else `$POD_NAMESPACE` — none of
 * them is an error before anything connects; the log level comes from `--log-level`, else
 * `$LOG_LEVEL`, else info; an operator's own flags (`extraOptions`) appear in `--help` and in
 * `flags`. `operatorManagerOptions(name, options, cache)` turns those options
 * into the manager's, the watched namespace (empty = all) becoming the cache's default.
 */

import { Command } from 'commander';
import type { Logger } from 'pino';
import type { CacheOptions } from '../cache/cache.ts';
import type { LeaderElectionOptions, ManagerOptions } from './manager.ts';

export interface OperatorProcessOptions {
  /** Kubeconfig file; undefined = $KUBECONFIG, ~/.kube/config or the in-cluster service account. */
  kubeconfigPath?: string;
  /** Namespace to watch; undefined or "" = all namespaces. */
  watchNamespace?: string;
  /** host:port of /healthz, /readyz and /metrics; undefined = no HTTP server. */
  httpAddress?: string;
  leaderElection?: LeaderElectionOptions;
  logger?: Logger;
  logLevel?: string;
}

/** The options of the command line, plus the address as given (for the start-up log line). */
export interface OperatorCommandLine extends OperatorProcessOptions {
  watchNamespace: string;
  metricsBindAddress: string;
  logLevel: string;
  /** Every parsed flag by commander's camel-case name, those of `extraOptions` included. */
  flags: Record<string, unknown>;
}

/** Parses the operator's arguments (default: this process's); exits with usage on an error. */
export function parseOperatorCommandLine(operator: { name: string; description: string; extraOptions?: (program: Command) => void }, args?: readonly string[]): OperatorCommandLine {
  const program = new Command()
    .name(operator.name)
    .description(operator.description)
    .option('--kubeconfig <path>', 'kubeconfig file (default: $KUBECONFIG, ~/.kube/config or in-cluster)', process.env.KUBECONFIG)
    .option('--namespace <namespace>', 'namespace to watch, empty = all namespaces; $WATCH_NAMESPACE sets the default', process.env.WATCH_NAMESPACE ?? '')
    .option('--metrics-bind-address <host:port>', 'address of /healthz, /readyz and /metrics; 0 = off', '127.0.0.1:8080')
    .option('--leader-elect', `reconcile only while holding the Lease ${operator.name}-leader`, false)
    .option('--leader-election-namespace <namespace>', 'namespace of the Lease (default: the watched namespace, else $POD_NAMESPACE)')
    .option('--log-level <level>', 'pino log level', process.env.LOG_LEVEL ?? 'info');
  operator.extraOptions?.(program);
  if (args) program.parse([...args], { from: 'user' });
  else program.parse();

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
  return {
    kubeconfigPath: flags.kubeconfig || undefined,
    watchNamespace: flags.namespace,
    httpAddress: flags.metricsBindAddress === '0' ? undefined : flags.metricsBindAddress,
    metricsBindAddress: flags.metricsBindAddress,
    leaderElection: flags.leaderElect && leaseNamespace ? { namespace: leaseNamespace } : undefined,
    logLevel: flags.logLevel,
    flags: { ...flags },
  };
}

/** The manager options of an operator process named `name`, caching `cache` in the watched namespace. */
export function operatorManagerOptions(name: string, options: OperatorProcessOptions, cache: Omit<CacheOptions, 'defaultNamespace'> = {}): ManagerOptions {
  return {
    name,
    kubeconfigPath: options.kubeconfigPath,
    httpAddress: options.httpAddress,
    leaderElection: options.leaderElection,
    logger: options.logger,
    logLevel: options.logLevel,
    cache: { ...cache, defaultNamespace: options.watchNamespace || undefined },
  };
}
